/* The CPU engine of the Gaussian mixtures (see gmm.h). Work is split so that every
 * value is computed the same way whatever the number of threads:
 *  - E-step: fixed blocks of rows in parallel; within a block, tiles of GM_GMM_TILE rows
 *    (above GM_GMM_SMALL_D with full covariances, the whole block) and for each tile
 *    every component: the rows are centred on its mean and then multiplied by the inverse
 *    Cholesky factor U, so that log N(x | mu, Sigma) = -d/2 log(2 pi) + sum log diag(U)
 *    - |(x - mu) U|^2 / 2 (hand-written kernels up to GM_GMM_SMALL_D, DTRMM above);
 *    the block sums of the log-likelihood are added in block order.
 *  - M-step: components in parallel, each over all rows in order: the weighted mean,
 *    then the scatter W'W of W = sqrt(z) (x - mu), the rows centred on it (by blocks;
 *    hand-written kernels up to GM_GMM_SMALL_D, DSYRK above), or for diagonal models
 *    the weighted squares of each column, summed row by row.
 * OpenBLAS is held to one thread inside these regions (blas.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "blas.h"
#include "gmm.h"

#define GM_GMM_BLOCK 1024
/* Up to this dimension hand-written loops beat the BLAS calls on blocks of rows. */
#define GM_GMM_SMALL_D 24
#define GM_LOG_2PI 1.8378770664093454836
/* Work per pass (rows x components x d^2, or x d) from which the passes are threaded. */
#define GM_GMM_PARALLEL_WORK 2e6

/* The small-d kernels take 8 rows at a time in four 2-wide vectors (GCC/Clang vector
 * extensions, one SSE2 register each), so that the running sums stay in registers.
 * Each row is summed in the same order whether it falls in a group of 8 or not. */
