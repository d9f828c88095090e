/* Benchmark of one call spread over several GPUs of a host (the `devices` option): the
 * same call on 1, 2, ... devices, its time (best of `reps`), the speed-up over one device
 * and whether the answer is the one-device answer.
 *
 *   build/bench/devices_gpu [--devices 1,2,4] [--reps R] [--only knn,knn64,gmm,dpc,tsne]
 *                           [--knn N M D K] [--knn64 N M D K] [--gmm N D G] [--dpc N]
 *                           [--tsne N D]
 *
 * kNN: M queries against N references of D columns (fp32, host arrays in and out), the
 *      references sharded over the devices, the queries sent to all; the lists must equal
 *      the one-device lists exactly (same indices, same tie rule).
 * knn64: the same in double precision (precision auto: the certified path of R and Octave),
 *      whose lists are exact, so that any difference between device counts is a fault.
 * GMM: VVV with G components on N x D (fp64); the time of an EM iteration from fits of 5
 *      and 105 iterations at tol 0 from one k-means++ start (best of R each, their EM
 *      iterations by the fit's clock, model.seconds_em), never the difference of two
 *      single runs; the log-likelihood beside the one-device one (the
 *      sums run in another order: equal up to rounding).
 * DPC: density peaks on N x 2 points with k = 10 centres, rho and delta by row blocks
 *      over the devices; rho, delta, nearest and the clusters must equal one device's.
 *      Also timed: the density passes alone (gpuml_dpc_density: dc, rho, delta), the part
 *      the devices share; the rest of the fit (centres, clusters, halo) runs on one.
 * t-SNE: N x D points in 30 clusters, the defaults (FFT, 1,000 iterations), the kNN for P
 *      and the optimisation split; the whole fit and the optimisation alone, and whether
 *      the embedding is one device's (it should be, bit for bit: the lists are exact in
 *      double precision and the split optimiser sums as one device does).
 * Defaults are the sizes of the multi-GPU issue: kNN 10^7 references x 128 with 10^5
 * queries, k = 10; GMM 10^7 x 50, G = 16; DPC 10^8 x 2; t-SNE 10^6 x 50. Prints "RESULT <case> <seconds>"
 * lines and a table last. Built by tools/gpu-run.sh like the other bench/ *_gpu.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpuml.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
/* The normal draw of entry `i` of stream `s`, from a counter-based hash (splitmix64), so
 * that the large matrices are filled by all cores in the same bits whatever their number
 * (10^7 x 128 draws one after another took most of a minute of the lent machine). */
static double unit_hash(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}
static double normal_at(uint64_t s, uint64_t i) {
  const uint64_t base = (s << 40) ^ (2 * i);
  return sqrt(-2 * log(unit_hash(base))) * cos(6.283185307179586 * unit_hash(base + 1));
}

static void *must(void *p) {
  if (!p) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  return p;
}

static int counts[8], ncounts = 0, reps = 2;

/* n x d points (column-major) around G centres drawn uniformly in [0, width)^d, each row
 * i at centre i mod G plus standard normal noise from stream `stream` (the same values
 * on any number of threads). */
static double *blobs(int64_t n, int64_t d, int64_t G, double width, uint64_t stream) {
  double *x = must(malloc(sizeof(double) * (size_t)n * (size_t)d));
  double *centre = must(malloc(sizeof(double) * (size_t)(G * d)));
  for (int64_t i = 0; i < G * d; i++) centre[i] = width * uniform();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++)
      x[i + j * n] = centre[(i % G) * d + j] + normal_at(stream, (uint64_t)(i * d + j));
  free(centre);
  return x;
}

/* The options of a run on the first c devices. */
static gpuml_options on_devices(int c) {
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = GPUML_BACKEND_CUDA;
  o.ndevices = c;
  for (int i = 0; i < c; i++) o.devices[i] = i;
  return o;
}

typedef struct {
  char name[64];
  int devices;
  double seconds, speedup;
  char answer[96];
} row_t;
static row_t table[64];
static int nrows = 0;

static void record(const char *name, int c, double seconds, double one, const char *answer) {
  row_t *r = &table[nrows++];
  snprintf(r->name, sizeof r->name, "%s", name);
  r->devices = c;
  r->seconds = seconds;
  r->speedup = one / seconds;
  snprintf(r->answer, sizeof r->answer, "%s", answer);
  printf("RESULT %s_devices%d %.4f  (speed-up %.2fx; %s)\n", name, c, seconds, one / seconds,
         answer);
  fflush(stdout);
}

