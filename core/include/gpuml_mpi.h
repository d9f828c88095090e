/*
 * gpuml_mpi.h — SPMD entry points over MPI: every rank of a communicator calls them with
 * its own block of rows, as a job started by `mpirun -np N` does. Built into
 * libgpuml_mpi when configure finds MPI (Open MPI from Debian's libopenmpi-dev); each
 * rank runs on the backend and devices its options name (a GPU per rank of a host:
 * gpuml_mpi_options_set_devices with "local", or opt->device from
 * gpuml_mpi_local_device).
 *
 * The global data are the ranks' blocks one after another in rank order: row i of rank r
 * is global row offset_r + i, offset_r the rows of the ranks before it. Results equal
 * those of one process on the whole data (kNN: the lists are merged by (distance, index),
 * the order of every backend's final lists; mixtures: up to the order of the sums;
 * density peaks: bit for bit).
 */
#ifndef GPUML_MPI_H
#define GPUML_MPI_H

#include <mpi.h>
#include "gpuml.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The global row count of a call, for front ends that size their outputs before calling
 * (a collective: every rank of comm calls it): *n_total receives the sum of the ranks'
 * n_local. Errors (every rank gets the same status): "mpi:mismatch" when the ranks
 * disagree on d, "mpi:error" when MPI is not initialised or fails.
 */
gpuml_status gpuml_mpi_rows(MPI_Comm comm, int64_t n_local, int64_t d, int64_t *n_total);

/*
 * As gpuml_mpi_rows, and *offset receives this rank's first global row (0-based): the
 * rows of the ranks before it (a collective, as gpuml_mpi_rows).
 */
gpuml_status gpuml_mpi_block(MPI_Comm comm, int64_t n_local, int64_t d, int64_t *n_total,
                             int64_t *offset);

/*
 * MPI for a front end whose users never call MPI themselves (R, Octave: every rank of
 * `mpirun -np N` runs a script that calls gpuml). gpuml_mpi_start() initialises MPI when
 * nobody has; rank and size (may be NULL) receive this process's place in
 * MPI_COMM_WORLD, *started (may be NULL) 1 when this call initialised MPI, else 0.
 * Open MPI loads its components as plugins that need libmpi's symbols, which a front end
 * loading gpuml as a plugin with local symbols (an R package, a MEX file) would hide:
 * libmpi is made global first. Errors: "mpi:finalized" when MPI has been finalised (it
 * cannot start again in this process), "mpi:error" when MPI_Init fails.
 * gpuml_mpi_end() finalises MPI when gpuml_mpi_start() initialised it and it is still up,
 * and returns 1 then, else 0 (MPI started by someone else is theirs to end); front ends
 * call it at exit.
 */
gpuml_status gpuml_mpi_start(int *rank, int *size, int *started);
int gpuml_mpi_end(void);

/*
 * The GPU of each rank on its host (collectives: every rank of comm calls them).
 * gpuml_mpi_local_rank: *local_rank receives this rank's number among the ranks of comm
 * on its own host (those that share memory with it: MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED), 0, 1, ... in the order of their ranks in comm; *local_size (may
 * be NULL) how many ranks of comm the host runs.
 * gpuml_mpi_local_device: *device receives the local rank modulo the host's CUDA devices
 * (gpuml_backend_info's device_count), 0 when it has none: `mpirun -np 4` on a host of 4
 * GPUs puts every rank on a GPU of its own, 8 ranks two on each.
 * Errors: "mpi:error" when MPI is not initialised or fails.
 */
gpuml_status gpuml_mpi_local_rank(MPI_Comm comm, int *local_rank, int *local_size);
gpuml_status gpuml_mpi_local_device(MPI_Comm comm, int *device);

/*
 * The devices of an MPI call: the rule of the `devices` argument of the front ends' MPI
 * functions, as gpuml_options_set_devices / _word are for the others (a collective: every
 * rank of comm calls it, after setting opt->backend).
 *   word "local" (any case), or no word and no numbers (word NULL, count 0: the default):
 *     opt->device = gpuml_mpi_local_device, no device list; each rank runs on a GPU of
 *     its host, the ranks of a host spread over its GPUs. On the CPU backend (named in
 *     opt) the devices are not counted (that would start CUDA in a job that uses none)
 *     and opt->device is 0; the CPU ignores it.
 *   word "all" (any case): as gpuml_options_set_devices_word, every device of its host,
 *     on every rank.
 *   numbers (word NULL, count >= 1): as gpuml_options_set_devices, the devices listed, on
 *     every rank.
 * Error "badDevice" for another word or a bad list, "mpi:error" when MPI is not
 * initialised or fails; the ranks agree on the status first (a bad value on one rank is
 * the error of every rank, naming it), and opt is unchanged on failure.
 */
gpuml_status gpuml_mpi_options_set_devices(MPI_Comm comm, gpuml_options *opt, const char *word,
                                           const double *ids, int64_t count);

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

