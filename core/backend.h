/* The one interface between the algorithm drivers of core/ and the backends: the CPU
 * (core/cpu/) and CUDA (kernels/). A backend is a table of operations, one group per
 * algorithm; a driver resolves the backend once per call (gm_backend_resolve) and then
 * calls only through the table, so no driver knows which backends were compiled in.
 * core/backend.c registers the tables: the only place that asks whether CUDA was built.
 *
 * Every operation takes arguments already checked by the driver (finite data, sizes,
 * k in range; for kNN the finiteness may be left to the backend's staging:
 * gm_neighbour_ops.checks_staged_values), reports failures through gm_fail() and frees
 * what it allocated on every path. A NULL group means the backend has no implementation
 * of that algorithm. */
#ifndef GPUML_BACKEND_H
#define GPUML_BACKEND_H

#include <stdint.h>
#include "internal.h"
#include "dpc.h"
#include "gmm.h"
#include "tsne.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Distances and kNN. Outputs are in the dtype of the input. */
typedef struct gm_neighbour_ops {
  /* out (rows(x) x rows(y), or rows(x) x rows(x) when y is NULL: x against itself,
   * exactly symmetric with a zero diagonal), as gpuml_dist_compute() defines it. */
  gpuml_status (*dist)(const gm_matrix *x, const gm_matrix *y, int squared, void *out,
                       const gpuml_options *opt);
  /* index and dist (rows(query) x k; query NULL: the data against itself, self
   * excluded by index), as gpuml_knn_search() defines them; *rechecked (may be NULL):
   * the queries searched again in fp64 (gpuml_knn_result.rechecked). */
  gpuml_status (*knn)(const gm_matrix *data, const gm_matrix *query, int64_t k,
                      int64_t *index, void *dist, const gpuml_options *opt,
                      int64_t *rechecked);
  /* The kNN index (gpuml_knn_index_build): a resident copy of data for repeated
   * searches, or NULL where the backend searches the host copy each time (the CPU).
   * *state is what resident_knn and resident_free take, *bytes the device memory held. */
  gpuml_status (*resident_build)(const gm_matrix *data, const gpuml_options *opt,
                                 void **state, size_t *bytes);
  /* knn() on the data of resident_build, `data` being the same host matrix. */
  gpuml_status (*resident_knn)(const void *state, const gm_matrix *data,
                               const gm_matrix *query, int64_t k, int64_t *index, void *dist,
                               const gpuml_options *opt, int64_t *rechecked);
  void (*resident_free)(void *state);
  /* Nonzero when knn(), resident_build() and resident_knn() read every value of data and
   * query that they are given from the host (resident_knn: the query; the index's data
   * were read by resident_build) through a copy that checks it (gm_pack_rows, or
   * gm_rows_non_finite before a block goes to the device straight from host memory), and
   * stop with GM_STATUS_NON_FINITE at the first block holding Inf or NaN, before that
   * block reaches the device: values they did not check never reach a result, a kernel
   * or the output. They may then be given values the driver has not scanned; a call
   * that succeeds has seen only finite ones. The kNN driver skips its own scan then
   * (core/knn.c, staged_check) and, after any failure, scans to report the first
   * non-finite value as before. 0: every value is scanned by the driver first. */
  int checks_staged_values;
} gm_neighbour_ops;

/* Density peaks: the passes over pairs. rho_grid and delta_grid are cell indexes (core/dpc.h;
 * d <= GM_DPC_GRID_MAX_DIM), given where core's rule (gm_dpc_rows_fit) puts that pass on
 * one; NULL: all pairs are visited, in tiles. On one device rho may have cells of its own
 * (gm_dpc_cells); the parts of a split fit share one index. */
