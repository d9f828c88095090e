/* The starting point of every EM fit, on the CPU for both backends so that they start
 * from the same parameters. Greedy k-means++ (each step draws 2 + log G candidates
 * with probability proportional to the squared distance to the nearest centre so far
 * and keeps the one that lowers the total most) is run GM_INIT_SEEDINGS times and the
 * centres of smallest k-means cost are kept: one unlucky draw (two centres in one
 * cluster, none in another) would otherwise start EM next to a poor local optimum.
 * Large data are seeded on a random sample of rows; every row is then assigned. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gmm.h"
#include "rng.h"

#define GM_INIT_SEEDINGS 4
#define GM_INIT_SAMPLE 131072
/* Sums over the rows go by fixed blocks added in block order, so that they do not
 * depend on the number of threads. */
#define GM_INIT_BLOCK 4096

static int64_t nblocks_of(int64_t n) { return (n + GM_INIT_BLOCK - 1) / GM_INIT_BLOCK; }

/* dist[i] = |x_i - x_c|^2 for all rows, in dimension order. */
static void distances_to(const double *x, int64_t n, int64_t d, int64_t c, double *dist,
                         int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < nblocks_of(n); b++) {
    const int64_t r0 = b * GM_INIT_BLOCK, r1 = r0 + GM_INIT_BLOCK < n ? r0 + GM_INIT_BLOCK : n;
    for (int64_t i = r0; i < r1; i++) dist[i] = 0;
    for (int64_t j = 0; j < d; j++) {
      const double *col = x + j * n, v = col[c];
      for (int64_t i = r0; i < r1; i++) {
        const double t = col[i] - v;
        dist[i] += t * t;
      }
    }
  }
}

/* sum_i min(a[i], b[i]) (b may be NULL: sum_i a[i]), with per-block sums kept in
 * `block` for the draw. */
static double blocked_sum(const double *a, const double *b, int64_t n, double *block,
                          int threads) {
  const int64_t nb = nblocks_of(n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t q = 0; q < nb; q++) {
    const int64_t r0 = q * GM_INIT_BLOCK, r1 = r0 + GM_INIT_BLOCK < n ? r0 + GM_INIT_BLOCK : n;
    double s = 0;
    for (int64_t i = r0; i < r1; i++) s += b && b[i] < a[i] ? b[i] : a[i];
    block[q] = s;
  }
  double total = 0;
  for (int64_t q = 0; q < nb; q++) total += block[q];
  return total;
}

/* The row where the running sum of dist first exceeds u (u < total): the draw with
 * probability proportional to dist. Rows of zero weight are never drawn. */
static int64_t draw_row(const double *dist, int64_t n, const double *block, double u) {
  const int64_t nb = nblocks_of(n);
  double acc = 0;
  int64_t q = 0;
  while (q < nb - 1 && acc + block[q] <= u) acc += block[q++];
  int64_t last = -1;
  for (int64_t i = q * GM_INIT_BLOCK; i < n; i++) {
    if (dist[i] > 0) last = i;
    acc += dist[i];
    if (acc > u && dist[i] > 0) return i;
  }
  if (last >= 0) return last;
  for (int64_t i = n - 1; i >= 0; i--) /* rounding ran past the end of the block */
    if (dist[i] > 0) return i;
  return -1;
}

typedef struct {
  double *nearest, *cand, *block, *scratch;
  int trials;
} gm_seeding_space;

/* One greedy k-means++ seeding of x (n x d): centre rows in `centre`, the k-means cost
 * in *cost. GPUML_ERR_ARG when the rows run out of distinct values (*distinct then
 * holds how many there are). */
