/* The density peaks passes of the CPU backend: on the grid of cells when the driver
 * built one (d <= GM_DPC_GRID_MAX_DIM, see gm_dpc_rows_fit), else on distance tiles over
 * all pairs. */
#include "cpu_backend.h"

gpuml_status gm_cpu_dpc_density(const double *x, int64_t n, int64_t d,
                                const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                int gaussian, double dc, double cut, double *rho,
                                double *delta_sq, int64_t *nearest, const gpuml_options *opt) {
  gpuml_status st = rho_grid ? gm_dpc_grid_rho(rho_grid, gaussian, dc, cut, rho, opt)
                             : gm_dpc_tiles_rho(x, n, d, gaussian, dc, cut, rho, opt);
  if (st) return st;
  const int64_t top = gm_dpc_top(rho, n);
  return delta_grid ? gm_dpc_grid_delta(delta_grid, rho, top, delta_sq, nearest, opt)
                    : gm_dpc_tiles_delta(x, n, d, rho, top, delta_sq, nearest, opt);
}

gpuml_status gm_cpu_dpc_border(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                               double cut, const double *rho, const int64_t *cluster,
                               double *border, const gpuml_options *opt) {
  return grid ? gm_dpc_grid_border(grid, cut, rho, cluster, border, opt)
              : gm_dpc_tiles_border(x, n, d, cut, rho, cluster, border, opt);
}
