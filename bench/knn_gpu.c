/* GPU benchmark of gpuml_knn_search_f() (backend cuda, precision single, host arrays in and
 * out, so transfers are included), with a GPU-vs-CPU agreement check on a subset of
 * queries and the SGEMM ceiling of the device (cublasSgemm, fp32, no TF32).
 *
 *   build/bench/knn_gpu            all cases; GPUML_BENCH_SKIP_LARGE=1 skips n = 1e6
 *   build/bench/knn_gpu --index n m d k   the kNN index against the plain search
 *   build/bench/knn_gpu --self-ab n d k [reps]   the self-search of n x d double data,
 *                                  precision auto (as gpu_knn(x, k) from R), with the
 *                                  symmetric schedule off and on (GPUML_CUDA_KNN_SYMMETRIC
 *                                  0 and 1, alternating, best of reps each), answers
 *                                  compared bit for bit
 *   build/bench/knn_gpu --sanitize [--quick]  small runs of every path (for
 *                                  compute-sanitizer); --quick leaves out k > 1000
 *   build/bench/knn_gpu --tensor-sweep  cuBLAS TF32 and fp16 GEMMs at the kNN tiles' shapes
 *
 * Prints "RESULT <case> <ms>" lines that tools/gpu-run.sh joins with PyTorch's. */
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
static float uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 40) / 16777216.0);
}

static float *random_points(int64_t n, int64_t d) {
  float *x = malloc(sizeof(float) * (size_t)n * (size_t)d);
  if (!x) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  for (int64_t i = 0; i < n * d; i++) x[i] = uniform();
  return x;
}

static gpuml_options opts(gpuml_backend backend, gpuml_precision precision) {
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = backend;
  o.precision = precision;
  return o;
}

/* SGEMM ceiling: C (M x N) = A^T B with k = 128, the shape of the kNN tiles. */
static void sgemm_ceiling(void) {
  const int M = 16384, N = 65536, K = 128, reps = 4;
  float *A = NULL, *B = NULL, *C = NULL;
  cublasHandle_t h = NULL;
  cudaEvent_t e0, e1;
  if (cudaMalloc((void **)&A, sizeof(float) * (size_t)M * K) ||
      cudaMalloc((void **)&B, sizeof(float) * (size_t)N * K) ||
      cudaMalloc((void **)&C, sizeof(float) * (size_t)M * N) || cublasCreate(&h)) {
    printf("sgemm ceiling: allocation failed\n");
    goto out;
  }
  cudaMemset(A, 0, sizeof(float) * (size_t)M * K);
  cudaMemset(B, 0, sizeof(float) * (size_t)N * K);
  cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const float alpha = 1, beta = 0;
  /* random-ish data: fill A and B with a pattern via a tiny host upload */
  {
    float *hA = random_points(K, M), *hB = random_points(K, N);
    cudaMemcpy(A, hA, sizeof(float) * (size_t)M * K, cudaMemcpyHostToDevice);
    cudaMemcpy(B, hB, sizeof(float) * (size_t)N * K, cudaMemcpyHostToDevice);
    free(hA);
    free(hB);
  }
  cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, A, K, B, K, &beta, C, M);
  cudaEventRecord(e0, 0);
  for (int r = 0; r < reps; r++)
    cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, A, K, B, K, &beta, C, M);
  cudaEventRecord(e1, 0);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  double flops = 2.0 * M * (double)N * K * reps;
  printf("SGEMM ceiling (cublasSgemm TN %d x %d x %d, fp32, no TF32): %.1f TFLOP/s\n", M, N, K,
         flops / (ms / 1e3) / 1e12);
  printf("CEILING_TFLOPS %.2f\n", flops / (ms / 1e3) / 1e12);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
out:
  if (h) cublasDestroy(h);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
}

