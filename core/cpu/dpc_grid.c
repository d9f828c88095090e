/* The spatial grid of density peaks for d <= 3 and the CPU passes over it. With cells
 * of side h >= dc, the cutoff density and the halo only need the 3^d cells around a
 * point; the nearest denser point is searched ring by ring outwards until the ring's
 * distance bound exceeds the best found. Distances are the exact direct-form squares
 * (gm_sqdist), so the answers are those of the brute force. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dpc.h"

/* Cells per dimension stay below this, so that the rounding of cell indices (about
 * 3 ulp of the index) stays far below GM_DPC_RING_SLACK. */
#define GM_DPC_MAX_CELLS_PER_DIM ((int64_t)1 << 20)
/* Points per block of work between progress reports and interrupt checks. */
#define GM_DPC_GRID_BLOCK 4096

int gm_dpc_grid_usable(int64_t d) { return d >= 1 && d <= GM_DPC_GRID_MAX_DIM; }

void gm_dpc_grid_free(gm_dpc_grid *g) {
  free(g->start);
  free(g->cell);
  free(g->order);
  free(g->coords);
  g->start = g->cell = g->order = NULL;
  g->coords = NULL;
}

static double cells_for(const double *range, int dim, double h, int64_t *per_dim) {
  double total = 1;
  for (int t = 0; t < dim; t++) {
    double m = floor(range[t] / h) + 1;
    if (per_dim) per_dim[t] = (int64_t)m;
    total *= m;
  }
  return total;
}

gpuml_status gm_dpc_grid_build(const double *x, int64_t n, int64_t d, double min_side,
                               gm_dpc_grid *g) {
  memset(g, 0, sizeof *g);
  g->dim = (int)d;
  g->n = n;
  double range[GM_DPC_GRID_MAX_DIM] = {0, 0, 0}, widest = 0, volume = 1;
  int spread = 0;
  for (int t = 0; t < g->dim; t++) {
    const double *col = x + (size_t)t * (size_t)n;
    double lo = col[0], hi = col[0];
    for (int64_t i = 1; i < n; i++) {
      if (col[i] < lo) lo = col[i];
      if (col[i] > hi) hi = col[i];
    }
    g->lo[t] = lo;
    range[t] = hi - lo;
    if (range[t] > widest) widest = range[t];
    if (range[t] > 0) {
      volume *= range[t];
      spread++;
    }
  }
  double h, max_total;
  if (min_side > 0) {
    /* Slightly wider than dc, so that two points within dc never land two cells apart
     * through the rounding of (x - lo) / h; wider still when dc would make too many
     * cells (any side >= dc is correct, only slower). */
    h = min_side * (1 + 1e-8);
    max_total = 2.0 * (double)n + 64;
  } else {
    max_total = (double)n / 2 + 1;
    h = spread ? pow(volume / max_total, 1.0 / spread) : 1;
    if (!(h > 0) || !isfinite(h)) h = widest > 0 ? widest : 1;
  }
  if (widest / h > (double)(GM_DPC_MAX_CELLS_PER_DIM - 2))
    h = widest / (double)(GM_DPC_MAX_CELLS_PER_DIM - 2);
  while (cells_for(range, g->dim, h, NULL) > max_total) h *= 1.25;
  g->h = h;
  g->inv_h = 1 / h;
  g->ncells = (int64_t)cells_for(range, g->dim, h, g->cells);
  for (int t = 0; t < g->dim; t++)
    if (g->cells[t] > g->max_cells) g->max_cells = g->cells[t];

  g->start = gm_alloc((size_t)g->ncells + 1, sizeof *g->start);
  g->cell = gm_alloc((size_t)n, sizeof *g->cell);
  g->order = gm_alloc((size_t)n, sizeof *g->order);
  g->coords = gm_alloc((size_t)n * (size_t)d, sizeof *g->coords);
  int64_t *cell_of = gm_alloc((size_t)n, sizeof *cell_of);
  if (!g->start || !g->cell || !g->order || !g->coords || !cell_of) {
    free(cell_of);
    gm_dpc_grid_free(g);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the density peaks grid",
                   ((double)n * (24.0 + 8.0 * (double)d) + 8.0 * (double)g->ncells) / 1e6);
  }
  memset(g->start, 0, ((size_t)g->ncells + 1) * sizeof *g->start);
  for (int64_t i = 0; i < n; i++) {
    int64_t id = 0, stride = 1;
    for (int t = 0; t < g->dim; t++) {
      int64_t c = (int64_t)floor((x[i + (size_t)t * (size_t)n] - g->lo[t]) * g->inv_h);
      if (c < 0) c = 0;
      if (c >= g->cells[t]) c = g->cells[t] - 1;
      id += c * stride;
      stride *= g->cells[t];
    }
    cell_of[i] = id;
    g->start[id + 1]++;
  }
  for (int64_t c = 0; c < g->ncells; c++) g->start[c + 1] += g->start[c];
  /* A counting sort, stable: within a cell, points keep their index order. */
  int64_t *fill = gm_alloc((size_t)g->ncells, sizeof *fill);
  if (!fill) {
    free(cell_of);
    gm_dpc_grid_free(g);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the density peaks grid");
  }
  memcpy(fill, g->start, (size_t)g->ncells * sizeof *fill);
  for (int64_t i = 0; i < n; i++) g->order[fill[cell_of[i]]++] = i;
  free(fill);
  for (int64_t s = 0; s < n; s++) {
    const int64_t i = g->order[s];
    g->cell[s] = cell_of[i];
    for (int t = 0; t < g->dim; t++)
      g->coords[(size_t)t * (size_t)n + (size_t)s] = x[i + (size_t)t * (size_t)n];
  }
  free(cell_of);
  return GPUML_OK;
}

