/* The deterministic start of the mixtures: model-based agglomerative hierarchical
 * clustering with the VVV criterion (Banfield & Raftery 1993; Fraley 1998, "Algorithms
 * for model-based Gaussian hierarchical clustering"), on data transformed as mclust's
 * "SVD" option does, so that the partitions equal mclust's hclass(hc(X, "VVV",
 * use = "SVD"), G) up to the labels.
 *
 * The rows. At most GM_GMM_HC_SUBSET rows take part: all of them when n is no larger,
 * otherwise one row from each of GM_GMM_HC_SUBSET consecutive strata of equal length,
 * at a fixed pseudo-random offset within its stratum. Sorted or grouped data are then
 * sampled in proportion (each group to within one row per boundary), and periodic data
 * (labels 0, 1, 0, 1, ...) do not alias with a fixed stride. The offsets are a fixed
 * function of the stratum (not of the options' seed).
 *
 * The transformation (mclust.options("hcUse") = "SVD"). Each column is centred and
 * divided by its standard deviation (denominator m - 1); columns of zero deviation are
 * dropped, as mclust drops the columns that this makes non-finite. With the SVD
 * Xs = U S V' of the m x d' result, the clustering runs on Z = Xs V S^(-1/2). mclust
 * divides by the square root of every singular value; a zero one (collinear columns,
 * m <= d') then gives non-finite or noise-dominated columns there. Here the directions
 * with s_k <= s_1 max(m, d') DBL_EPSILON are dropped instead (the numerical rank); on
 * data of full rank the two agree. p below is the number of columns of Z.
 *
 * The criterion. A group of l rows with scatter matrix W (sum of the outer products of
 * the deviations from its mean) costs
 *     T = l log(beta (tr W + alpha) / l)                        when l <= max(p, 2)
 *                                                               or W is singular,
 *     T = l log(det(W / l) + beta (tr W + alpha) / l)            otherwise,
 * the VVV classification likelihood with a trace term that keeps small groups finite
 * (Fraley 1998, mclust's hcVVV). alpha = tr(Z'Z) / (m p) (mclust's hcVVV: alpha = 1
 * times traceW(Z / sqrt(m p)), and at least DBL_EPSILON), beta = 1. A singleton costs
 * log(alpha beta). Each step merges the pair of groups whose merge raises the total
 * least: T(i u j) - T(i) - T(j). The merged scatter is W_i + W_j + (n_i n_j / n_ij)
 * (mu_i - mu_j)(mu_i - mu_j)', its trace updated the same way.
 *
 * The pair costs of the groups present are kept in an m(m-1)/2 table; a merge
 * recomputes only the pairs of the merged group. Costs come from the trace alone while
 * the merged group has at most max(p, 2) rows; beyond that from a log-determinant:
 * for a group with more than p rows and a positive-definite scatter, its Cholesky
 * factor L and log det W are kept, and a merge with a small group (k <= 1 + p/4 rank-one
 * terms: the mean difference and the small group's centred rows) costs
 * log det W + log det(I + Y'Y), Y = L^-1 U, O(p^2 k); otherwise the merged scatter is
 * formed and factored, O(p^3). The costs of a group with a factor with all singletons
 * are computed GM_HC_BATCH singletons at a time, vectorised across them. Groups keep
 * their p x p scatter matrices while m / 2 of them fit in GM_HC_SCATTER_BYTES (p <= 63
 * at m = 2000); beyond that only the (at most m / p) groups of more than p rows keep
 * theirs and the scatter of a smaller group is formed from its rows when needed. Each column j of the table keeps its
 * least cost over i < j; a cost that grew is looked at only when its column's kept
 * least is the least of all (then the column is scanned again), so a merge costs
 * O(g) besides its pair costs.
 *
 * Ties. Groups live in slots 0 .. g-1; a merge of slots a < b puts the merged group in
 * slot a and moves the last slot into slot b, and among equal costs the pair (i, j),
 * i < j, with the largest j, then the largest i, is merged: the bookkeeping of mclust's
 * hcvvv, so that exact ties (duplicate rows, say) are broken as mclust breaks them.
 * The costs are computed here by other (mathematically equal) formulas than mclust's
 * Givens updates of triangular factors, so pairs whose costs differ only in the last
 * bits may be merged in the other order: then the two trees differ from that merge on.
 * This happens on data with many equal rows (integer data with most rows repeated):
 * in mclust's arithmetic (a group's sum scaled by square roots of group sizes) the
 * trace of equal rows comes out as rounding noise rather than 0 and the noise orders
 * its ties;
 * here equal rows give exact ties, broken by the slot rule. On data without such ties
 * (and on the same data jittered by 1e-6) the partitions agree
 * (bench/gmm_hc_check.R).
 *
 * Every pair cost is computed by one thread from the same operands, and the vectorised
 * loops reorder no sums, so the result depends neither on the number of threads nor on
 * the vector width of the machine. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gmm.h"

/* mclust's hcVVV defaults: alpha is this times tr(Z'Z) / (m p), beta this. */
#define GM_HC_ALPHA 1.0
#define GM_HC_BETA 1.0
/* A merge's pair update runs on several threads only above this much estimated work
 * (about a flop each: tens of milliseconds): a parallel region per merge costs more than a
 * short update, and on a machine whose cores are busy with other work, each region's
 * barrier can wait a scheduler time slice for a descheduled thread (measured: 2,000
 * rows of 50 columns, 2 threads on 2 busy cores, 4.4 s with a region per merge against
 * 1.0 s on one thread). */