static gpuml_status seed_once(const double *x, int64_t n, int64_t d, int64_t G, gm_rng *rng,
                              int threads, const gpuml_options *opt, gm_seeding_space *s,
                              int64_t *centre, double *cost, int64_t *distinct) {
  centre[0] = gm_rng_below(rng, n);
  distances_to(x, n, d, centre[0], s->nearest, threads);
  for (int64_t c = 1; c < G; c++) {
    const double total = blocked_sum(s->nearest, NULL, n, s->block, threads);
    if (!(total > 0)) {
      *distinct = c;
      return GPUML_ERR_ARG;
    }
    int best = -1;
    double best_total = 0;
    for (int t = 0; t < s->trials; t++) {
      const int64_t row = draw_row(s->nearest, n, s->block, gm_rng_uniform(rng) * total);
      double *dist = s->cand + (size_t)t * (size_t)n;
      distances_to(x, n, d, row, dist, threads);
      const double after = blocked_sum(s->nearest, dist, n, s->scratch, threads);
      if (best < 0 || after < best_total) {
        best = t;
        best_total = after;
        centre[c] = row;
      }
    }
    const double *dist = s->cand + (size_t)best * (size_t)n;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++)
      if (dist[i] < s->nearest[i]) s->nearest[i] = dist[i];
    if (gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture fit interrupted");
  }
  *cost = blocked_sum(s->nearest, NULL, n, s->block, threads);
  return GPUML_OK;
}

/* label[i] = the nearest of the G centres (G x d, row-major), ties to the earlier. */
static void assign(const double *x, int64_t n, int64_t d, const double *centres, int64_t G,
                   int64_t *label, int threads) {
#pragma omp parallel num_threads(threads)
  {
    double dist[GM_INIT_BLOCK], best[GM_INIT_BLOCK];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < nblocks_of(n); b++) {
      const int64_t r0 = b * GM_INIT_BLOCK, rn = n - r0 < GM_INIT_BLOCK ? n - r0 : GM_INIT_BLOCK;
      for (int64_t k = 0; k < G; k++) {
        for (int64_t i = 0; i < rn; i++) dist[i] = 0;
        for (int64_t j = 0; j < d; j++) {
          const double *col = x + r0 + j * n, v = centres[k * d + j];
          for (int64_t i = 0; i < rn; i++) {
            const double t = col[i] - v;
            dist[i] += t * t;
          }
        }
        for (int64_t i = 0; i < rn; i++)
          if (k == 0 || dist[i] < best[i]) {
            best[i] = dist[i];
            label[r0 + i] = k;
          }
      }
    }
  }
}

gpuml_status gm_gmm_kmeanspp(const double *x, int64_t n, int64_t d, int64_t G,
                             int spherical, double reg, uint64_t seed,
                             const gpuml_options *opt, double *weights, double *means,
                             double *covariances) {
  return gm_gmm_kmeanspp_spread(NULL, x, n, d, G, spherical, reg, seed, opt, weights, means,
                                covariances);
}