#if defined(__GNUC__)
typedef double gm_v2 __attribute__((vector_size(16)));
#define GM_GMM_LANES 8
static inline gm_v2 load2(const double *p) {
  gm_v2 v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void store2(double *p, gm_v2 v) { memcpy(p, &v, sizeof v); }
#else
#define GM_GMM_LANES 0
#endif

#if GM_GMM_LANES && defined(__x86_64__)
#include <immintrin.h>
#define GM_GMM_AVX2 1
typedef double gm_v4 __attribute__((vector_size(32)));
#define GM_LOAD4(p) ({ gm_v4 v_; memcpy(&v_, (p), sizeof v_); v_; })
#define GM_STORE4(p, v) do { gm_v4 v_ = (v); memcpy((p), &v_, sizeof v_); } while (0)
#else
#define GM_GMM_AVX2 0
#endif

/* out[i] = sqrt(v[i]) for v >= 0: SSE2's packed square root where there is one (the
 * library call, with its errno handling, cost a tenth of an EM iteration). */
#if defined(__x86_64__)
#include <emmintrin.h>
static void square_roots(const double *v, int64_t count, double *out) {
  int64_t i = 0;
  for (; i + 2 <= count; i += 2) _mm_storeu_pd(out + i, _mm_sqrt_pd(_mm_loadu_pd(v + i)));
  for (; i < count; i++) out[i] = sqrt(v[i]);
}
#else
static void square_roots(const double *v, int64_t count, double *out) {
  for (int64_t i = 0; i < count; i++) out[i] = sqrt(v[i]);
}
#endif

typedef struct {
  gm_gmm_data data;
  int threads;
  double *w, *mu, *cov; /* kmax, d x kmax, d x d x kmax */
  double *U;            /* full: d x d x kmax inverse upper factors; else d x kmax 1/sd */
  double *logdet_u;     /* kmax: sum log diag(U) */
  double *z;            /* n x kmax */
  double *logdens;      /* n */
  double *block_ll;     /* one per block of rows */
  double *work;         /* per thread: GM_GMM_BLOCK x (d + 1) */
  int avx2;             /* the processor runs the AVX2 kernels */
  int full_capable;     /* U has room for full factors */
} gm_gmm_cpu;

static int64_t block_count(int64_t n) { return (n + GM_GMM_BLOCK - 1) / GM_GMM_BLOCK; }

static void cpu_close(void *p) {
  gm_gmm_cpu *e = p;
  if (!e) return;
  free(e->w);
  free(e->mu);
  free(e->cov);
  free(e->U);
  free(e->logdet_u);
  free(e->z);
  free(e->logdens);
  free(e->block_ll);
  free(e->work);
  free(e);
}

gpuml_status gm_gmm_cpu_open(const gm_gmm_data *data, void **engine) {
  *engine = NULL;
  gm_gmm_cpu *e = calloc(1, sizeof *e);
  if (!e) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the mixture state");
  e->data = *data;
  /* Small problems run on one thread: their iterations take less than the cost of
   * waking and joining the others (and, on a busy machine, far less). */
  const double work = (double)data->n * (double)data->kmax * (double)data->d *
                      (data->structure == GM_GMM_FULL_STRUCTURE ? (double)data->d : 1.0);
  e->threads = work >= GM_GMM_PARALLEL_WORK ? gm_threads(data->opt) : 1;
#if GM_GMM_AVX2
  e->avx2 = __builtin_cpu_supports("avx2") != 0;
#endif
  const size_t n = (size_t)data->n, d = (size_t)data->d, K = (size_t)data->kmax;
  const int full = data->structure == GM_GMM_FULL_STRUCTURE;
  e->full_capable = full;
  e->w = gm_alloc(K, sizeof(double));
  e->mu = gm_alloc(d * K, sizeof(double));
  e->cov = gm_alloc(d * d * K, sizeof(double));
  e->U = gm_alloc(full ? d * d * K : d * K, sizeof(double));
  e->logdet_u = gm_alloc(K, sizeof(double));
  e->z = gm_alloc(n * K, sizeof(double));
  e->logdens = gm_alloc(n, sizeof(double));
  e->block_ll = gm_alloc((size_t)block_count(data->n), sizeof(double));
  e->work = gm_alloc((size_t)e->threads * GM_GMM_BLOCK * (d + 1), sizeof(double));
  if (!e->w || !e->mu || !e->cov || !e->U || !e->logdet_u || !e->z || !e->logdens ||
      !e->block_ll || !e->work) {
    cpu_close(e);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory",
                   "cannot allocate %.1f MB for the mixture's responsibilities and work space",
                   ((double)n * (double)(K + 1) + (double)e->threads * GM_GMM_BLOCK * ((double)d + 1)) *
                       8 / 1e6);
  }
  *engine = e;
  return GPUML_OK;
}

static gpuml_status cpu_set_params(void *p, int64_t K, const double *w, const double *mu,
                                   const double *cov) {
  gm_gmm_cpu *e = p;
  const size_t d = (size_t)e->data.d;
  memcpy(e->w, w, (size_t)K * sizeof(double));
  memcpy(e->mu, mu, d * (size_t)K * sizeof(double));
  memcpy(e->cov, cov, d * d * (size_t)K * sizeof(double));
  return GPUML_OK;
}

static gpuml_status cpu_set_component(void *p, int64_t K, const double *w, int64_t k,
                                      const double *mu, const double *cov) {
  gm_gmm_cpu *e = p;
  const size_t d = (size_t)e->data.d;
  memcpy(e->w, w, (size_t)K * sizeof(double));
  memcpy(e->mu + d * (size_t)k, mu, d * sizeof(double));
  memcpy(e->cov + d * d * (size_t)k, cov, d * d * sizeof(double));
  return GPUML_OK;
}

