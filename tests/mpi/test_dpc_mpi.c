/* C tests of density peaks over MPI (core/mpi/dpc_mpi.c), run as
 * `mpirun -np 3 build/tests/test_dpc_mpi`: every rank makes the same global data, keeps
 * its block of rows (uneven, one rank may hold none), and gpuml_mpi_dpc_fit must give
 * what gpuml_dpc_fit gives in one process on the whole data, bit for bit: rho, delta,
 * nearest, gamma of the rank's rows, the centres, and the clusters and halo of its rows.
 * Rank 0 prints the counts of all ranks. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gpuml_mpi.h"

/* n x d points: blobs, or with `lattice` values on a coarse grid so that exact ties and
 * duplicates abound. */
static double *global_points(int64_t n, int64_t d, int lattice) {
  uint64_t s = 9191;
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < d; t++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      const double u = (double)(s >> 11) / 9007199254740992.0;
      x[i + t * n] = lattice ? floor(u * 5) : 6.0 * (double)((i + t) % 3) + u;
    }
  return x;
}

/* The block of rank r of n rows: sizes weighted 1 : 2 : 3 ..., the last rank of 3 or more
 * holding none when `empty_last`. */
static void block_of(int64_t n, int rank, int size, int empty_last, int64_t *r0, int64_t *rn) {
  const int holders = empty_last && size > 2 ? size - 1 : size;
  int64_t weight_total = 0, before = 0;
  for (int r = 0; r < holders; r++) weight_total += r + 1;
  for (int r = 0; r < rank && r < holders; r++) before += r + 1;
  *r0 = rank < holders ? n * before / weight_total : n;
  const int64_t r1 = rank < holders ? n * (before + rank + 1) / weight_total : n;
  *rn = r1 - *r0;
}

static double *rows_of(const double *x, int64_t n, int64_t d, int64_t r0, int64_t rn) {
  double *b = malloc(sizeof(double) * (size_t)((rn > 0 ? rn : 1) * d));
  for (int64_t t = 0; t < d; t++) memcpy(b + t * rn, x + t * n + r0, sizeof(double) * (size_t)rn);
  return b;
}

typedef struct {
  double *rho, *delta, *gamma;
  int64_t *nearest, *centres, *cluster, ncentres;
  int *halo;
} outputs;

static outputs outputs_alloc(int64_t rows, int64_t n) {
  const size_t r = (size_t)(rows > 0 ? rows : 1);
  outputs o = {malloc(sizeof(double) * r), malloc(sizeof(double) * r), malloc(sizeof(double) * r),
               malloc(sizeof(int64_t) * r), malloc(sizeof(int64_t) * (size_t)n),
               malloc(sizeof(int64_t) * r), 0, malloc(sizeof(int) * r)};
  return o;
}

static void outputs_free(outputs *o) {
  free(o->rho);
  free(o->delta);
  free(o->gamma);
  free(o->nearest);
  free(o->centres);
  free(o->cluster);
  free(o->halo);
}

static void check_case(const char *name, int64_t n, int64_t d, int lattice, double dc,
                       int gaussian, double gaussian_cutoff, int64_t k, int empty_last,
                       int rank, int size) {
  double *x = global_points(n, d, lattice);
  int64_t r0, rn;
  block_of(n, rank, size, empty_last, &r0, &rn);
  double *mine = rows_of(x, n, d, r0, rn);
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CPU;
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  p.estimate_dc = dc <= 0;
  p.dc = dc;
  p.kernel = gaussian ? GPUML_DPC_GAUSSIAN : GPUML_DPC_CUTOFF;
  p.gaussian_cutoff = gaussian_cutoff;
  const double kk = (double)k;
  gpuml_params_set_numbers(GPUML_PARAMS_DPC, &p, "k", &kk, 1);
  outputs got = outputs_alloc(rn, n), ref = outputs_alloc(n, n);
  gpuml_dpc_result rg, rr;
  gpuml_status st = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, mine, rn, d, &p, got.rho, got.delta,
                                      got.nearest, got.gamma, got.centres, &got.ncentres,
                                      got.cluster, got.halo, &opt, &rg);
  gpuml_status sr = gpuml_dpc_fit(x, n, d, &p, ref.rho, ref.delta, ref.nearest, ref.gamma,
                                  NULL, ref.centres, &ref.ncentres, ref.cluster, ref.halo, &opt, &rr);
  CHECK(st == GPUML_OK && sr == GPUML_OK, "%s (rank %d): %s", name, rank, gpuml_last_error());
  if (!st && !sr) {
    const size_t nd = sizeof(double) * (size_t)rn, ni = sizeof(int64_t) * (size_t)rn;
    CHECK(rg.dc == rr.dc && !memcmp(got.rho, ref.rho + r0, nd) &&
              !memcmp(got.delta, ref.delta + r0, nd) && !memcmp(got.gamma, ref.gamma + r0, nd) &&
              !memcmp(got.nearest, ref.nearest + r0, ni),
          "%s (rank %d of %d, rows %lld): dc, rho, delta, gamma or nearest differ from one "
          "process",
          name, rank, size, (long long)rn);
    CHECK(got.ncentres == ref.ncentres &&
              !memcmp(got.centres, ref.centres, sizeof(int64_t) * (size_t)ref.ncentres) &&
              !memcmp(got.cluster, ref.cluster + r0, ni) &&
              !memcmp(got.halo, ref.halo + r0, sizeof(int) * (size_t)rn),
          "%s (rank %d of %d): centres, clusters or halo differ from one process", name, rank,
          size);
  }
  outputs_free(&got);
  outputs_free(&ref);
  free(x);
  free(mine);
}

