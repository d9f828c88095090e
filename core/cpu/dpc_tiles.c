/* The passes of density peaks over all pairs on the CPU, by distance tiles (any d):
 * the density (cutoff or Gaussian), the nearest denser point and the border densities
 * of the halo. Each OpenMP thread takes a block of points and computes its tiles
 * against blocks of all points (core/distance_tiles.h), so memory stays O(n).
 * Decisions are exact: the direct form gives gm_sqdist() itself; in the GEMM form a
 * value within the screening margin of a threshold or of the best so far is
 * recomputed by gm_sqdist(), so the answers are the same as on the grid and on the GPU. */
#include <math.h>
#include <stdlib.h>
#include "blas.h"
#include "distance_tiles.h"
#include "dpc.h"

#define GM_DPC_QUERY_BLOCK 256 /* a power of two dividing GM_DPC_GAUSS_PART_ROWS */
#define GM_DPC_REF_BLOCK 2048

typedef enum { PASS_COUNT, PASS_GAUSS, PASS_DELTA, PASS_BORDER } pass_kind;

typedef struct {
  pass_kind kind;
  double cut;           /* PASS_COUNT, PASS_GAUSS, PASS_BORDER: s < cut */
  double inv_dc2;       /* PASS_GAUSS */
  const double *rho;    /* PASS_DELTA, PASS_BORDER */
  const int64_t *cluster; /* PASS_BORDER */
  int64_t top;          /* PASS_DELTA */
  double *value;        /* rho, delta_sq or border, per point */
  int64_t *nearest;     /* PASS_DELTA */
} pass_spec;

static const char *stage_of(pass_kind kind) {
  switch (kind) {
    case PASS_COUNT:
    case PASS_GAUSS: return "dpc rho";
    case PASS_DELTA: return "dpc delta";
    case PASS_BORDER: return "dpc halo";
  }
  return "dpc";
}

/* One tile: references a0 .. a0 + an - 1 (rows of `tile`) against the queries q0 ..
 * q0 + qn - 1 (columns), folded into the running values acc/acc_j of the queries. The
 * sweeps over a column are written to vectorise; exact recomputations are rare and
 * done apart. */
