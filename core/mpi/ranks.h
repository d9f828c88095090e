/* What the MPI entry points share: agreement on a status across the ranks. */
#ifndef GPUML_MPI_RANKS_H
#define GPUML_MPI_RANKS_H

#include <mpi.h>
#include "internal.h"

/* Every rank gets the status of the lowest failing rank, with its message (a collective:
 * every rank of comm calls it). */
gpuml_status gm_mpi_agree(MPI_Comm comm, int rank, int size, gpuml_status st);

/* An MPI call that failed. */
gpuml_status gm_mpi_failed(const char *what);

#endif