static gpuml_status cpu_factor(void *p, int64_t K, int *info) {
  gm_gmm_cpu *e = p;
  const int64_t d = e->data.d;
  const int di = (int)d;
  const int full = e->data.structure == GM_GMM_FULL_STRUCTURE;
  const int blas_threads = gm_blas_serial_begin();
#pragma omp parallel for num_threads(e->threads) schedule(dynamic, 1) if (full && d >= 32)
  for (int64_t k = 0; k < K; k++) {
    const double *S = e->cov + k * d * d;
    int status = 0;
    double logdet = 0;
    if (full) {
      double *U = e->U + k * d * d;
      memcpy(U, S, (size_t)(d * d) * sizeof(double));
      dpotrf_("U", &di, U, &di, &status, 1);
      if (status == 0) dtrtri_("U", "N", &di, U, &di, &status, 1, 1);
      if (status == 0) {
        for (int64_t j = 0; j < d; j++) {
          for (int64_t i = j + 1; i < d; i++) U[i + j * d] = 0;
          logdet += log(U[j + j * d]);
        }
      }
    } else {
      double *u = e->U + k * d;
      for (int64_t j = 0; j < d && !status; j++) {
        const double v = S[j + j * d];
        if (!(v > 0) || !isfinite(v)) status = (int)j + 1;
        else {
          u[j] = 1 / sqrt(v);
          logdet += log(u[j]);
        }
      }
    }
    if (status == 0 && !isfinite(logdet)) status = 1;
    info[k] = status;
    e->logdet_u[k] = logdet;
  }
  gm_blas_serial_end(blas_threads);
  return GPUML_OK;
}

/* out[i] = |y_i U|^2 for rn rows of Y (ld rows, d columns), U upper triangular. */
static void small_mahalanobis(const double *Y, int64_t ld, int64_t rn, const double *U,
                              int64_t d, double *out) {
  int64_t i0 = 0;
#if GM_GMM_LANES
  for (; i0 + GM_GMM_LANES <= rn; i0 += GM_GMM_LANES) {
    gm_v2 acc0 = {0, 0}, acc1 = {0, 0}, acc2 = {0, 0}, acc3 = {0, 0};
    for (int64_t j = 0; j < d; j++) {
      gm_v2 t0 = {0, 0}, t1 = {0, 0}, t2 = {0, 0}, t3 = {0, 0};
      for (int64_t a = 0; a <= j; a++) {
        const double u = U[a + j * d], *y = Y + a * ld + i0;
        t0 += load2(y) * u;
        t1 += load2(y + 2) * u;
        t2 += load2(y + 4) * u;
        t3 += load2(y + 6) * u;
      }
      acc0 += t0 * t0;
      acc1 += t1 * t1;
      acc2 += t2 * t2;
      acc3 += t3 * t3;
    }
    store2(out + i0, acc0);
    store2(out + i0 + 2, acc1);
    store2(out + i0 + 4, acc2);
    store2(out + i0 + 6, acc3);
  }
#endif
  for (; i0 < rn; i0++) {
    double acc = 0;
    for (int64_t j = 0; j < d; j++) {
      double t = 0;
      for (int64_t a = 0; a <= j; a++) t += Y[a * ld + i0] * U[a + j * d];
      acc += t * t;
    }
    out[i0] = acc;
  }
}

/* S[a, b] += sum_i W[i, a] W[i, b] for a <= b (W: rn rows, ld), with 16 partial sums
 * per entry (enough independent additions to hide their latency) combined in a fixed
 * order. */
static void small_scatter(const double *W, int64_t ld, int64_t rn, int64_t d, double *S) {
  for (int64_t b = 0; b < d; b++)
    for (int64_t a = 0; a <= b; a++) {
      const double *wa = W + a * ld, *wb = W + b * ld;
      double s = 0;
      int64_t i = 0;
#if GM_GMM_LANES
      gm_v2 c0 = {0, 0}, c1 = {0, 0}, c2 = {0, 0}, c3 = {0, 0};
      gm_v2 c4 = {0, 0}, c5 = {0, 0}, c6 = {0, 0}, c7 = {0, 0};
      for (; i + 16 <= rn; i += 16) {
        c0 += load2(wa + i) * load2(wb + i);
        c1 += load2(wa + i + 2) * load2(wb + i + 2);
        c2 += load2(wa + i + 4) * load2(wb + i + 4);
        c3 += load2(wa + i + 6) * load2(wb + i + 6);
        c4 += load2(wa + i + 8) * load2(wb + i + 8);
        c5 += load2(wa + i + 10) * load2(wb + i + 10);
        c6 += load2(wa + i + 12) * load2(wb + i + 12);
        c7 += load2(wa + i + 14) * load2(wb + i + 14);
      }
      const gm_v2 c = ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7));
      s = c[0] + c[1];