#define GM_HC_PARALLEL_WORK 3e7
/* The scatter matrices of all groups of 2 or more rows are kept (rather than formed from
 * their rows when needed) when m / 2 of them take at most this many bytes. */
#define GM_HC_SCATTER_BYTES (32.0 * 1024 * 1024)
/* Singletons whose merge costs with a large group are computed together. */
#define GM_HC_BATCH 8
/* How many merges between two looks at the interrupt callback (every merge when its
 * pair update is long). */
#define GM_HC_INTERRUPT_EVERY 32

typedef struct {
  int64_t m; /* rows */
  int64_t p; /* columns of z */
  const double *z; /* m x p, row-major: row i at z + i p */
  double alpha, beta;
  int64_t small_rank; /* low-rank update when it has at most this many terms */
  /* per slot */
  int64_t *size, *head, *tail;
  double *mean;  /* slot s at mean + s p */
  double *trace, *term;
  double **scatter; /* p x p lower triangle (column-major) for groups of more than p rows,
                     * and for all groups of 2 or more rows when keep_scatter */
  int keep_scatter;  /* m / 2 scatter matrices fit in GM_HC_SCATTER_BYTES */
  double **factor;  /* its Cholesky factor L by rows (L_ik at i p + k, k <= i; the diagonal
                     * stored as 1 / L_ii), or NULL where the scatter is not positive
                     * definite */
  double *logdet;   /* log det of the scatter where factor is set */
  int64_t *next;    /* per row: the next row of its group, -1 at the end */
  double *cost;     /* packed pair costs: (i, j), i < j, at j (j - 1) / 2 + i */
  double *colmin;   /* per slot j: the least cost(i, j) over i < j ... */
  int64_t *colarg;  /* ... and its i (the largest such i) */
  int64_t *partners; /* 2m: the slots whose costs with a merged group are computed */
  size_t work_len;  /* doubles of scratch per thread */
} gm_hc;

static inline size_t packed(int64_t i, int64_t j) {
  return (size_t)j * (size_t)(j - 1) / 2 + (size_t)i;
}

/* The cost of a group of l rows, trace tr, log det of its scatter logdet (-INFINITY when
 * singular or not computed). */
static double group_term(const gm_hc *h, int64_t l, double tr, double logdet) {
  const double rl = (double)l, b = h->beta * (tr + h->alpha) / rl;
  if (l <= h->p || l <= 2 || tr == 0 || !isfinite(logdet)) return rl * log(b);
  const double detlog = logdet - (double)h->p * log(rl); /* log det(W / l) */
  if (detlog <= 0) return rl * log(exp(detlog) + b);
  return rl * (log1p(exp(-detlog) * b) + detlog);
}

/* In-place Cholesky factor of the lower triangle of the p x p matrix a (column-major):
 * log det, or -INFINITY when it is not positive definite. */
GM_VECTOR_CLONES
static double cholesky(double *a, int64_t p) {
  double logdet = 0;
  for (int64_t j = 0; j < p; j++) {
    double *cj = a + j * p;
    const double pivot = cj[j];
    if (!(pivot > 0) || !isfinite(pivot)) return -INFINITY;
    const double r = sqrt(pivot), inv = 1 / r;
    logdet += log(pivot);
    cj[j] = r;
    for (int64_t i = j + 1; i < p; i++) cj[i] *= inv;
    for (int64_t k = j + 1; k < p; k++) {
      double *ck = a + k * p;
      const double f = cj[k];
#pragma omp simd
      for (int64_t i = k; i < p; i++) ck[i] -= cj[i] * f;
    }
  }
  return logdet;
}

/* out (lower triangle) += the scatter of the group in slot s. */
GM_VECTOR_CLONES
static void add_scatter(const gm_hc *h, int64_t s, double *out, double *v) {
  const int64_t p = h->p;
  if (h->scatter[s]) {
    const double *w = h->scatter[s];
    for (int64_t j = 0; j < p; j++)
      for (int64_t i = j; i < p; i++) out[i + j * p] += w[i + j * p];
    return;
  }
  if (h->size[s] < 2) return;
  const double *mu = h->mean + s * p;
  for (int64_t r = h->head[s]; r >= 0; r = h->next[r]) {
    const double *zr = h->z + r * p;
    for (int64_t k = 0; k < p; k++) v[k] = zr[k] - mu[k];
    for (int64_t j = 0; j < p; j++) {
      const double f = v[j];
#pragma omp simd
      for (int64_t i = j; i < p; i++) out[i + j * p] += v[i] * f;
    }
  }
}

