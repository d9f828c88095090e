/* MPI started and ended for a front end (gpuml_mpi_start, gpuml_mpi_end). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include "gpuml_mpi.h"
#include "ranks.h"

static int started_here; /* MPI_Init was called by gpuml_mpi_start */

/* Open MPI's plugins need libmpi's symbols: load it again, globally (it is loaded). */
static void make_libmpi_global(void) {
  Dl_info info;
  if (dladdr((void *)&MPI_Init, &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

gpuml_status gpuml_mpi_start(int *rank, int *size, int *started) {
  gm_clear_error();
  if (started) *started = 0;
  int up = 0, down = 0;
  MPI_Finalized(&down);
  if (down)
    return gm_fail(GPUML_ERR_ARG, "mpi:finalized",
                   "MPI has been finalised in this session (gpu_mpi_finalize()): it cannot "
                   "start again");
  MPI_Initialized(&up);
  if (!up) {
    make_libmpi_global();
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return gm_mpi_failed("MPI_Init");
    started_here = 1;
    if (started) *started = 1;
  }
  if (rank && MPI_Comm_rank(MPI_COMM_WORLD, rank) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Comm_rank");
  if (size && MPI_Comm_size(MPI_COMM_WORLD, size) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Comm_size");
  return GPUML_OK;
}

int gpuml_mpi_end(void) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (!started_here || !up || down) return 0;
  MPI_Finalize();
  return 1;
}