/* fp64: the same data as double (precision auto, the certified path R and Octave take) */
static void bench_knn(int64_t n, int64_t m, int64_t d, int64_t k, int fp64) {
  char name[64];
  snprintf(name, sizeof name, "knn_%lldx%lld_q%lld_k%lld%s", (long long)n, (long long)d,
           (long long)m, (long long)k, fp64 ? "_fp64" : "");
  printf("== %s (%s)\n", name, fp64 ? "fp64, precision auto" : "fp32, precision single");
  fflush(stdout);
  float *x = must(malloc(sizeof(float) * (size_t)n * (size_t)d));
  float *q = must(malloc(sizeof(float) * (size_t)m * (size_t)d));
  /* clusters of 1,000 centres, so that neighbours are not all at the same distance */
  const int64_t C = 1000;
  float *centre = must(malloc(sizeof(float) * (size_t)(C * d)));
  for (int64_t i = 0; i < C * d; i++) centre[i] = (float)(10 * uniform());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++)
      x[i + j * n] = centre[(i % C) * d + j] + (float)normal_at(1, (uint64_t)(i * d + j));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < d; j++)
      q[i + j * m] = centre[((i * 7) % C) * d + j] + (float)normal_at(2, (uint64_t)(i * d + j));
  free(centre);
  double *x64 = NULL, *q64 = NULL;
  if (fp64) {
    x64 = must(malloc(sizeof(double) * (size_t)n * (size_t)d));
    q64 = must(malloc(sizeof(double) * (size_t)m * (size_t)d));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n * d; i++) x64[i] = x[i];
    for (int64_t i = 0; i < m * d; i++) q64[i] = q[i];
  }
  int64_t *idx1 = must(malloc(sizeof(int64_t) * (size_t)(m * k)));
  int64_t *idx = must(malloc(sizeof(int64_t) * (size_t)(m * k)));
  double *dist = must(malloc(sizeof(double) * (size_t)(m * k)));
  double one = 0;
  for (int ci = 0; ci < ncounts; ci++) {
    const int c = counts[ci];
    gpuml_options o = on_devices(c);
    o.precision = fp64 ? GPUML_PRECISION_AUTO : GPUML_PRECISION_SINGLE;
    double best = 1e300;
    int ok = 1;
    for (int r = 0; r <= reps && ok; r++) { /* r = 0 warms the devices up, untimed */
      const double t0 = now_s();
      int64_t *out = c == counts[0] ? idx1 : idx;
      ok = (fp64 ? gpuml_knn_search(x64, n, d, q64, m, k, out, dist, &o, NULL)
                 : gpuml_knn_search_f(x, n, d, q, m, k, out, (float *)dist, &o, NULL)) == GPUML_OK;
      const double t = now_s() - t0;
      if (r > 0 && t < best) best = t;
    }
    if (!ok) {
      printf("%s on %d devices failed: %s\n", name, c, gpuml_last_error());
      continue;
    }
    if (c == counts[0]) one = best * counts[0];
    char answer[96];
    if (c == counts[0]) {
      snprintf(answer, sizeof answer, "reference");
    } else {
      int64_t differ = 0;
      for (int64_t i = 0; i < m * k; i++) differ += idx[i] != idx1[i];
      snprintf(answer, sizeof answer, "%lld of %lld entries differ from %d device%s",
               (long long)differ, (long long)(m * k), counts[0], counts[0] > 1 ? "s" : "");
    }
    record(name, c, best, one, answer);
  }
  free(x);
  free(q);
  free(x64);
  free(q64);
  free(idx1);
  free(idx);
  free(dist);
}

/* One VVV fit of max_iter iterations at tol 0 from the bench's k-means++ start. */
static double gmm_fit(const double *x, int64_t n, int64_t d, int64_t G, int64_t max_iter, int c,
                      double *loglik, double *seconds_em) {
  gpuml_gmm_model model;
  memset(&model, 0, sizeof model);
  model.weights = must(malloc(sizeof(double) * G));
  model.means = must(malloc(sizeof(double) * d * G));
  model.covariances = must(malloc(sizeof(double) * d * d * G));
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  p.G[0] = G;
  p.nG = 1;
  p.models[0] = GPUML_GMM_FULL;
  p.n_models = 1;
  p.max_iter = max_iter;
  p.init = GPUML_GMM_INIT_KMEANSPP;
  p.tol = 0;
  gpuml_options o = on_devices(c);
  o.seed = 7;
  const double t0 = now_s();
  const gpuml_status st = gpuml_gmm_fit(x, n, d, &p, &model, NULL, NULL, NULL, NULL, &o, NULL);
  const double t = now_s() - t0;
  *loglik = st ? NAN : model.loglik;
  *seconds_em = st ? NAN : model.seconds_em;
  if (st) printf("GMM fit on %d devices failed: %s\n", c, gpuml_last_error());
  free(model.weights);
  free(model.means);
  free(model.covariances);
  return st ? -1 : t;
}