/* The scatter of groups a and b merged (c = n_a n_b / n_ab, delta = mu_a - mu_b) into w. */
static void merged_scatter(const gm_hc *h, int64_t a, int64_t b, double c, const double *delta,
                           double *w, double *v) {
  const int64_t p = h->p;
  memset(w, 0, (size_t)(p * p) * sizeof(double));
  add_scatter(h, a, w, v);
  add_scatter(h, b, w, v);
  for (int64_t j = 0; j < p; j++) {
    const double f = c * delta[j];
    for (int64_t i = j; i < p; i++) w[i + j * p] += delta[i] * f;
  }
}

/* How many rank-one terms group s adds to another's scatter in a merge: its centred
 * rows (none for a singleton) and the mean difference. */
static int64_t update_terms(const gm_hc *h, int64_t s) {
  return 1 + (h->size[s] > 1 ? h->size[s] : 0);
}

/* log det of the merged scatter W_a + W_b + c delta delta' from the factor of a:
 * log det W_a + log det(I + Y'Y), Y = L_a^-1 [sqrt(c) delta, centred rows of b]. */
GM_VECTOR_CLONES
static double low_rank_logdet(const gm_hc *h, int64_t a, int64_t b, double c,
                              const double *delta, double *work) {
  const int64_t p = h->p, k = update_terms(h, b);
  const double *L = h->factor[a];
  double *Y = work, *M = work + p * k;
  const double sc = sqrt(c);
  for (int64_t i = 0; i < p; i++) Y[i] = sc * delta[i];
  if (k > 1) {
    const double *mu = h->mean + b * p;
    int64_t t = 1;
    for (int64_t r = h->head[b]; r >= 0; r = h->next[r], t++) {
      const double *zr = h->z + r * p;
      for (int64_t i = 0; i < p; i++) Y[i + t * p] = zr[i] - mu[i];
    }
  }
  for (int64_t t = 0; t < k; t++) { /* forward substitution by rows, column by column */
    double *y = Y + t * p;
    for (int64_t i = 0; i < p; i++) {
      const double *li = L + i * p;
      double acc = y[i];
      for (int64_t j = 0; j < i; j++) acc -= li[j] * y[j];
      y[i] = acc * li[i];
    }
  }
  if (k == 1) {
    double s = 0;
    for (int64_t i = 0; i < p; i++) s += Y[i] * Y[i];
    return h->logdet[a] + log1p(s);
  }
  for (int64_t u = 0; u < k; u++)
    for (int64_t t = u; t < k; t++) {
      double s = 0;
      const double *yt = Y + t * p, *yu = Y + u * p;
      for (int64_t i = 0; i < p; i++) s += yt[i] * yu[i];
      M[t + u * k] = (t == u ? 1 : 0) + s;
    }
  const double ld = cholesky(M, k);
  return isfinite(ld) ? h->logdet[a] + ld : NAN;
}

/* Scratch of one thread: p x p, p x (small_rank), small_rank^2, a p x GM_HC_BATCH block and
 * its sums, and two p-vectors (the last 2p). */
static size_t work_doubles(int64_t p, int64_t small_rank) {
  return (size_t)(p * p + p * small_rank + small_rank * small_rank + 2 * p +
                  (p + 1) * GM_HC_BATCH);
}

/* The cost of groups a and b merged, and its trace in *tr_out. */
static double merged_term(const gm_hc *h, int64_t a, int64_t b, double *work, double *tr_out) {
  const int64_t p = h->p, na = h->size[a], nb = h->size[b], n = na + nb;
  double *delta = work + work_doubles(p, h->small_rank) - 2 * p, *v = delta + p;
  const double *ma = h->mean + a * p, *mb = h->mean + b * p;
  double dd = 0;
  for (int64_t k = 0; k < p; k++) {
    delta[k] = ma[k] - mb[k];
    dd += delta[k] * delta[k];
  }
  const double c = (double)na * (double)nb / (double)n;
  const double tr = h->trace[a] + h->trace[b] + c * dd;
  *tr_out = tr;
  double logdet = -INFINITY;
  if (n > p && n > 2 && tr != 0) {
    logdet = NAN;
    if (h->factor[a] && update_terms(h, b) <= h->small_rank)
      logdet = low_rank_logdet(h, a, b, c, delta, work);
    else if (h->factor[b] && update_terms(h, a) <= h->small_rank)
      logdet = low_rank_logdet(h, b, a, c, delta, work);
    if (isnan(logdet)) {
      merged_scatter(h, a, b, c, delta, work, v);
      logdet = cholesky(work, p);
    }
  }
  return group_term(h, n, tr, logdet);
}

static double pair_cost(const gm_hc *h, int64_t a, int64_t b, double *work) {
  double tr;
  const double cost = merged_term(h, a, b, work, &tr) - (h->term[a] + h->term[b]);
  return isnan(cost) ? INFINITY : cost;
}