/* Compares the GPU answer for the first `check` queries with the CPU backend's. */
static void agreement(const float *data, int64_t n, int64_t d, const float *query, int64_t m,
                      int64_t k, const int64_t *idx, const float *dist, int64_t check) {
  if (check > m) check = m;
  float *sub = malloc(sizeof(float) * (size_t)check * (size_t)d);
  int64_t *cidx = malloc(sizeof(int64_t) * (size_t)check * (size_t)k);
  float *cdist = malloc(sizeof(float) * (size_t)check * (size_t)k);
  for (int64_t t = 0; t < d; t++)
    for (int64_t i = 0; i < check; i++) sub[i + t * check] = query[i + t * m];
  gpuml_options o = opts(GPUML_BACKEND_CPU, GPUML_PRECISION_DOUBLE);
  gpuml_status st = gpuml_knn_search_f(data, n, d, sub, check, k, cidx, cdist, &o, NULL);
  if (st) {
    printf("  agreement: CPU failed: %s\n", gpuml_last_error());
  } else {
    int64_t same = 0;
    double worst = 0;
    for (int64_t i = 0; i < check; i++)
      for (int64_t j = 0; j < k; j++) {
        if (idx[i + j * m] == cidx[i + j * check]) same++;
        double a = dist[i + j * m], b = cdist[i + j * check];
        double r = fabs(a - b) / (1e-30 + fabs(b));
        if (r > worst) worst = r;
      }
    printf("  agreement with the CPU on %lld queries: %.4f%% same indices, max rel dist diff %.2e\n",
           (long long)check, 100.0 * same / (double)(check * k), worst);
  }
  free(sub);
  free(cidx);
  free(cdist);
}

static int run_case(const char *name, int64_t n, int64_t m, int64_t d, int64_t k, int64_t check,
                    int reps) {
  float *data = random_points(n, d), *query = random_points(m, d);
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)m * (size_t)k);
  float *dist = malloc(sizeof(float) * (size_t)m * (size_t)k);
  if (!idx || !dist) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  double best = 1e300;
  int ok = 1;
  for (int r = 0; r < reps; r++) {
    gpuml_options o = opts(GPUML_BACKEND_CUDA, GPUML_PRECISION_SINGLE);
    double t0 = now_ms();
    gpuml_status st = gpuml_knn_search_f(data, n, d, query, m, k, idx, dist, &o, NULL);
    double t = now_ms() - t0;
    if (st) {
      printf("%s: FAILED: %s\n", name, gpuml_last_error());
      ok = 0;
      break;
    }
    if (t < best) best = t;
  }
  if (ok) {
    printf("%s: %.1f ms (best of %d, host arrays in and out)\n", name, best, reps);
    printf("RESULT %s %.1f\n", name, best);
    if (check > 0) agreement(data, n, d, query, m, k, idx, dist, check);
  }
  fflush(stdout);
  free(data);
  free(query);
  free(idx);
  free(dist);
  return ok;
}

/* The kNN index (gpuml_knn_index_build, double data): the data of run_case's case
 * prepared once on the device (the index borrows the matrix, as R's glue does), then the
 * same queries searched against it (best of 3), in
 * precision single (the fp32 answer, as run_case) and auto (the exact fp64 answer); the
 * indices compared with the plain fp32 search's of the same data. */
