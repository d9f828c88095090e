/* GPU benchmark of gpuml_gmm_fit() (backend cuda, fp64 throughout, host arrays in and
 * out): the time of one EM iteration, from fits of 5 and 5 + ITER iterations from the
 * same start (tol = 0), each the best of 3 (never the difference of two single runs,
 * which noise can make negative), timed by each fit's own clock of its EM iterations
 * (model.seconds_em: the start, the upload and the output do not count; the difference
 * of the whole fits is printed beside it); plus the time of whole fits, the agreement of
 * the GPU with the CPU backend from the same start, and the DGEMM ceiling of the device.
 *
 *   build/bench/gmm_gpu              all cases (GPUML_BENCH_SKIP_LARGE=1: not n = 10^6)
 *   build/bench/gmm_gpu --sanitize   small runs of every path, each checked against the
 *                                    CPU backend (for compute-sanitizer; also run it with
 *                                    GPUML_CUDA_TILE=500 for the tiled data path)
 *   build/bench/gmm_gpu --case N D G MODEL ITER   one case (MODEL: VVV, VVI, ...; the
 *                                    full-covariance path as GPUML_GMM_FUSED and
 *                                    GPUML_GMM_DMMA say), e.g. under ncu for the kernels
 *                                    of ITER iterations
 *   build/bench/gmm_gpu --paths N D G ITER   the full-covariance (VVV) paths side by side
 *                                    on one case: GEMM, fused FMA kernels, tensor-core
 *                                    (DMMA) kernels, each checked against the CPU on
 *                                    20,000 rows of the same shape first
 *
 * Build (as tools/gpu-run.sh builds bench/knn_gpu.c):
 *   gcc -O2 -std=c11 -fopenmp -Icore/include -I$CUDA_INC bench/gmm_gpu.c build/libgpuml.a \
 *       $LIBS -lm -o build/bench/gmm_gpu
 * Prints "RESULT <case> <ms per iteration>" lines, as bench/gmm_sklearn.py does. */
#define _POSIX_C_SOURCE 200809L
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpuml.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t rng = 88172645463325252ULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }

/* n points (column-major n x d) around G centres spread over a cube of side 8. */
static double *clustered(int64_t n, int64_t d, int64_t G) {
  double *x = malloc(sizeof(double) * (size_t)n * (size_t)d);
  double *centre = malloc(sizeof(double) * (size_t)(G * d));
  if (!x || !centre) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  for (int64_t i = 0; i < G * d; i++) centre[i] = 8 * uniform();
  for (int64_t i = 0; i < n; i++) {
    const int64_t k = i % G;
    for (int64_t j = 0; j < d; j++) x[i + j * n] = centre[k * d + j] + normal();
  }
  free(centre);
  return x;
}

typedef struct {
  gpuml_gmm_model model;
  int64_t *cls;
  double ms;
  gpuml_status status;
} run_t;

static run_t fit(const double *x, int64_t n, int64_t d, int64_t G, gpuml_gmm_covariance cov,
                 int64_t max_iter, double tol, gpuml_backend backend, int want_labels) {
  run_t r;
  memset(&r, 0, sizeof r);
  r.model.weights = malloc(sizeof(double) * G);
  r.model.means = malloc(sizeof(double) * d * G);
  r.model.covariances = malloc(sizeof(double) * d * d * G);
  if (want_labels) r.cls = malloc(sizeof(int64_t) * n);
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  p.G[0] = G;
  p.nG = 1;
  p.models[0] = cov;
  p.n_models = 1;
  p.max_iter = max_iter;
  p.init = GPUML_GMM_INIT_KMEANSPP; /* one start: the cost of one fit's iterations */
  p.tol = tol;
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = backend;
  o.seed = 7;
  const double t0 = now_ms();
  r.status = gpuml_gmm_fit(x, n, d, &p, &r.model, NULL, r.cls, NULL, NULL, &o, NULL);
  r.ms = now_ms() - t0;
  if (r.status) fprintf(stderr, "fit failed: %s\n", gpuml_last_error());
  return r;
}