#endif
      for (; i < rn; i++) s += wa[i] * wb[i];
      S[a + b * d] += s;
    }
}

#if GM_GMM_AVX2
/* The same kernels on 4-wide AVX2 vectors. Without FMA (not asked for) every lane does
 * the very operations of the SSE2 code, so results do not depend on the processor. */

__attribute__((target("avx2"))) static void small_mahalanobis_avx2(
    const double *Y, int64_t ld, int64_t rn, const double *U, int64_t d, double *out) {
  int64_t i0 = 0;
  /* 16 rows: four independent chains of additions per column of U */
  for (; i0 + 16 <= rn; i0 += 16) {
    gm_v4 acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0}, acc2 = {0, 0, 0, 0}, acc3 = {0, 0, 0, 0};
    for (int64_t j = 0; j < d; j++) {
      gm_v4 t0 = {0, 0, 0, 0}, t1 = {0, 0, 0, 0}, t2 = {0, 0, 0, 0}, t3 = {0, 0, 0, 0};
      for (int64_t a = 0; a <= j; a++) {
        const double u = U[a + j * d], *y = Y + a * ld + i0;
        t0 += GM_LOAD4(y) * u;
        t1 += GM_LOAD4(y + 4) * u;
        t2 += GM_LOAD4(y + 8) * u;
        t3 += GM_LOAD4(y + 12) * u;
      }
      acc0 += t0 * t0;
      acc1 += t1 * t1;
      acc2 += t2 * t2;
      acc3 += t3 * t3;
    }
    GM_STORE4(out + i0, acc0);
    GM_STORE4(out + i0 + 4, acc1);
    GM_STORE4(out + i0 + 8, acc2);
    GM_STORE4(out + i0 + 12, acc3);
  }
  for (; i0 < rn; i0++) { /* as small_mahalanobis(), without leaving AVX state behind */
    double acc = 0;
    for (int64_t j = 0; j < d; j++) {
      double t = 0;
      for (int64_t a = 0; a <= j; a++) t += Y[a * ld + i0] * U[a + j * d];
      acc += t * t;
    }
    out[i0] = acc;
  }
}

__attribute__((target("avx2"))) static void small_scatter_avx2(const double *W, int64_t ld,
                                                              int64_t rn, int64_t d,
                                                              double *S) {
  const int64_t full = rn - rn % 16;
  for (int64_t b = 0; b < d; b++)
    for (int64_t a = 0; a <= b; a++) {
      const double *wa = W + a * ld, *wb = W + b * ld;
      gm_v4 c0 = {0, 0, 0, 0}, c1 = {0, 0, 0, 0}, c2 = {0, 0, 0, 0}, c3 = {0, 0, 0, 0};
      for (int64_t i = 0; i < full; i += 16) {
        c0 += GM_LOAD4(wa + i) * GM_LOAD4(wb + i);
        c1 += GM_LOAD4(wa + i + 4) * GM_LOAD4(wb + i + 4);
        c2 += GM_LOAD4(wa + i + 8) * GM_LOAD4(wb + i + 8);
        c3 += GM_LOAD4(wa + i + 12) * GM_LOAD4(wb + i + 12);
      }
      /* the SSE2 code's order: lanes (0 2)(4 6)(8 10)(12 14), then the odd ones */
      const double even = ((c0[0] + c0[2]) + (c1[0] + c1[2])) + ((c2[0] + c2[2]) + (c3[0] + c3[2]));
      const double odd = ((c0[1] + c0[3]) + (c1[1] + c1[3])) + ((c2[1] + c2[3]) + (c3[1] + c3[3]));
      double s = even + odd;
      for (int64_t i = full; i < rn; i++) s += wa[i] * wb[i];
      S[a + b * d] += s;
    }
}
#endif