/* pair_cost(a, s) for up to GM_HC_BATCH singletons s (slots one[0 .. count-1]) and a
 * group a with a factor: the same operations as low_rank_logdet with one term, in the
 * same order for each singleton, on GM_HC_BATCH singletons side by side (so the costs
 * are those of pair_cost to the last bit). */
GM_VECTOR_CLONES
static void singleton_costs(const gm_hc *h, int64_t a, const int64_t *one, int count,
                            double *out, double *work) {
  enum { B = GM_HC_BATCH };
  const int64_t p = h->p, na = h->size[a], n = na + 1;
  const double *L = h->factor[a], *ma = h->mean + a * p;
  const double c = (double)na * 1.0 / (double)n;
  const double sc = sqrt(c);
  double *Y = work, *dd = work + p * B; /* Y[i B + t] */
  for (int t = 0; t < B; t++) {
    const double *mb = h->mean + (t < count ? one[t] : one[0]) * p;
    double sum = 0;
    for (int64_t i = 0; i < p; i++) {
      const double delta = ma[i] - mb[i];
      sum += delta * delta;
      Y[i * B + t] = sc * delta;
    }
    dd[t] = sum;
  }
  /* forward substitution by rows, four rows side by side (four independent chains of
   * subtractions; each row's in the order k = 0, 1, ..., as one by one) */
  for (int64_t i0 = 0; i0 < p; i0 += 4) {
    if (i0 + 4 <= p) {
      const double *l0 = L + i0 * p, *l1 = l0 + p, *l2 = l1 + p, *l3 = l2 + p;
      double a0[B], a1[B], a2[B], a3[B];
      for (int t = 0; t < B; t++) {
        a0[t] = Y[i0 * B + t];
        a1[t] = Y[(i0 + 1) * B + t];
        a2[t] = Y[(i0 + 2) * B + t];
        a3[t] = Y[(i0 + 3) * B + t];
      }
      for (int64_t k = 0; k < i0; k++) {
        const double *yk = Y + k * B, f0 = l0[k], f1 = l1[k], f2 = l2[k], f3 = l3[k];
#pragma omp simd
        for (int t = 0; t < B; t++) {
          a0[t] -= f0 * yk[t];
          a1[t] -= f1 * yk[t];
          a2[t] -= f2 * yk[t];
          a3[t] -= f3 * yk[t];
        }
      }
      for (int t = 0; t < B; t++) Y[i0 * B + t] = a0[t] * l0[i0];
      for (int t = 0; t < B; t++) {
        a1[t] -= l1[i0] * Y[i0 * B + t];
        Y[(i0 + 1) * B + t] = a1[t] * l1[i0 + 1];
      }
      for (int t = 0; t < B; t++) {
        a2[t] -= l2[i0] * Y[i0 * B + t];
        a2[t] -= l2[i0 + 1] * Y[(i0 + 1) * B + t];
        Y[(i0 + 2) * B + t] = a2[t] * l2[i0 + 2];
      }
      for (int t = 0; t < B; t++) {
        a3[t] -= l3[i0] * Y[i0 * B + t];
        a3[t] -= l3[i0 + 1] * Y[(i0 + 1) * B + t];
        a3[t] -= l3[i0 + 2] * Y[(i0 + 2) * B + t];
        Y[(i0 + 3) * B + t] = a3[t] * l3[i0 + 3];
      }
      continue;
    }
    for (int64_t i = i0; i < p; i++) {
      const double *li = L + i * p;
      double acc[B];
      for (int t = 0; t < B; t++) acc[t] = Y[i * B + t];
      for (int64_t k = 0; k < i; k++) {
        const double f = li[k], *yk = Y + k * B;
#pragma omp simd
        for (int t = 0; t < B; t++) acc[t] -= f * yk[t];
      }
      const double inv = li[i];
#pragma omp simd
      for (int t = 0; t < B; t++) Y[i * B + t] = acc[t] * inv;
    }
  }
  for (int t = 0; t < count; t++) {
    double ssq = 0;
    for (int64_t i = 0; i < p; i++) ssq += Y[i * B + t] * Y[i * B + t];
    const int64_t s = one[t];
    const double tr = h->trace[a] + h->trace[s] + c * dd[t];
    const double logdet = n > p && n > 2 && tr != 0 ? h->logdet[a] + log1p(ssq) : -INFINITY;
    const double cost = group_term(h, n, tr, logdet) - (h->term[a] + h->term[s]);
    out[t] = isnan(cost) ? INFINITY : cost;
  }
}

/* The least cost of column j (ties: the largest i). */
static void rescan(gm_hc *h, int64_t j) {
  const double *col = h->cost + packed(0, j);
  double best = INFINITY;
  int64_t arg = 0;
  for (int64_t i = 0; i < j; i++)
    if (col[i] <= best) {
      best = col[i];
      arg = i;
    }
  h->colmin[j] = best;
  h->colarg[j] = arg;
}

