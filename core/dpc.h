/* Density peaks internals shared by core/dpc*.c and kernels/dpc.cu: the exact distance
 * thresholds, the cell index, the density order, and the CPU passes over pairs. */
#ifndef GPUML_DPC_H
#define GPUML_DPC_H
#include <stdint.h>
#include "internal.h"
#include "dpc_shared.h"

#ifdef __cplusplus
extern "C" {
#endif

/* In the GEMM form, a screened squared distance s may differ from the exact one by up
 * to GM_DPC_SCREEN_SLACK * (d + 4) * (|a|^2 + |b|^2) (centred points): within that of a
 * threshold or a best value, the pair is recomputed exactly. */
#define GM_DPC_SCREEN_SLACK 1e-15

/* The smallest double T > 0 such that sqrt(s) < dc (strict) or sqrt(s) <= dc (not
 * strict) holds exactly when s < T, for every squared distance s >= 0. sqrt is
 * correctly rounded and monotone on both backends, so deciding "d < dc" as "s < T"
 * gives the same answers as comparing the rounded distance itself. */
double gm_dpc_sq_threshold(double dc, int strict);

/* j is above i in the density order: denser, or as dense with a smaller index. */
static inline int gm_dpc_above(double rho_j, int64_t j, double rho_i, int64_t i) {
  return rho_j > rho_i || (rho_j == rho_i && j < i);
}

/* The top of the density order (the first index of the largest rho), on `threads`. */
int64_t gm_dpc_top(const double *rho, int64_t n, int threads);

/* The density order of rho (gpuml_dpc_order's, unchecked) on `threads`: point indices
 * from the densest down, equal densities by index. */
gpuml_status gm_dpc_density_order(const double *rho, int64_t n, int64_t *order, int threads);

/* The cell index of density peaks (d <= GM_DPC_GRID_MAX_DIM): the points sorted by
 * cell, cells of side h holding about gm_dpc_grid_per_cell(d) points each (see
 * gm_dpc_cells). Cell ids are row-major with dimension 0 fastest (see
 * gm_dpc_geom), so a row of cells along dimension 0 is one contiguous run of sorted
 * points, and start[] doubles as the prefix count of points by cell. */
typedef struct gm_dpc_grid {
  gm_dpc_geom geom;
  int64_t n;
  int64_t ncells;
  int64_t *start;     /* ncells + 1: points of cell c are sorted positions start[c] .. start[c+1]-1 */
  int64_t *cell;      /* n: the cell of each sorted position */
  int64_t *order;     /* n: the original index of each sorted position */
  double *coords;     /* dim x n: coordinate t of sorted position s at coords[t * n + s] */
  /* The halo's runs (gm_dpc_grid_runs; NULL until then): from cell c onwards in id order,
   * cells c .. run_end[c] are empty or hold only cluster run_label[c] (GM_DPC_MIXED: c
   * alone, holding several clusters; GM_DPC_EMPTY: all empty to the last cell), and
   * run_max[c] is the largest rho among their points. */
  int64_t *run_label, *run_end;
  double *run_max;
  int64_t nclusters; /* the largest cluster id + 1 */
  int threads;       /* the OpenMP threads of its host loops (the options') */
  double range[GM_DPC_GRID_MAX_DIM]; /* the points' extent from geom.lo (the box) */
} gm_dpc_grid;

/* Whether the index serves d dimensions, and its mean points per cell there. */
int gm_dpc_grid_usable(int64_t d);
double gm_dpc_grid_per_cell(int64_t d);
/* How the side of the cells is chosen: per_cell points a cell on average over the
 * bounding box (MEAN: the walks of delta and the halo, whose cost grows with the empty
 * cells of sparse regions), or about per_cell points in the cell of a typical point
 * (SEEN: the cutoff density, whose cost grows with the points of the cells its sphere
 * crosses; smaller cells where the data are clustered, at most per_point cells a point:
 * the backend's gm_dpc_ops.cells_per_point; 0 for MEAN). */
typedef enum { GM_DPC_CELLS_MEAN = 0, GM_DPC_CELLS_SEEN = 1 } gm_dpc_cells;
/* The geometry alone (geom, n, ncells, threads; the arrays NULL), for a backend that
 * sorts the points by cell itself (gm_dpc_ops.sorts_index), then the whole index. */
void gm_dpc_grid_plan(const double *x, int64_t n, int64_t d, double per_cell, gm_dpc_cells sizing,
                      double per_point, int threads, gm_dpc_grid *g);
/* Another geometry of box's points (x, n, d and threads as box's) over box's bounds,
 * which are not scanned again. */
void gm_dpc_grid_replan(const double *x, const gm_dpc_grid *box, double per_cell,
                        gm_dpc_cells sizing, double per_point, gm_dpc_grid *g);
gpuml_status gm_dpc_grid_build(const double *x, int64_t n, int64_t d, double per_cell,
                               gm_dpc_cells sizing, double per_point, int threads,
                               gm_dpc_grid *g);
/* The arrays of a planned index: the points of x sorted by its cells. */
gpuml_status gm_dpc_grid_sort(const double *x, gm_dpc_grid *g);
void gm_dpc_grid_free(gm_dpc_grid *g);
/* The rows of cells a point's ball of squared radius cut can touch, at most (the cost of
 * a cutoff count or a halo scan per point on the index, next to n pairs on tiles). */
double gm_dpc_grid_rows(const gm_dpc_grid *g, double cut);
/* The rule of `auto` (core/dpc.c): whether the passes within dc run on the index. */
#define GM_DPC_ROW_COST 16
int gm_dpc_rows_fit(const gm_dpc_grid *g, double cut, int64_t n);
/* The density above which the halo's border pass takes the points first (about 1%), from
 * rho by original index (both backends). */
double gm_dpc_seed_rho(const double *rho, int64_t n);
/* The halo's runs of cells by cluster (run_label, run_end, run_max). */
gpuml_status gm_dpc_grid_runs(gm_dpc_grid *g, const double *rho, const int64_t *cluster);
/* The runs from each cell's label (a cluster, GM_DPC_MIXED or GM_DPC_EMPTY) and densest
 * point (-1 when empty), in place: label and top become run_label and run_max (the maps
 * of core/dpc_shared.h applied from the last cell; the GPU scans them). */
void gm_dpc_grid_merge_runs(int64_t nc, int64_t *label, int64_t *end, double *top);

/* ---- The passes over parts of the points (core/dpc_shards.c): the backend's
 *      density() split into the part_rho and part_delta of its sessions (core/backend.h);
 *      the same answers, bit for bit. ---- */
struct gm_backend;
struct gm_shard_plan;

/* Over the shards of `plan` (several devices, GPUML_SHARDS), in one process. With order
 * (n values) and a backend with part_order, the density order too (*ordered = 1; else 0,
 * and the caller makes it). */
gpuml_status gm_dpc_sharded(const struct gm_backend *b, const struct gm_shard_plan *plan,
                            const double *x, int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                            const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                            double *rho, double *delta_sq, int64_t *nearest, int64_t *order,
                            int *ordered, const gpuml_options *used);

/* Parts spread over processes (the MPI entry point, core/mpi/dpc_mpi.c), each holding all
 * the points and computing one part. */
typedef struct gm_dpc_spread {
  int part, parts; /* this process computes part `part` of `parts` */
  void *ctx;
  /* After every process's part: each entry of values (and of index, when not NULL) from
   * the process whose part holds it, the others holding 0 and -1 there (values are >= 0).
   * st is this process's status, agreed across them first: a failure anywhere is every
   * process's. */
  gpuml_status (*merge)(void *ctx, gpuml_status st, double *values, int64_t *index, int64_t n);
} gm_dpc_spread;

gpuml_status gm_dpc_spread_density(const struct gm_backend *b, const gm_dpc_spread *spread,
                                   const double *x, int64_t n, int64_t d,
                                   const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                   int gaussian, double dc, double cut, double *rho,
                                   double *delta_sq, int64_t *nearest,
                                   const gpuml_options *used);

/* to[rows[k]] = values[k] (and to_index[rows[k]] = indices[k] when indices is not NULL)
 * for k < count but where rows[k] == skip, on `threads` threads: a part's values, copied
 * from a device in the order of its index, put in place on the host. */
void gm_dpc_scatter(const int64_t *rows, int64_t count, int64_t skip, const double *values,
                    double *to, const int64_t *indices, int64_t *to_index, int threads);

/* gpuml_dpc_fit() with the passes spread over processes (spread NULL: gpuml_dpc_fit
 * itself). Every process passes all the points and gets every output for all of them. */
gpuml_status gm_dpc_fit_spread(const gm_dpc_spread *spread, const double *x, int64_t n,
                               int64_t d, const gpuml_dpc_params *params, double *rho,
                               double *delta, int64_t *nearest, double *gamma, int64_t *order,
                               int64_t *centres, int64_t *ncentres, int64_t *cluster, int *halo,
                               const gpuml_options *opt, gpuml_dpc_result *result);

/* out[c] (c < ncentres) = the largest border[i] over the points i of cluster c, 0 for
 * none (border >= 0): a halo's largest border density by cluster, on `threads`. */
void gm_dpc_cluster_max(const double *border, const int64_t *cluster, int64_t n,
                        int64_t ncentres, double *out, int threads);

/* ---- CPU passes (core/dpc_grid.c, core/dpc_tiles.c). Each writes per original index;
 *      delta_sq/nearest are left untouched for `top`. ---- */

/* rho on the grid of the points of cells first_cell .. last_cell - 1 (0 .. ncells: all)
 * over the pairs with s < cut: their count (cut = gm_dpc_sq_threshold(dc, 1)), or with
 * gaussian the sum of their weights exp(-s / dc^2) (the truncated Gaussian: cut from
 * gaussian_cutoff dc). */
gpuml_status gm_dpc_grid_rho(const gm_dpc_grid *g, int gaussian, double dc, double cut,
                             int64_t first_cell, int64_t last_cell, double *rho,
                             const gpuml_options *opt);
/* Squared distance to and index of the nearest point above each point of sorted positions
 * first .. last - 1 (0 .. n: all): rings of cells
 * outwards, skipping rows and cells farther than the best so far and cells with no
 * point as dense, until the rings' distance bound passes the best. */
gpuml_status gm_dpc_grid_delta(const gm_dpc_grid *g, const double *rho, int64_t top,
                               int64_t first, int64_t last, double *delta_sq, int64_t *nearest,
                               const gpuml_options *opt);
/* border[i]: the largest (rho_i + rho_j) / 2 over the j of other clusters with s_ij < cut,
 * or a smaller value (0) where it cannot be its cluster's largest: only each cluster's
 * largest border[i] is exact (all the halo needs; both backends give the same). */
gpuml_status gm_dpc_grid_border(const gm_dpc_grid *g, double cut, const double *rho,
                                const int64_t *cluster, double *border,
                                const gpuml_options *opt);

/* out[a + b * an] = gm_sqdist() of the points a0 + a and b0 + b of x (n x d): the
 * direct tile, vectorised over a. */
void gm_dpc_direct_tile(const double *x, int64_t n, int64_t d, int64_t a0, int64_t an,
                        int64_t b0, int64_t bn, double *out);

/* The same by distance tiles over all pairs (any d; either kernel for rho, the pairs
 * with s < cut: cut INFINITY for the exact Gaussian), for the points first .. last - 1
 * against all n. */
gpuml_status gm_dpc_tiles_rho(const double *x, int64_t n, int64_t d, int gaussian, double dc,
                              double cut, int64_t first, int64_t last, double *rho,
                              const gpuml_options *opt);
gpuml_status gm_dpc_tiles_delta(const double *x, int64_t n, int64_t d, const double *rho,
                                int64_t top, int64_t first, int64_t last, double *delta_sq,
                                int64_t *nearest, const gpuml_options *opt);
gpuml_status gm_dpc_tiles_border(const double *x, int64_t n, int64_t d, double cut,
                                 const double *rho, const int64_t *cluster, double *border,
                                 const gpuml_options *opt);

#ifdef __cplusplus
}
#endif

#endif
