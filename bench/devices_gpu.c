/* Benchmark of one call spread over several GPUs of a host (the `devices` option): the
 * same call on 1, 2, ... devices, its time (best of `reps`), the speed-up over one device
 * and whether the answer is the one-device answer.
 *
 *   build/bench/devices_gpu [--devices 1,2,4] [--reps R] [--only knn,gmm,dpc]
 *                           [--knn N M D K] [--gmm N D G] [--dpc N]
 *
 * kNN: M queries against N references of D columns (fp32, host arrays in and out), the
 *      references sharded over the devices, the queries sent to all; the lists must equal
 *      the one-device lists exactly (same indices, same tie rule).
 * GMM: VVV with G components on N x D (fp64); the time of an EM iteration from fits of 5
 *      and 25 iterations at tol 0 from one k-means++ start (best of R each), never the
 *      difference of two single runs; the log-likelihood beside the one-device one (the
 *      sums run in another order: equal up to rounding).
 * DPC: density peaks on N x 2 points with k = 10 centres, rho and delta by row blocks
 *      over the devices; rho, delta, nearest and the clusters must equal one device's.
 * Defaults are the sizes of the multi-GPU issue: kNN 10^7 references x 128 with 10^5
 * queries, k = 10; GMM 10^7 x 50, G = 16; DPC 10^8 x 2. Prints "RESULT <case> <seconds>"
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
static double normal(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }

static void *must(void *p) {
  if (!p) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  return p;
}

static int counts[8], ncounts = 0, reps = 2;

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
static row_t table[32];
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

static void bench_knn(int64_t n, int64_t m, int64_t d, int64_t k) {
  char name[64];
  snprintf(name, sizeof name, "knn_%lldx%lld_q%lld_k%lld", (long long)n, (long long)d,
           (long long)m, (long long)k);
  printf("== %s (fp32, precision single)\n", name);
  fflush(stdout);
  float *x = must(malloc(sizeof(float) * (size_t)n * (size_t)d));
  float *q = must(malloc(sizeof(float) * (size_t)m * (size_t)d));
  /* clusters of 1,000 centres, so that neighbours are not all at the same distance */
  const int64_t C = 1000;
  float *centre = must(malloc(sizeof(float) * (size_t)(C * d)));
  for (int64_t i = 0; i < C * d; i++) centre[i] = (float)(10 * uniform());
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) x[i + j * n] = centre[(i % C) * d + j] + (float)normal();
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < d; j++) q[i + j * m] = centre[((i * 7) % C) * d + j] + (float)normal();
  free(centre);
  int64_t *idx1 = must(malloc(sizeof(int64_t) * (size_t)(m * k)));
  int64_t *idx = must(malloc(sizeof(int64_t) * (size_t)(m * k)));
  float *dist = must(malloc(sizeof(float) * (size_t)(m * k)));
  double one = 0;
  for (int ci = 0; ci < ncounts; ci++) {
    const int c = counts[ci];
    gpuml_options o = on_devices(c);
    o.precision = GPUML_PRECISION_SINGLE;
    double best = 1e300;
    int ok = 1;
    for (int r = 0; r <= reps && ok; r++) { /* r = 0 warms the devices up, untimed */
      const double t0 = now_s();
      ok = gpuml_knn_search_f(x, n, d, q, m, k, c == counts[0] ? idx1 : idx, dist, &o, NULL) ==
           GPUML_OK;
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
  free(idx1);
  free(idx);
  free(dist);
}

/* One VVV fit of max_iter iterations at tol 0 from the bench's k-means++ start. */
static double gmm_fit(const double *x, int64_t n, int64_t d, int64_t G, int64_t max_iter, int c,
                      double *loglik) {
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
  double *x = must(malloc(sizeof(double) * (size_t)n * (size_t)d));
  double *centre = must(malloc(sizeof(double) * (size_t)(G * d)));
  for (int64_t i = 0; i < G * d; i++) centre[i] = 8 * uniform();
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) x[i + j * n] = centre[(i % G) * d + j] + normal();
  free(centre);
  double one = 0, loglik1 = NAN;
  const int64_t lengths[2] = {5, 25};
  for (int ci = 0; ci < ncounts; ci++) {
    const int c = counts[ci];
    double best[2] = {1e300, 1e300}, ll = NAN;
    int ok = gmm_fit(x, n, d, G, 2, c, &ll) >= 0; /* warm-up */
    for (int r = 0; r < reps && ok; r++)
      for (int l = 0; l < 2 && ok; l++) {
        const double t = gmm_fit(x, n, d, G, lengths[l], c, &ll);
        ok = t >= 0;
        if (ok && t < best[l]) best[l] = t;
      }
    if (!ok) continue;
    const double per = (best[1] - best[0]) / (double)(lengths[1] - lengths[0]);
    printf("  %d device(s): fits of 5 and 25 iterations, best of %d: %.3f and %.3f s\n", c, reps,
           best[0], best[1]);
    if (c == counts[0]) {
      one = per * counts[0];
      loglik1 = ll;
    }
    char answer[96];
    snprintf(answer, sizeof answer, "loglik after 25 iterations %.12g (rel. difference %.1e)", ll,
             fabs(ll - loglik1) / fabs(loglik1));
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
  double *x = must(malloc(sizeof(double) * (size_t)n * (size_t)d));
  double centre[2 * 20];
  for (int i = 0; i < 2 * G; i++) centre[i] = 20 * uniform();
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) x[i + j * n] = centre[(i % G) * d + j] + normal();
  double *rho1 = must(malloc(sizeof(double) * (size_t)n));
  double *delta1 = must(malloc(sizeof(double) * (size_t)n));
  int64_t *near1 = must(malloc(sizeof(int64_t) * (size_t)n));
  int64_t *cl1 = must(malloc(sizeof(int64_t) * (size_t)n));
  double *rho = must(malloc(sizeof(double) * (size_t)n));
  double *delta = must(malloc(sizeof(double) * (size_t)n));
  int64_t *near = must(malloc(sizeof(int64_t) * (size_t)n));
  int64_t *cl = must(malloc(sizeof(int64_t) * (size_t)n));
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
    int ok = 1;
    for (int r = 0; r <= reps && ok; r++) { /* r = 0 warms up */
      const double t0 = now_s();
      ok = gpuml_dpc_fit(x, n, d, &p, first ? rho1 : rho, first ? delta1 : delta,
                         first ? near1 : near, gamma, centres, &ncentres, first ? cl1 : cl,
                         halo, &o, NULL) == GPUML_OK;
      const double t = now_s() - t0;
      if (r > 0 && t < best) best = t;
    }
    if (!ok) {
      printf("%s on %d devices failed: %s\n", name, c, gpuml_last_error());
      continue;
    }
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
}