static void check_errors(int rank, int size) {
  double x[6] = {0, 1, 2, 0, 1, 2};
  outputs o = outputs_alloc(3, 3 * size);
  gpuml_options opt;
  gpuml_options_init(&opt);
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  p.estimate_dc = 0;
  p.dc = 1.5;
  /* the ranks disagree on d */
  gpuml_status st = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, x, 3, rank == 0 ? 2 : 1, &p, o.rho, o.delta,
                                      o.nearest, NULL, NULL, NULL, NULL, NULL, &opt, NULL);
  if (size > 1)
    CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "mpi:mismatch") == 0,
          "d differing between ranks (rank %d): %s", rank, gpuml_last_error());
  /* k beyond the global rows: the same error on every rank */
  const double many = 1000;
  gpuml_params_set_numbers(GPUML_PARAMS_DPC, &p, "k", &many, 1);
  st = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, x, 3, 2, &p, o.rho, o.delta, o.nearest, NULL, o.centres,
                         &o.ncentres, o.cluster, o.halo, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "dpc:badK") == 0,
        "k too large (rank %d): %s", rank, gpuml_last_error());
  /* a NaN on rank 0 only: every rank fails, naming rank 0 */
  gpuml_dpc_params_init(&p);
  p.estimate_dc = 0;
  p.dc = 1.5;
  double bad[6] = {0, 1, 2, 0, 1, 2};
  if (rank == 0) bad[4] = NAN;
  st = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, bad, 3, 2, &p, o.rho, o.delta, o.nearest, NULL, NULL,
                         NULL, NULL, NULL, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strstr(gpuml_last_error_id(), "nonFinite") != NULL &&
            (rank == 0 || strstr(gpuml_last_error(), "rank 0") != NULL),
        "a NaN on rank 0 (rank %d): %s", rank, gpuml_last_error());
  /* a bad device list on the last rank only */
  if (rank == size - 1) {
    opt.ndevices = 2;
    opt.devices[0] = 1;
    opt.devices[1] = 1;
  }
  st = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, x, 3, 2, &p, o.rho, o.delta, o.nearest, NULL, NULL,
                         NULL, NULL, NULL, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strstr(gpuml_last_error(), "listed twice") != NULL,
        "a device listed twice on one rank (rank %d): %s", rank, gpuml_last_error());
  /* dc <= 0 given: refused on every rank after the rows are gathered */
  gpuml_options_init(&opt);
  p.dc = -1;
  st = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, x, 3, 2, &p, o.rho, o.delta, o.nearest, NULL, NULL,
                         NULL, NULL, NULL, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strstr(gpuml_last_error_id(), "dpc:") != NULL,
        "dc = -1 (rank %d): %s", rank, gpuml_last_error());
  outputs_free(&o);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check_case("blobs d=2, cell index", 1001, 2, 0, 0.25, 0, 0, 3, 0, rank, size);
  check_case("blobs d=3, dc estimated", 800, 3, 0, 0, 0, 0, 3, 0, rank, size);
  check_case("blobs d=2, truncated Gaussian", 700, 2, 0, 0.2, 1, 3, 3, 0, rank, size);
  check_case("lattice ties and duplicates d=2", 500, 2, 1, 1.5, 0, 0, 4, 0, rank, size);
  check_case("lattice ties, the last rank empty", 401, 3, 1, 1.2, 0, 0, 2, 1, rank, size);
  check_case("tiles d=12, exact Gaussian", 600, 12, 0, 2, 1, 0, 3, 0, rank, size);
  check_case("tiles (GEMM) d=20", 500, 20, 0, 3, 0, 0, 3, 1, rank, size);
  check_case("fewer rows than ranks", 2, 2, 0, 0.5, 0, 0, 1, 1, rank, size);
  check_errors(rank, size);
  int counts[2] = {check_passed, check_failed}, total[2] = {0, 0};
  MPI_Reduce(counts, total, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("C: %d passed, %d failed\n", total[0], total[1]);
  MPI_Finalize();
  return rank == 0 && total[1] ? 1 : 0;
}