/* Rows per tile of the E-step with small d or diagonal covariances: every component's
 * log-densities of a tile are computed while its rows of x (and their centred copy, at
 * most GM_GMM_SMALL_D x GM_GMM_TILE doubles, 12 KB) are in the L1 cache, where whole
 * blocks were read again from L3 for each component. A multiple of 16, so that the
 * kernels group the rows as they would a whole block. */
#define GM_GMM_TILE 64

/* out[i] = sum_j ((x_ij - mu_j) u_j)^2 for the rn rows from r0 (diagonal factors u),
 * the squares added in column order as a centred copy would give them, without one. */
static inline __attribute__((always_inline)) void diagonal_mahalanobis_rows(
    const double *x, int64_t n, int64_t r0, int64_t rn, const double *mu, const double *u,
    int64_t d, double *out) {
  for (int64_t t0 = 0; t0 < rn; t0 += GM_GMM_TILE) {
    const int64_t tn = rn - t0 < GM_GMM_TILE ? rn - t0 : GM_GMM_TILE;
    double *acc = out + t0;
    for (int64_t i = 0; i < tn; i++) acc[i] = 0;
    for (int64_t j = 0; j < d; j++) {
      const double *col = x + r0 + t0 + j * n, m = mu[j], uj = u[j];
#pragma omp simd
      for (int64_t i = 0; i < tn; i++) {
        const double t = (col[i] - m) * uj;
        acc[i] += t * t;
      }
    }
  }
}

static void diagonal_mahalanobis(const double *x, int64_t n, int64_t r0, int64_t rn,
                                 const double *mu, const double *u, int64_t d, double *out) {
  diagonal_mahalanobis_rows(x, n, r0, rn, mu, u, d, out);
}

#if GM_GMM_AVX2
__attribute__((target("avx2"))) static void diagonal_mahalanobis_avx2(
    const double *x, int64_t n, int64_t r0, int64_t rn, const double *mu, const double *u,
    int64_t d, double *out) {
  diagonal_mahalanobis_rows(x, n, r0, rn, mu, u, d, out);
}
#endif

/* Y (tn x d, ld tn) = the tn rows from r0 less mu. */
static void centre_rows(const double *x, int64_t n, int64_t r0, int64_t tn, const double *mu,
                        int64_t d, double *Y) {
  for (int64_t j = 0; j < d; j++) {
    const double *col = x + r0 + j * n;
    double *y = Y + j * tn;
    const double m = mu[j];
#pragma omp simd
    for (int64_t i = 0; i < tn; i++) y[i] = col[i] - m;
  }
}

/* logp[i] = log(w_k N(x_i | k)) for rn rows from r0 (a tile, or with DTRMM a block).
 * Small d: the rows are centred into Y and go through small_mahalanobis() (16 or 8 at a
 * time); larger d: DTRMM of the centred rows. Y: rn x d doubles. */
static void block_log_prob(const gm_gmm_cpu *e, int64_t r0, int64_t rn, int64_t k,
                           double *Y, double *logp) {
  const int64_t n = e->data.n, d = e->data.d;
  const double *x = e->data.x, *mu = e->mu + k * d;
  const double c = log(e->w[k]) + e->logdet_u[k] - 0.5 * (double)d * GM_LOG_2PI;
  if (e->data.structure != GM_GMM_FULL_STRUCTURE) {
#if GM_GMM_AVX2
    if (e->avx2) diagonal_mahalanobis_avx2(x, n, r0, rn, mu, e->U + k * d, d, logp);
    else
#endif
      diagonal_mahalanobis(x, n, r0, rn, mu, e->U + k * d, d, logp);
  } else if (d <= GM_GMM_SMALL_D) {
    centre_rows(x, n, r0, rn, mu, d, Y);
#if GM_GMM_AVX2
    if (e->avx2) small_mahalanobis_avx2(Y, rn, rn, e->U + k * d * d, d, logp);
    else
#endif
      small_mahalanobis(Y, rn, rn, e->U + k * d * d, d, logp);
  } else {
    const int m = (int)rn, di = (int)d;
    const double one = 1;
    centre_rows(x, n, r0, rn, mu, d, Y);
    dtrmm_("R", "U", "N", "N", &m, &di, &one, e->U + k * d * d, &di, Y, &m, 1, 1, 1, 1);
    for (int64_t i = 0; i < rn; i++) logp[i] = 0;
    for (int64_t j = 0; j < d; j++) {
      const double *y = Y + j * rn;
#pragma omp simd
      for (int64_t i = 0; i < rn; i++) logp[i] += y[i] * y[i];
    }
  }
#pragma omp simd
  for (int64_t i = 0; i < rn; i++) logp[i] = c - 0.5 * logp[i];
}

