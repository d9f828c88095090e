/* Where the first GPU call of a process spends its time (the first call of an R session
 * pays the same): the CUDA context, gpuml's device probe, then each algorithm's first and
 * second call on small data, each step timed on its own.
 *
 *   build/bench/first_call_gpu
 *
 * Prints "FIRST <step> <ms>" lines and a table. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "gpuml.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double *points(int64_t n, int64_t d, uint64_t seed) {
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n * d; i++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = (double)(seed >> 11) / 9007199254740992.0 + (double)((i % n) % 7);
  }
  return x;
}

static void report(const char *step, double ms, gpuml_status st) {
  printf("FIRST %-28s %9.1f ms%s%s\n", step, ms, st ? "  FAILED: " : "",
         st ? gpuml_last_error() : "");
}

int main(void) {
  const int64_t n = 4000, d = 64, k = 10;
  double *x = points(n, d, 7);
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n * k));
  double *dist = malloc(sizeof(double) * (size_t)(n * k));
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CUDA;

  double t = now_ms();
  cudaError_t e = cudaFree(0);
  report("cuda context (cudaFree(0))", now_ms() - t, e == cudaSuccess ? GPUML_OK : GPUML_ERR_CUDA);
  gpuml_info info;
  t = now_ms();
  gpuml_status st = gpuml_backend_info(&info);
  report("gpuml_backend_info", now_ms() - t, st);
  printf("device: %s\n", info.device_name);
  for (int round = 0; round < 2; round++) {
    const char *tag = round ? "second" : "first";
    char name[64];
    t = now_ms();
    st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, &opt, NULL);
    snprintf(name, sizeof name, "knn %s (GEMM, d = 64)", tag);
    report(name, now_ms() - t, st);
    double *out = malloc(sizeof(double) * 500 * 500);
    t = now_ms();
    st = gpuml_dist_compute(x, 500, d, NULL, 0, 0, out, &opt, NULL);
    snprintf(name, sizeof name, "dist %s", tag);
    report(name, now_ms() - t, st);
    free(out);
    gpuml_dpc_params dp;
    gpuml_dpc_params_init(&dp);
    double *rho = malloc(sizeof(double) * n), *delta = malloc(sizeof(double) * n);
    int64_t *nearest = malloc(sizeof(int64_t) * n);
    t = now_ms();
    st = gpuml_dpc_density(x, n, 2, &dp, rho, delta, nearest, NULL, &opt, NULL);
    snprintf(name, sizeof name, "dpc %s (d = 2)", tag);
    report(name, now_ms() - t, st);
    free(rho);
    free(delta);
    free(nearest);
    gpuml_tsne_params tp;
    gpuml_tsne_params_init(&tp);
    tp.max_iter = 100;
    tp.initial_dims = 20;  /* PCA on the device (cuSOLVER) */
    double *y = malloc(sizeof(double) * (size_t)n * 2);
    for (int m = 0; m < 2; m++) {
      tp.method = m ? GPUML_TSNE_FFT : GPUML_TSNE_EXACT;  /* FFT: cuFFT's first plan */
      t = now_ms();
      st = gpuml_tsne_fit(x, n, d, &tp, y, NULL, &opt, NULL);
      snprintf(name, sizeof name, "tsne %s %s", m ? "fft" : "exact", tag);
      report(name, now_ms() - t, st);
    }
    free(y);
    gpuml_gmm_params gp;
    gpuml_gmm_params_init(&gp);
    gp.G[0] = 4;
    gp.nG = 1;
    gp.models[0] = GPUML_GMM_FULL; /* VVV from k-means++: the default start (hc of 2,000 */
    gp.n_models = 1;               /* rows) and the 14 models run mostly on the host */
    gp.init = GPUML_GMM_INIT_KMEANSPP;
    gp.max_iter = 20;
    gpuml_gmm_model model;
    model.weights = malloc(sizeof(double) * 4);
    model.means = malloc(sizeof(double) * (size_t)d * 4);
    model.covariances = malloc(sizeof(double) * (size_t)(d * d) * 4);
    t = now_ms();
    st = gpuml_gmm_fit(x, n, d, &gp, &model, NULL, NULL, NULL, NULL, &opt, NULL);
    snprintf(name, sizeof name, "gmm %s (G = 4, VVV)", tag);
    report(name, now_ms() - t, st);
    free(model.weights);
    free(model.means);
    free(model.covariances);
  }
  t = now_ms();
  gpuml_shutdown();
  report("gpuml_shutdown", now_ms() - t, GPUML_OK);
  t = now_ms();
  st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, &opt, NULL);
  report("knn after shutdown", now_ms() - t, st);
  free(x);
  free(idx);
  free(dist);
  return 0;
}