/*
 * Gaussian mixtures across the ranks of comm: gpuml_gmm_fit() on the rows of all ranks.
 *   x: this rank's n_local x d rows (n_local >= 1 on every rank); params, opt and d the
 *     same on every rank, and every rank on the same backend.
 *   model and bic: the same on every rank; z (n_local x G), classification and
 *     uncertainty (n_local): this rank's rows.
 * Each rank runs EM on its rows; the M-step statistics of the ranks (sizes, means,
 * scatter about the rank's means) are gathered and combined in rank order
 * (MPI_Allgather, not MPI_Allreduce, whose order of additions is the library's), so that
 * every rank gets the same bits and the same parameters; log-likelihoods are summed in
 * rank order. The starts see the same rows on every rank: the hierarchical start's rows
 * (at most 2,000, chosen from the global row count as gpuml_gmm_fit chooses them; with
 * d = 1 the whole column) and the rows k-means++ draws are gathered from their owners;
 * components that collapse are re-seeded at the worst-fitted rows of all ranks. The fit
 * is then the one-process fit up to the order of the sums (the tests ask for the same
 * model, G and classification and log-likelihoods within 1e-10). The seed is rank 0's
 * opt->seed on every rank (a front end that draws one from each rank's generator still
 * fits one model).
 * The ranks agree on the status after every step one of them could fail alone; the
 * interrupt callback is not polled (a rank cannot stop alone), progress is each rank's.
 * Errors as gpuml_gmm_fit, "mpi:mismatch" when the ranks disagree on d or the parameters'
 * counts, "mpi:error" when MPI fails; every rank gets the same status.
 */
gpuml_status gpuml_mpi_gmm_fit(MPI_Comm comm, const double *x, int64_t n_local, int64_t d,
                               const gpuml_gmm_params *params, gpuml_gmm_model *model,
                               double *z, int64_t *classification, double *uncertainty,
                               double *bic, const gpuml_options *opt,
                               gpuml_gmm_result *result);

/*
 * Density peaks across the ranks of comm: gpuml_dpc_fit() on the rows of all ranks.
 *   x: this rank's n_local x d rows (n_local may be 0 on some ranks); params, opt and d
 *     the same on every rank, and every rank on the same backend.
 *   rho, delta, nearest, gamma (may be NULL), cluster and halo: this rank's n_local rows
 *     (nearest and the clusters' centres as global 0-based indices); centres (room for
 *     the global row count, gpuml_mpi_rows) and ncentres: the same on every rank.
 * The rows are gathered on every rank (each holds all the points, as each device of one
 * process does); the rho pass and then the delta pass are split into as many parts as
 * ranks, rank r computing part r (blocks of cells on the cell index, else blocks of rows,
 * as over several devices: the parts of the passes over shards), and the parts meet on
 * every rank (MPI_Allreduce with MPI_MAX over entries only their own rank set, so in any
 * order). Each point's values come from the same walk as on one device, so rho, delta,
 * nearest, gamma, the centres, clusters and halo are one process's bit for bit. The
 * centres, clusters and halo are then computed on every rank alike (the halo is not
 * split). The dc estimate's sample uses rank 0's opt->seed; the interrupt callback is
 * not polled (a rank cannot stop alone); at most INT_MAX rows over all ranks.
 * Errors as gpuml_dpc_fit, "mpi:mismatch" when the ranks disagree on d or on whether a
 * selection is given, "mpi:error" when MPI fails; every rank gets the same status.
 */
gpuml_status gpuml_mpi_dpc_fit(MPI_Comm comm, const double *x, int64_t n_local, int64_t d,
                               const gpuml_dpc_params *params, double *rho, double *delta,
                               int64_t *nearest, double *gamma, int64_t *centres,
                               int64_t *ncentres, int64_t *cluster, int *halo,
                               const gpuml_options *opt, gpuml_dpc_result *result);

/* gpuml_mpi_gmm_fit and gpuml_mpi_dpc_fit in the form gpuml_gmm_fit_fn and
 * gpuml_dpc_fit_fn (gpuml.h): comm points to the communicator. */
gpuml_status gpuml_mpi_gmm_fit_comm(void *comm, const double *x, int64_t n_local, int64_t d,
                                    const gpuml_gmm_params *params, gpuml_gmm_model *model,
                                    double *z, int64_t *classification, double *uncertainty,
                                    double *bic, const gpuml_options *opt,
                                    gpuml_gmm_result *result);
gpuml_status gpuml_mpi_dpc_fit_comm(void *comm, const double *x, int64_t n_local, int64_t d,
                                    const gpuml_dpc_params *params, double *rho, double *delta,
                                    int64_t *nearest, double *gamma, int64_t *centres,
                                    int64_t *ncentres, int64_t *cluster, int *halo,
                                    const gpuml_options *opt, gpuml_dpc_result *result);

#ifdef __cplusplus
}
#endif

#endif
