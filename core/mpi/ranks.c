/* Agreement on a status across the ranks (ranks.h). */
#include <stdio.h>
#include <string.h>
#include "ranks.h"

gpuml_status gm_mpi_failed(const char *what) {
  return gm_fail(GPUML_ERR_ARG, "mpi:error", "%s failed", what);
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