/* Entry (i, j) of column j changed. The kept least cost of a column is never worse than
 * the true one (a cost that grew is not looked at until the column's least cost is the
 * least of all: see agglomerate), so a change needs a look only when it is better. */
static void entry_changed(gm_hc *h, int64_t i, int64_t j) {
  const double v = h->cost[packed(i, j)];
  if (v < h->colmin[j] || (v == h->colmin[j] && i >= h->colarg[j])) {
    h->colmin[j] = v;
    h->colarg[j] = i;
  }
}

static void move_slot(gm_hc *h, int64_t from, int64_t to) {
  const int64_t p = h->p;
  h->size[to] = h->size[from];
  h->head[to] = h->head[from];
  h->tail[to] = h->tail[from];
  memcpy(h->mean + to * p, h->mean + from * p, (size_t)p * sizeof(double));
  h->trace[to] = h->trace[from];
  h->term[to] = h->term[from];
  h->scatter[to] = h->scatter[from];
  h->factor[to] = h->factor[from];
  h->logdet[to] = h->logdet[from];
  h->scatter[from] = h->factor[from] = NULL;
}

/* Merges slots a < b into a (the group's statistics; the pair table is the caller's). */
static gpuml_status merge_groups(gm_hc *h, int64_t a, int64_t b, double *work) {
  const int64_t p = h->p, na = h->size[a], nb = h->size[b], n = na + nb;
  double tr;
  const double term = merged_term(h, a, b, work, &tr);
  if (n > p || h->keep_scatter) {
    double *delta = work + work_doubles(p, h->small_rank) - 2 * p, *v = delta + p;
    double *w = h->scatter[a] ? h->scatter[a] : h->scatter[b];
    if (!w && !(w = gm_alloc((size_t)(p * p), sizeof(double)))) goto nomem;
    const double c = (double)na * (double)nb / (double)n;
    double *scratch = work; /* the merged scatter, formed before w is overwritten */
    merged_scatter(h, a, b, c, delta, scratch, v);
    memcpy(w, scratch, (size_t)(p * p) * sizeof(double));
    if (h->scatter[a] != w) free(h->scatter[a]);
    if (h->scatter[b] != w) free(h->scatter[b]);
    h->scatter[b] = NULL;
    h->scatter[a] = w;
  }
  if (n > p) {
    double *f = h->factor[a] ? h->factor[a] : h->factor[b];
    if (!f && !(f = gm_alloc((size_t)(p * p), sizeof(double)))) goto nomem;
    memcpy(f, h->scatter[a], (size_t)(p * p) * sizeof(double));
    const double ld = cholesky(f, p);
    if (h->factor[a] != f) free(h->factor[a]);
    if (h->factor[b] != f) free(h->factor[b]);
    h->factor[b] = NULL;
    if (isfinite(ld)) { /* kept by rows, the diagonal inverted */
      for (int64_t j = 0; j < p; j++) {
        f[j + j * p] = 1 / f[j + j * p];
        for (int64_t i = j + 1; i < p; i++) f[j + i * p] = f[i + j * p];
      }
      h->factor[a] = f;
      h->logdet[a] = ld;
    } else {
      free(f);
      h->factor[a] = NULL;
    }
  }
  double *ma = h->mean + a * p;
  const double *mb = h->mean + b * p, wb = (double)nb / (double)n;
  for (int64_t k = 0; k < p; k++) ma[k] += wb * (mb[k] - ma[k]);
  h->size[a] = n;
  h->trace[a] = tr;
  h->term[a] = term;
  h->next[h->tail[a]] = h->head[b];
  h->tail[a] = h->tail[b];
  return GPUML_OK;
nomem:
  return gm_fail(GPUML_ERR_NOMEM, "noMemory",
                 "cannot allocate a %lld x %lld scatter matrix for the hierarchical start",
                 (long long)p, (long long)p);
}

/* ---- the rows and the transformation ----------------------------------------------- */

static uint64_t mix64(uint64_t v) { /* splitmix64's finaliser */
  v += 0x9E3779B97F4A7C15ULL;
  v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ULL;
  v = (v ^ (v >> 27)) * 0x94D049BB133111EBULL;
  return v ^ (v >> 31);
}

void gm_gmm_hc_rows(int64_t n, int64_t m, int64_t *rows) {
  if (n <= m) {
    for (int64_t i = 0; i < n; i++) rows[i] = i;
    return;
  }
  const int64_t q = n / m, r = n % m; /* stratum k: [floor(k n / m), floor((k + 1) n / m)) */
  for (int64_t k = 0; k < m; k++) {
    const int64_t lo = k * q + (k * r) / m, hi = (k + 1) * q + ((k + 1) * r) / m;
    rows[k] = lo + (int64_t)(mix64((uint64_t)k) % (uint64_t)(hi - lo));
  }
}

/* z (m x p, row-major, allocated here) from the chosen rows; *p_out its columns, *trace
 * tr(Z'Z) (the sum of the singular values kept). */
