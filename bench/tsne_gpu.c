/* GPU benchmark of gpuml_tsne_fit() through the public C API (backend cuda, host arrays in
 * and out: PCA, kNN, P and the 1000 iterations all included), with quality next to
 * time, and a CPU-vs-GPU agreement check.
 *
 *   build/bench/tsne_gpu [--data DIR] [--skip-large]
 *       Fashion-MNIST (the four IDX .gz files of DIR, default
 *       /usr/share/datasets/fashion-mnist or ./bench-data): all 70,000 images with the
 *       defaults, then the first 20,000 and 10,000 with each method, pixels / 255, PCA
 *       to 50; then n = 1,000,000 synthetic points (20 Gaussian clusters in 50
 *       dimensions, pca off), unless --skip-large.
 *   build/bench/tsne_gpu --sanitize
 *       small runs of every GPU path, each compared with the CPU (for compute-sanitizer).
 *
 * Quality: 10-NN label accuracy in the embedding (leave-one-out majority vote, ties to
 * the nearer neighbour) and 10-NN preservation (the share of each point's 10 nearest
 * neighbours in the input space that are among its 10 nearest in the embedding), as
 * bench/tsne_cpu.R and bench/tsne_sklearn.py compute them. Prints "RESULT <case> <ms>".
 * Build: gcc -O2 -std=c11 -fopenmp -Icore/include bench/tsne_gpu.c build/libgpuml.a $LIBS -lm */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
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

static void *must(void *p) {
  if (!p) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  return p;
}

/* ---- data ------------------------------------------------------------------------- */

/* Reads `count` bytes after a header of `header` bytes from a gzip file (gzip -dc). */
static unsigned char *read_gz(const char *path, size_t header, size_t count) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
  FILE *f = popen(cmd, "r");
  if (!f) return NULL;
  unsigned char *buf = must(malloc(header + count));
  size_t got = fread(buf, 1, header + count, f);
  pclose(f);
  if (got != header + count) {
    free(buf);
    return NULL;
  }
  memmove(buf, buf + header, count);
  return buf;
}