static void fold_tile(const pass_spec *ps, const gm_points *P, int gemm, double slack,
                      const double *tile, int64_t a0, int64_t an, int64_t q0, int64_t qn,
                      double *acc, int64_t *acc_j) {
  const int64_t n = P->n, d = P->d;
  const double *sq = gemm ? P->sqnorm + a0 : NULL;
  const double *rho = ps->rho ? ps->rho + a0 : NULL;
  double max_norm = 0;
  for (int64_t a = 0; gemm && a < an; a++)
    if (sq[a] > max_norm) max_norm = sq[a];
  for (int64_t b = 0; b < qn; b++) {
    const int64_t i = q0 + b;
    const double *col = tile + b * an;
    const double norm_i = gemm ? P->sqnorm[i] : 0;
    const int self_here = i >= a0 && i < a0 + an;
    double v = acc[b];
    switch (ps->kind) {
      case PASS_COUNT: {
        const double cut = ps->cut, widest = slack * (max_norm + norm_i);
        double count = 0, near = 0;
#pragma omp simd reduction(+ : count, near)
        for (int64_t a = 0; a < an; a++) {
          count += col[a] < cut ? 1.0 : 0.0;
          near += fabs(col[a] - cut) <= widest ? 1.0 : 0.0;
        }
        if (gemm && near > 0)
          for (int64_t a = 0; a < an; a++)
            if (fabs(col[a] - cut) <= slack * (sq[a] + norm_i)) {
              const double e = gm_sqdist(P->x + a0 + a, n, P->x + i, n, d);
              count += (e < cut ? 1.0 : 0.0) - (col[a] < cut ? 1.0 : 0.0);
            }
        v += count - (self_here ? 1 : 0); /* the point itself is at 0 < cut */
        break;
      }
      case PASS_GAUSS: {
        /* the point itself is left out, not subtracted: rho may be tiny next to 1; only
         * the pairs with s < cut count (all of them when cut is INFINITY), decided on the
         * exact square within the screening margin of cut */
        const int64_t skip = self_here ? i - a0 : an;
        const double cut = ps->cut;
        double sum = 0;
        for (int64_t a = 0; a < an; a++) {
          if (a == skip) continue;
          const int near = gemm && fabs(col[a] - cut) <= slack * (sq[a] + norm_i);
          if (near ? gm_sqdist(P->x + a0 + a, n, P->x + i, n, d) < cut : col[a] < cut)
            sum += exp(-col[a] * ps->inv_dc2);
        }
        v += sum;
        break;
      }
      case PASS_DELTA: {
        /* Above i: rho_j >= rho_i for j < i, rho_j > rho_i after it. The sweeps are split
         * at i so that they only compare doubles (and vectorise). */
        const double rho_i = ps->rho[i], inf = INFINITY;
        int64_t ia = i - a0;
        if (ia < 0) ia = 0;
        if (ia > an) ia = an;
        int64_t best_j = acc_j[b];
        double bound = v;
        if (!gemm) {
          /* exact values: the smallest above i, then its first (smallest) index */
#pragma omp simd reduction(min : bound)
          for (int64_t a = 0; a < ia; a++) {
            const double c = col[a] + (rho[a] >= rho_i ? 0.0 : inf);
            bound = c < bound ? c : bound;
          }
#pragma omp simd reduction(min : bound)
          for (int64_t a = ia; a < an; a++) {
            const double c = col[a] + (rho[a] > rho_i ? 0.0 : inf);
            bound = c < bound ? c : bound;
          }
          if (bound < inf)
            for (int64_t a = 0; a < an; a++)
              if (col[a] == bound && (a < ia ? rho[a] >= rho_i : rho[a] > rho_i)) {
                if (bound < v || a0 + a < best_j) {
                  v = bound;
                  best_j = a0 + a;
                }
                break;
              }
        } else {
          /* The screened values bound the exact minimum from above (value + margin);
           * only the pairs that may reach it are recomputed exactly. */
#pragma omp simd reduction(min : bound)
          for (int64_t a = 0; a < ia; a++) {
            const double c = col[a] + slack * (sq[a] + norm_i) + (rho[a] >= rho_i ? 0.0 : inf);
            bound = c < bound ? c : bound;
          }
#pragma omp simd reduction(min : bound)
          for (int64_t a = ia; a < an; a++) {
            const double c = col[a] + slack * (sq[a] + norm_i) + (rho[a] > rho_i ? 0.0 : inf);
            bound = c < bound ? c : bound;
          }
          for (int64_t a = 0; a < an; a++) {
            if (col[a] - slack * (sq[a] + norm_i) > bound) continue;
            if (!(a < ia ? rho[a] >= rho_i : rho[a] > rho_i)) continue;
            const int64_t j = a0 + a;
            const double e = gm_sqdist(P->x + j, n, P->x + i, n, d);
            if (e < v || (e == v && j < best_j)) {
              v = e;
              best_j = j;
            }
          }
        }
        acc_j[b] = best_j;
        break;
      }
      case PASS_BORDER: {
        const double rho_i = ps->rho[i];
        const int64_t own = ps->cluster[i];
        for (int64_t a = 0; a < an; a++) {
          const int64_t j = a0 + a;
          if (ps->cluster[j] == own) continue;
          const double avg = (rho_i + ps->rho[j]) / 2;
          if (avg <= v) continue;
          double s = col[a];
          if (gemm && fabs(s - ps->cut) <= slack * (P->sqnorm[j] + norm_i))
            s = gm_sqdist(P->x + j, n, P->x + i, n, d);
          if (s < ps->cut) v = avg;
        }
        break;
      }
    }
    acc[b] = v;
  }
}

/* The direct tile, out[a + b * an] = gm_sqdist(point a0 + a, point b0 + b): the sum in
 * dimension order, as gm_sqdist_tile()'s direct form gives it, but written with
 * restrict pointers so that the loop over a vectorises (measured 5x faster at d = 10). */
void gm_dpc_direct_tile(const double *restrict x, int64_t n, int64_t d, int64_t a0, int64_t an,
                        int64_t b0, int64_t bn, double *restrict out) {
  for (int64_t b = 0; b < bn; b++) {
    double *restrict row = out + b * an;
    for (int64_t a = 0; a < an; a++) row[a] = 0;
    for (int64_t t = 0; t < d; t++) {
      const double q = x[b0 + b + t * n];
      const double *restrict col = x + a0 + t * n;
#pragma omp simd
      for (int64_t a = 0; a < an; a++) {
        const double diff = col[a] - q;
        row[a] += diff * diff;
      }
    }
  }
}