static gpuml_status transform(const double *x, int64_t n, int64_t d, const int64_t *rows,
                              int64_t m, double **z_out, int64_t *p_out, double *trace) {
  *z_out = NULL;
  double *xs = gm_alloc((size_t)m * (size_t)d, sizeof(double));
  double *a = gm_alloc((size_t)m * (size_t)d, sizeof(double));
  double *s = NULL, *vt = NULL, *work = NULL, *z = NULL;
  gpuml_status st = GPUML_OK;
  if (!xs || !a) goto nomem;
  int64_t dk = 0; /* columns kept: centred and scaled to unit standard deviation */
  for (int64_t j = 0; j < d; j++) {
    double *col = xs + dk * m, mean = 0, ss = 0;
    for (int64_t i = 0; i < m; i++) col[i] = x[rows[i] + j * n];
    for (int64_t i = 0; i < m; i++) mean += col[i];
    mean /= (double)m;
    for (int64_t i = 0; i < m; i++) {
      col[i] -= mean;
      ss += col[i] * col[i];
    }
    const double sd = sqrt(ss / (double)(m - 1));
    if (!(sd > 0) || !isfinite(sd)) continue; /* a constant column */
    for (int64_t i = 0; i < m; i++) col[i] /= sd;
    dk++;
  }
  const int64_t k = m < dk ? m : dk;
  int64_t rank = 0;
  double sum_s = 0;
  if (k > 0) {
    const int im = (int)m, idk = (int)dk, ik = (int)k, one = 1, query = -1;
    int info = 0, lwork;
    double wq = 0, u_dummy = 0;
    s = gm_alloc((size_t)k, sizeof(double));
    vt = gm_alloc((size_t)k * (size_t)dk, sizeof(double));
    if (!s || !vt) goto nomem;
    memcpy(a, xs, (size_t)m * (size_t)dk * sizeof(double)); /* dgesvd overwrites it */
    dgesvd_("N", "S", &im, &idk, a, &im, s, &u_dummy, &one, vt, &ik, &wq, &query, &info, 1, 1);
    lwork = (int)wq + 1;
    work = gm_alloc((size_t)lwork, sizeof(double));
    if (!work) goto nomem;
    dgesvd_("N", "S", &im, &idk, a, &im, s, &u_dummy, &one, vt, &ik, work, &lwork, &info, 1, 1);
    if (info != 0) {
      st = gm_fail(GPUML_ERR_NUMERIC, "gmm:numeric",
                   "the SVD of the scaled data for the hierarchical start failed (info %d)", info);
      goto done;
    }
    const double tol = s[0] * (double)(m > dk ? m : dk) * DBL_EPSILON;
    while (rank < k && s[rank] > tol) rank++;
  }
  if (rank > 0) {
    z = gm_alloc((size_t)m * (size_t)rank, sizeof(double));
    if (!z) goto nomem;
    for (int64_t c = 0; c < rank; c++) sum_s += s[c];
    for (int64_t j = 0; j < dk; j++) /* the rows of V' scaled by s^(-1/2) */
      for (int64_t c = 0; c < rank; c++) vt[c + j * k] /= sqrt(s[c]);
    /* z[i, c] = sum_j xs[i, j] v[j, c] / sqrt(s_c) */
    memset(z, 0, (size_t)m * (size_t)rank * sizeof(double));
    for (int64_t j = 0; j < dk; j++) {
      const double *col = xs + j * m, *v = vt + j * k;
      for (int64_t i = 0; i < m; i++) {
        double *zi = z + i * rank;
        const double f = col[i];
        for (int64_t c = 0; c < rank; c++) zi[c] += f * v[c];
      }
    }
    *p_out = rank;
  } else { /* all rows equal: one column of zeros, every merge costs the same */
    z = gm_alloc((size_t)m, sizeof(double));
    if (!z) goto nomem;
    memset(z, 0, (size_t)m * sizeof(double));
    *p_out = 1;
  }
  *trace = sum_s;
  *z_out = z;
  z = NULL;
  goto done;
nomem:
  st = gm_fail(GPUML_ERR_NOMEM, "noMemory",
               "cannot allocate %.1f MB for the scaled data of the hierarchical start",
               2 * (double)m * (double)d * 8 / 1e6);
done:
  free(xs);
  free(a);
  free(s);
  free(vt);
  free(work);
  free(z);
  return st;
}

/* ---- the merges and the partitions --------------------------------------------------- */

static int64_t find_root(int64_t *parent, int64_t i) {
  while (parent[i] != i) {
    parent[i] = parent[parent[i]];
    i = parent[i];
  }
  return i;
}

/* Column g - 1 of labels for g = gmax .. 1 from the merge history (pairs of rows of the
 * two groups merged). */