typedef struct gm_dpc_ops {
  /* rho, and for every point but the top of the density order (gm_dpc_top) the
   * squared distance to its nearest denser point and that point's index; rho on the
   * index when rho_grid is given, delta when delta_grid is (the same index). rho sums
   * over the other points with s < cut: 1 each, or exp(-s / dc^2) when gaussian (cut
   * INFINITY: the exact sum, on the tiles; finite: the truncated sum, on either). When
   * order is not NULL it receives the density order of that rho (gm_dpc_density_order's,
   * made where rho lies: on the device for a GPU). When kept is not NULL, a backend whose
   * passes run on a device may leave there, in *kept, what the fit's cut and halo read
   * again (its index of delta_grid with the sorted points, rho, the nearest denser points
   * with -1 at the top, the density order), for assign and border to take instead of
   * copying it up again; *kept stays NULL where it keeps nothing. release_kept frees it
   * (outside any other call of the backend). */
  gpuml_status (*density)(const double *x, int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                          const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                          double *rho, double *delta_sq, int64_t *nearest, int64_t *order,
                          void **kept, const gpuml_options *opt);
  void (*release_kept)(void *kept);
  /* The same passes one part at a time, for work split over devices or processes
   * (core/dpc_shards.c), in a session that holds what the parts of one device share (the
   * points, the cell index or the points resident for the tiles, the passes' arrays), so
   * that the points go to the device and the index is built once for the rho parts and
   * the delta parts. part_open takes density()'s arguments but its outputs (x and the
   * grids outlive the session) and opens it on opt->device; the later calls take their
   * callbacks and threads from their options, their device from the session. Any thread
   * may make the calls of a session, one at a time, and close it (outside any other call
   * of the backend).
   * part_rho and part_delta each write only the entries of their part's points, by
   * original index, into arrays of all n points. A part is cells first .. last - 1 of the
   * index for rho on it (rho_grid given), sorted positions first .. last - 1 of the index
   * for delta on it (delta_grid given), else rows first .. last - 1. Each point's values
   * are those of density(), bit for bit (the same walk over its cell or its row of
   * tiles). part_delta takes rho of all points, the same in every part_delta of a session
   * (which may keep it from the first), and leaves `top` untouched. */
  gpuml_status (*part_open)(const double *x, int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                            const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                            const gpuml_options *opt, void **session);
  /* The rho parts' bounds (parts + 1 cells: gm_dpc_part_ends over the squared counts of
   * the cells of the session's rho index), for a backend that sorts the points itself
   * (sorts_index), whose grids hold no start[]; NULL for one whose grids do. */
  gpuml_status (*part_bounds)(void *session, int parts, int64_t *bounds,
                              const gpuml_options *opt);
  gpuml_status (*part_rho)(void *session, int64_t first, int64_t last, double *rho,
                           const gpuml_options *opt);
  /* The cutoff count over parts from both sides of each pair (the GPU's symmetric count),
   * NULL where there is none. part_counts_on: 1 where the session counts so (the same
   * answer for every session of the same points and cut), else 0 and part_rho for every
   * part. part_counts then tests each crossed pair of cells once, from the lower cell, for
   * the cells first .. last - 1 against their own and the later cells, and counts each
   * pair inside for both points (every point counts itself once, in the part of its
   * cell); with counts (by original index, all n points) it writes there what the session
   * counted since the last such call, with NULL it keeps that for the next. Over all
   * parts, rho = the sum of what was written - 1, bit for bit density()'s. */
  int (*part_counts_on)(void *session, const gpuml_options *opt);
  gpuml_status (*part_counts)(void *session, int64_t first, int64_t last, uint32_t *counts,
                              const gpuml_options *opt);
  gpuml_status (*part_delta)(void *session, const double *rho, int64_t top, int64_t first,
                             int64_t last, double *delta_sq, int64_t *nearest,
                             const gpuml_options *opt);
  /* The density order (gm_dpc_density_order's) of the rho of all points that the
   * session's part_delta took, made where the session holds it; NULL for a backend that
   * leaves the order to the host. */
  gpuml_status (*part_order)(void *session, int64_t *order, const gpuml_options *opt);
  void (*part_close)(void *session);
  /* cluster_border[c] (c < ncentres) = the largest (rho_i + rho_j) / 2 over the pairs of
   * a point i of cluster c and a point j of another cluster with s_ij < cut, 0 when there
   * is none; on the index (grid with its runs, or NULL for the tiles). kept: density()'s
   * of the same fit, or NULL (the backend then takes rho, cluster and the index as given;
   * with it, the same values on the device). */
  gpuml_status (*border)(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                         double cut, const double *rho, const int64_t *cluster,
                         int64_t ncentres, void *kept, double *cluster_border,
                         const gpuml_options *opt);
  /* 1: the backend sorts the points by cell itself (on the device), so the grids it gets
   * hold the geometry only (gm_dpc_grid_plan; no arrays, no runs). */
  int sorts_index;
  /* The most cells per point of the cutoff density's own index (gm_dpc_cells SEEN) where
   * the data are clustered: more, smaller cells test fewer points but walk more rows and
   * take more memory, and each backend's count has its own balance (bench/RESULTS.md
   * round 15). */
  double cells_per_point;
  /* The clusters of a cut, as core's walk in the density order gives them (each point
   * the cluster of its nearest denser point, centres[c] cluster c), from a fit's own
   * order (a permutation): cluster by point index. *done = 0 where the backend leaves
   * it to the host (too few points to pay for the copies); *bad = n when every point
   * got one, else a position whose nearest is not earlier in the order (the host then
   * walks again and names the error). NULL: always the host. kept: density()'s of the
   * fit whose order and nearest these are, or NULL; with it, the backend reads them where
   * it kept them and keeps the clusters there too, for border. */
  gpuml_status (*assign)(const int64_t *order, const int64_t *nearest, int64_t n,
                         const int64_t *centres, int64_t k, int64_t *cluster, int *done,
                         int64_t *bad, void *kept, const gpuml_options *opt);
  /* The points in a typical point's cell that the cutoff density's own index aims at in
   * d dimensions, where the backend's count has its own balance (rows walked against
   * points tested); 0 or NULL: gm_dpc_grid_per_cell's. */
  double (*rho_per_cell)(int64_t d);
} gm_dpc_ops;

