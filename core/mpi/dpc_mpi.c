/* gpuml_mpi_dpc_fit(): density peaks across the ranks of an MPI communicator
 * (core/include/gpuml_mpi.h). The ranks' rows are gathered on every rank; each rank then
 * computes its part of the rho pass and of the delta pass (core/dpc_shards.c, the parts
 * the devices of one process take), the parts meet on every rank, and every rank goes on
 * from the same densities to the same centres, clusters and halo. The answer is one
 * process's, bit for bit. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include "dpc.h"
#include "gpuml_mpi.h"
#include "ranks.h"

/* The spread's context: the communicator, and how many merges this rank has taken part
 * in (gm_dpc_spread_density merges twice when all goes well; a rank that failed before
 * catches up with failing statuses, so that every rank calls the same collectives). */
typedef struct {
  MPI_Comm comm;
  int rank, size;
  int merges;
} spread_ctx;

enum { MERGES = 2 };

/* Every entry from the rank that computed it: the others hold 0 (values >= 0) and -1
 * (indices), so the maximum is that rank's value, in any order of the reduction. */
static gpuml_status merge_parts(void *vctx, gpuml_status st, double *values, int64_t *index,
                                int64_t n) {
  spread_ctx *c = vctx;
  c->merges++;
  if ((st = gm_mpi_agree(c->comm, c->rank, c->size, st))) return st;
  if (MPI_Allreduce(MPI_IN_PLACE, values, (int)n, MPI_DOUBLE, MPI_MAX, c->comm) != MPI_SUCCESS ||
      (index && MPI_Allreduce(MPI_IN_PLACE, index, (int)n, MPI_INT64_T, MPI_MAX, c->comm) !=
                    MPI_SUCCESS))
    return gm_mpi_failed("MPI_Allreduce");
  return GPUML_OK;
}

/* The global column-major n x d matrix from the ranks' blocks, column by column. */
static gpuml_status gather_rows(MPI_Comm comm, const double *x, int64_t n_local, int64_t d,
                                const int *counts, const int *displs, int64_t n, double *all) {
  for (int64_t t = 0; t < d; t++)
    if (MPI_Allgatherv(n_local > 0 ? x + t * n_local : all, (int)n_local, MPI_DOUBLE,
                       all + t * n, counts, displs, MPI_DOUBLE, comm) != MPI_SUCCESS)
      return gm_mpi_failed("MPI_Allgatherv");
  return GPUML_OK;
}