static void run_free(run_t *r) {
  free(r->model.weights);
  free(r->model.means);
  free(r->model.covariances);
  free(r->cls);
}

/* fp64 GEMM ceiling: C (M x N) = A B with k = 50, the shape of the E-step. */
static void dgemm_ceiling(void) {
  const int M = 65536, N = 800, K = 50, reps = 5;
  double *A = NULL, *B = NULL, *C = NULL;
  cublasHandle_t h = NULL;
  cudaEvent_t e0, e1;
  if (cudaMalloc((void **)&A, sizeof(double) * (size_t)M * K) ||
      cudaMalloc((void **)&B, sizeof(double) * (size_t)K * N) ||
      cudaMalloc((void **)&C, sizeof(double) * (size_t)M * N) || cublasCreate(&h)) {
    printf("dgemm ceiling: allocation failed\n");
    goto out;
  }
  cudaMemset(A, 0, sizeof(double) * (size_t)M * K);
  cudaMemset(B, 0, sizeof(double) * (size_t)K * N);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const double alpha = 1, beta = 0;
  cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, A, M, B, K, &beta, C, M);
  cudaEventRecord(e0, 0);
  for (int r = 0; r < reps; r++)
    cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, A, M, B, K, &beta, C, M);
  cudaEventRecord(e1, 0);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  printf("CEILING_DGEMM_TFLOPS %.1f (cublasDgemm %d x %d x %d, the E-step's shape)\n",
         2.0 * M * N * K * reps / (ms / 1e3) / 1e12, M, N, K);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
out:
  if (h) cublasDestroy(h);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
}

/* The full-covariance path of kernels/gmm.cu: "gemm" (GPUML_GMM_FUSED=0,
 * GPUML_GMM_DMMA=0), "fused" (the fused FMA kernels: GPUML_GMM_FUSED=1,
 * GPUML_GMM_DMMA=0), "dmma" (the tensor-core kernels: GPUML_GMM_DMMA=1), or with NULL
 * the library's default (both unset). Each falls back to the GEMM path where it does
 * not apply (GPUML_TRACE=1 names the path an engine takes). */
static void set_path(const char *path) {
  unsetenv("GPUML_GMM_FUSED");
  unsetenv("GPUML_GMM_DMMA");
  if (!path) return;
  const int fused = strcmp(path, "fused") == 0, dmma = strcmp(path, "dmma") == 0;
  setenv("GPUML_GMM_FUSED", fused ? "1" : "0", 1);
  setenv("GPUML_GMM_DMMA", dmma ? "1" : "0", 1);
}

/* The suffix of a case's name for a path (the names of earlier runs kept: "_fused0" the
 * GEMM path, "_fused1" the fused kernels). */
static const char *path_suffix(const char *path) {
  if (!path) return "";
  if (strcmp(path, "gemm") == 0) return "_fused0";
  if (strcmp(path, "fused") == 0) return "_fused1";
  return "_dmma1";
}

/* ms per EM iteration on the GPU, and a whole fit to convergence; path: as set_path
 * (named in the case's name when not NULL). Returns the ms per iteration (-1: failed). */