/* Rows i = r0 .. r0 + rn - 1 of z (ld n) hold log(w_k N(x_i | k)); they become the
 * responsibilities, logdens[i] the log of their sum (taken about the row's largest
 * term). Returns the sum of those over the rows, in row order. */
static double normalise_row(double *z, int64_t n, int64_t i, int64_t K, double *logdens) {
  double top = z[i];
  for (int64_t k = 1; k < K; k++)
    if (z[i + k * n] > top) top = z[i + k * n];
  double s = 0;
  for (int64_t k = 0; k < K; k++) {
    const double t = z[i + k * n] - top;
    s += z[i + k * n] = t < GM_GMM_LOG_FLUSH ? 0 : exp(t);
  }
  const double lse = top + log(s), inv = 1 / s;
  for (int64_t k = 0; k < K; k++) z[i + k * n] *= inv;
  logdens[i] = lse;
  return lse;
}

static double normalise_rows(double *z, int64_t n, int64_t r0, int64_t rn, int64_t K,
                             double *logdens) {
  double sum = 0;
  for (int64_t i = r0; i < r0 + rn; i++) sum += normalise_row(z, n, i, K, logdens);
  return sum;
}

static gpuml_status cpu_estep(void *p, int64_t K, double *loglik) {
  gm_gmm_cpu *e = p;
  const int64_t n = e->data.n, d = e->data.d, nblocks = block_count(n);
  const gpuml_options *opt = e->data.opt;
  volatile int stop = 0;
  const int blas_threads = gm_blas_serial_begin();
#pragma omp parallel num_threads(e->threads)
  {
    double *Y = e->work + (size_t)gm_thread_id() * GM_GMM_BLOCK * (size_t)(d + 1);
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < nblocks; b++) {
      if (stop) continue;
      const int64_t r0 = b * GM_GMM_BLOCK, rn = n - r0 < GM_GMM_BLOCK ? n - r0 : GM_GMM_BLOCK;
      /* log(w_k N(x_i | k)) goes into z first, then becomes the responsibility. */
      const int64_t step =
          e->data.structure == GM_GMM_FULL_STRUCTURE && d > GM_GMM_SMALL_D ? rn : GM_GMM_TILE;
      for (int64_t t0 = r0; t0 < r0 + rn; t0 += step) {
        const int64_t tn = r0 + rn - t0 < step ? r0 + rn - t0 : step;
        for (int64_t k = 0; k < K; k++) block_log_prob(e, t0, tn, k, Y, e->z + t0 + k * n);
      }
      e->block_ll[b] = normalise_rows(e->z, n, r0, rn, K, e->logdens);
      if (gm_is_calling_thread() && gm_interrupted(opt)) stop = 1;
    }
  }
  gm_blas_serial_end(blas_threads);
  if (stop) return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture fit interrupted");
  double ll = 0;
  for (int64_t b = 0; b < nblocks; b++) ll += e->block_ll[b];
  *loglik = ll;
  return GPUML_OK;
}

static gpuml_status cpu_log_density(void *p, double *out) {
  gm_gmm_cpu *e = p;
  memcpy(out, e->logdens, (size_t)e->data.n * sizeof(double));
  return GPUML_OK;
}

/* out[j] = sum_i z_i (x_ij - mu_j)^2, each a sum over the rows in order. Four columns go
 * through the rows together: their sums are independent chains of additions, where one
 * column at a time waited on each addition. */
