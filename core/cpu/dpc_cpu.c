/* The density peaks passes of the CPU backend: on the grid of cells when the driver
 * built one (d <= GM_DPC_GRID_MAX_DIM, see gm_dpc_rows_fit), else on distance tiles over
 * all pairs. The whole passes are their parts over all points. */
#include "cpu_backend.h"

gpuml_status gm_cpu_dpc_rho(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                            int gaussian, double dc, double cut, int64_t first, int64_t last,
                            double *rho, const gpuml_options *opt) {
  return grid ? gm_dpc_grid_rho(grid, gaussian, dc, cut, first, last, rho, opt)
              : gm_dpc_tiles_rho(x, n, d, gaussian, dc, cut, first, last, rho, opt);
}

gpuml_status gm_cpu_dpc_delta(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                              const double *rho, int64_t top, int64_t first, int64_t last,
                              double *delta_sq, int64_t *nearest, const gpuml_options *opt) {
  return grid ? gm_dpc_grid_delta(grid, rho, top, first, last, delta_sq, nearest, opt)
              : gm_dpc_tiles_delta(x, n, d, rho, top, first, last, delta_sq, nearest, opt);
}

gpuml_status gm_cpu_dpc_density(const double *x, int64_t n, int64_t d,
                                const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                int gaussian, double dc, double cut, double *rho,
                                double *delta_sq, int64_t *nearest, const gpuml_options *opt) {
  gpuml_status st = gm_cpu_dpc_rho(x, n, d, rho_grid, gaussian, dc, cut, 0,
                                   rho_grid ? rho_grid->ncells : n, rho, opt);
  if (st) return st;
  return gm_cpu_dpc_delta(x, n, d, delta_grid, rho, gm_dpc_top(rho, n), 0, n, delta_sq, nearest,
                          opt);
}

gpuml_status gm_cpu_dpc_border(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                               double cut, const double *rho, const int64_t *cluster,
                               double *border, const gpuml_options *opt) {
  return grid ? gm_dpc_grid_border(grid, cut, rho, cluster, border, opt)
              : gm_dpc_tiles_border(x, n, d, cut, rho, cluster, border, opt);
}