/* The first n of the 70,000 images (training then test), n x 784 column-major / 255. */
static int fashion_mnist(const char *dir, int64_t n, double **x, int **label) {
  static const char *stems[2] = {"train", "t10k"};
  static const int64_t sizes[2] = {60000, 10000};
  *x = must(malloc(sizeof(double) * (size_t)n * 784));
  *label = must(malloc(sizeof(int) * (size_t)n));
  int64_t at = 0;
  for (int s = 0; s < 2 && at < n; s++) {
    const int64_t take = n - at < sizes[s] ? n - at : sizes[s];
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, stems[s]);
    unsigned char *img = read_gz(path, 16, (size_t)take * 784);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, stems[s]);
    unsigned char *lab = read_gz(path, 8, (size_t)take);
    if (!img || !lab) {
      free(img);
      free(lab);
      return 0;
    }
    for (int64_t i = 0; i < take; i++) {
      for (int t = 0; t < 784; t++) (*x)[(at + i) + (int64_t)t * n] = img[i * 784 + t] / 255.0;
      (*label)[at + i] = lab[i];
    }
    free(img);
    free(lab);
    at += take;
  }
  return 1;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static double uniform01(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double normal01(void) {
  return sqrt(-2 * log(uniform01())) * cos(6.283185307179586 * uniform01());
}

/* n points around `clusters` random centres in d dimensions. */
static double *synthetic(int64_t n, int64_t d, int clusters, int **label) {
  double *centre = must(malloc(sizeof(double) * clusters * d));
  for (int64_t e = 0; e < clusters * d; e++) centre[e] = 4 * normal01();
  double *x = must(malloc(sizeof(double) * (size_t)n * d));
  *label = must(malloc(sizeof(int) * (size_t)n));
  for (int64_t i = 0; i < n; i++) {
    const int c = (int)(uniform01() * clusters) % clusters;
    (*label)[i] = c;
    for (int64_t t = 0; t < d; t++) x[i + t * n] = centre[c * d + t] + normal01();
  }
  free(centre);
  return x;
}

/* ---- quality ------------------------------------------------------------------------ */

static gpuml_options options(gpuml_backend backend) {
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = backend;
  return o;
}

/* Label accuracy and preservation on the first m points (all when m = n). */
static void quality(const double *x, int64_t n, int64_t d, const double *y, int dims,
                    const int *label, int64_t m, double *accuracy, double *preservation) {
  const int k = 10;
  int64_t *iy = must(malloc(sizeof(int64_t) * (size_t)m * k));
  int64_t *ix = must(malloc(sizeof(int64_t) * (size_t)m * k));
  double *dd = must(malloc(sizeof(double) * (size_t)m * k));
  double *qy = must(malloc(sizeof(double) * (size_t)m * dims));
  double *qx = x ? must(malloc(sizeof(double) * (size_t)m * d)) : NULL;
  for (int64_t i = 0; i < m; i++) {
    for (int t = 0; t < dims; t++) qy[i + t * m] = y[i + t * n];
    for (int64_t t = 0; x && t < d; t++) qx[i + t * m] = x[i + t * n];
  }
  gpuml_options o = options(GPUML_BACKEND_AUTO);
  /* k + 1 neighbours of the queries among all points; the query itself is dropped */
  int64_t *tmp = must(malloc(sizeof(int64_t) * (size_t)m * (k + 1)));
  double *tmpd = must(malloc(sizeof(double) * (size_t)m * (k + 1)));
  for (int pass = 0; pass < (x ? 2 : 1); pass++) {
    int64_t *out = pass ? ix : iy;
    gpuml_status st = pass ? gpuml_knn_search(x, n, d, qx, m, k + 1, tmp, tmpd, &o, NULL)
                           : gpuml_knn_search(y, n, dims, qy, m, k + 1, tmp, tmpd, &o, NULL);
    if (st) {
      fprintf(stderr, "quality kNN: %s\n", gpuml_last_error());
      exit(1);
    }
    for (int64_t i = 0; i < m; i++) {
      int c = 0;
      for (int j = 0; j <= k && c < k; j++)
        if (tmp[i + j * m] != i) out[i + (c++) * m] = tmp[i + j * m];
    }
  }
  int64_t hits = 0, shared = 0;
  for (int64_t i = 0; i < m; i++) {
    int votes[256] = {0}, best = -1;
    for (int j = 0; j < k; j++) votes[label[iy[i + j * m]] & 255]++;
    for (int j = 0; j < k; j++) {  /* ties go to the nearer neighbour's label */
      const int l = label[iy[i + j * m]] & 255;
      if (best < 0 || votes[l] > votes[best]) best = l;
    }
    hits += best == label[i];
    for (int a = 0; x && a < k; a++)
      for (int b = 0; b < k; b++) shared += ix[i + a * m] == iy[i + b * m];
  }
  *accuracy = (double)hits / m;
  *preservation = x ? (double)shared / ((double)m * k) : NAN;
  free(iy);
  free(ix);
  free(dd);
  free(qy);
  free(qx);
  free(tmp);
  free(tmpd);
}

/* ---- cases -------------------------------------------------------------------------- */

static int run_case(const char *name, const double *x, int64_t n, int64_t d, const int *label,
                    int pca, gpuml_tsne_method method, int64_t quality_points,
                    const double *reference, int64_t ref_d) {
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.pca = pca;
  p.method = method;
  double *y = must(malloc(sizeof(double) * (size_t)n * 2));
  double costs[32];
  gpuml_tsne_result res;
  gpuml_options o = options(GPUML_BACKEND_CUDA);
  const double t0 = now_s();
  gpuml_status st = gpuml_tsne_fit(x, n, d, &p, y, costs, &o, &res);
  const double seconds = now_s() - t0;
  if (st) {
    printf("%s: FAILED: %s\n", name, gpuml_last_error());
    free(y);
    return 0;
  }
  double acc, pres;
  quality(reference, n, ref_d, y, 2, label, quality_points, &acc, &pres);
  printf("RESULT %s %.1f\n", name, seconds * 1e3);
  printf("%-22s n = %7lld: %7.2f s (PCA + kNN + P %.2f s, %d iterations %.2f s), method %s, "
         "KL %.4f, 10-NN accuracy %.4f, 10-NN preservation %.4f%s\n",
         name, (long long)n, seconds, res.seconds_affinities, res.iterations_done,
         res.seconds_optimisation, gpuml_tsne_method_name(res.method_used), res.kl, acc, pres,
         quality_points < n ? " (quality on a subset)" : "");
  fflush(stdout);
  free(y);
  return 1;
}

/* The same small problem on both backends: P identical, KL close. */
static int agreement(int64_t n, gpuml_tsne_method method, int dims, int max_iter, int quiet) {
  int *label = NULL;
  double *x = synthetic(n, 30, 8, &label);
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.method = method;
  p.dims = dims;
  p.max_iter = max_iter;
  double *yc = must(malloc(sizeof(double) * (size_t)n * dims));
  double *yg = must(malloc(sizeof(double) * (size_t)n * dims));
  double *yg2 = must(malloc(sizeof(double) * (size_t)n * dims));
  double cc[64], cg[64];
  gpuml_options oc = options(GPUML_BACKEND_CPU), og = options(GPUML_BACKEND_CUDA);
  int ok = gpuml_tsne_fit(x, n, 30, &p, yc, cc, &oc, NULL) == GPUML_OK;
  ok = ok && gpuml_tsne_fit(x, n, 30, &p, yg, cg, &og, NULL) == GPUML_OK;
  ok = ok && gpuml_tsne_fit(x, n, 30, &p, yg2, NULL, &og, NULL) == GPUML_OK;
  const int last = gpuml_tsne_cost_count(max_iter) - 1;
  const int same = ok && memcmp(yg, yg2, sizeof(double) * (size_t)n * dims) == 0;
  const double rel = ok ? fabs(cc[last] - cg[last]) / cc[last] : INFINITY;
  const int good = ok && same && rel < 0.02;
  if (!quiet || !good)
    printf("agreement n = %lld, %s, dims %d: KL cpu %.5f gpu %.5f (%.2f%%), GPU repeatable: %s%s%s\n",
           (long long)n, gpuml_tsne_method_name(method), dims, ok ? cc[last] : NAN,
           ok ? cg[last] : NAN, 100 * rel, same ? "yes" : "no", good ? "" : "  FAILED ",
           ok ? "" : gpuml_last_error());
  free(x);
  free(label);
  free(yc);
  free(yg);
  free(yg2);
  return good;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  int skip_large = getenv("GPUML_BENCH_SKIP_LARGE") != NULL, sanitize = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--data") && a + 1 < argc) dir = argv[++a];
    else if (!strcmp(argv[a], "--skip-large")) skip_large = 1;
    else if (!strcmp(argv[a], "--sanitize")) sanitize = 1;
    else {
      fprintf(stderr, "usage: %s [--data DIR] [--skip-large] [--sanitize]\n", argv[0]);
      return 2;
    }
  }
  gpuml_info info;
  gpuml_backend_info(&info);
  printf("device: %s; CUDA runtime %d; %d OpenMP threads\n",
         info.device_count ? info.device_name : "none", info.cuda_runtime_version,
         info.max_threads);
  if (!info.device_count) {
    printf("no CUDA device: %s\n", info.cuda_message);
    return 1;
  }
  int failures = 0;
  if (sanitize) {
    for (int dims = 1; dims <= 3; dims++) {
      failures += !agreement(1500, GPUML_TSNE_EXACT, dims, 60, 0);
      failures += !agreement(1500, GPUML_TSNE_FFT, dims, 60, 0);
    }
    printf("sanitize runs: %d failed\n", failures);
    gpuml_shutdown(); /* the contexts' pools: a leak check sees only leaks */
    return failures ? 1 : 0;
  }
  failures += !agreement(600, GPUML_TSNE_EXACT, 2, 100, 1);  /* also warms the GPU up */
  failures += !agreement(5000, GPUML_TSNE_EXACT, 2, 1000, 0);
  failures += !agreement(5000, GPUML_TSNE_FFT, 2, 1000, 0);

  const char *dirs[] = {dir, "/usr/share/datasets/fashion-mnist", "bench-data"};
  double *x = NULL;
  int *label = NULL;
  for (int i = 0; i < 3 && !x; i++) {
    if (!dirs[i]) continue;
    if (!fashion_mnist(dirs[i], 70000, &x, &label)) {
      free(x);
      free(label);
      x = NULL;
      label = NULL;
    }
  }
  if (!x) {
    printf("Fashion-MNIST not found (pass --data DIR holding the four IDX .gz files)\n");
    failures++;
  } else {
    failures += !run_case("tsne_fmnist70k", x, 70000, 784, label, 1, GPUML_TSNE_AUTO, 70000, x, 784);
    /* the first 20,000 and 10,000 (the comparison with scikit-learn at 20,000), each by
     * both methods: where method = "auto" should switch on the GPU */
    double *xs = must(malloc(sizeof(double) * 20000 * 784));
    for (int64_t m = 20000; m >= 10000; m -= 10000) {
      for (int64_t t = 0; t < 784; t++) memcpy(xs + t * m, x + t * 70000, sizeof(double) * m);
      char name[64];
      for (int method = 0; method < 2; method++) {
        snprintf(name, sizeof name, "tsne_fmnist%lldk_%s", (long long)(m / 1000),
                 method ? "exact" : "fft");
        failures += !run_case(name, xs, m, 784, label, 1, method ? GPUML_TSNE_EXACT : GPUML_TSNE_FFT,
                              m, xs, 784);
      }
    }
    free(xs);
    free(x);
    free(label);
  }
  if (!skip_large) {
    const int64_t n = 1000000;
    double *xs = synthetic(n, 50, 20, &label);
    failures += !run_case("tsne_synthetic_1m", xs, n, 50, label, 0, GPUML_TSNE_AUTO, 20000, xs, 50);
    free(xs);
    free(label);
  }
  printf("tsne_gpu: %d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