static void partitions(const int64_t *merged, int64_t m, int64_t gmax, int32_t *labels,
                       int64_t *parent, int64_t *label_of) {
  for (int64_t i = 0; i < m; i++) {
    parent[i] = i;
    label_of[i] = -1;
  }
  for (int64_t t = 0, groups = m; groups >= 1; t++, groups--) {
    if (t > 0) {
      const int64_t ra = find_root(parent, merged[2 * (t - 1)]),
                    rb = find_root(parent, merged[2 * (t - 1) + 1]);
      parent[ra > rb ? ra : rb] = ra < rb ? ra : rb;
    }
    if (groups > gmax) continue;
    int32_t *out = labels + (groups - 1) * m;
    int32_t next = 0;
    for (int64_t i = 0; i < m; i++) {
      const int64_t r = find_root(parent, i);
      if (label_of[r] < 0) label_of[r] = next++;
      out[i] = (int32_t)label_of[r];
    }
    for (int64_t i = 0; i < m; i++) label_of[find_root(parent, i)] = -1;
  }
}

static gpuml_status agglomerate(gm_hc *h, const gpuml_options *opt, int threads,
                                int64_t *merged, double *work) {
  const int64_t m = h->m;
  for (int64_t s = 0; s < m; s++) {
    h->size[s] = 1;
    h->head[s] = h->tail[s] = s;
    h->next[s] = -1;
    h->trace[s] = 0;
    h->term[s] = group_term(h, 1, 0, -INFINITY);
    h->logdet[s] = -INFINITY;
    memcpy(h->mean + s * h->p, h->z + s * h->p, (size_t)h->p * sizeof(double));
  }
  /* every pair of singletons, in blocks of columns between looks at the interrupt */
  for (int64_t j0 = 1; j0 < m; j0 += 256) {
    const int64_t j1 = j0 + 256 < m ? j0 + 256 : m;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int64_t j = j0; j < j1; j++) {
      double *w = work + (size_t)gm_thread_id() * h->work_len;
      for (int64_t i = 0; i < j; i++) h->cost[packed(i, j)] = pair_cost(h, i, j, w);
    }
    for (int64_t j = j0; j < j1; j++) rescan(h, j);
    if (gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture start interrupted");
  }
  for (int64_t g = m; g > 1; g--) { /* slots 0 .. g-1 hold the groups */
    /* the least kept cost (ties: the largest j); when it is out of date, the column is
     * scanned again and the choice made again */
    int64_t b;
    for (;;) {
      b = 1;
      for (int64_t j = 2; j < g; j++)
        if (h->colmin[j] <= h->colmin[b]) b = j;
      if (h->cost[packed(h->colarg[b], b)] == h->colmin[b]) break;
      rescan(h, b);
    }
    const int64_t a = h->colarg[b], last = g - 1;
    merged[2 * (m - g)] = h->head[a];
    merged[2 * (m - g) + 1] = h->head[b];
    GM_TRY(merge_groups(h, a, b, work));
    if (b != last) { /* the last slot moves to b, its costs with it */
      move_slot(h, last, b);
      for (int64_t i = 0; i < b; i++) h->cost[packed(i, b)] = h->cost[packed(i, last)];
      for (int64_t j = b + 1; j < last; j++) h->cost[packed(b, j)] = h->cost[packed(j, last)];
    }
    /* the merged group's pairs: with a factor for the merged group, its singleton
     * partners in blocks, the others one by one */
    const int64_t gn = g - 1;
    int64_t nsingle = 0, nother = 0;
    int64_t *single = h->partners, *other = h->partners + m;
    const double rp = (double)h->p, p2 = rp * rp;
    double est = 0; /* the work of the pair costs, roughly */
    for (int64_t j = 0; j < gn; j++) {
      if (j == a) continue;
      if (h->factor[a] && h->size[j] == 1) {
        single[nsingle++] = j;
        est += p2 / 2 + 60;
      } else {
        other[nother++] = j;
        est += h->size[a] + h->size[j] <= h->p ? rp + 60 : p2 * (rp / 6 + 1) + 60;
      }
    }
    const int64_t nblocks = (nsingle + GM_HC_BATCH - 1) / GM_HC_BATCH;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4) if (est >= GM_HC_PARALLEL_WORK)
    for (int64_t task = 0; task < nblocks + nother; task++) {
      double *w = work + (size_t)gm_thread_id() * h->work_len;
      if (task < nblocks) {
        const int64_t t0 = task * GM_HC_BATCH;
        const int count = (int)(nsingle - t0 < GM_HC_BATCH ? nsingle - t0 : GM_HC_BATCH);
        double out[GM_HC_BATCH];
        singleton_costs(h, a, single + t0, count, out, w);
        for (int t = 0; t < count; t++) {
          const int64_t j = single[t0 + t];
          h->cost[j < a ? packed(j, a) : packed(a, j)] = out[t];
        }
      } else {
        const int64_t j = other[task - nblocks];
        h->cost[j < a ? packed(j, a) : packed(a, j)] = pair_cost(h, a, j, w);
      }
    }
    /* the least cost of each column touched: a and b anew, j > a at row a, and
     * b < j < last at row b */
    if (a > 0) rescan(h, a);
    if (b != last) rescan(h, b);
    for (int64_t j = a + 1; j < gn; j++) {
      if (j == b && b != last) continue;
      entry_changed(h, a, j);
      if (b != last && j > b) entry_changed(h, b, j);
    }
    if ((est >= 1e6 || (m - g + 1) % GM_HC_INTERRUPT_EVERY == 0) && gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture start interrupted");
  }
  return GPUML_OK;
}

