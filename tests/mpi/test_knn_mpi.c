/* C tests of the MPI entry points (core/mpi/), run as `mpirun -np 3 build/tests/test_knn_mpi`:
 * every rank makes the same global data, keeps its block of rows (uneven, one rank may
 * hold none), and the SPMD search must give what one process gives on the whole data,
 * bit for bit. Rank 0 prints the counts of all ranks. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gpuml_mpi.h"

static double *global_points(int64_t n, int64_t d, int grid) {
  uint64_t s = 4242;
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n * d; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = (double)(s >> 11) / 9007199254740992.0;
    x[i] = grid ? floor(u * 3) : u;
  }
  return x;
}

/* The block of rank r of n rows: sizes r + 1 : ... weighted, the last rank of 3 or more
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

/* Rows [r0, r0 + rn) of the column-major n x d matrix x. */
static double *rows_of(const double *x, int64_t n, int64_t d, int64_t r0, int64_t rn) {
  double *b = malloc(sizeof(double) * (size_t)((rn > 0 ? rn : 1) * d));
  for (int64_t t = 0; t < d; t++) memcpy(b + t * rn, x + t * n + r0, sizeof(double) * (size_t)rn);
  return b;
}

static void check_case(const char *name, int64_t n, int64_t d, int64_t m, int64_t k, int grid,
                       int empty_last, int rank, int size) {
  double *x = global_points(n, d, grid), *q = m ? global_points(m, d, 0) : NULL;
  int64_t r0, rn;
  block_of(n, rank, size, empty_last, &r0, &rn);
  double *mine = rows_of(x, n, d, r0, rn);
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CPU;
  const int64_t rows = q ? m : rn, all_rows = q ? m : n;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)((rows > 0 ? rows : 1) * k));
  double *dist = malloc(sizeof(double) * (size_t)((rows > 0 ? rows : 1) * k));
  int64_t *ridx = malloc(sizeof(int64_t) * (size_t)(all_rows * k));
  double *rdist = malloc(sizeof(double) * (size_t)(all_rows * k));
  gpuml_status st = gpuml_mpi_knn_search(MPI_COMM_WORLD, mine, rn, d, q, m, k, idx, dist, &opt, NULL);
  gpuml_status sr = gpuml_knn_search(x, n, d, q, m, k, ridx, rdist, &opt, NULL);
  CHECK(st == GPUML_OK && sr == GPUML_OK, "%s (rank %d): %s", name, rank, gpuml_last_error());
  if (!st && !sr) {
    int64_t bad = 0;
    for (int64_t j = 0; j < k; j++)
      for (int64_t i = 0; i < rows; i++) {
        const int64_t ri = q ? i : r0 + i;  /* the row of the reference result */
        if (idx[i + j * rows] != ridx[ri + j * all_rows] || dist[i + j * rows] != rdist[ri + j * all_rows])
          bad++;
      }
    CHECK(bad == 0, "%s (rank %d of %d, rows %lld): %lld entries differ from one process", name,
          rank, size, (long long)rn, (long long)bad);
  }
  free(x);
  free(q);
  free(mine);
  free(idx);
  free(dist);
  free(ridx);
  free(rdist);
}

static void check_errors(int rank, int size) {
  double x[6] = {0, 1, 2, 0, 1, 2};
  int64_t idx[8];
  double dist[8];
  gpuml_options opt;
  gpuml_options_init(&opt);
  /* the ranks disagree on k */
  gpuml_status st = gpuml_mpi_knn_search(MPI_COMM_WORLD, x, 3, 2, NULL, 0, rank == 0 ? 1 : 2, idx,
                                         dist, &opt, NULL);
  if (size > 1)
    CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "mpi:mismatch") == 0,
          "k differing between ranks (rank %d): %s", rank, gpuml_last_error());
  else
    CHECK(st == GPUML_OK, "one rank: k = 1 is fine: %s", gpuml_last_error());
  /* k beyond the global rows: the same error on every rank */
  st = gpuml_mpi_knn_search(MPI_COMM_WORLD, x, 3, 2, NULL, 0, 1000, idx, dist, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:badK") == 0,
        "k too large (rank %d): %s", rank, gpuml_last_error());
  /* a NaN on rank 0 only: every rank fails, naming rank 0 */
  double bad[6] = {0, 1, 2, 0, 1, 2};
  if (rank == 0) bad[4] = NAN;
  st = gpuml_mpi_knn_search(MPI_COMM_WORLD, bad, 3, 2, NULL, 0, 1, idx, dist, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:nonFinite") == 0 &&
            (rank == 0 || strstr(gpuml_last_error(), "rank 0") != NULL),
        "a NaN on rank 0 (rank %d): %s", rank, gpuml_last_error());
}

/* gpuml_mpi_rows: the sum of the ranks' rows; ranks that disagree on d all fail. */
static void check_rows(int rank, int size) {
  int64_t total = -1;
  gpuml_status st = gpuml_mpi_rows(MPI_COMM_WORLD, rank + 1, 4, &total);
  CHECK(st == GPUML_OK && total == (int64_t)size * (size + 1) / 2, "rows: %lld (%s)",
        (long long)total, gpuml_last_error());
  st = gpuml_mpi_rows(MPI_COMM_WORLD, 3, rank == size - 1 ? 5 : 4, &total);
  CHECK(size == 1 || (st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "mpi:mismatch") == 0),
        "rows with columns that disagree: %s", gpuml_last_error());
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check_case("self d=8 k=5", 700, 8, 0, 5, 0, 0, rank, size);
  check_case("self, grid ties and duplicates, k=20", 500, 2, 0, 20, 1, 0, rank, size);
  check_case("self, the last rank empty", 400, 5, 0, 7, 0, 1, rank, size);
  check_case("self k = n - 1", 60, 3, 0, 59, 1, 0, rank, size);
  check_case("queries d=20 k=9", 900, 20, 150, 9, 0, 0, rank, size);
  check_case("queries, the last rank empty, k beyond a block", 300, 4, 40, 120, 0, 1, rank, size);
  check_errors(rank, size);
  check_rows(rank, size);
  int counts[2] = {check_passed, check_failed}, total[2] = {0, 0};
  MPI_Reduce(counts, total, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("C: %d passed, %d failed\n", total[0], total[1]);
  MPI_Finalize();
  return rank == 0 && total[1] ? 1 : 0;
}