/* ---- walking the cells ------------------------------------------------------------- */

typedef struct {
  int64_t a, b; /* sorted positions a .. b - 1 */
} gm_run;

static void cell_coords(const gm_dpc_grid *g, int64_t id, int64_t *c) {
  for (int t = 0; t < g->dim; t++) {
    c[t] = id % g->cells[t];
    id /= g->cells[t];
  }
}

/* Calls visit(state, a, b) for the runs of points in the cells at Chebyshev distance
 * exactly r from cell c (r = 0: the cell itself). Along dimension 0 the cells of a row
 * are contiguous, so a row is one run, or two single cells when only its two ends lie
 * on the ring. */
typedef void (*gm_run_fn)(void *state, int64_t a, int64_t b);

static void walk_ring(const gm_dpc_grid *g, const int64_t *c, int64_t r, gm_run_fn visit,
                      void *state) {
  const int64_t m0 = g->cells[0];
  const int64_t m1 = g->dim > 1 ? g->cells[1] : 1, m2 = g->dim > 2 ? g->cells[2] : 1;
  const int64_t r1 = g->dim > 1 ? r : 0, r2 = g->dim > 2 ? r : 0;
  const int64_t c1 = g->dim > 1 ? c[1] : 0, c2 = g->dim > 2 ? c[2] : 0;
  for (int64_t o2 = -r2; o2 <= r2; o2++) {
    const int64_t y2 = c2 + o2;
    if (y2 < 0 || y2 >= m2) continue;
    for (int64_t o1 = -r1; o1 <= r1; o1++) {
      const int64_t y1 = c1 + o1;
      if (y1 < 0 || y1 >= m1) continue;
      const int64_t row = (y1 + y2 * m1) * m0;
      if (r == 0 || o1 == r || o1 == -r || o2 == r || o2 == -r) {
        const int64_t lo = c[0] - r < 0 ? 0 : c[0] - r;
        const int64_t hi = c[0] + r >= m0 ? m0 - 1 : c[0] + r;
        visit(state, g->start[row + lo], g->start[row + hi + 1]);
      } else {
        if (c[0] - r >= 0) visit(state, g->start[row + c[0] - r], g->start[row + c[0] - r + 1]);
        if (c[0] + r < m0) visit(state, g->start[row + c[0] + r], g->start[row + c[0] + r + 1]);
      }
    }
  }
}

/* The exact squared distance (gm_sqdist's sum) from the point p to sorted position j. */
static inline double grid_sqdist(const gm_dpc_grid *g, const double *p, int64_t j) {
  double s = 0;
  for (int t = 0; t < g->dim; t++) {
    double diff = g->coords[(size_t)t * (size_t)g->n + (size_t)j] - p[t];
    s += diff * diff;
  }
  return s;
}

static void point_of(const gm_dpc_grid *g, int64_t s, double *p) {
  for (int t = 0; t < g->dim; t++) p[t] = g->coords[(size_t)t * (size_t)g->n + (size_t)s];
}

/* The runs of the 3^dim cells around cell c (itself included): one run per row. */
static int block_runs(const gm_dpc_grid *g, const int64_t *c, gm_run *runs) {
  const int64_t m0 = g->cells[0];
  const int64_t m1 = g->dim > 1 ? g->cells[1] : 1, m2 = g->dim > 2 ? g->cells[2] : 1;
  const int64_t c1 = g->dim > 1 ? c[1] : 0, c2 = g->dim > 2 ? c[2] : 0;
  const int64_t lo = c[0] > 0 ? c[0] - 1 : 0, hi = c[0] + 1 < m0 ? c[0] + 1 : m0 - 1;
  int count = 0;
  for (int64_t y2 = c2 - 1; y2 <= c2 + 1; y2++) {
    if (y2 < 0 || y2 >= m2) continue;
    for (int64_t y1 = c1 - 1; y1 <= c1 + 1; y1++) {
      if (y1 < 0 || y1 >= m1) continue;
      const int64_t row = (y1 + y2 * m1) * m0;
      runs[count].a = g->start[row + lo];
      runs[count].b = g->start[row + hi + 1];
      count++;
    }
  }
  return count;
}

