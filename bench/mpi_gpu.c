/* The SPMD entry points (core/include/gpuml_mpi.h) with every rank on its own GPU, against
 * one process on one GPU, on a host with several:
 *   mpirun -np R build/bench/mpi_gpu [--reps N] [--only knn,gmm,dpc]
 * Every rank makes the same global data (a fixed generator) and keeps its block of rows
 * (equal blocks in rank order); each rank takes the CUDA device of gpuml_mpi_local_device
 * (its place among the ranks of its host modulo the host's devices). Rank 0
 * also runs the one-process call (gpuml_knn_search, gpuml_gmm_fit, gpuml_dpc_fit) on its
 * device while the others wait, and compares: kNN lists and density peaks (rho, delta,
 * nearest, clusters) of all rows gathered to rank 0, identical; the mixture's
 * log-likelihood, relative difference. Times: wall clock of the collective call (from a
 * barrier to the slowest rank's return), best of --reps (default 2); the mixture's EM
 * iteration from fits of 5 and 45 iterations (tol 0), best of --reps each.
 *   knn   self-search of 10^6 x 128 (uniform), k = 10, double precision (the certified
 *         path); the blocks travel around a ring of the ranks
 *   gmm   4 x 10^6 x 50, G = 16, VVV, k-means++ start (seed 5)
 *   dpc   10^7 x 2 (10 Gaussian blobs), dc estimated, k = 10
 * Prints "RESULT <case> ranks <R> <seconds> one <seconds> speed-up <x> <answer>".
 * Build (tools/gpu-run.sh with MPI): mpicc -O2 -std=c11 -fopenmp -Icore/include
 *   bench/mpi_gpu.c build/libgpuml_mpi.a build/libgpuml.a $LIBS -lm */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpuml_mpi.h"