static void bench_gmm(int64_t n, int64_t d, int64_t G) {
  char name[64];
  snprintf(name, sizeof name, "gmm_%lldx%lld_G%lld_VVV_iteration", (long long)n, (long long)d,
           (long long)G);
  printf("== %s (fp64; seconds per EM iteration)\n", name);
  fflush(stdout);
  double *x = blobs(n, d, G, 8, 3);
  double one = 0, loglik1 = NAN;
  const int64_t lengths[2] = {5, 105};
  for (int ci = 0; ci < ncounts; ci++) {
    const int c = counts[ci];
    /* best: whole fits; em: their EM iterations by the fit's own clock (the start and the
     * upload of 10^7 rows vary by seconds between fits: their difference is noise) */
    double best[2] = {1e300, 1e300}, em[2] = {1e300, 1e300}, ll = NAN, sec = 0;
    int ok = gmm_fit(x, n, d, G, 2, c, &ll, &sec) >= 0; /* warm-up */
    for (int r = 0; r < reps && ok; r++)
      for (int l = 0; l < 2 && ok; l++) {
        const double t = gmm_fit(x, n, d, G, lengths[l], c, &ll, &sec);
        ok = t >= 0;
        if (ok && t < best[l]) best[l] = t;
        if (ok && sec < em[l]) em[l] = sec;
      }
    if (!ok) continue;
    const double per = (em[1] - em[0]) / (double)(lengths[1] - lengths[0]);
    printf("  %d device(s): fits of %lld and %lld iterations, best of %d: EM iterations %.3f "
           "and %.3f s (whole fits %.3f and %.3f s: %.1f ms per iteration)\n",
           c, (long long)lengths[0], (long long)lengths[1], reps, em[0], em[1], best[0], best[1],
           1e3 * (best[1] - best[0]) / (double)(lengths[1] - lengths[0]));
    if (c == counts[0]) {
      one = per * counts[0];
      loglik1 = ll;
    }
    char answer[96];
    snprintf(answer, sizeof answer, "loglik after %lld iterations %.12g (rel. difference %.1e)",
             (long long)lengths[1], ll, fabs(ll - loglik1) / fabs(loglik1));
    record(name, c, per, one, answer);
  }
  free(x);
}

