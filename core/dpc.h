/* Density peaks internals shared by core/dpc*.c and kernels/dpc.cu: the exact distance
 * thresholds, the spatial grid, the density order, and the CPU passes over pairs. */
#ifndef GPUML_DPC_H
#define GPUML_DPC_H
#include <stdint.h>
#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The grid serves d <= this many dimensions (the cutoff rho, delta, the halo). */
#define GM_DPC_GRID_MAX_DIM 3
/* Ring bounds are shrunk by this factor, far above the rounding of cell indices and
 * of the squared distances, so that a point outside the rings searched is never
 * nearer than the bound says. */
#define GM_DPC_RING_SLACK 1e-9
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

/* The top of the density order. */
int64_t gm_dpc_top(const double *rho, int64_t n);

/* Points bucketed by cells of side h >= dc: the neighbours within dc of a point lie
 * in the 3^dim cells around its own. Cell ids are row-major with dimension 0 fastest,
 * so the cells (c0 - 1 .. c0 + 1, c1, c2) hold one contiguous run of sorted points. */
typedef struct gm_dpc_grid {
  int dim;
  int64_t n;
  double lo[GM_DPC_GRID_MAX_DIM], h, inv_h;
  int64_t cells[GM_DPC_GRID_MAX_DIM];
  int64_t ncells;
  int64_t max_cells;  /* the largest of cells[] (the last useful ring) */
  int64_t *start;     /* ncells + 1: points of cell c are sorted positions start[c] .. start[c+1]-1 */
  int64_t *cell;      /* n: the cell of each sorted position */
  int64_t *order;     /* n: the original index of each sorted position */
  double *coords;     /* dim x n: coordinate t of sorted position s at coords[t * n + s] */
} gm_dpc_grid;

int gm_dpc_grid_usable(int64_t d);
/* Builds the grid for x (n x d, d <= GM_DPC_GRID_MAX_DIM). For the cutoff density and
 * the halo, min_side = dc: cells of side >= dc, as small as the cell budget (2n + 64)
 * allows. For delta, min_side = 0: cells sized to hold about two points each on
 * average over the bounding box, so that the ring search looks at few points. */
gpuml_status gm_dpc_grid_build(const double *x, int64_t n, int64_t d, double min_side,
                               gm_dpc_grid *g);
void gm_dpc_grid_free(gm_dpc_grid *g);

/* ---- CPU passes (core/dpc_grid.c, core/dpc_tiles.c). Each writes per original index;
 *      delta_sq/nearest are left untouched for `top`. ---- */

/* rho by the cutoff kernel (cut = gm_dpc_sq_threshold(dc, 1)) on the grid. */
gpuml_status gm_dpc_grid_rho(const gm_dpc_grid *g, double cut, double *rho,
                             const gpuml_options *opt);
/* Squared distance to and index of the nearest point above each point, by rings of
 * cells. */
gpuml_status gm_dpc_grid_delta(const gm_dpc_grid *g, const double *rho, int64_t top,
                               double *delta_sq, int64_t *nearest, const gpuml_options *opt);
/* The largest (rho_i + rho_j) / 2 over the j of other clusters with s_ij < cut. */
gpuml_status gm_dpc_grid_border(const gm_dpc_grid *g, double cut, const double *rho,
                                const int64_t *cluster, double *border,
                                const gpuml_options *opt);

/* out[a + b * an] = gm_sqdist() of the points a0 + a and b0 + b of x (n x d): the
 * direct tile, vectorised over a. */
void gm_dpc_direct_tile(const double *x, int64_t n, int64_t d, int64_t a0, int64_t an,
                        int64_t b0, int64_t bn, double *out);

/* The same by distance tiles over all pairs (any d; either kernel for rho). */
gpuml_status gm_dpc_tiles_rho(const double *x, int64_t n, int64_t d, int gaussian, double dc,
                              double cut, double *rho, const gpuml_options *opt);
gpuml_status gm_dpc_tiles_delta(const double *x, int64_t n, int64_t d, const double *rho,
                                int64_t top, double *delta_sq, int64_t *nearest,
                                const gpuml_options *opt);
gpuml_status gm_dpc_tiles_border(const double *x, int64_t n, int64_t d, double cut,
                                 const double *rho, const int64_t *cluster, double *border,
                                 const gpuml_options *opt);

#ifdef __cplusplus
}
#endif

#endif