/* t-SNE. */
typedef struct gm_tsne_ops {
  /* Conditional affinities: dist (n x k, column-major) are the distances to each
   * point's k nearest neighbours; p (n x k, column-major) receives p_{j|i}
   * (gm_tsne_bisect_point), entropy (n, may be NULL) the entropies. */
  gpuml_status (*conditional)(const double *dist, int64_t n, int64_t k, double perplexity,
                              double *p, double *entropy, const gpuml_options *opt);
  /* The symmetric P of the perplexities' mean conditional affinities over each point's k
   * neighbours (idx, dist: n x k, column-major): see gm_tsne_affinities_multiscale(). */
  gpuml_status (*affinities)(const int64_t *idx, const double *dist, int64_t n, int64_t k,
                             const double *perplexities, int64_t scales, gm_csr *P,
                             double *entropy, const gpuml_options *opt);
  /* The first ncomp principal component scores (n x ncomp) of x, before
   * gm_tsne_sign_fix(). */
  gpuml_status (*pca)(const double *x, int64_t n, int64_t d, int64_t ncomp, double *scores,
                      const gpuml_options *opt);
  /* The optimiser: y (n x dims) holds the initial embedding and receives the result. */
  gpuml_status (*optimize)(const gm_csr *P, const gm_tsne_run *run, double *y,
                           double *itercosts, gpuml_tsne_result *result,
                           const gpuml_options *opt);
  /* One gradient evaluation as the optimiser does it (see gm_tsne_gradient_cpu()). */
  gpuml_status (*gradient)(const gm_csr *P, const double *y, int64_t n, int dims,
                           gpuml_tsne_method method, int boxes, double exaggeration,
                           double df, double *grad, double *z, const gpuml_options *opt);
  /* method = auto: the most points (embedding of `dims` dimensions, kernel of df degrees
   * of freedom) for which the exact repulsion is the faster on this backend and machine. */
  int64_t (*exact_max_n)(int dims, double df);
  /* New points placed into a fixed embedding (see gm_tsne_place_cpu()). */
  gpuml_status (*place)(const gm_csr *P, const gm_tsne_place_run *run, double *y,
                        const gpuml_options *opt);
  /* The fit's P from the data x (n x d) without a round trip through the host: the
   * self-search for k neighbours as knn() does it (Euclidean; split by query blocks over
   * opt's devices or shards, the lists gathered on the first device), then P as
   * affinities() builds it from those lists, kept in the first device's memory for
   * optimize() (P->resident, n and nnz set). Where that memory is too small, P comes
   * back on the host as affinities() gives it. NULL: the core searches, then calls
   * affinities() (the CPU, where the lists and P are in host memory anyway). */
  gpuml_status (*fit_affinities)(const double *x, int64_t n, int64_t d, int64_t k,
                                 const double *perplexities, int64_t scales, gm_csr *P,
                                 const gpuml_options *opt);
  /* Copies a resident P (fit_affinities) into newly allocated P->row, col, val (the
   * tests compare it with the CPU's); NULL with fit_affinities. */
  gpuml_status (*resident_to_host)(gm_csr *P, const gpuml_options *opt);
} gm_tsne_ops;

