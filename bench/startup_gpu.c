/* What the first GPU call of a process pays beyond a warm one (issue 15's first-call
 * target), measured in two fresh processes:
 *   build/bench/startup_gpu libs    the CUDA libraries' own start: the context
 *                                   (cudaFree(0)), a cuBLAS and a cuSOLVER handle, the
 *                                   first and a second cuFFT plan of the t-SNE grids' kind
 *   build/bench/startup_gpu fft     after the context: for each FFT size of t-SNE's grids
 *                                   (2^a 3^b from 32 to 729, 2-D, C2C, batch 4), the
 *                                   plan's time, the first execution's, a second one's
 *   build/bench/startup_gpu fftpar T   the same plans made by T threads at once (wall time)
 * (CUDA_CACHE_PATH set to an empty folder: the case of a machine's first run, when cuFFT
 * compiles each size's kernels; later processes find them in that cache.)
 *   build/bench/startup_gpu tsne    gpuml_tsne_fit on 70,000 x 50 (uniform, seed 1,
 *                                   FFT, 1000 iterations) twice: every progress report
 *                                   with its time since the call began, then both totals
 * Build: gcc -O2 -std=c11 -fopenmp -Icore/include -I$CUDA/include bench/startup_gpu.c
 *        build/libgpuml.a $LIBS -lm */
#define _POSIX_C_SOURCE 200809L
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cusolverDn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpuml.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double call_start;
static const char *last_stage = "";
static int64_t last_done = -1;

/* every stage change, and the optimiser every 250 iterations */
static void report(void *ctx, const char *stage, int64_t done, int64_t total) {
  (void)ctx;
  const int changed = strcmp(stage, last_stage) != 0;
  if (changed || done == total || (strcmp(stage, "tsne") == 0 && done % 250 == 0 && done != last_done))
    printf("  %-12s %8lld / %-8lld at %.3f s\n", stage, (long long)done, (long long)total,
           now_s() - call_start);
  last_stage = stage;
  last_done = done;
}

static int libs(void) {
  double t = now_s();
  if (cudaFree(0) != cudaSuccess) return 1;
  printf("STARTUP context %.3f s\n", now_s() - t);
  t = now_s();
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
  printf("STARTUP cublasCreate %.3f s\n", now_s() - t);
  t = now_s();
  cusolverDnHandle_t solver;
  if (cusolverDnCreate(&solver) != CUSOLVER_STATUS_SUCCESS) return 1;
  printf("STARTUP cusolverDnCreate %.3f s\n", now_s() - t);
  for (int size = 64; size <= 128; size += 64) {
    int dims[2] = {size, size};
    cufftHandle plan;
    t = now_s();
    if (cufftPlanMany(&plan, 2, dims, NULL, 1, size * size, NULL, 1, size * size, CUFFT_C2C, 4) !=
        CUFFT_SUCCESS)
      return 1;
    printf("STARTUP cufftPlanMany %dx%d %.3f s\n", size, size, now_s() - t);
    cufftDestroy(plan);
  }
  cusolverDnDestroy(solver);
  cublasDestroy(blas);
  return 0;
}

static int good(int n) {
  for (;; n++) {
    int m = n;
    while (m % 2 == 0) m /= 2;
    while (m % 3 == 0) m /= 3;
    if (m == 1) return n;
  }
}