gpuml_status gpuml_mpi_dpc_fit(MPI_Comm comm, const double *x, int64_t n_local, int64_t d,
                               const gpuml_dpc_params *params, double *rho, double *delta,
                               int64_t *nearest, double *gamma, int64_t *centres,
                               int64_t *ncentres, int64_t *cluster, int *halo,
                               const gpuml_options *opt, gpuml_dpc_result *result) {
  gm_clear_error();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "MPI is not initialised: call MPI_Init first");
  spread_ctx sc = {comm, 0, 1, 0};
  if (MPI_Comm_rank(comm, &sc.rank) != MPI_SUCCESS || MPI_Comm_size(comm, &sc.size) != MPI_SUCCESS)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "not a valid communicator");
  const double t0 = gm_seconds();
  /* the shape of the call, the same on every rank */
  const gpuml_dpc_selection *sel = params ? &params->select : NULL;
  const int cut = sel && (sel->has_k || sel->has_rho || sel->has_delta);
  int64_t mine[3] = {d, params ? 1 : 0, cut}, lo[3], hi[3];
  if (MPI_Allreduce(mine, lo, 3, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS ||
      MPI_Allreduce(mine, hi, 3, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allreduce");
  if (memcmp(lo, hi, sizeof lo) != 0)
    return gm_fail(GPUML_ERR_ARG, "mpi:mismatch",
                   "the ranks disagree on the number of columns or on whether centres are "
                   "chosen: every rank passes the same");
  /* local checks, then agreement: an error on any rank is an error on all */
  gpuml_status st = GPUML_OK;
  if (!params) st = gm_fail(GPUML_ERR_ARG, "dpc:badArgument", "params must not be NULL");
  if (!st && n_local < 0)
    st = gm_fail(GPUML_ERR_ARG, "dpc:badData", "n_local = %lld is negative", (long long)n_local);
  if (!st && n_local > 0) st = gm_check_matrix(x, n_local, d, "x", "dpc");
  if (!st && n_local > 0 && (!rho || !delta || !nearest))
    st = gm_fail(GPUML_ERR_ARG, "dpc:badOutput",
                 "the output arrays rho, delta and nearest must not be NULL");
  if (!st && cut && (!centres || !ncentres || (n_local > 0 && (!cluster || !halo))))
    st = gm_fail(GPUML_ERR_ARG, "dpc:badOutput",
                 "with a selection, the outputs centres, ncentres, cluster and halo must not be NULL");
  if (!st) st = gm_check_options(opt);
  if ((st = gm_mpi_agree(comm, sc.rank, sc.size, st))) return st;
  if (ncentres) *ncentres = 0;

  /* the rows of every rank, in rank order */
  int64_t *rows = gm_alloc((size_t)sc.size, sizeof *rows);
  int *counts = gm_alloc((size_t)sc.size, sizeof *counts),
      *displs = gm_alloc((size_t)sc.size, sizeof *displs);
  double *all = NULL, *a_rho = NULL, *a_delta = NULL, *a_gamma = NULL;
  int64_t *a_nearest = NULL, *a_centres = NULL, *a_cluster = NULL;
  int *a_halo = NULL;
  int64_t n = 0, offset = 0;
  if (!rows || !counts || !displs)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the ranks' rows");
  if ((st = gm_mpi_agree(comm, sc.rank, sc.size, st))) goto done;
  if (MPI_Allgather(&n_local, 1, MPI_INT64_T, rows, 1, MPI_INT64_T, comm) != MPI_SUCCESS) {
    st = gm_mpi_failed("MPI_Allgather");
    goto done;
  }
  for (int r = 0; r < sc.size; r++) {
    if (r == sc.rank) offset = n;
    n += rows[r];
  }
  /* the same on every rank: the gathers count rows in int */
  if (n > INT_MAX) {
    st = gm_fail(GPUML_ERR_ARG, "dpc:tooLarge",
                 "%lld rows over the ranks: density peaks over MPI takes at most %d rows",
                 (long long)n, INT_MAX);
    goto done;
  }
  for (int r = 0; r < sc.size; r++) {
    counts[r] = (int)rows[r];
    displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
  }
  /* every rank holds all the points and every output for all of them */
  const size_t len = n > 0 ? (size_t)n : 1;
  all = gm_alloc(len * (size_t)(d > 0 ? d : 1), sizeof *all);
  a_rho = gm_alloc(len, sizeof *a_rho);
  a_delta = gm_alloc(len, sizeof *a_delta);
  a_gamma = gm_alloc(len, sizeof *a_gamma);
  a_nearest = gm_alloc(len, sizeof *a_nearest);
  if (cut) {
    a_centres = gm_alloc(len, sizeof *a_centres);
    a_cluster = gm_alloc(len, sizeof *a_cluster);
    a_halo = gm_alloc(len, sizeof *a_halo);
  }
  if (!all || !a_rho || !a_delta || !a_gamma || !a_nearest ||
      (cut && (!a_centres || !a_cluster || !a_halo)))
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory",
                 "cannot allocate %.1f MB for the points of all ranks and their outputs",
                 (double)len * (double)(d + 8) * 8 / 1e6);
  if ((st = gm_mpi_agree(comm, sc.rank, sc.size, st))) goto done;
  if ((st = gather_rows(comm, x, n_local, d, counts, displs, n, all))) goto done;

  /* rank 0's seed (the dc estimate's sample) on every rank; no interrupt (a rank cannot
   * stop alone) */
  gpuml_options local;
  if (opt) local = *opt;
  else gpuml_options_init(&local);
  if (MPI_Bcast(&local.seed, 1, MPI_UINT64_T, 0, comm) != MPI_SUCCESS) {
    st = gm_mpi_failed("MPI_Bcast");
    goto done;
  }
  local.interrupted = NULL;
  gm_dpc_spread spread = {sc.rank, sc.size, &sc, merge_parts};
  st = gm_dpc_fit_spread(&spread, all, n, d, params, a_rho, a_delta, a_nearest, a_gamma, NULL,
                         a_centres, ncentres, a_cluster, a_halo, &local, result);
  /* a rank that failed before a merge still takes part in it, failing */
  while (sc.merges < MERGES) {
    const gpuml_status mine_st = st ? st : gm_fail(GPUML_ERR_NUMERIC, "dpc:internal", "a merge of the parts was skipped");
    merge_parts(&sc, mine_st, NULL, NULL, 0);
    if (!st) st = mine_st;
  }
  if ((st = gm_mpi_agree(comm, sc.rank, sc.size, st))) goto done;
  /* this rank's rows */
  if (n_local > 0) {
    memcpy(rho, a_rho + offset, sizeof *rho * (size_t)n_local);
    memcpy(delta, a_delta + offset, sizeof *delta * (size_t)n_local);
    memcpy(nearest, a_nearest + offset, sizeof *nearest * (size_t)n_local);
    if (gamma) memcpy(gamma, a_gamma + offset, sizeof *gamma * (size_t)n_local);
    if (cut) {
      memcpy(cluster, a_cluster + offset, sizeof *cluster * (size_t)n_local);
      memcpy(halo, a_halo + offset, sizeof *halo * (size_t)n_local);
    }
  }
  if (cut) memcpy(centres, a_centres, sizeof *centres * (size_t)*ncentres);
  if (result) result->run.seconds = gm_seconds() - t0;
done:
  if (st && ncentres) *ncentres = 0;
  free(rows);
  free(counts);
  free(displs);
  free(all);
  free(a_rho);
  free(a_delta);
  free(a_gamma);
  free(a_nearest);
  free(a_centres);
  free(a_cluster);
  free(a_halo);
  return st;
}

gpuml_status gpuml_mpi_dpc_fit_comm(void *comm, const double *x, int64_t n_local, int64_t d,
                                    const gpuml_dpc_params *params, double *rho, double *delta,
                                    int64_t *nearest, double *gamma, int64_t *centres,
                                    int64_t *ncentres, int64_t *cluster, int *halo,
                                    const gpuml_options *opt, gpuml_dpc_result *result) {
  return gpuml_mpi_dpc_fit(*(MPI_Comm *)comm, x, n_local, d, params, rho, delta, nearest, gamma,
                           centres, ncentres, cluster, halo, opt, result);
}