/* Gaussian mixtures: an engine (core/gmm.h) opened on the data. */
typedef struct gm_gmm_backend {
  gpuml_status (*open)(const gm_gmm_data *data, void **engine);
  const gm_gmm_ops *ops;
} gm_gmm_backend;

typedef struct gm_backend {
  gpuml_backend id;
  const char *name;
  /* How it was built: the device code it holds ("sm_75 sm_80 ... compute_90"), the
   * runtime version it was built against; NULL and 0 for the CPU. */
  const char *architectures;
  int runtime_built;
  /* Fills this backend's fields of *info; returns the number of usable devices (the
   * CPU: 1), 0 with info->cuda_message saying why. */
  int (*probe)(gpuml_info *info);
  /* Releases what the backend keeps across calls for one device (device >= 0) or all
   * (device < 0); may be NULL. */
  void (*release)(int device);
  const gm_neighbour_ops *neighbours;
  const gm_dpc_ops *dpc;
  const gm_tsne_ops *tsne;
  const gm_gmm_backend *gmm;
} gm_backend;

/* The tables (core/cpu/backend_cpu.c, kernels/backend_cuda.cu). */
extern const gm_backend gm_cpu_backend;
extern const gm_backend gm_cuda_backend;

/* The registered table of a backend (CPU or CUDA); NULL when it was not built. */
const gm_backend *gm_backend_get(gpuml_backend id);

/* Which algorithm a call runs, to find its group in a table. */
typedef enum {
  GM_ALGO_NEIGHBOURS = 0,
  GM_ALGO_DPC = 1,
  GM_ALGO_TSNE = 2,
  GM_ALGO_GMM = 3
} gm_algo;

/* Resolves opt->backend for a call of `algo` doing about `work` pair-dimension
 * operations: auto takes CUDA when it was built, a device is present, it implements
 * the algorithm and the work is large enough to gain. Errors carry "<id>:noCuda".
 * *used receives a copy of *opt whose backend is the one that runs (CPU or CUDA,
 * never auto): the call passes it on to everything it runs. *backend (may be NULL)
 * receives that backend's table. */
gpuml_status gm_backend_resolve(const gpuml_options *opt, gm_algo algo, double work,
                                const char *id, gpuml_options *used,
                                const gm_backend **backend);

/* The table of the backend that resolved options name (used->backend CPU or CUDA). */
const gm_backend *gm_backend_used(const gpuml_options *used);

/* Fills a result's run information after a call that started at t0 (gm_seconds()) with
 * the resolved options `used` on data of the given type. */
void gm_run_info_fill(gpuml_run_info *run, const gpuml_options *used, gm_dtype dtype, double t0);

#ifdef __cplusplus
}
#endif

#endif