static double bench_case(int64_t n, int64_t d, int64_t G, gpuml_gmm_covariance cov, int iters,
                         const char *path) {
  char name[128];
  snprintf(name, sizeof name, "gmm_n%lld_d%lld_k%lld_%s%s", (long long)n, (long long)d,
           (long long)G, gpuml_gmm_model_name(cov, d), path_suffix(path));
  set_path(path);
  double *x = clustered(n, d, G);
  run_t warm = fit(x, n, d, G, cov, 2, 0, GPUML_BACKEND_CUDA, 0);
  run_free(&warm);
  /* best[l]: whole fits; em[l]: their EM iterations alone (the fit's own clock, without
   * the start and the upload, whose noise at 10^6 rows reaches tens of ms per iteration
   * in the difference of whole fits) */
  double best[2] = {1e300, 1e300}, em[2] = {1e300, 1e300};
  const int64_t lengths[2] = {5, 5 + iters};
  int ok = 1;
  for (int rep = 0; rep < 3 && ok; rep++)
    for (int l = 0; l < 2 && ok; l++) {
      run_t r = fit(x, n, d, G, cov, lengths[l], 0, GPUML_BACKEND_CUDA, 0);
      ok = r.status == GPUML_OK;
      if (r.ms < best[l]) best[l] = r.ms;
      if (ok && r.model.seconds_em * 1e3 < em[l]) em[l] = r.model.seconds_em * 1e3;
      run_free(&r);
    }
  run_t c = fit(x, n, d, G, cov, 200, 1e-8, GPUML_BACKEND_CUDA, 0);
  const double per = (em[1] - em[0]) / iters, per_whole = (best[1] - best[0]) / iters;
  if (ok && !c.status) {
    printf("%-34s %8.2f ms per iteration (EM iterations of fits of 5 and %d, best of 3: %.1f "
           "and %.1f ms; from the whole fits, %.1f and %.1f ms: %.2f ms); whole fit (tol "
           "1e-8, at most 200 iterations): %.0f ms, %lld iterations, loglik %.10g\n",
           name, per, 5 + iters, em[0], em[1], best[0], best[1], per_whole, c.ms,
           (long long)c.model.n_iter, c.model.loglik);
    printf("RESULT %s %.3f\n", name, per);
    fflush(stdout);
  }
  run_free(&c);
  free(x);
  set_path(NULL);
  return ok && !c.status ? per : -1;
}

/* GPU and CPU fits from the same start: log-likelihoods and classes. */
static int agree(int64_t n, int64_t d, int64_t G, gpuml_gmm_covariance cov, int64_t iters) {
  double *x = clustered(n, d, G);
  run_t g = fit(x, n, d, G, cov, iters, 0, GPUML_BACKEND_CUDA, 1);
  run_t h = fit(x, n, d, G, cov, iters, 0, GPUML_BACKEND_CPU, 1);
  int ok = !g.status && !h.status;
  if (ok) {
    const double rel = fabs(g.model.loglik - h.model.loglik) / fabs(h.model.loglik);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) differ += g.cls[i] != h.cls[i];
    ok = rel < 1e-8 && differ <= n / 10000;
    printf("agreement n = %lld d = %lld G = %lld %s, %lld iterations: loglik rel. difference "
           "%.2e, %lld of %lld classes differ%s\n",
           (long long)n, (long long)d, (long long)G, gpuml_gmm_model_name(cov, d),
           (long long)iters, rel, (long long)differ, (long long)n, ok ? "" : "  <-- FAILED");
  }
  run_free(&g);
  run_free(&h);
  free(x);
  return ok;
}