/* What one pass does for one sorted position. */
typedef void (*gm_point_fn)(const gm_dpc_grid *g, const void *ctx, int64_t s);

/* Runs fn over all sorted positions on the OpenMP threads, in blocks, with progress
 * and interrupt checks on the calling thread. */
static gpuml_status for_points(const gm_dpc_grid *g, const gpuml_options *opt, const char *stage,
                               gm_point_fn fn, const void *ctx) {
  const int64_t n = g->n, nblocks = (n + GM_DPC_GRID_BLOCK - 1) / GM_DPC_GRID_BLOCK;
  volatile int stop = 0;
  int64_t done = 0, reported = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(gm_threads(opt))
  for (int64_t b = 0; b < nblocks; b++) {
    if (stop) continue;
    const int64_t s0 = b * GM_DPC_GRID_BLOCK;
    const int64_t s1 = s0 + GM_DPC_GRID_BLOCK < n ? s0 + GM_DPC_GRID_BLOCK : n;
    for (int64_t s = s0; s < s1; s++) fn(g, ctx, s);
    int64_t now;
#pragma omp atomic capture
    now = done += s1 - s0;
    if (gm_is_calling_thread()) {
      if (gm_interrupted(opt)) stop = 1;
      else gm_progress(opt, stage, reported = now, n);
    }
  }
  /* once more after the pass: the calling thread may have had no block of it */
  if (stop || gm_interrupted(opt))
    return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "density peaks interrupted");
  if (reported < n) gm_progress(opt, stage, n, n);
  return GPUML_OK;
}

/* ---- the cutoff density -------------------------------------------------------- */

typedef struct {
  double cut;
  double *rho;
} rho_ctx;

/* Counts the points of sorted positions a .. b - 1 with s < cut from p; the loop over
 * points vectorises (each square sum is still formed in dimension order). */
static int64_t count_run(const gm_dpc_grid *g, const double *p, int64_t a, int64_t b,
                         double cut) {
  const double *X0 = g->coords, *X1 = X0 + g->n, *X2 = X1 + g->n;
  double count = 0;
  switch (g->dim) {
    case 1:
#pragma omp simd reduction(+ : count)
      for (int64_t j = a; j < b; j++) {
        const double d0 = X0[j] - p[0];
        count += d0 * d0 < cut ? 1.0 : 0.0;
      }
      break;
    case 2:
#pragma omp simd reduction(+ : count)
      for (int64_t j = a; j < b; j++) {
        const double d0 = X0[j] - p[0], d1 = X1[j] - p[1];
        double s = d0 * d0;
        s += d1 * d1;
        count += s < cut ? 1.0 : 0.0;
      }
      break;
    default:
#pragma omp simd reduction(+ : count)
      for (int64_t j = a; j < b; j++) {
        const double d0 = X0[j] - p[0], d1 = X1[j] - p[1], d2 = X2[j] - p[2];
        double s = d0 * d0;
        s += d1 * d1;
        s += d2 * d2;
        count += s < cut ? 1.0 : 0.0;
      }
  }
  return (int64_t)count;
}

static void rho_point(const gm_dpc_grid *g, const void *vctx, int64_t s) {
  const rho_ctx *ctx = vctx;
  double p[GM_DPC_GRID_MAX_DIM];
  int64_t c[GM_DPC_GRID_MAX_DIM];
  gm_run runs[9];
  point_of(g, s, p);
  cell_coords(g, g->cell[s], c);
  const int nr = block_runs(g, c, runs);
  int64_t count = 0;
  for (int k = 0; k < nr; k++) count += count_run(g, p, runs[k].a, runs[k].b, ctx->cut);
  ctx->rho[g->order[s]] = (double)(count - 1); /* itself, at 0 < cut, is not counted */
}

gpuml_status gm_dpc_grid_rho(const gm_dpc_grid *g, double cut, double *rho,
                             const gpuml_options *opt) {
  rho_ctx ctx = {cut, rho};
  return for_points(g, opt, "dpc rho", rho_point, &ctx);
}

/* ---- the nearest denser point ---------------------------------------------------- */

typedef struct {
  const double *rho_sorted; /* rho of each sorted position */
  int64_t top;
  double *delta_sq;
  int64_t *nearest;
} delta_ctx;