gpuml_status gm_gmm_kmeanspp_spread(const gm_gmm_spread *spread, const double *x, int64_t n,
                                    int64_t d, int64_t G, int spherical, double reg,
                                    uint64_t seed, const gpuml_options *opt, double *weights,
                                    double *means, double *covariances) {
  /* The passes below are short; below this size their threads cost more than they do. */
  const int threads = (double)n * (double)d >= 262144 ? gm_threads(opt) : 1;
  const int64_t N = spread ? spread->n : n; /* the rows of all processes */
  gm_rng rng;
  gm_rng_seed(&rng, seed);
  const int sampled = N > GM_INIT_SAMPLE;
  const int64_t ns = sampled ? GM_INIT_SAMPLE : N;
  gm_seeding_space s = {NULL, NULL, NULL, NULL, 2 + (int)log((double)G)};
  double *sample = NULL, *centres = NULL, *count = NULL, *var = NULL;
  int64_t *rows = NULL, *best_rows = NULL, *label = NULL, *drawn = NULL;
  s.nearest = gm_alloc((size_t)ns, sizeof(double));
  s.cand = gm_alloc((size_t)ns * (size_t)s.trials, sizeof(double));
  s.block = gm_alloc((size_t)nblocks_of(ns), sizeof(double));
  s.scratch = gm_alloc((size_t)nblocks_of(ns), sizeof(double));
  if (sampled || spread) {
    sample = gm_alloc((size_t)ns * (size_t)d, sizeof(double));
    drawn = gm_alloc((size_t)ns, sizeof(int64_t));
  }
  centres = gm_alloc((size_t)(G * d), sizeof(double));
  count = gm_alloc((size_t)G, sizeof(double));
  var = gm_alloc((size_t)d, sizeof(double));
  rows = gm_alloc((size_t)G, sizeof(int64_t));
  best_rows = gm_alloc((size_t)G, sizeof(int64_t));
  label = gm_alloc((size_t)n, sizeof(int64_t));
  gpuml_status st = GPUML_OK;
  if (!s.nearest || !s.cand || !s.block || !s.scratch || ((sampled || spread) && (!sample || !drawn)) ||
      !centres || !count || !var || !rows || !best_rows || !label)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the k-means++ start",
                 ((double)ns * (s.trials + 1 + (sampled ? d : 0)) + (double)n) * 8 / 1e6);
  if ((st = gm_gmm_agree(spread, st))) goto done;
  const double *xs = x;
  if (sampled || spread) {
    /* rows drawn with replacement (a repeat is never drawn as a centre twice), or all of
     * them from every process */
    for (int64_t r = 0; r < ns; r++) drawn[r] = sampled ? gm_rng_below(&rng, N) : r;
    if (spread) {
      if ((st = spread->gather(spread->ctx, x, n, d, drawn, ns, sample))) goto done;
    } else {
      for (int64_t r = 0; r < ns; r++)
        for (int64_t j = 0; j < d; j++) sample[r + j * ns] = x[drawn[r] + j * n];
    }
    xs = sample;
  }
  double best_cost = 0;
  for (int t = 0; t < GM_INIT_SEEDINGS; t++) {
    double cost = 0;
    int64_t distinct = 0;
    st = seed_once(xs, ns, d, G, &rng, threads, opt, &s, rows, &cost, &distinct);
    if (st == GPUML_ERR_ARG) {
      st = gm_fail(GPUML_ERR_ARG, "gmm:badG", "G = %lld exceeds the %lld distinct rows of the %s",
                   (long long)G, (long long)distinct, sampled ? "sampled data" : "data");
      goto done;
    }
    if (st) goto done;
    if (t == 0 || cost < best_cost) {
      best_cost = cost;
      memcpy(best_rows, rows, (size_t)G * sizeof(int64_t));
    }
  }
  for (int64_t k = 0; k < G; k++)
    for (int64_t j = 0; j < d; j++) centres[k * d + j] = xs[best_rows[k] + j * ns];
  assign(x, n, d, centres, G, label, threads);

  /* Cluster sizes, means and the pooled within-cluster variance of each column, each
   * column by one thread in row order (then over the processes). */
  for (int64_t k = 0; k < G; k++) count[k] = 0;
  for (int64_t i = 0; i < n; i++) count[label[i]] += 1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t j = 0; j < d; j++) {
    const double *col = x + j * n;
    double *mu = means + j; /* means[j + k d] */
    for (int64_t k = 0; k < G; k++) mu[k * d] = 0;
    for (int64_t i = 0; i < n; i++) mu[label[i] * d] += col[i];
  }
  if (spread && ((st = spread->sum(spread->ctx, count, G)) ||
                 (st = spread->sum(spread->ctx, means, G * d))))
    goto done;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t j = 0; j < d; j++) {
    const double *col = x + j * n;
    double *mu = means + j;
    for (int64_t k = 0; k < G; k++) mu[k * d] /= count[k];
    double v = 0;
    for (int64_t i = 0; i < n; i++) {
      const double t = col[i] - mu[label[i] * d];
      v += t * t;
    }
    var[j] = v;
  }
  if (spread && (st = spread->sum(spread->ctx, var, d))) goto done;
  double mean_var = 0;
  for (int64_t j = 0; j < d; j++) mean_var += (var[j] /= (double)N);
  mean_var /= (double)d;
  for (int64_t k = 0; k < G; k++) {
    weights[k] = count[k] / (double)N;
    double *S = covariances + k * d * d;
    memset(S, 0, (size_t)(d * d) * sizeof(double));
    for (int64_t j = 0; j < d; j++)
      S[j + j * d] = (spherical ? mean_var : var[j]) + reg;
  }
done:
  free(s.nearest);
  free(s.cand);
  free(s.block);
  free(s.scratch);
  free(sample);
  free(drawn);
  free(centres);
  free(count);
  free(var);
  free(rows);
  free(best_rows);
  free(label);
  return st;
}