/* The pass for the points first .. last - 1 against all n points. */
static gpuml_status run_pass(const double *x, int64_t n, int64_t d, const pass_spec *ps,
                             int64_t first, int64_t last, const gpuml_options *opt) {
  const int threads = gm_threads(opt), gemm = gm_use_gemm(d);
  const double slack = GM_DPC_SCREEN_SLACK * (double)(d + 4);
  const int64_t rows = last - first;
  /* The blocks of queries lie on a grid of multiples of qblock over all n points, qblock
   * a power of two from n and the threads (not from the part), so that a point falls in
   * the same block whichever part it is computed in (GM_DPC_GAUSS_PART_ROWS). */
  int64_t qblock = GM_DPC_QUERY_BLOCK;
  while (qblock > 1 && qblock > (n + threads - 1) / threads) qblock /= 2;
  const int64_t block0 = first / qblock;
  const int64_t nblocks = rows > 0 ? (last - 1) / qblock - block0 + 1 : 0;
  const int64_t rblock = n < GM_DPC_REF_BLOCK ? n : GM_DPC_REF_BLOCK;
  double *centre = NULL, *tiles = NULL, *acc = NULL;
  int64_t *acc_j = NULL;
  gm_points P = {0};
  gpuml_status st = GPUML_OK;
  if (gemm && (st = gm_gemm_centre(x, n, NULL, 0, d, &centre))) goto done;
  if ((st = gm_points_init(&P, x, n, d, centre, threads))) goto done;
  tiles = gm_alloc((size_t)threads * (size_t)rblock * (size_t)qblock, sizeof *tiles);
  acc = gm_alloc((size_t)threads * (size_t)qblock, sizeof *acc);
  acc_j = gm_alloc((size_t)threads * (size_t)qblock, sizeof *acc_j);
  if (!tiles || !acc || !acc_j) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB of density peaks work space",
                 (double)threads * (double)qblock * ((double)rblock + 2) * 8 / 1e6);
    goto done;
  }
  const char *stage = stage_of(ps->kind);
  volatile int stop = 0;
  int64_t points_done = 0, reported = 0;
  const int blas_threads = gm_blas_serial_begin();
#pragma omp parallel num_threads(threads)
  {
    const int t = gm_thread_id();
    double *tile = tiles + (size_t)t * (size_t)rblock * (size_t)qblock;
    double *my_acc = acc + (size_t)t * (size_t)qblock;
    int64_t *my_j = acc_j + (size_t)t * (size_t)qblock;
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < nblocks; blk++) {
      if (stop) continue;
      const int64_t b0 = (block0 + blk) * qblock, b1 = b0 + qblock < last ? b0 + qblock : last;
      const int64_t q0 = b0 > first ? b0 : first, qn = b1 - q0;
      for (int64_t b = 0; b < qn; b++) {
        my_acc[b] = ps->kind == PASS_DELTA ? INFINITY : 0;
        my_j[b] = -1;
      }
      for (int64_t a0 = 0; a0 < n && !stop; a0 += rblock) {
        const int64_t an = n - a0 < rblock ? n - a0 : rblock;
        if (gemm) gm_sqdist_tile(&P, a0, an, &P, q0, qn, tile, an);
        else gm_dpc_direct_tile(x, n, d, a0, an, q0, qn, tile);
        fold_tile(ps, &P, gemm, slack, tile, a0, an, q0, qn, my_acc, my_j);
        if (gm_is_calling_thread() && gm_interrupted(opt)) stop = 1;
      }
      if (stop) continue;
      for (int64_t b = 0; b < qn; b++) {
        const int64_t i = q0 + b;
        if (ps->kind == PASS_DELTA) {
          if (i == ps->top) continue;
          ps->nearest[i] = my_j[b];
        }
        ps->value[i] = my_acc[b];
      }
      int64_t now;
#pragma omp atomic capture
      now = points_done += qn;
      if (gm_is_calling_thread() && !stop) gm_progress(opt, stage, reported = now, rows);
    }
  }
  gm_blas_serial_end(blas_threads);
  /* once more after the pass: the calling thread may have had no block of it */
  if (stop || gm_interrupted(opt))
    st = gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "density peaks interrupted");
  else if (reported < rows)
    gm_progress(opt, stage, rows, rows);
done:
  free(tiles);
  free(acc);
  free(acc_j);
  free(centre);
  gm_points_free(&P);
  return st;
}

gpuml_status gm_dpc_tiles_rho(const double *x, int64_t n, int64_t d, int gaussian, double dc,
                              double cut, int64_t first, int64_t last, double *rho,
                              const gpuml_options *opt) {
  pass_spec ps = {0};
  ps.kind = gaussian ? PASS_GAUSS : PASS_COUNT;
  ps.cut = cut;
  ps.inv_dc2 = 1 / (dc * dc);
  ps.value = rho;
  return run_pass(x, n, d, &ps, first, last, opt);
}

gpuml_status gm_dpc_tiles_delta(const double *x, int64_t n, int64_t d, const double *rho,
                                int64_t top, int64_t first, int64_t last, double *delta_sq,
                                int64_t *nearest, const gpuml_options *opt) {
  pass_spec ps = {0};
  ps.kind = PASS_DELTA;
  ps.rho = rho;
  ps.top = top;
  ps.value = delta_sq;
  ps.nearest = nearest;
  return run_pass(x, n, d, &ps, first, last, opt);
}

gpuml_status gm_dpc_tiles_border(const double *x, int64_t n, int64_t d, double cut,
                                 const double *rho, const int64_t *cluster, double *border,
                                 const gpuml_options *opt) {
  pass_spec ps = {0};
  ps.kind = PASS_BORDER;
  ps.cut = cut;
  ps.rho = rho;
  ps.cluster = cluster;
  ps.value = border;
  return run_pass(x, n, d, &ps, 0, n, opt);
}