gpuml_status gm_gmm_hc(const double *x, int64_t n, int64_t d, int64_t gmax,
                       const gpuml_options *opt, int64_t *rows, int32_t *labels) {
  gpuml_status st = gm_check_options(opt);
  if (st) return st;
  if ((st = gm_check_matrix(x, n, d, "data", "gmm"))) return st;
  const int64_t m = n < GM_GMM_HC_SUBSET ? n : GM_GMM_HC_SUBSET;
  if (gmax < 1 || gmax > m)
    return gm_fail(GPUML_ERR_ARG, "gmm:badG",
                   "G = %lld groups from the hierarchical start: give 1 .. %lld (the %s rows)",
                   (long long)gmax, (long long)m, n > m ? "sampled" : "data's");
  if (d > 46340)
    return gm_fail(GPUML_ERR_ARG, "gmm:tooLarge",
                   "%lld columns are more than the hierarchical start takes (46340)", (long long)d);
  if (!rows || !labels)
    return gm_fail(GPUML_ERR_ARG, "gmm:badOutput", "rows and labels must be allocated");
  gm_gmm_hc_rows(n, m, rows);
  if (m == 1) {
    labels[0] = 0;
    return GPUML_OK;
  }
  const int threads = gm_threads(opt);
  gm_hc h;
  memset(&h, 0, sizeof h);
  h.m = m;
  double *z = NULL, trace = 0, *work = NULL;
  int64_t *merged = NULL;
  if ((st = transform(x, n, d, rows, m, &z, &h.p, &trace))) return st;
  const int64_t p = h.p;
  h.z = z;
  h.alpha = GM_HC_ALPHA * trace / ((double)m * (double)p);
  if (!(h.alpha >= DBL_EPSILON)) h.alpha = DBL_EPSILON;
  h.beta = GM_HC_BETA;
  h.small_rank = 1 + p / 4;
  h.keep_scatter = (double)(m / 2) * (double)(p * p) * sizeof(double) <= GM_HC_SCATTER_BYTES;
  h.work_len = work_doubles(p, h.small_rank);
  h.size = gm_alloc((size_t)m, sizeof(int64_t));
  h.head = gm_alloc((size_t)m, sizeof(int64_t));
  h.tail = gm_alloc((size_t)m, sizeof(int64_t));
  h.next = gm_alloc((size_t)m, sizeof(int64_t));
  h.mean = gm_alloc((size_t)m * (size_t)p, sizeof(double));
  h.trace = gm_alloc((size_t)m, sizeof(double));
  h.term = gm_alloc((size_t)m, sizeof(double));
  h.logdet = gm_alloc((size_t)m, sizeof(double));
  h.scatter = calloc((size_t)m, sizeof(double *));
  h.factor = calloc((size_t)m, sizeof(double *));
  h.cost = gm_alloc(packed(0, m), sizeof(double));
  h.colmin = gm_alloc((size_t)m, sizeof(double));
  h.colarg = gm_alloc((size_t)m, sizeof(int64_t));
  h.partners = gm_alloc((size_t)(2 * m), sizeof(int64_t));
  merged = gm_alloc((size_t)(2 * m), sizeof(int64_t));
  work = gm_alloc((size_t)threads * h.work_len, sizeof(double));
  if (!h.size || !h.head || !h.tail || !h.next || !h.mean || !h.trace || !h.term || !h.logdet ||
      !h.scatter || !h.factor || !h.cost || !h.colmin || !h.colarg || !h.partners || !merged || !work) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory",
                 "cannot allocate %.1f MB for the hierarchical start of %lld rows",
                 (double)packed(0, m) * 8 / 1e6, (long long)m);
    goto done;
  }
  if ((st = agglomerate(&h, opt, threads, merged, work))) goto done;
  /* the partitions reuse head and tail as union-find scratch */
  partitions(merged, m, gmax, labels, h.head, h.tail);
done:
  if (h.scatter)
    for (int64_t s = 0; s < m; s++) free(h.scatter[s]);
  if (h.factor)
    for (int64_t s = 0; s < m; s++) free(h.factor[s]);
  free(h.size);
  free(h.head);
  free(h.tail);
  free(h.next);
  free(h.mean);
  free(h.trace);
  free(h.term);
  free(h.logdet);
  free(h.scatter);
  free(h.factor);
  free(h.cost);
  free(h.colmin);
  free(h.colarg);
  free(h.partners);
  free(merged);
  free(work);
  free(z);
  return st;
}
