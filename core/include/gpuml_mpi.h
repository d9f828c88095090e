/*
 * gpuml_mpi.h — SPMD entry points over MPI: every rank of a communicator calls them with
 * its own block of rows, as a job started by `mpirun -np N` does. Built into
 * libgpuml_mpi when configure finds MPI (Open MPI from Debian's libopenmpi-dev); each
 * rank runs on the backend its options name (a rank per GPU: set opt->device from the
 * rank's local number).
 *
 * The global data are the ranks' blocks one after another in rank order: row i of rank r
 * is global row offset_r + i, offset_r the rows of the ranks before it. Results equal
 * those of one process on the whole data (the lists are merged by (distance, index), the
 * order of every backend's final lists).
 */
#ifndef GPUML_MPI_H
#define GPUML_MPI_H

#include <mpi.h>
#include "gpuml.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Exact kNN across the ranks of comm (double precision).
 *   data: this rank's n_local x d rows (n_local may be 0); d the same on every rank.
 *   query: m x d queries, the same on every rank; then index and dist (m x k, global
 *     0-based indices) receive the neighbours among all ranks' rows, on every rank.
 *   query NULL: the data against itself; then index and dist are n_local x k and give the
 *     neighbours of this rank's rows among all ranks' rows, each row excluded by index.
 *     The blocks travel around a ring of the ranks (one block per rank in memory at once).
 * Errors as gpuml_knn_search (k against the global row count), "mpi:mismatch" when the
 * ranks disagree on d, k, m or the form of the call, "mpi:error" when MPI fails. Every
 * rank gets the same status.
 */
gpuml_status gpuml_mpi_knn_search(MPI_Comm comm, const double *data, int64_t n_local, int64_t d,
                                  const double *query, int64_t m, int64_t k, int64_t *index,
                                  double *dist, const gpuml_options *opt,
                                  gpuml_knn_result *result);

#ifdef __cplusplus
}
#endif

#endif