static void bench_dpc(int64_t n) {
  char name[64];
  snprintf(name, sizeof name, "dpc_%lldx2_k10", (long long)n);
  printf("== %s (fp64, dc estimated, cutoff kernel, 10 centres with halo)\n", name);
  fflush(stdout);
  const int64_t d = 2, G = 20;
  double *x = blobs(n, d, G, 20, 4);
  double *rho1 = must(malloc(sizeof(double) * (size_t)n));
  double *delta1 = must(malloc(sizeof(double) * (size_t)n));
  int64_t *near1 = must(malloc(sizeof(int64_t) * (size_t)n));
  int64_t *cl1 = must(malloc(sizeof(int64_t) * (size_t)n));
  double *rho = must(malloc(sizeof(double) * (size_t)n));
  double *delta = must(malloc(sizeof(double) * (size_t)n));
  int64_t *near = must(malloc(sizeof(int64_t) * (size_t)n));
  int64_t *cl = must(malloc(sizeof(int64_t) * (size_t)n));
  double *rho2 = must(malloc(sizeof(double) * (size_t)n));   /* the passes alone */
  double *delta2 = must(malloc(sizeof(double) * (size_t)n));
  int64_t *near2 = must(malloc(sizeof(int64_t) * (size_t)n));
  double *gamma = must(malloc(sizeof(double) * (size_t)n));
  int *halo = must(malloc(sizeof(int) * (size_t)n));
  int64_t centres[10], ncentres = 0;
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  const double ten = 10;
  if (gpuml_params_set_numbers(GPUML_PARAMS_DPC, &p, "k", &ten, 1)) {
    printf("dpc: %s\n", gpuml_last_error());
    return;
  }
  double one = 0;
  for (int ci = 0; ci < ncounts; ci++) {
    const int c = counts[ci];
    gpuml_options o = on_devices(c);
    const int first = c == counts[0];
    double best = 1e300;
    /* the warm-up (contexts, kernels' first launches) on the first 100,000 points */
    const int64_t nw = n < 100000 ? n : 100000;
    double *xw = must(malloc(sizeof(double) * (size_t)nw * (size_t)d));
    for (int64_t j = 0; j < d; j++) memcpy(xw + j * nw, x + j * n, sizeof(double) * (size_t)nw);
    int ok = gpuml_dpc_fit(xw, nw, d, &p, rho, delta, near, gamma, NULL, centres, &ncentres, cl, halo,
                           &o, NULL) == GPUML_OK;
    free(xw);
    for (int r = 1; r <= reps && ok; r++) {
      const double t0 = now_s();
      ok = gpuml_dpc_fit(x, n, d, &p, first ? rho1 : rho, first ? delta1 : delta,
                         first ? near1 : near, gamma, NULL, centres, &ncentres, first ? cl1 : cl,
                         halo, &o, NULL) == GPUML_OK;
      const double t = now_s() - t0;
      if (t < best) best = t;
    }
    if (!ok) {
      printf("%s on %d devices failed: %s\n", name, c, gpuml_last_error());
      continue;
    }
    double passes = 1e300;
    for (int r = 0; r < reps && ok; r++) {
      const double t0 = now_s();
      ok = gpuml_dpc_density(x, n, d, &p, rho2, delta2, near2, NULL, &o, NULL) == GPUML_OK;
      const double t = now_s() - t0;
      if (t < passes) passes = t;
    }
    if (!ok) {
      printf("%s density on %d devices failed: %s\n", name, c, gpuml_last_error());
      continue;
    }
    printf("  %d device(s): fit %.3f s, of which the density passes (gpuml_dpc_density) %.3f s\n",
           c, best, passes);
    if (first) one = best * counts[0];
    char answer[96];
    if (first) {
      snprintf(answer, sizeof answer, "reference");
    } else {
      int64_t differ = 0;
      for (int64_t i = 0; i < n; i++)
        differ += rho[i] != rho1[i] || delta[i] != delta1[i] || near[i] != near1[i] ||
                  cl[i] != cl1[i];
      snprintf(answer, sizeof answer, "%lld of %lld points differ from %d device%s",
               (long long)differ, (long long)n, counts[0], counts[0] > 1 ? "s" : "");
    }
    record(name, c, best, one, answer);
  }
  free(x);
  free(rho1), free(delta1), free(near1), free(cl1);
  free(rho), free(delta), free(near), free(cl), free(gamma), free(halo);
  free(rho2), free(delta2), free(near2);
}

/* Whether the comma-separated list names case (a whole item). */
/* t-SNE (defaults: 1,000 iterations, the FFT method, PCA to 50, perplexity 30): the whole
 * fit and its optimisation alone (the kNN for P is split as a search; P is built on the
 * host when several devices search). */
static void bench_tsne(int64_t n, int64_t d) {
  char name[64], opt_name[64], aff_name[64];
  snprintf(name, sizeof name, "tsne_%lldx%lld", (long long)n, (long long)d);
  snprintf(opt_name, sizeof opt_name, "tsne_%lldx%lld_optimisation", (long long)n, (long long)d);
  snprintf(aff_name, sizeof aff_name, "tsne_%lldx%lld_knn_and_P", (long long)n, (long long)d);
  printf("== %s (fp64, FFT, 1000 iterations; whole fit, kNN and P, optimisation)\n", name);
  fflush(stdout);
  const int64_t G = 30;
  double *x = blobs(n, d, G, 6, 5);
  double *y1 = must(malloc(sizeof(double) * (size_t)n * 2));
  double *y = must(malloc(sizeof(double) * (size_t)n * 2));
  double one = 0, one_opt = 0, one_aff = 0;
  for (int ci = 0; ci < ncounts; ci++) {
    const int c = counts[ci];
    gpuml_options o = on_devices(c);
    o.seed = 11;
    gpuml_tsne_params p;
    gpuml_tsne_params_init(&p);
    p.method = GPUML_TSNE_FFT;
    double best = 1e300, best_opt = 1e300, best_aff = 1e300;
    int ok = 1;
    for (int r = 0; r <= reps && ok; r++) { /* r = 0: a short warm-up fit, untimed */
      p.max_iter = r == 0 ? 50 : 1000;
      p.stop_lying_iter = r == 0 ? 25 : 250;
      p.mom_switch_iter = p.stop_lying_iter;
      gpuml_tsne_result res;
      double *out = c == counts[0] ? y1 : y;
      const double t0 = now_s();
      ok = gpuml_tsne_fit(x, n, d, &p, out, NULL, &o, &res) == GPUML_OK;
      const double t = now_s() - t0;
      if (r > 0 && t < best) best = t;
      if (r > 0 && res.seconds_optimisation < best_opt) best_opt = res.seconds_optimisation;
      if (r > 0 && res.seconds_affinities < best_aff) best_aff = res.seconds_affinities;
    }
    if (!ok) {
      printf("%s on %d devices failed: %s\n", name, c, gpuml_last_error());
      continue;
    }
    if (c == counts[0])
      one = best * counts[0], one_opt = best_opt * counts[0], one_aff = best_aff * counts[0];
    char answer[96];
    if (c == counts[0]) {
      snprintf(answer, sizeof answer, "reference");
    } else {
      int64_t differ = 0;
      double worst = 0;
      for (int64_t i = 0; i < n * 2; i++) {
        differ += y[i] != y1[i];
        worst = fmax(worst, fabs(y[i] - y1[i]));
      }
      snprintf(answer, sizeof answer, "%lld of %lld coordinates differ (largest %.2g)",
               (long long)differ, (long long)(n * 2), worst);
    }
    record(name, c, best, one, answer);
    record(aff_name, c, best_aff, one_aff, answer);
    record(opt_name, c, best_opt, one_opt, answer);
  }
  free(x);
  free(y1);
  free(y);
}

