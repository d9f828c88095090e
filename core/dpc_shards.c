/* Density peaks over parts of the points (several devices, GPUML_SHARDS, or the ranks of
 * an MPI job): rho of every part first, since delta needs the rho of all points, then
 * delta and nearest of every part. A part computes its points against all points with
 * the backend's rho_part and delta_part, which give each point the values of the whole
 * pass bit for bit (the same walk over its cell or its row of tiles), so the answers are
 * the single device's, ties included.
 *
 * The parts: on the cell index, rho by runs of whole cells (a cell's points are counted
 * together) of about n / parts points each, and delta by runs of sorted positions; over
 * all pairs, rows (the Gaussian density in multiples of GM_DPC_GAUSS_PART_ROWS, so that
 * every point's weights come from the same GEMM tile as on one device; fewer parts then
 * get work below a few thousand rows a part). Every device or process holds all the
 * points and its own index. */
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "shards.h"

typedef struct {
  const gm_backend *b;
  const double *x;
  int64_t n, d;
  const gm_dpc_grid *rho_grid, *delta_grid;
  int gaussian;
  double dc, cut;
  int parts;
  const int64_t *rho_bounds; /* parts + 1: the cells (or rows) of each part's rho */
  int64_t top;
  double *rho, *delta_sq;
  int64_t *nearest;
} dpc_job;

/* bounds[p] .. bounds[p + 1] - 1: the cells of part p, each part's first cell the first
 * whose points before it reach gm_shard_start(n, parts, p). The points per cell from
 * start[] when the index holds it, else counted by the cell rule (gm_dpc_cell_of) for a
 * backend that sorts the points itself. */
static gpuml_status cell_bounds(const gm_dpc_grid *g, const double *x, int parts,
                                int64_t *bounds) {
  const int64_t n = g->n, nc = g->ncells;
  int64_t *before = NULL; /* points in the cells before each cell, nc + 1 */
  if (!g->start) {
    before = gm_alloc((size_t)nc + 1, sizeof *before);
    if (!before)
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to split the cells",
                     (double)nc * 8 / 1e6);
    memset(before, 0, ((size_t)nc + 1) * sizeof *before);
    for (int64_t i = 0; i < n; i++) before[gm_dpc_cell_of(&g->geom, x, n, i) + 1]++;
    for (int64_t c = 0; c < nc; c++) before[c + 1] += before[c];
  }
  const int64_t *prefix = g->start ? g->start : before;
  int64_t c = 0;
  bounds[0] = 0;
  for (int p = 1; p < parts; p++) {
    const int64_t target = gm_shard_start(n, parts, p);
    while (c < nc && prefix[c] < target) c++;
    bounds[p] = c;
  }
  bounds[parts] = nc;
  free(before);
  return GPUML_OK;
}

static gpuml_status rho_of_part(void *ctx, int part, const gpuml_options *opt) {
  const dpc_job *job = ctx;
  if (job->rho_bounds[part] == job->rho_bounds[part + 1]) return GPUML_OK;
  return job->b->dpc->rho_part(job->x, job->n, job->d, job->rho_grid, job->gaussian, job->dc,
                               job->cut, job->rho_bounds[part], job->rho_bounds[part + 1],
                               job->rho, opt);
}

static gpuml_status delta_of_part(void *ctx, int part, const gpuml_options *opt) {
  const dpc_job *job = ctx;
  const int64_t first = gm_shard_start(job->n, job->parts, part),
                last = gm_shard_start(job->n, job->parts, part + 1);
  if (first == last) return GPUML_OK;
  return job->b->dpc->delta_part(job->x, job->n, job->d, job->delta_grid, job->rho, job->top,
                                 first, last, job->delta_sq, job->nearest, opt);
}

/* The job of the passes over `parts` parts; *bounds (freed by the caller) its rho parts. */
static gpuml_status job_make(dpc_job *job, const gm_backend *b, int parts, const double *x,
                             int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                             const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                             double *rho, double *delta_sq, int64_t *nearest) {
  *job = (dpc_job){b, x, n, d, rho_grid, delta_grid, gaussian, dc, cut, parts, NULL, -1,
                   rho, delta_sq, nearest};
  int64_t *bounds = gm_alloc((size_t)parts + 1, sizeof *bounds);
  if (!bounds) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the parts");
  job->rho_bounds = bounds;
  if (rho_grid) return cell_bounds(rho_grid, x, parts, bounds);
  /* the Gaussian's weights carry the rounding of their tile: its parts hold whole tiles
   * (GM_DPC_GAUSS_PART_ROWS) */
  const int64_t unit = gaussian ? GM_DPC_GAUSS_PART_ROWS : 1;
  for (int p = 0; p <= parts; p++) {
    const int64_t at = (gm_shard_start(n, parts, p) + unit / 2) / unit * unit;
    bounds[p] = p == parts || at > n ? n : at;
  }
  return GPUML_OK;
}

gpuml_status gm_dpc_sharded(const gm_backend *b, const gm_shard_plan *plan, const double *x,
                            int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                            const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                            double *rho, double *delta_sq, int64_t *nearest,
                            const gpuml_options *used) {
  dpc_job job;
  gpuml_status st = job_make(&job, b, plan->count, x, n, d, rho_grid, delta_grid, gaussian, dc,
                             cut, rho, delta_sq, nearest);
  if (!st) st = gm_shards_run(plan, used, rho_of_part, &job, "dpc rho");
  if (!st) {
    job.top = gm_dpc_top(rho, n);
    st = gm_shards_run(plan, used, delta_of_part, &job, "dpc delta");
  }
  free((void *)job.rho_bounds);
  return st;
}

gpuml_status gm_dpc_spread_density(const gm_backend *b, const gm_dpc_spread *spread,
                                   const double *x, int64_t n, int64_t d,
                                   const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                   int gaussian, double dc, double cut, double *rho,
                                   double *delta_sq, int64_t *nearest,
                                   const gpuml_options *used) {
  /* what the other processes compute stays 0 (rho, delta_sq) and -1 (nearest) here */
  for (int64_t i = 0; i < n; i++) {
    rho[i] = 0;
    delta_sq[i] = 0;
    nearest[i] = -1;
  }
  dpc_job job;
  gpuml_status st = job_make(&job, b, spread->parts, x, n, d, rho_grid, delta_grid, gaussian, dc,
                             cut, rho, delta_sq, nearest);
  if (!st) st = rho_of_part(&job, spread->part, used);
  if (!(st = spread->merge(spread->ctx, st, rho, NULL, n))) {
    job.top = gm_dpc_top(rho, n);
    st = delta_of_part(&job, spread->part, used);
    st = spread->merge(spread->ctx, st, delta_sq, nearest, n);
  }
  free((void *)job.rho_bounds);
  return st;
}