static int index_case(const char *name, int64_t n, int64_t m, int64_t d, int64_t k) {
  float *data = random_points(n, d), *query = random_points(m, d);
  double *data64 = malloc(sizeof(double) * (size_t)n * (size_t)d);
  double *query64 = malloc(sizeof(double) * (size_t)m * (size_t)d);
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)m * (size_t)k);
  int64_t *ref = malloc(sizeof(int64_t) * (size_t)m * (size_t)k);
  double *dist = malloc(sizeof(double) * (size_t)m * (size_t)k);
  float *ref_dist = malloc(sizeof(float) * (size_t)m * (size_t)k);
  if (!data64 || !query64 || !idx || !ref || !dist || !ref_dist) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  for (int64_t i = 0; i < n * d; i++) data64[i] = data[i];
  for (int64_t i = 0; i < m * d; i++) query64[i] = query[i];
  gpuml_options o = opts(GPUML_BACKEND_CUDA, GPUML_PRECISION_SINGLE);
  int ok = gpuml_knn_search_f(data, n, d, query, m, k, ref, ref_dist, &o, NULL) == GPUML_OK;
  static const gpuml_precision precisions[] = {GPUML_PRECISION_SINGLE, GPUML_PRECISION_AUTO};
  static const char *precision_names[] = {"single", "auto"};
  for (int p = 0; ok && p < 2; p++) {
    o = opts(GPUML_BACKEND_CUDA, precisions[p]);
    gpuml_knn_index *ix = NULL;
    double t0 = now_ms();
    if (gpuml_knn_index_build_borrowed(data64, n, d, &o, &ix) != GPUML_OK) {
      printf("%s/index-%s: FAILED to build: %s\n", name, precision_names[p], gpuml_last_error());
      ok = 0;
      break;
    }
    const double build = now_ms() - t0;
    gpuml_knn_index_info info;
    gpuml_knn_index_describe(ix, &info);
    double best = 1e300;
    gpuml_knn_result res = {0};
    for (int r = 0; r < 3 && ok; r++) {
      t0 = now_ms();
      if (gpuml_knn_index_search(ix, query64, m, k, idx, dist, &o, &res) != GPUML_OK) {
        printf("%s/index-%s: FAILED: %s\n", name, precision_names[p], gpuml_last_error());
        ok = 0;
      }
      const double t = now_ms() - t0;
      if (t < best) best = t;
    }
    if (ok) {
      int64_t differ = 0;
      for (int64_t i = 0; i < m * k; i++) differ += idx[i] != ref[i];
      printf("%s/index-%s: build %.1f ms (%.1f GB on the device), search %.1f ms (best of 3, "
             "double queries in, results out), %lld rechecked, %lld of %lld indices differ "
             "from the plain fp32 search\n",
             name, precision_names[p], build, info.device_bytes / 1e9, best,
             (long long)res.rechecked, (long long)differ, (long long)(m * k));
      printf("RESULT %s/index-%s %.1f\n", name, precision_names[p], best);
    }
    gpuml_knn_index_free(ix);
  }
  fflush(stdout);
  free(data);
  free(query);
  free(data64);
  free(query64);
  free(idx);
  free(ref);
  free(dist);
  free(ref_dist);
  return ok;
}

/* The self-search of n x d double data in precision auto with the symmetric schedule
 * off and on (GPUML_CUDA_KNN_SYMMETRIC), the settings alternating so that both see the
 * same state of the device; best of reps each, the answers compared bit for bit. */
static int self_ab(int64_t n, int64_t d, int64_t k, int reps) {
  double *x = malloc(sizeof(double) * (size_t)n * (size_t)d);
  int64_t *idx[2] = {malloc(sizeof(int64_t) * (size_t)n * (size_t)k),
                     malloc(sizeof(int64_t) * (size_t)n * (size_t)k)};
  double *dist[2] = {malloc(sizeof(double) * (size_t)n * (size_t)k),
                     malloc(sizeof(double) * (size_t)n * (size_t)k)};
  if (!x || !idx[0] || !idx[1] || !dist[0] || !dist[1]) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  for (int64_t i = 0; i < n * d; i++) x[i] = uniform();
  double best[2] = {1e300, 1e300};
  int64_t rechecked[2] = {0, 0};
  for (int r = 0; r < reps; r++)
    for (int on = 0; on < 2; on++) {
      setenv("GPUML_CUDA_KNN_SYMMETRIC", on ? "1" : "0", 1);
      gpuml_options o = opts(GPUML_BACKEND_CUDA, GPUML_PRECISION_AUTO);
      gpuml_knn_result res;
      double t0 = now_ms();
      gpuml_status st = gpuml_knn_search(x, n, d, NULL, 0, k, idx[on], dist[on], &o, &res);
      double t = now_ms() - t0;
      if (st) {
        printf("self-ab symmetric=%d: FAILED: %s\n", on, gpuml_last_error());
        return 0;
      }
      if (t < best[on]) best[on] = t;
      rechecked[on] = res.rechecked;
    }
  unsetenv("GPUML_CUDA_KNN_SYMMETRIC");
  int64_t differ = 0;
  for (int64_t i = 0; i < n * k; i++)
    if (idx[0][i] != idx[1][i] || dist[0][i] != dist[1][i]) differ++;
  for (int on = 0; on < 2; on++) {
    printf("self n=%lld d=%lld k=%lld auto, symmetric %s: %.1f ms (best of %d), %lld rechecked\n",
           (long long)n, (long long)d, (long long)k, on ? "on " : "off", best[on], reps,
           (long long)rechecked[on]);
    printf("RESULT self_n=%lld_d=%lld_k=%lld_symmetric=%d %.1f\n", (long long)n, (long long)d,
           (long long)k, on, best[on]);
  }
  printf("self-ab: off / on = %.2f; %lld of %lld results differ\n", best[0] / best[1],
         (long long)differ, (long long)(n * k));
  fflush(stdout);
  free(x);
  for (int on = 0; on < 2; on++) {
    free(idx[on]);
    free(dist[on]);
  }
  return differ == 0;
}