int main(int argc, char **argv) {
  int64_t knn[4] = {10000000, 100000, 128, 10}, gmm[3] = {10000000, 50, 16}, dpc_n = 100000000;
  const char *only = "knn,gmm,dpc", *devices = NULL;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--devices") && a + 1 < argc) devices = argv[++a];
    else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--only") && a + 1 < argc) only = argv[++a];
    else if (!strcmp(argv[a], "--knn") && a + 4 < argc)
      for (int i = 0; i < 4; i++) knn[i] = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--gmm") && a + 3 < argc)
      for (int i = 0; i < 3; i++) gmm[i] = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--dpc") && a + 1 < argc) dpc_n = atoll(argv[++a]);
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
  if (strstr(only, "knn")) bench_knn(knn[0], knn[1], knn[2], knn[3]);
  if (strstr(only, "gmm")) bench_gmm(gmm[0], gmm[1], gmm[2]);
  if (strstr(only, "dpc")) bench_dpc(dpc_n);
  printf("\n%-40s %7s %12s %8s  %s\n", "case", "devices", "seconds", "speed-up", "answer");
  for (int i = 0; i < nrows; i++)
    printf("%-40s %7d %12.4f %7.2fx  %s\n", table[i].name, table[i].devices, table[i].seconds,
           table[i].speedup, table[i].answer);
  return 0;
}