int main(int argc, char **argv) {
  const int sanitize = argc > 1 && strcmp(argv[1], "--sanitize") == 0;
  gpuml_info info;
  gpuml_backend_info(&info);
  if (info.device_count == 0) {
    fprintf(stderr, "no CUDA device: %s\n", info.cuda_message);
    return 2;
  }
  printf("device: %s, %.0f GiB\n", info.device_name, info.device_memory / 1073741824.0);
  if (sanitize) {
    int runs = 0, failed = 0;
    const gpuml_gmm_covariance three[] = {GPUML_GMM_FULL, GPUML_GMM_DIAG, GPUML_GMM_SPHERICAL};
    for (int t = 0; t < 3; t++, runs++) failed += !agree(3000, 20, 5, three[t], 15);
    for (int t = 0; t < GPUML_GMM_N_MODELS; t++, runs++)
      failed += !agree(2000, 3, 3, (gpuml_gmm_covariance)t, 15);
    /* the fused full-covariance kernels (GPUML_GMM_FUSED=1) and the tensor-core ones
     * (GPUML_GMM_DMMA=1) at their edges (fewer rows than a block, K = 1, d = 1, d = 64
     * their limit), on a plain case, and (tensor cores) two groups of components over
     * several chunks of rows */
    const char *paths[2] = {"fused", "dmma"};
    for (int p = 0; p < 2; p++) {
      set_path(paths[p]);
      printf("(%s kernels) ", paths[p]);
      failed += !agree(20, 5, 1, GPUML_GMM_FULL, 5);
      failed += !agree(1000, 1, 2, GPUML_GMM_FULL, 10);
      failed += !agree(3000, 64, 3, GPUML_GMM_FULL, 10);
      failed += !agree(3000, 20, 5, GPUML_GMM_FULL, 15);
      failed += !agree(9001, 13, 9, GPUML_GMM_FULL, 10);
      runs += 5;
    }
    set_path(NULL);
    printf("sanitize runs: %d, failed: %d\n", runs, failed);
    return failed ? 1 : 0;
  }
  if (argc == 7 && strcmp(argv[1], "--case") == 0) {
    gpuml_gmm_covariance cov;
    if (gpuml_gmm_parse_covariance(argv[5], &cov) != GPUML_OK) {
      fprintf(stderr, "unknown model %s\n", argv[5]);
      return 2;
    }
    /* the path as the environment says; named as set_path would name it */
    const char *f = getenv("GPUML_GMM_FUSED"), *m = getenv("GPUML_GMM_DMMA");
    const char *path = m && !strcmp(m, "1")   ? "dmma"
                       : f && !strcmp(f, "1") ? "fused"
                       : (f || m)             ? "gemm"
                                              : NULL;
    if (path) set_path(path);
    bench_case(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), cov, atoi(argv[6]), path);
    return 0;
  }
  if (argc == 6 && strcmp(argv[1], "--paths") == 0) {
    const int64_t n = atoll(argv[2]), d = atoll(argv[3]), G = atoll(argv[4]);
    const int iters = atoi(argv[5]);
    const char *paths[3] = {"gemm", "fused", "dmma"};
    double ms[3];
    int failed = 0;
    for (int p = 0; p < 3; p++) {
      set_path(paths[p]);
      printf("(%s) ", paths[p]);
      failed += !agree(20000, d, G, GPUML_GMM_FULL, 10);
      ms[p] = bench_case(n, d, G, GPUML_GMM_FULL, iters, paths[p]);
    }
    set_path(NULL);
    if (ms[0] > 0 && ms[2] > 0)
      printf("RATIO gemm / dmma %.2f, fused / dmma %.2f (n = %lld, d = %lld, G = %lld, VVV)\n",
             ms[0] / ms[2], ms[1] > 0 ? ms[1] / ms[2] : 0.0, (long long)n, (long long)d,
             (long long)G);
    printf("agreement checks failed: %d\n", failed);
    return failed ? 1 : 0;
  }
  dgemm_ceiling();
  int failed = 0;
  failed += !agree(20000, 50, 16, GPUML_GMM_FULL, 10);
  set_path("fused");
  printf("(fused kernels) ");
  failed += !agree(20000, 50, 16, GPUML_GMM_FULL, 10);
  set_path("dmma");
  printf("(tensor-core kernels) ");
  failed += !agree(20000, 50, 16, GPUML_GMM_FULL, 10);
  set_path(NULL);
  failed += !agree(20000, 50, 16, GPUML_GMM_DIAG, 10);
  failed += !agree(20000, 784, 10, GPUML_GMM_FULL, 3);
  for (int t = 0; t < GPUML_GMM_N_MODELS; t++)
    failed += !agree(20000, 10, 6, (gpuml_gmm_covariance)t, 10);
  if (!getenv("GPUML_BENCH_SKIP_LARGE")) {
    bench_case(1000000, 50, 16, GPUML_GMM_FULL, 100, "gemm");
    bench_case(1000000, 50, 16, GPUML_GMM_FULL, 100, "fused");
    bench_case(1000000, 50, 16, GPUML_GMM_FULL, 100, "dmma");
    bench_case(1000000, 50, 16, GPUML_GMM_DIAG, 100, NULL);
  }
  bench_case(200000, 50, 16, GPUML_GMM_FULL, 100, "gemm");
  bench_case(200000, 50, 16, GPUML_GMM_FULL, 100, "fused");
  bench_case(200000, 50, 16, GPUML_GMM_FULL, 100, "dmma");
  bench_case(60000, 784, 10, GPUML_GMM_FULL, 20, NULL); /* past the fused kernels' d */
  printf("agreement checks failed: %d\n", failed);
  return failed ? 1 : 0;
}