/* Small runs of every path and precision, each checked against the CPU backend. */
static int sanitize_runs(int quick) {
  static const struct {
    int64_t n, m, d, k;
    int self;
  } cases[] = {{700, 300, 20, 10, 1}, {700, 300, 2, 10, 0},  {700, 300, 5, 300, 1},
               {700, 300, 40, 300, 0}, {900, 300, 24, 699, 0}, {500, 200, 3, 499, 1},
               {2500, 40, 5, 2100, 0}, {2300, 30, 20, 2200, 0},
               {9000, 12, 3, 8500, 0}, {8800, 9, 20, 8300, 0}};
  int bad = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    if (quick && cases[c].k > 1000) continue; /* the largest k are slow under racecheck */
    static const gpuml_precision precisions[] = {GPUML_PRECISION_DOUBLE, GPUML_PRECISION_SINGLE,
                                                 GPUML_PRECISION_AUTO};
    static const char *precision_names[] = {"double", "single", "auto"};
    for (int prec = 0; prec < 3; prec++) {
      int64_t n = cases[c].n, d = cases[c].d, k = cases[c].k;
      int64_t m = cases[c].self ? n : cases[c].m;
      double *data = malloc(sizeof(double) * n * d), *query = malloc(sizeof(double) * m * d);
      for (int64_t i = 0; i < n * d; i++) data[i] = uniform();
      for (int64_t i = 0; i < m * d; i++) query[i] = uniform();
      int64_t *i1 = malloc(sizeof(int64_t) * m * k), *i2 = malloc(sizeof(int64_t) * m * k);
      double *d1 = malloc(sizeof(double) * m * k), *d2 = malloc(sizeof(double) * m * k);
      gpuml_options g = opts(GPUML_BACKEND_CUDA, precisions[prec]);
      gpuml_options cpu = opts(GPUML_BACKEND_CPU, GPUML_PRECISION_DOUBLE);
      const double *q = cases[c].self ? NULL : query;
      gpuml_status s1 = gpuml_knn_search(data, n, d, q, m, k, i1, d1, &g, NULL);
      gpuml_status s2 = gpuml_knn_search(data, n, d, q, m, k, i2, d2, &cpu, NULL);
      int64_t diff = 0;
      for (int64_t i = 0; s1 == 0 && s2 == 0 && i < m * k; i++)
        if (i1[i] != i2[i]) diff++;
      printf("sanitize knn n=%lld m=%lld d=%lld k=%lld self=%d %s: %s, %lld indices differ\n",
             (long long)n, (long long)m, (long long)d, (long long)k, cases[c].self,
             precision_names[prec], s1 ? gpuml_last_error() : "ok", (long long)diff);
      if (s1 || s2 || diff) bad++;
      /* distances too */
      int64_t dm = cases[c].self ? n : m;
      double *o1 = malloc(sizeof(double) * n * dm);
      s1 = gpuml_dist_compute(data, n, d, cases[c].self ? NULL : query, m, 0, o1, &g, NULL);
      printf("sanitize dist n=%lld m=%lld d=%lld %s: %s\n", (long long)n, (long long)dm,
             (long long)d, precision_names[prec], s1 ? gpuml_last_error() : "ok");
      if (s1) bad++;
      free(o1);
      free(data); free(query); free(i1); free(i2); free(d1); free(d2);
    }
  }
  { /* the float entry point (fp32 compute, float storage) */
    int64_t n = 800, d = 24, k = 12;
    float *x = malloc(sizeof(float) * n * d);
    for (int64_t i = 0; i < n * d; i++) x[i] = uniform();
    int64_t *i1 = malloc(sizeof(int64_t) * n * k), *i2 = malloc(sizeof(int64_t) * n * k);
    float *d1 = malloc(sizeof(float) * n * k), *d2 = malloc(sizeof(float) * n * k);
    gpuml_options g = opts(GPUML_BACKEND_CUDA, GPUML_PRECISION_SINGLE);
    gpuml_options cpu = opts(GPUML_BACKEND_CPU, GPUML_PRECISION_DOUBLE);
    gpuml_status s1 = gpuml_knn_search_f(x, n, d, NULL, 0, k, i1, d1, &g, NULL);
    gpuml_status s2 = gpuml_knn_search_f(x, n, d, NULL, 0, k, i2, d2, &cpu, NULL);
    int64_t diff = 0;
    for (int64_t i = 0; s1 == 0 && s2 == 0 && i < n * k; i++)
      if (i1[i] != i2[i] || d1[i] != d2[i]) diff++;
    printf("sanitize knn_f n=%lld d=%lld k=%lld: %s, %lld results differ\n", (long long)n,
           (long long)d, (long long)k, s1 ? gpuml_last_error() : "ok", (long long)diff);
    if (s1 || s2 || diff) bad++;
    float *o = malloc(sizeof(float) * n * n);
    s1 = gpuml_dist_compute_f(x, n, d, NULL, 0, 1, o, &g, NULL);
    printf("sanitize dist_f: %s\n", s1 ? gpuml_last_error() : "ok");
    if (s1) bad++;
    free(o); free(x); free(i1); free(i2); free(d1); free(d2);
  }
  printf("sanitize runs: %d failed\n", bad);
  return bad ? 1 : 0;
}