static void diagonal_scatter(const double *x, int64_t n, const double *z, const double *mu,
                             int64_t d, double *out) {
  int64_t j = 0;
  for (; j + 4 <= d; j += 4) {
    const double *c0 = x + j * n, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n;
    const double m0 = mu[j], m1 = mu[j + 1], m2 = mu[j + 2], m3 = mu[j + 3];
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t i = 0; i < n; i++) {
      const double t0 = c0[i] - m0, t1 = c1[i] - m1, t2 = c2[i] - m2, t3 = c3[i] - m3;
      s0 += z[i] * t0 * t0;
      s1 += z[i] * t1 * t1;
      s2 += z[i] * t2 * t2;
      s3 += z[i] * t3 * t3;
    }
    out[j] = s0;
    out[j + 1] = s1;
    out[j + 2] = s2;
    out[j + 3] = s3;
  }
  for (; j < d; j++) {
    const double *col = x + j * n;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
      const double t = col[i] - mu[j];
      s += z[i] * t * t;
    }
    out[j] = s;
  }
}

/* W (rn x d, ld rn) = sqrt(z_i) (x_ij - mu_j) for the rn rows from r0; sz: rn doubles. */
static void weighted_centred_rows(const double *x, int64_t n, int64_t r0, int64_t rn,
                                  const double *z, const double *mu, int64_t d, double *W,
                                  double *sz) {
  square_roots(z + r0, rn, sz);
  for (int64_t j = 0; j < d; j++) {
    const double *col = x + r0 + j * n, m = mu[j];
    double *wcol = W + j * rn;
#pragma omp simd
    for (int64_t i = 0; i < rn; i++) wcol[i] = sz[i] * (col[i] - m);
  }
}

#if GM_GMM_AVX2
/* The same on 4-wide vectors (the square root is correctly rounded on both). */
__attribute__((target("avx2"))) static void weighted_centred_rows_avx2(
    const double *x, int64_t n, int64_t r0, int64_t rn, const double *z, const double *mu,
    int64_t d, double *W, double *sz) {
  int64_t i = 0;
  for (; i + 4 <= rn; i += 4) _mm256_storeu_pd(sz + i, _mm256_sqrt_pd(_mm256_loadu_pd(z + r0 + i)));
  for (; i < rn; i++) sz[i] = sqrt(z[r0 + i]);
  for (int64_t j = 0; j < d; j++) {
    const double *col = x + r0 + j * n, m = mu[j];
    double *wcol = W + j * rn;
#pragma omp simd
    for (int64_t r = 0; r < rn; r++) wcol[r] = sz[r] * (col[r] - m);
  }
}
#endif

/* Weight, mean and unconstrained covariance (without reg) of component k from its
 * responsibilities. */
