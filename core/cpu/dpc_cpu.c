/* The density peaks passes of the CPU backend: on the grid of cells when the driver
 * built one (d <= GM_DPC_GRID_MAX_DIM, see gm_dpc_rows_fit), else on distance tiles over
 * all pairs. The whole passes are their parts over all points; a session of parts
 * (core/backend.h) keeps nothing but its arguments. */
#include <stdlib.h>
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
                                double *delta_sq, int64_t *nearest, int64_t *order,
                                void **kept, const gpuml_options *opt) {
  gpuml_status st = gm_cpu_dpc_rho(x, n, d, rho_grid, gaussian, dc, cut, 0,
                                   rho_grid ? rho_grid->ncells : n, rho, opt);
  (void)kept;  /* the passes' arrays are the caller's already */
  if (!st && order) st = gm_dpc_density_order(rho, n, order, gm_threads(opt));
  if (st) return st;
  return gm_cpu_dpc_delta(x, n, d, delta_grid, rho, gm_dpc_top(rho, n, gm_threads(opt)), 0, n,
                          delta_sq, nearest, opt);
}

/* A session of the passes over parts: the arguments alone, since the points and the index
 * are in host memory already. */
typedef struct {
  const double *x;
  int64_t n, d;
  const gm_dpc_grid *rho_grid, *delta_grid;
  int gaussian;
  double dc, cut;
} cpu_part_session;

gpuml_status gm_cpu_dpc_part_open(const double *x, int64_t n, int64_t d,
                                  const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                  int gaussian, double dc, double cut, const gpuml_options *opt,
                                  void **session) {
  (void)opt;
  cpu_part_session *s = malloc(sizeof *s);
  *session = s;
  if (!s) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate a density peaks session");
  *s = (cpu_part_session){x, n, d, rho_grid, delta_grid, gaussian, dc, cut};
  return GPUML_OK;
}

gpuml_status gm_cpu_dpc_part_rho(void *session, int64_t first, int64_t last, double *rho,
                                 const gpuml_options *opt) {
  const cpu_part_session *s = session;
  return gm_cpu_dpc_rho(s->x, s->n, s->d, s->rho_grid, s->gaussian, s->dc, s->cut, first, last,
                        rho, opt);
}

gpuml_status gm_cpu_dpc_part_delta(void *session, const double *rho, int64_t top, int64_t first,
                                   int64_t last, double *delta_sq, int64_t *nearest,
                                   const gpuml_options *opt) {
  const cpu_part_session *s = session;
  return gm_cpu_dpc_delta(s->x, s->n, s->d, s->delta_grid, rho, top, first, last, delta_sq,
                          nearest, opt);
}

void gm_cpu_dpc_part_close(void *session) { free(session); }

gpuml_status gm_cpu_dpc_border(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                               double cut, const double *rho, const int64_t *cluster,
                               int64_t ncentres, void *kept, double *cluster_border,
                               const gpuml_options *opt) {
  (void)kept;
  double *border = gm_alloc((size_t)n, sizeof *border);
  if (!border)
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the halo",
                   (double)n * 8 / 1e6);
  gpuml_status st = grid ? gm_dpc_grid_border(grid, cut, rho, cluster, border, opt)
                         : gm_dpc_tiles_border(x, n, d, cut, rho, cluster, border, opt);
  if (!st) gm_dpc_cluster_max(border, cluster, n, ncentres, cluster_border, gm_threads(opt));
  free(border);
  return st;
}