/* Fixed costs around a call: device queries, handles, allocations, copies. */
static void overheads(void) {
  double t0;
  gpuml_info info;
  t0 = now_ms();
  gpuml_backend_info(&info);
  printf("overhead gpuml_backend_info: %.3f ms\n", now_ms() - t0);
  struct cudaDeviceProp prop;
  t0 = now_ms();
  cudaGetDeviceProperties(&prop, 0);
  printf("overhead cudaGetDeviceProperties: %.3f ms\n", now_ms() - t0);
  int v;
  t0 = now_ms();
  cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0);
  printf("overhead cudaDeviceGetAttribute: %.3f ms\n", now_ms() - t0);
  cudaStream_t st;
  t0 = now_ms();
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaStreamDestroy(st);
  printf("overhead stream create+destroy: %.3f ms\n", now_ms() - t0);
  cublasHandle_t h;
  for (int r = 0; r < 3; r++) {
    t0 = now_ms();
    cublasCreate(&h);
    cublasDestroy(h);
    printf("overhead cublasCreate+Destroy: %.3f ms\n", now_ms() - t0);
    t0 = now_ms();
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    cudaStreamDestroy(st);
    printf("overhead stream create+destroy: %.3f ms\n", now_ms() - t0);
  }
  size_t fr, tot;
  t0 = now_ms();
  cudaMemGetInfo(&fr, &tot);
  printf("overhead cudaMemGetInfo: %.3f ms\n", now_ms() - t0);
  void *p;
  t0 = now_ms();
  cudaMalloc(&p, (size_t)256 << 20);
  double t1 = now_ms();
  cudaFree(p);
  printf("overhead cudaMalloc 256 MB: %.3f ms, cudaFree: %.3f ms\n", t1 - t0, now_ms() - t1);
  size_t bytes = (size_t)65536 * 784 * 4;
  float *h_x = random_points(65536, 784);
  cudaMalloc(&p, bytes);
  for (int r = 0; r < 2; r++) {
    t0 = now_ms();
    cudaMemcpy(p, h_x, bytes, cudaMemcpyHostToDevice);
    printf("overhead H2D pageable %.0f MB: %.3f ms\n", bytes / 1e6, now_ms() - t0);
  }
  t0 = now_ms();
  cudaError_t e = cudaHostRegister(h_x, bytes, cudaHostRegisterDefault);
  printf("overhead cudaHostRegister %.0f MB: %.3f ms (%s)\n", bytes / 1e6, now_ms() - t0,
         cudaGetErrorString(e));
  t0 = now_ms();
  cudaMemcpy(p, h_x, bytes, cudaMemcpyHostToDevice);
  printf("overhead H2D registered: %.3f ms\n", now_ms() - t0);
  t0 = now_ms();
  cudaHostUnregister(h_x);
  printf("overhead cudaHostUnregister: %.3f ms\n", now_ms() - t0);
  t0 = now_ms();
  cudaMemcpy2D(p, 4096 * 4, h_x, 65536 * 4, 4096 * 4, 784, cudaMemcpyHostToDevice);
  printf("overhead H2D pageable 2D 4096 rows x 784: %.3f ms\n", now_ms() - t0);
  t0 = now_ms();
  cudaMemcpy(h_x, p, bytes, cudaMemcpyDeviceToHost);
  printf("overhead D2H pageable: %.3f ms\n", now_ms() - t0);
  cudaFree(p);
  free(h_x);
}