static void mstep_component(gm_gmm_cpu *e, int64_t k, double *W, double *nk_out) {
  const int64_t n = e->data.n, d = e->data.d;
  const double *x = e->data.x, *z = e->z + k * n;
  double nk = 0;
  int64_t i = 0;
#if GM_GMM_LANES
  gm_v2 acc0 = {0, 0}, acc1 = {0, 0}, acc2 = {0, 0}, acc3 = {0, 0};
  for (; i + GM_GMM_LANES <= n; i += GM_GMM_LANES) {
    acc0 += load2(z + i);
    acc1 += load2(z + i + 2);
    acc2 += load2(z + i + 4);
    acc3 += load2(z + i + 6);
  }
  const gm_v2 acc = (acc0 + acc1) + (acc2 + acc3);
  nk = acc[0] + acc[1];
#endif
  for (; i < n; i++) nk += z[i];
  *nk_out = nk;
  if (!(nk > 0)) return;
  double *mu = e->mu + k * d, *S = e->cov + k * d * d;
  const int ni = (int)n, di = (int)d, one_i = 1;
  const double inv = 1 / nk, zero = 0, one = 1;
  dgemv_("T", &ni, &di, &inv, x, &ni, z, &one_i, &zero, mu, &one_i, 1);
  e->w[k] = nk / (double)n;
  if (e->data.structure == GM_GMM_FULL_STRUCTURE) {
    /* The scatter of the rows centred on the new mean, by blocks of
     * W = sqrt(z) (x - mu): S += W'W (hand-written up to GM_GMM_SMALL_D, else DSYRK). */
    const int small = d <= GM_GMM_SMALL_D;
    if (small) memset(S, 0, (size_t)(d * d) * sizeof(double));
    for (int64_t r0 = 0; r0 < n; r0 += GM_GMM_BLOCK) {
      const int64_t rn = n - r0 < GM_GMM_BLOCK ? n - r0 : GM_GMM_BLOCK;
#if GM_GMM_AVX2
      if (e->avx2) weighted_centred_rows_avx2(x, n, r0, rn, z, mu, d, W, W + d * rn);
      else
#endif
        weighted_centred_rows(x, n, r0, rn, z, mu, d, W, W + d * rn);
      if (small) {
#if GM_GMM_AVX2
        if (e->avx2) small_scatter_avx2(W, rn, rn, d, S);
        else
#endif
          small_scatter(W, rn, rn, d, S);
      } else {
        const int m = (int)rn;
        dsyrk_("U", "T", &di, &m, &one, W, &m, r0 == 0 ? &zero : &one, S, &di, 1, 1);
      }
    }
    for (int64_t b = 0; b < d; b++)
      for (int64_t a = 0; a <= b; a++) {
        const double v = S[a + b * d] * inv;
        S[a + b * d] = v;
        S[b + a * d] = v;
      }
    return;
  }
  diagonal_scatter(x, n, z, mu, d, W);
  for (int64_t j = 0; j < d; j++) W[j] *= inv;
  memset(S, 0, (size_t)(d * d) * sizeof(double));
  for (int64_t j = 0; j < d; j++) S[j + j * d] = W[j];
}

static gpuml_status cpu_mstep(void *p, int64_t K, double *nk) {
  gm_gmm_cpu *e = p;
  const gpuml_options *opt = e->data.opt;
  volatile int stop = 0;
  const int blas_threads = gm_blas_serial_begin();
#pragma omp parallel num_threads(e->threads)
  {
    double *W = e->work + (size_t)gm_thread_id() * GM_GMM_BLOCK * (size_t)(e->data.d + 1);
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < K; k++) {
      if (stop) continue;
      mstep_component(e, k, W, nk + k);
      if (gm_is_calling_thread() && gm_interrupted(opt)) stop = 1;
    }
  }
  gm_blas_serial_end(blas_threads);
  if (stop) return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture fit interrupted");
  return GPUML_OK;
}

static gpuml_status cpu_get_params(void *p, int64_t K, double *w, double *mu, double *cov) {
  gm_gmm_cpu *e = p;
  const size_t d = (size_t)e->data.d;
  if (w) memcpy(w, e->w, (size_t)K * sizeof(double));
  if (mu) memcpy(mu, e->mu, d * (size_t)K * sizeof(double));
  if (cov) memcpy(cov, e->cov, d * d * (size_t)K * sizeof(double));
  return GPUML_OK;
}

static gpuml_status cpu_get_z(void *p, int64_t K, double *z) {
  gm_gmm_cpu *e = p;
  memcpy(z, e->z, (size_t)e->data.n * (size_t)K * sizeof(double));
  return GPUML_OK;
}

static gpuml_status cpu_set_structure(void *p, gm_gmm_structure structure) {
  gm_gmm_cpu *e = p;
  if (structure == GM_GMM_FULL_STRUCTURE && !e->full_capable)
    return gm_fail(GPUML_ERR_ARG, "gmm:internal",
                   "the engine was opened for diagonal covariances only");
  e->data.structure = structure;
  return GPUML_OK;
}

const gm_gmm_ops gm_gmm_cpu_ops = {cpu_set_params, cpu_set_component, cpu_factor,
                                   cpu_estep,      cpu_log_density,   cpu_mstep,
                                   cpu_get_params, cpu_get_z,         cpu_set_structure,
                                   cpu_close};
