/* C tests of gpuml_mpi_gmm_fit (core/mpi/gmm_mpi.c), run as `mpirun -np 3
 * build/tests/test_gmm_mpi`: every rank makes the same global data and keeps its block of
 * rows (uneven); the SPMD fit must be the fit of one process on the whole data up to the
 * order of the sums (gmm_compare.h: the same model, G and classification of the rank's
 * rows, the log-likelihood and every BIC within 1e-10 relative) and the same on every
 * rank. Rank 0 prints the counts of all ranks. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gmm_compare.h"
#include "gpuml_mpi.h"

/* Rank r's block of n rows: sizes 1 : 2 : 3 ... */
static void block_of(int64_t n, int rank, int size, int64_t *r0, int64_t *rn) {
  int64_t total = 0, before = 0;
  for (int r = 0; r < size; r++) total += r + 1;
  for (int r = 0; r < rank; r++) before += r + 1;
  *r0 = n * before / total;
  *rn = n * (before + rank + 1) / total - *r0;
}

static void check_fit(const char *name, const double *x, int64_t n, int64_t d,
                      const gpuml_gmm_params *p, int rank, int size) {
  int64_t r0, rn;
  block_of(n, rank, size, &r0, &rn);
  double *mine = malloc(sizeof(double) * (size_t)(rn * d));
  for (int64_t j = 0; j < d; j++) memcpy(mine + j * rn, x + j * n + r0, sizeof(double) * (size_t)rn);
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CPU;
  gmm_fit_t spmd = gmm_fit_alloc(rn, d, p), one = gmm_fit_alloc(n, d, p);
  gmm_fit_done(&spmd, gpuml_mpi_gmm_fit(MPI_COMM_WORLD, mine, rn, d, p, &spmd.model, NULL,
                                        spmd.cls, NULL, spmd.bic, &opt, NULL));
  gmm_fit_done(&one, gpuml_gmm_fit(x, n, d, p, &one.model, NULL, one.cls, NULL, one.bic, &opt, NULL));
  char what[160];
  snprintf(what, sizeof what, "%s (rank %d of %d)", name, rank, size);
  gmm_compare(what, &spmd, &one, r0, rn, n, d, p);
  /* every rank holds the same model, bit for bit */
  double v[2] = {spmd.model.loglik, spmd.model.means[0]}, lo[2], hi[2];
  MPI_Allreduce(v, lo, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(v, hi, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(spmd.status || (lo[0] == hi[0] && lo[1] == hi[1]), "%s: the ranks' models differ", what);
  gmm_fit_free(&spmd);
  gmm_fit_free(&one);
  free(mine);
}

static void check_case(const char *name, int64_t n, int64_t d, int64_t G, int grouped,
                       const gpuml_gmm_params *p, int rank, int size) {
  double *x = gmm_clusters(n, d, G, grouped);
  check_fit(name, x, n, d, p, rank, size);
  free(x);
}

/* The far rows on the last rank: components collapse and are re-seeded at the
 * worst-fitted rows of all ranks. */
static void check_collapse(int rank, int size) {
  int64_t n, d;
  double *x = gmm_collapsing(&n, &d);
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  p.nG = 1;
  p.init = GPUML_GMM_INIT_KMEANSPP;
  p.reg = 1e-6;
  p.n_models = 1;
  p.models[0] = GPUML_GMM_VVV;
  for (int64_t G = 3; G <= 4; G++) {
    p.G[0] = G;
    char name[64];
    snprintf(name, sizeof name, "collapsing components, VVV G = %lld", (long long)G);
    check_fit(name, x, n, d, &p, rank, size);
  }
  free(x);
}

static void check_errors(int rank) {
  double x[8] = {0, 1, 2, 3, 0, 1, 0, 1};
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  p.nG = 1;
  p.G[0] = 1;
  gmm_fit_t f = gmm_fit_alloc(4, 2, &p);
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CPU;
  /* a NaN on rank 0 only: every rank fails, naming rank 0 */
  if (rank == 0) x[5] = NAN;
  gpuml_status st = gpuml_mpi_gmm_fit(MPI_COMM_WORLD, x, 4, 2, &p, &f.model, NULL, f.cls, NULL,
                                      f.bic, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:nonFinite") == 0 &&
            (rank == 0 || strstr(gpuml_last_error(), "rank 0") != NULL),
        "a NaN on rank 0 (rank %d): %s", rank, gpuml_last_error());
  x[5] = 1;
  /* G beyond the global rows */
  p.G[0] = 1000;
  st = gpuml_mpi_gmm_fit(MPI_COMM_WORLD, x, 4, 2, &p, &f.model, NULL, f.cls, NULL, f.bic, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badG") == 0,
        "G too large (rank %d): %s", rank, gpuml_last_error());
  /* the ranks disagree on d */
  p.G[0] = 1;
  st = gpuml_mpi_gmm_fit(MPI_COMM_WORLD, x, 4, rank == 0 ? 1 : 2, &p, &f.model, NULL, f.cls, NULL,
                         f.bic, &opt, NULL);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1)
    CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "mpi:mismatch") == 0,
          "d differing between ranks (rank %d): %s", rank, gpuml_last_error());
  gmm_fit_free(&f);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static const gpuml_gmm_covariance each[] = {GPUML_GMM_VVV, GPUML_GMM_EEE, GPUML_GMM_VEV,
                                              GPUML_GMM_VII};
  gpuml_gmm_params p;
  for (int m = 0; m < 4; m++) {
    gpuml_gmm_params_init(&p);
    p.nG = 4;
    p.n_models = 1;
    p.models[0] = each[m];
    char name[96];
    snprintf(name, sizeof name, "%s G = 1:4, grouped rows", gpuml_gmm_model_name(each[m], 3));
    check_case(name, 900, 3, 3, 1, &p, rank, size);
    snprintf(name, sizeof name, "%s G = 1:4, interleaved rows", gpuml_gmm_model_name(each[m], 3));
    check_case(name, 900, 3, 4, 0, &p, rank, size);
  }
  gpuml_gmm_params_init(&p);
  check_case("default sweep (every model, G = 1:9)", 900, 3, 4, 0, &p, rank, size);
  p.nG = 5;
  check_case("default sweep G = 1:5 on 3,000 rows (the start's 2,000 gathered)", 3000, 2, 3, 1,
             &p, rank, size);
  check_case("one column (the column gathered)", 600, 1, 3, 1, &p, rank, size);
  p.init = GPUML_GMM_INIT_KMEANSPP;
  p.n_init = 2;
  check_case("k-means++ starts, n_init = 2", 900, 3, 4, 1, &p, rank, size);
  check_collapse(rank, size);
  check_errors(rank);
  int counts[2] = {check_passed, check_failed}, total[2] = {0, 0};
  MPI_Reduce(counts, total, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("C: %d passed, %d failed\n", total[0], total[1]);
  MPI_Finalize();
  return rank == 0 && total[1] ? 1 : 0;
}