/* cublasSgemm rates for the tile shapes a kNN run could use (k = d). */
static void gemm_sweep(void) {
  static const int shapes[][2] = {{16384, 4096}, {65536, 4096}, {16384, 8192}, {32768, 8192},
                                  {16384, 16384}, {65536, 8192}, {8192, 8192}, {4096, 16384}};
  static const int dims[] = {128, 784};
  cublasHandle_t h;
  cublasCreate(&h);
  float *A, *B, *C;
  cudaMalloc((void **)&A, sizeof(float) * 65536 * 784);
  cudaMalloc((void **)&B, sizeof(float) * 65536 * 784);
  cudaMalloc((void **)&C, sizeof(float) * (size_t)65536 * 16384);
  float *h_a = random_points(65536, 784);
  cudaMemcpy(A, h_a, sizeof(float) * 65536 * 784, cudaMemcpyHostToDevice);
  cudaMemcpy(B, h_a, sizeof(float) * 65536 * 784, cudaMemcpyHostToDevice);
  free(h_a);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const float alpha = -2, beta = 0;
  for (size_t di = 0; di < 2; di++)
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (int op = 0; op < 3; op++) {
        int M = shapes[si][0], N = shapes[si][1], K = dims[di];
        const char *name = op == 0 ? "TN" : op == 1 ? "NT" : "NN";
        cublasOperation_t ta = op == 0 ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t tb = op == 1 ? CUBLAS_OP_T : CUBLAS_OP_N;
        int lda = op == 0 ? K : M, ldb = op == 1 ? N : K;
        float ms = 0;
        for (int r = 0; r < 2; r++) {
          cudaEventRecord(e0, 0);
          cublasSgemm(h, ta, tb, M, N, K, &alpha, A, lda, B, ldb, &beta, C, M);
          cudaEventRecord(e1, 0);
          cudaEventSynchronize(e1);
          cudaEventElapsedTime(&ms, e0, e1);
        }
        printf("sgemm %s M=%d N=%d K=%d: %.3f ms, %.1f TFLOP/s\n", name, M, N, K, ms,
               2.0 * M * (double)N * K / (ms / 1e3) / 1e12);
      }
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cublasDestroy(h);
}

/* cuBLAS's tensor-core GEMMs at the kNN tiles' shapes (TN, fp32 out): TF32 (fp32 in) and
 * fp16 in; the plain pass's candidate GEMM in either form. */
static void tensor_sweep(void) {
  static const int shapes[][3] = {{16384, 8192, 768}, {16384, 5000, 768}, {65536, 8192, 128},
                                  {65536, 8192, 64}};
  cublasHandle_t h;
  cublasCreate(&h);
  float *A, *B, *C;
  cudaMalloc((void **)&A, sizeof(float) * 65536 * 768);
  cudaMalloc((void **)&B, sizeof(float) * 65536 * 768);
  cudaMalloc((void **)&C, sizeof(float) * (size_t)65536 * 8192);
  cudaMemset(A, 0, sizeof(float) * 65536 * 768);
  cudaMemset(B, 0, sizeof(float) * 65536 * 768);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const float alpha = -2, beta = 0;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int half = 0; half < 2; half++) {
      const int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
      const cudaDataType t = half ? CUDA_R_16F : CUDA_R_32F;
      const cublasComputeType_t c = half ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
      float best = 1e30f;
      for (int r = 0; r < 4; r++) {
        float ms = 0;
        cudaEventRecord(e0, 0);
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, A, t, K, B, t, K, &beta, C,
                     CUDA_R_32F, M, c, CUBLAS_GEMM_DEFAULT);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (r > 0 && ms < best) best = ms;
      }
      printf("gemm %s M=%d N=%d K=%d: %.3f ms, %.1f TFLOP/s\n", half ? "fp16" : "tf32", M, N, K,
             best, 2.0 * M * (double)N * K / (best / 1e3) / 1e12);
    }
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cublasDestroy(h);
}