static int rank, size, reps = 2;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *must(void *p) {
  if (!p) {
    fprintf(stderr, "rank %d: out of host memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

static uint64_t next(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 11;
}
static double uniform(uint64_t *s) { return (double)next(s) / 9007199254740992.0; }
static double normal(uint64_t *s) {
  const double u = uniform(s) + 1e-300, v = uniform(s);
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* n x d, column-major: centres (sd spread) plus unit noise; spread 0: uniform [0, 1) */
static double *data(int64_t n, int64_t d, int centres, double spread, uint64_t seed) {
  double *x = must(malloc(sizeof(double) * (size_t)(n * d)));
  uint64_t s = seed;
  if (spread == 0) {
    for (int64_t e = 0; e < n * d; e++) x[e] = uniform(&s);
    return x;
  }
  double *c = must(malloc(sizeof(double) * (size_t)(centres * d)));
  for (int64_t e = 0; e < centres * d; e++) c[e] = spread * normal(&s);
  for (int64_t j = 0; j < d; j++)
    for (int64_t i = 0; i < n; i++) x[i + j * n] = c[(i % centres) + j * centres] + normal(&s);
  free(c);
  return x;
}

static void block(int64_t n, int r, int64_t *r0, int64_t *rn) {
  *r0 = n * r / size;
  *rn = n * (r + 1) / size - *r0;
}

static double *rows_of(const double *x, int64_t n, int64_t d, int64_t r0, int64_t rn) {
  double *b = must(malloc(sizeof(double) * (size_t)(rn * d > 0 ? rn * d : 1)));
  for (int64_t j = 0; j < d; j++) memcpy(b + j * rn, x + j * n + r0, sizeof(double) * (size_t)rn);
  return b;
}

/* this rank's n_local x cols block (column-major, 8-byte entries) into rank 0's n x cols */
static void gather(const void *mine, int64_t n, int64_t cols, void *all) {
  int64_t r0, rn;
  block(n, rank, &r0, &rn);
  int *counts = must(malloc(sizeof(int) * size)), *displs = must(malloc(sizeof(int) * size));
  for (int r = 0; r < size; r++) {
    int64_t a, m;
    block(n, r, &a, &m);
    counts[r] = (int)m;
    displs[r] = (int)a;
  }
  for (int64_t c = 0; c < cols; c++)
    MPI_Gatherv((const char *)mine + 8 * c * rn, (int)rn, MPI_INT64_T,
                rank == 0 ? (char *)all + 8 * c * n : NULL, counts, displs, MPI_INT64_T, 0,
                MPI_COMM_WORLD);
  free(counts);
  free(displs);
}

static gpuml_options options(int device) {
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = GPUML_BACKEND_CUDA;
  o.device = device;
  o.seed = 5;
  return o;
}

static void result(const char *name, double t, double one, const char *answer) {
  if (rank == 0) {
    printf("RESULT %s ranks %d %.4f one %.4f speed-up %.2fx %s\n", name, size, t, one, one / t,
           answer);
    fflush(stdout);
  }
}

static void fail(const char *what, gpuml_status st) {
  if (st) {
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, gpuml_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static void bench_knn(int device) {
  const int64_t n = 1000000, d = 128, k = 10;
  double *x = data(n, d, 0, 0, 1);
  int64_t r0, rn;
  block(n, rank, &r0, &rn);
  double *mine = rows_of(x, n, d, r0, rn);
  int64_t *idx = must(malloc(sizeof(int64_t) * (size_t)(rn * k)));
  double *dist = must(malloc(sizeof(double) * (size_t)(rn * k)));
  gpuml_options o = options(device);
  double best = 1e300;
  for (int r = 0; r < reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_s();
    fail("gpuml_mpi_knn_search",
         gpuml_mpi_knn_search(MPI_COMM_WORLD, mine, rn, d, NULL, 0, k, idx, dist, &o, NULL));
    MPI_Barrier(MPI_COMM_WORLD);
    if (now_s() - t0 < best) best = now_s() - t0;
  }
  int64_t *all_idx = rank == 0 ? must(malloc(sizeof(int64_t) * (size_t)(n * k))) : NULL;
  double *all_dist = rank == 0 ? must(malloc(sizeof(double) * (size_t)(n * k))) : NULL;
  gather(idx, n, k, all_idx);
  gather(dist, n, k, all_dist);
  double one = 1e300;
  char answer[128] = "";
  if (rank == 0) {
    int64_t *i1 = must(malloc(sizeof(int64_t) * (size_t)(n * k)));
    double *d1 = must(malloc(sizeof(double) * (size_t)(n * k)));
    for (int r = 0; r < reps; r++) {
      const double t0 = now_s();
      fail("gpuml_knn_search", gpuml_knn_search(x, n, d, NULL, 0, k, i1, d1, &o, NULL));
      if (now_s() - t0 < one) one = now_s() - t0;
    }
    int64_t differ = 0;
    for (int64_t e = 0; e < n * k; e++) differ += i1[e] != all_idx[e] || d1[e] != all_dist[e];
    snprintf(answer, sizeof answer, "%lld of %lld entries differ", (long long)differ,
             (long long)(n * k));
    free(i1);
    free(d1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  result("knn_self_1e6x128_k10_fp64", best, one, answer);
  free(all_idx);
  free(all_dist);
  free(x);
  free(mine);
  free(idx);
  free(dist);
}

static void gmm_params(gpuml_gmm_params *p, int64_t iters) {
  gpuml_gmm_params_init(p);
  p->nG = 1;
  p->G[0] = 16;
  p->n_models = 1;
  p->models[0] = GPUML_GMM_VVV;
  p->init = GPUML_GMM_INIT_KMEANSPP;
  p->max_iter = iters;
  p->tol = 0;
}

/* best of reps of one fit: the EM iterations' seconds (model.seconds_em) and loglik */
static double gmm_em(int mpi, const double *x, int64_t n, int64_t d, int64_t iters,
                     const gpuml_options *o, double *loglik) {
  gpuml_gmm_params p;
  gmm_params(&p, iters);
  double w[16], mu[16 * 50], cov[16 * 50 * 50], best = 1e300;
  for (int r = 0; r < reps; r++) {
    gpuml_gmm_model m = {0};
    m.weights = w;
    m.means = mu;
    m.covariances = cov;
    if (mpi)
      fail("gpuml_mpi_gmm_fit",
           gpuml_mpi_gmm_fit(MPI_COMM_WORLD, x, n, d, &p, &m, NULL, NULL, NULL, NULL, o, NULL));
    else
      fail("gpuml_gmm_fit", gpuml_gmm_fit(x, n, d, &p, &m, NULL, NULL, NULL, NULL, o, NULL));
    if (m.seconds_em < best) best = m.seconds_em;
    *loglik = m.loglik;
  }
  return best;
}

static void bench_gmm(int device) {
  const int64_t n = 4000000, d = 50;
  double *x = data(n, d, 16, 4, 7);
  int64_t r0, rn;
  block(n, rank, &r0, &rn);
  double *mine = rows_of(x, n, d, r0, rn);
  gpuml_options o = options(device);
  double ll_mpi = 0, ll_one = 0, junk;
  const double t5 = gmm_em(1, mine, rn, d, 5, &o, &junk);
  const double t45 = gmm_em(1, mine, rn, d, 45, &o, &ll_mpi);
  double one = 0;
  char answer[128] = "";
  if (rank == 0) {
    const double o5 = gmm_em(0, x, n, d, 5, &o, &junk);
    const double o45 = gmm_em(0, x, n, d, 45, &o, &ll_one);
    one = (o45 - o5) / 40;
    snprintf(answer, sizeof answer, "loglik after 45 iterations %.6f (rel. difference %.1e)",
             ll_mpi, fabs(ll_mpi - ll_one) / fabs(ll_one));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* the slowest rank's EM time */
  double mine_t[2] = {t5, t45}, worst[2];
  MPI_Allreduce(mine_t, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  result("gmm_4e6x50_G16_VVV_iteration", (worst[1] - worst[0]) / 40, one, answer);
  free(x);
  free(mine);
}

static void bench_dpc(int device) {
  const int64_t n = 10000000, d = 2;
  double *x = data(n, d, 10, 6, 3);
  int64_t r0, rn;
  block(n, rank, &r0, &rn);
  double *mine = rows_of(x, n, d, r0, rn);
  gpuml_options o = options(device);
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  p.select.has_k = 1;
  p.select.k = 10;
  double *rho = must(malloc(sizeof(double) * (size_t)rn)), *delta = must(malloc(sizeof(double) * (size_t)rn));
  int64_t *nearest = must(malloc(sizeof(int64_t) * (size_t)rn)), *cluster = must(malloc(sizeof(int64_t) * (size_t)rn));
  int *halo = must(malloc(sizeof(int) * (size_t)rn));
  int64_t *centres = must(malloc(sizeof(int64_t) * (size_t)n)), ncentres = 0;
  double best = 1e300;
  for (int r = 0; r < reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_s();
    fail("gpuml_mpi_dpc_fit", gpuml_mpi_dpc_fit(MPI_COMM_WORLD, mine, rn, d, &p, rho, delta, nearest,
                                                NULL, centres, &ncentres, cluster, halo, &o, NULL));
    MPI_Barrier(MPI_COMM_WORLD);
    if (now_s() - t0 < best) best = now_s() - t0;
  }
  double *all_rho = rank == 0 ? must(malloc(sizeof(double) * (size_t)n)) : NULL;
  double *all_delta = rank == 0 ? must(malloc(sizeof(double) * (size_t)n)) : NULL;
  int64_t *all_near = rank == 0 ? must(malloc(sizeof(int64_t) * (size_t)n)) : NULL;
  int64_t *all_cl = rank == 0 ? must(malloc(sizeof(int64_t) * (size_t)n)) : NULL;
  gather(rho, n, 1, all_rho);
  gather(delta, n, 1, all_delta);
  gather(nearest, n, 1, all_near);
  gather(cluster, n, 1, all_cl);
  double one = 1e300;
  char answer[128] = "";
  if (rank == 0) {
    double *r1 = must(malloc(sizeof(double) * (size_t)n)), *d1 = must(malloc(sizeof(double) * (size_t)n));
    int64_t *n1 = must(malloc(sizeof(int64_t) * (size_t)n)), *c1 = must(malloc(sizeof(int64_t) * (size_t)n));
    int *h1 = must(malloc(sizeof(int) * (size_t)n));
    int64_t *cent1 = must(malloc(sizeof(int64_t) * (size_t)n)), nc1 = 0;
    for (int r = 0; r < reps; r++) {
      const double t0 = now_s();
      fail("gpuml_dpc_fit", gpuml_dpc_fit(x, n, d, &p, r1, d1, n1, NULL, NULL, cent1, &nc1, c1, h1, &o, NULL));
      if (now_s() - t0 < one) one = now_s() - t0;
    }
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++)
      differ += r1[i] != all_rho[i] || d1[i] != all_delta[i] || n1[i] != all_near[i] ||
                c1[i] != all_cl[i];
    snprintf(answer, sizeof answer, "%lld of %lld points differ", (long long)differ, (long long)n);
    free(r1), free(d1), free(n1), free(c1), free(h1), free(cent1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  result("dpc_1e7x2_k10", best, one, answer);
  free(all_rho), free(all_delta), free(all_near), free(all_cl);
  free(x), free(mine), free(rho), free(delta), free(nearest), free(cluster), free(halo), free(centres);
}

static int wants(const char *list, const char *name) { return strstr(list, name) != NULL; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *only = "knn,gmm,dpc";
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--only") && a + 1 < argc) only = argv[++a];
  }
  if (reps < 1) reps = 1;
  /* the library's rule for a rank's GPU (what devices = "local" takes in R and Octave) */
  int local = 0, device = 0;
  fail("gpuml_mpi_local_rank", gpuml_mpi_local_rank(MPI_COMM_WORLD, &local, NULL));
  fail("gpuml_mpi_local_device", gpuml_mpi_local_device(MPI_COMM_WORLD, &device));
  gpuml_info info;
  gpuml_backend_info(&info);
  printf("rank %d of %d: local %d, device %d of %d\n", rank, size, local, device, info.device_count);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (wants(only, "knn")) bench_knn(device);
  if (wants(only, "gmm")) bench_gmm(device);
  if (wants(only, "dpc")) bench_dpc(device);
  gpuml_shutdown();
  MPI_Finalize();
  return 0;
}