typedef struct {
  const gm_dpc_grid *g;
  const double *rho_sorted;
  double p[GM_DPC_GRID_MAX_DIM];
  double rho_i;
  int64_t i;
  double best;
  int64_t best_j;
} delta_search;

static void delta_run(void *vstate, int64_t a, int64_t b) {
  delta_search *st = vstate;
  for (int64_t j = a; j < b; j++) {
    const int64_t oj = st->g->order[j];
    if (!gm_dpc_above(st->rho_sorted[j], oj, st->rho_i, st->i)) continue;
    const double sq = grid_sqdist(st->g, st->p, j);
    if (sq < st->best || (sq == st->best && oj < st->best_j)) {
      st->best = sq;
      st->best_j = oj;
    }
  }
}

static void delta_point(const gm_dpc_grid *g, const void *vctx, int64_t s) {
  const delta_ctx *ctx = vctx;
  delta_search st;
  st.g = g;
  st.rho_sorted = ctx->rho_sorted;
  st.i = g->order[s];
  if (st.i == ctx->top) return;
  st.rho_i = ctx->rho_sorted[s];
  st.best = INFINITY;
  st.best_j = -1;
  point_of(g, s, st.p);
  int64_t c[GM_DPC_GRID_MAX_DIM];
  cell_coords(g, g->cell[s], c);
  for (int64_t r = 0; r <= g->max_cells; r++) {
    /* Rings 0 .. r-1 are done: every point not seen is farther than (r - 1) h. */
    if (r >= 2) {
      const double bound = (double)(r - 1) * g->h;
      if (st.best < bound * bound * (1 - GM_DPC_RING_SLACK)) break;
    }
    walk_ring(g, c, r, delta_run, &st);
  }
  ctx->delta_sq[st.i] = st.best;
  ctx->nearest[st.i] = st.best_j;
}

gpuml_status gm_dpc_grid_delta(const gm_dpc_grid *g, const double *rho, int64_t top,
                               double *delta_sq, int64_t *nearest, const gpuml_options *opt) {
  double *rho_sorted = gm_alloc((size_t)g->n, sizeof *rho_sorted);
  if (!rho_sorted)
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB of density peaks work space",
                   (double)g->n * 8 / 1e6);
  for (int64_t s = 0; s < g->n; s++) rho_sorted[s] = rho[g->order[s]];
  delta_ctx ctx = {rho_sorted, top, delta_sq, nearest};
  gpuml_status st = for_points(g, opt, "dpc delta", delta_point, &ctx);
  free(rho_sorted);
  return st;
}

/* ---- the border densities of the halo ------------------------------------------- */

typedef struct {
  double cut;
  const double *rho_sorted;
  const int64_t *cluster_sorted;
  double *border;
} border_ctx;

static void border_point(const gm_dpc_grid *g, const void *vctx, int64_t s) {
  const border_ctx *ctx = vctx;
  double p[GM_DPC_GRID_MAX_DIM];
  int64_t c[GM_DPC_GRID_MAX_DIM];
  gm_run runs[9];
  point_of(g, s, p);
  cell_coords(g, g->cell[s], c);
  const int nr = block_runs(g, c, runs);
  const int64_t own = ctx->cluster_sorted[s];
  const double rho_i = ctx->rho_sorted[s];
  double best = 0;
  for (int k = 0; k < nr; k++)
    for (int64_t j = runs[k].a; j < runs[k].b; j++) {
      if (ctx->cluster_sorted[j] == own) continue;
      const double avg = (rho_i + ctx->rho_sorted[j]) / 2;
      if (avg > best && grid_sqdist(g, p, j) < ctx->cut) best = avg;
    }
  ctx->border[g->order[s]] = best;
}

gpuml_status gm_dpc_grid_border(const gm_dpc_grid *g, double cut, const double *rho,
                                const int64_t *cluster, double *border,
                                const gpuml_options *opt) {
  double *rho_sorted = gm_alloc((size_t)g->n, sizeof *rho_sorted);
  int64_t *cluster_sorted = gm_alloc((size_t)g->n, sizeof *cluster_sorted);
  gpuml_status st;
  if (!rho_sorted || !cluster_sorted) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB of density peaks work space",
                 (double)g->n * 16 / 1e6);
  } else {
    for (int64_t s = 0; s < g->n; s++) {
      rho_sorted[s] = rho[g->order[s]];
      cluster_sorted[s] = cluster[g->order[s]];
    }
    border_ctx ctx = {cut, rho_sorted, cluster_sorted, border};
    st = for_points(g, opt, "dpc halo", border_point, &ctx);
  }
  free(rho_sorted);
  free(cluster_sorted);
  return st;
}