static int fft(void) {
  double t = now_s();
  if (cudaFree(0) != cudaSuccess) return 1;
  printf("STARTUP context %.3f s\n", now_s() - t);
  const int batch = 4, largest = 729;
  cufftComplex *buf = NULL;
  if (cudaMalloc((void **)&buf, sizeof(cufftComplex) * largest * largest * batch) != cudaSuccess)
    return 1;
  cudaMemset(buf, 0, sizeof(cufftComplex) * largest * largest * batch);
  double plans = 0, firsts = 0, seconds = 0;
  for (int size = 32; size <= largest; size = good(size + 1)) {
    int dims[2] = {size, size};
    cufftHandle plan;
    t = now_s();
    if (cufftPlanMany(&plan, 2, dims, NULL, 1, size * size, NULL, 1, size * size, CUFFT_C2C,
                      batch) != CUFFT_SUCCESS)
      return 1;
    const double tp = now_s() - t;
    double te[2];
    for (int e = 0; e < 2; e++) {
      t = now_s();
      if (cufftExecC2C(plan, buf, buf, CUFFT_FORWARD) != CUFFT_SUCCESS) return 1;
      cudaDeviceSynchronize();
      te[e] = now_s() - t;
    }
    cufftDestroy(plan);
    printf("FFT %4d plan %.4f s first exec %.4f s second %.4f s\n", size, tp, te[0], te[1]);
    plans += tp, firsts += te[0], seconds += te[1];
  }
  printf("STARTUP fft sizes: plans %.3f s, first executions %.3f s, second %.3f s\n", plans,
         firsts, seconds);
  cudaFree(buf);
  return 0;
}

enum { kLargest = 729 };
static int plan_threads = 1;

static void *plan_some(void *arg) {
  const int t = (int)(intptr_t)arg;
  int i = 0;
  for (int size = 32; size <= kLargest; size = good(size + 1), i++) {
    if (i % plan_threads != t) continue;
    int dims[2] = {size, size};
    cufftHandle plan;
    if (cufftPlanMany(&plan, 2, dims, NULL, 1, size * size, NULL, 1, size * size, CUFFT_C2C, 4) ==
        CUFFT_SUCCESS)
      cufftDestroy(plan);
  }
  return NULL;
}

static int fftpar(int threads) {
  double t = now_s();
  if (cudaFree(0) != cudaSuccess) return 1;
  printf("STARTUP context %.3f s\n", now_s() - t);
  plan_threads = threads;
  pthread_t th[64];
  t = now_s();
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, plan_some, (void *)(intptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  printf("STARTUP fft sizes planned by %d threads: %.3f s\n", threads, now_s() - t);
  return 0;
}

static int tsne(void) {
  const int64_t n = 70000, d = 50;
  double *x = malloc(sizeof(double) * n * d), *y = malloc(sizeof(double) * n * 2);
  if (!x || !y) return 1;
  uint64_t s = 1;
  for (int64_t i = 0; i < n * d; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = (double)(s >> 11) / 9007199254740992.0;
  }
  for (int rep = 0; rep < 2; rep++) {
    gpuml_options o;
    gpuml_options_init(&o);
    o.backend = GPUML_BACKEND_CUDA;
    o.seed = 1;
    o.verbose = 1;
    o.progress = report;
    gpuml_tsne_params p;
    gpuml_tsne_params_init(&p);
    p.method = GPUML_TSNE_FFT;
    gpuml_tsne_result res;
    last_stage = "";
    call_start = now_s();
    if (gpuml_tsne_fit(x, n, d, &p, y, NULL, &o, &res) != GPUML_OK) {
      printf("failed: %s\n", gpuml_last_error());
      return 1;
    }
    printf("STARTUP tsne_70000x50 %s %.3f s (affinities %.3f, optimisation %.3f)\n",
           rep ? "second" : "first", now_s() - call_start, res.seconds_affinities,
           res.seconds_optimisation);
  }
  gpuml_shutdown();
  free(x);
  free(y);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "libs")) return libs();
  if (argc > 1 && !strcmp(argv[1], "tsne")) return tsne();
  if (argc > 1 && !strcmp(argv[1], "fft")) return fft();
  if (argc > 2 && !strcmp(argv[1], "fftpar")) {
    const int threads = atoi(argv[2]);
    return fftpar(threads < 1 ? 1 : threads > 64 ? 64 : threads);
  }
  fprintf(stderr, "usage: startup_gpu libs|fft|fftpar T|tsne\n");
  return 2;
}