int main(int argc, char **argv) {
  gpuml_info info;
  gpuml_backend_info(&info);
  if (argc > 1 && strcmp(argv[1], "--sanitize") == 0)
    return sanitize_runs(argc > 2 && strcmp(argv[2], "--quick") == 0);
  if (argc > 1 && strcmp(argv[1], "--overhead") == 0) {
    overheads();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--tensor-sweep") == 0) {
    tensor_sweep();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--gemm-sweep") == 0) {
    gemm_sweep();
    return 0;
  }
  if (argc > 5 && strcmp(argv[1], "--index") == 0) { /* --index n m d k */
    run_case("warmup", 4096, 4096, 128, 16, 0, 1);
    return index_case("index", atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), atoll(argv[5])) ? 0 : 1;
  }
  if (argc > 4 && strcmp(argv[1], "--self-ab") == 0) { /* --self-ab n d k [reps] */
    run_case("warmup", 4096, 4096, 128, 16, 0, 1);
    return self_ab(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), argc > 5 ? atoi(argv[5]) : 3)
               ? 0
               : 1;
  }
  if (argc > 5 && strcmp(argv[1], "--case") == 0) { /* --case n m d k [reps [label]] */
    int64_t n = atoll(argv[2]), m = atoll(argv[3]), d = atoll(argv[4]), k = atoll(argv[5]);
    run_case("warmup", 4096, 4096, 128, 16, 0, 1);
    int reps = argc > 6 ? atoi(argv[6]) : 1;
    return run_case(argc > 7 ? argv[7] : "case", n, m, d, k, 64, reps) ? 0 : 1;
  }
  printf("device: %s (%d devices), CUDA runtime %d, driver %d, %.1f GB\n", info.device_name,
         info.device_count, info.cuda_runtime_version, info.cuda_driver_version,
         info.device_memory / 1e9);
  if (info.device_count == 0) {
    printf("no GPU: %s\n", info.cuda_message);
    return 1;
  }
  sgemm_ceiling();
  /* warm-up: context, cuBLAS, module loading */
  run_case("warmup", 4096, 4096, 128, 16, 0, 1);
  int ok = 1;
  ok &= run_case("n=65536_d=128_k=16", 65536, 65536, 128, 16, 128, 3);
  ok &= run_case("n=65536_d=784_k=16", 65536, 65536, 784, 16, 64, 3);
  ok &= run_case("n=65536_d=2_k=16", 65536, 65536, 2, 16, 256, 3);
  ok &= run_case("n=65536_d=128_k=1024", 65536, 65536, 128, 1024, 32, 2);
  ok &= run_case("n=65536_d=128_k=4096", 65536, 65536, 128, 4096, 16, 2);
  const char *skip = getenv("GPUML_BENCH_SKIP_LARGE");
  /* queries and references of different sizes (m in the name) */
  ok &= run_case("n=500000_d=64_k=8_m=100000", 500000, 100000, 64, 8, 64, 3);
  if (!(skip && *skip && strcmp(skip, "0"))) {
    ok &= run_case("n=1000000_d=128_k=10", 1000000, 1000000, 128, 10, 16, 1);
    ok &= run_case("n=1000000_d=768_k=100_m=10000", 1000000, 10000, 768, 100, 16, 3);
    ok &= index_case("n=1000000_d=768_k=100_m=10000", 1000000, 10000, 768, 100);
  }
  return ok ? 0 : 1;
}
