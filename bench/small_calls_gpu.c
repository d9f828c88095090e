/* What a call costs beyond its arithmetic: the first call of a process and the median
 * of many small repeated calls (kNN and distances on the GPU), the per-call setup that
 * the per-device context saves. Builds against this tree's API and against the one
 * before the context (before gpuml_version existed), so that tools/gpu-compare.sh can
 * run it on both sides:
 *
 *   build/bench/small_calls_gpu
 *
 * Prints "RESULT <case> <ms>" lines. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "gpuml.h"

#ifdef GPUML_VERSION_MAJOR
#define KNN(x, n, d, k, idx, dist, opt) gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, opt, NULL)
#define DIST(x, n, d, out, opt) gpuml_dist_compute(x, n, d, NULL, 0, 0, out, opt, NULL)
#else
#define KNN(x, n, d, k, idx, dist, opt) gpuml_knn(x, n, d, NULL, 0, k, idx, dist, opt)
#define DIST(x, n, d, out, opt) gpuml_dist(x, n, d, NULL, 0, 0, out, opt)
#endif

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, by_value);
  return t[n / 2];
}

static void check(gpuml_status st, const char *what) {
  if (st != GPUML_OK) {
    fprintf(stderr, "%s failed: %s\n", what, gpuml_last_error());
    exit(1);
  }
}

int main(void) {
  enum { kRepeats = 200 };
  const int64_t n = 2000, d = 32, k = 10, nd = 300;
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  uint64_t s = 7;
  for (int64_t i = 0; i < n * d; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = (double)(s >> 11) / 9007199254740992.0;
  }
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n * k));
  double *dist = malloc(sizeof(double) * (size_t)(n * k));
  double *out = malloc(sizeof(double) * (size_t)(nd * nd));
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CUDA;

  double t = now_ms();
  check(KNN(x, n, d, k, idx, dist, &opt), "the first kNN");
  printf("RESULT first_knn_%lldx%lld %.3f\n", (long long)n, (long long)d, now_ms() - t);

  double times[kRepeats];
  for (int r = 0; r < kRepeats; r++) {
    t = now_ms();
    check(KNN(x, n, d, k, idx, dist, &opt), "kNN");
    times[r] = now_ms() - t;
  }
  printf("RESULT repeated_knn_%lldx%lld_k%lld %.3f\n", (long long)n, (long long)d,
         (long long)k, median(times, kRepeats));
  for (int r = 0; r < kRepeats; r++) {
    t = now_ms();
    check(DIST(x, nd, d, out, &opt), "distances");
    times[r] = now_ms() - t;
  }
  printf("RESULT repeated_dist_%lldx%lld %.3f\n", (long long)nd, (long long)d,
         median(times, kRepeats));
  /* The checksum keeps the results live and shows both sides computed the same. */
  double sum = 0;
  for (int64_t i = 0; i < n * k; i++) sum += dist[i] + (double)idx[i];
  printf("checksum %.10g\n", sum);
  free(x);
  free(idx);
  free(dist);
  free(out);
  return 0;
}
