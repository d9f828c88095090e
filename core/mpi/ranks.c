/* Agreement on a status and on the rows across the ranks (ranks.h, gpuml_mpi_rows,
 * gpuml_mpi_block). */
#include <stdio.h>
#include <string.h>
#include "gpuml_mpi.h"
#include "ranks.h"

gpuml_status gm_mpi_failed(const char *what) {
  return gm_fail(GPUML_ERR_ARG, "mpi:error", "%s failed", what);
}

gpuml_status gpuml_mpi_rows(MPI_Comm comm, int64_t n_local, int64_t d, int64_t *n_total) {
  int64_t offset = 0;
  return gpuml_mpi_block(comm, n_local, d, n_total, &offset);
}

gpuml_status gpuml_mpi_block(MPI_Comm comm, int64_t n_local, int64_t d, int64_t *n_total,
                             int64_t *offset) {
  gm_clear_error();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "MPI is not initialised: call MPI_Init first");
  int64_t mine[2] = {d, -d}, most[2], rows = n_local > 0 ? n_local : 0;
  if (MPI_Allreduce(mine, most, 2, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS ||
      MPI_Allreduce(&rows, n_total, 1, MPI_INT64_T, MPI_SUM, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allreduce");
  int rank = 0;
  *offset = 0;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Exscan(&rows, offset, 1, MPI_INT64_T, MPI_SUM, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Exscan");
  if (rank == 0) *offset = 0; /* MPI_Exscan leaves rank 0's undefined */
  if (most[0] != -most[1])
    return gm_fail(GPUML_ERR_ARG, "mpi:mismatch",
                   "the ranks disagree on the number of columns (from %lld to %lld): every "
                   "rank passes the same", (long long)-most[1], (long long)most[0]);
  return GPUML_OK;
}

gpuml_status gm_mpi_agree(MPI_Comm comm, int rank, int size, gpuml_status st) {
  int failing = st ? rank : size, first = size;
  if (MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allreduce");
  if (first == size) return GPUML_OK;
  struct {
    int status;
    char id[64];
    char message[1024];
  } what;
  memset(&what, 0, sizeof what);
  if (rank == first) {
    what.status = (int)st;
    snprintf(what.id, sizeof what.id, "%s", gpuml_last_error_id());
    snprintf(what.message, sizeof what.message, "%s", gpuml_last_error());
  }
  if (MPI_Bcast(&what, (int)sizeof what, MPI_BYTE, first, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Bcast");
  if (rank == first) return st;
  return gm_fail((gpuml_status)what.status, what.id, "rank %d: %s", first, what.message);
}