static int wants(const char *list, const char *name) {
  const size_t len = strlen(name);
  for (const char *s = list; *s;) {
    const char *end = strchr(s, ',');
    const size_t item = end ? (size_t)(end - s) : strlen(s);
    if (item == len && !strncmp(s, name, len)) return 1;
    if (!end) break;
    s = end + 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int64_t knn[4] = {10000000, 100000, 128, 10}, knn64[4] = {2000000, 20000, 128, 10}, gmm[3] = {10000000, 50, 16}, dpc_n = 100000000;
  int64_t tsne[2] = {1000000, 50};
  const char *only = "knn,knn64,gmm,dpc,tsne", *devices = NULL;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--devices") && a + 1 < argc) devices = argv[++a];
    else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--only") && a + 1 < argc) only = argv[++a];
    else if (!strcmp(argv[a], "--knn") && a + 4 < argc)
      for (int i = 0; i < 4; i++) knn[i] = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--knn64") && a + 4 < argc)
      for (int i = 0; i < 4; i++) knn64[i] = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--gmm") && a + 3 < argc)
      for (int i = 0; i < 3; i++) gmm[i] = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--dpc") && a + 1 < argc) dpc_n = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--tsne") && a + 2 < argc)
      for (int i = 0; i < 2; i++) tsne[i] = atoll(argv[++a]);
    else {
      fprintf(stderr, "unknown argument %s (see the comment at the top of bench/devices_gpu.c)\n",
              argv[a]);
      return 2;
    }
  }
  gpuml_info info;
  if (gpuml_backend_info(&info) || info.device_count < 1) {
    printf("no CUDA device: %s\n", gpuml_last_error());
    return 1;
  }
  if (devices) {
    for (const char *s = devices; *s && ncounts < 8;) {
      counts[ncounts++] = atoi(s);
      while (*s && *s != ',') s++;
      if (*s == ',') s++;
    }
  } else {
    for (int c = 1; c <= info.device_count && ncounts < 8; c *= 2) counts[ncounts++] = c;
  }
  printf("device 0: %s, %d devices, %.1f GB\n", info.device_name, info.device_count,
         info.device_memory / 1e9);
  if (wants(only, "knn")) bench_knn(knn[0], knn[1], knn[2], knn[3], 0);
  if (wants(only, "knn64")) bench_knn(knn64[0], knn64[1], knn64[2], knn64[3], 1);
  if (wants(only, "gmm")) bench_gmm(gmm[0], gmm[1], gmm[2]);
  if (wants(only, "dpc")) bench_dpc(dpc_n);
  if (wants(only, "tsne")) bench_tsne(tsne[0], tsne[1]);
  printf("\n%-40s %7s %12s %8s  %s\n", "case", "devices", "seconds", "speed-up", "answer");
  for (int i = 0; i < nrows; i++)
    printf("%-40s %7d %12.4f %7.2fx  %s\n", table[i].name, table[i].devices, table[i].seconds,
           table[i].speedup, table[i].answer);
  return 0;
}
