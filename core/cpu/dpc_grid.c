/* The cell index of density peaks (d <= GM_DPC_GRID_MAX_DIM) and the CPU passes over it.
 * Cells are small (a few points each), so a ball of radius dc covers many of them:
 *  - the cutoff density walks the rows of cells the ball touches; in each row the cells
 *    wholly inside the ball are counted from the prefix counts start[] without looking
 *    at their points, and only the points of the cells the sphere crosses are tested
 *    (dpc_shared.h classifies the cells, conservatively);
 *  - the nearest denser point is searched ring by ring outwards, skipping rows and
 *    cells farther than the best so far and cells whose densest point is below the
 *    point's density, until the rings' distance bound passes the best;
 *  - the halo skips the points that the densest point of another cluster within reach
 *    of their block of cells (reach_of) cannot lift past their cluster's border density
 *    so far; the others skip, row by row, the runs of cells of their own cluster and the
 *    runs whose densest point cannot raise the border density, and take the cells of
 *    another cluster wholly inside the ball from their densest point.
 * Tested pairs use the exact direct-form squares (gm_sqdist's sum, in dimension order),
 * so the answers are those of the brute force; the cutoff count first screens its pairs
 * on fp32 copies against a proven margin (core/dpc_shared.h's gm_dpc_screen), and only
 * the pairs within the margin take those squares. The GPU walks the same index with the
 * same formulas (kernels/dpc_grid.cuh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dpc.h"

/* Cells per dimension stay below this, so that the rounding of cell indices stays far
 * below the slack of the cell boxes. */
#define GM_DPC_MAX_CELLS_PER_DIM ((int64_t)1 << 20)
/* Points per block of work between progress reports and interrupt checks. */
#define GM_DPC_GRID_BLOCK 4096
/* Points from which the index's host loops (build, runs, gathers) run in parallel. */
#define GM_DPC_GRID_PARALLEL_MIN 100000
/* Cells per block of the cutoff density, and points of a cell counted together. */
#define GM_DPC_GRID_CELLS 1024
#define GM_DPC_GRID_BLOCK_CELL 32

int gm_dpc_grid_usable(int64_t d) { return d >= 1 && d <= GM_DPC_GRID_MAX_DIM; }

/* Points per cell: the cutoff density shares the rows of a cell among its points, and
 * tests only the points of the cells the sphere crosses (measured at 10^6 points,
 * 2-d, dc from the 2% rule: 16 per cell best, 2 per cell 2x slower); above 3-d a ball
 * touches (2 dc / h + 1)^(d - 1) rows, and the nearest denser point wants small cells. */
double gm_dpc_grid_per_cell(int64_t d) { return d <= 3 ? 16 : 8; }

void gm_dpc_grid_free(gm_dpc_grid *g) {
  free(g->start);
  free(g->cell);
  free(g->order);
  free(g->coords);
  free(g->run_label);
  free(g->run_end);
  free(g->run_max);
  g->start = g->cell = g->order = g->run_label = g->run_end = NULL;
  g->coords = g->run_max = NULL;
}

static double cells_for(const double *range, int dim, double h, int64_t *per_dim) {
  double total = 1;
  for (int t = 0; t < dim; t++) {
    double m = floor(range[t] / h) + 1;
    if (per_dim) per_dim[t] = (int64_t)m;
    total *= m;
  }
  return total;
}

/* geo's cells of side h over range (geo->dim and geo->lo set): h, inv_h, cells, strides,
 * max_cells and slack; returns the number of cells. */
static double geom_cells(gm_dpc_geom *geo, const double *range, double h) {
  geo->h = h;
  geo->inv_h = 1 / h;
  const double total = cells_for(range, geo->dim, h, geo->cells);
  int64_t stride = 1;
  geo->max_cells = 0;
  for (int t = 0; t < geo->dim; t++) {
    if (geo->cells[t] > geo->max_cells) geo->max_cells = geo->cells[t];
    geo->stride[t] = stride;
    stride *= geo->cells[t];
    /* the rounding of (x - lo) / h, in cells, is far below this */
    geo->slack[t] = 1e-6 + 1e-12 * (fabs(geo->lo[t]) + range[t]) * geo->inv_h;
  }
  return total;
}

/* Points sampled (evenly spaced indices) to estimate the occupancy the points see. */
#define GM_DPC_OCCUPANCY_SAMPLE 32768

/* The mean number of points in the cell of a point (itself included) with cells of side
 * h over base's box (its dim and lo), estimated from m evenly spaced points: the pairs of
 * them that share a cell, scaled to n (exact when m = n). ids: room for m; slots (a
 * power of two >= 2m) hold (id + 1, count). */
static double occupancy(const double *x, int64_t n, const gm_dpc_geom *base,
                        const double *range, double h, int64_t m, int threads, int64_t *ids,
                        int64_t *slots, int64_t nslots) {
  gm_dpc_geom trial = *base;
  geom_cells(&trial, range, h);
  /* the samples' reads are cache misses: on all threads */
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t j = 0; j < m; j++)
    ids[j] = gm_dpc_cell_of(&trial, x, n, (int64_t)((double)j * (double)n / (double)m));
  memset(slots, 0, (size_t)nslots * 2 * sizeof *slots);
  double pairs = 0;
  for (int64_t j = 0; j < m; j++) {
    /* open addressing; a point meets the earlier points of its cell: 2 pairs each */
    uint64_t at = ((uint64_t)ids[j] * 0x9E3779B97F4A7C15ull) >> 20;
    for (;; at++) {
      int64_t *slot = slots + 2 * (at & (uint64_t)(nslots - 1));
      if (slot[0] == 0) slot[0] = ids[j] + 1;
      if (slot[0] == ids[j] + 1) {
        pairs += 2.0 * (double)slot[1]++;
        break;
      }
    }
  }
  return 1 + pairs / ((double)m * (double)(m - 1)) * (double)(n - 1);
}

/* The side of the cells. Cells of the bounding box's mean density hold per_cell points
 * where the data are uniform, but clustered data put most points in cells many times
 * denser (10 Gaussian blobs in 3-d: cells of ~3,500 points at the centres), and the
 * cutoff density's cost per point grows with the points of the cells it tests. With
 * GM_DPC_CELLS_SEEN the side shrinks until the occupancy the points see (the mean, over
 * points, of their cell's count) is about per_cell, at most max_total cells. It only
 * changes the speed: every answer is the same at any h. */
static double cell_side(const double *x, int64_t n, const gm_dpc_geom *base,
                        const double *range, double widest, int spread, double volume,
                        double per_cell, gm_dpc_cells sizing, double per_point, int threads) {
  const int dim = base->dim;
  const double mean_total = (double)n / per_cell + 1;
  double h = spread ? pow(volume / mean_total, 1.0 / spread) : 1;
  if (!(h > 0) || !isfinite(h)) h = widest > 0 ? widest : 1;
  const double h_floor = widest / (double)(GM_DPC_MAX_CELLS_PER_DIM - 2);
  if (h < h_floor) h = h_floor;
  while (cells_for(range, dim, h, NULL) > mean_total) h *= 1.1;
  if (sizing == GM_DPC_CELLS_MEAN) return h;
  const int64_t m = n < GM_DPC_OCCUPANCY_SAMPLE ? n : GM_DPC_OCCUPANCY_SAMPLE;
  int64_t nslots = 1;
  while (nslots < 2 * m) nslots <<= 1;
  int64_t *slots = spread && m > 1 ? malloc((size_t)(nslots * 2 + m) * sizeof *slots) : NULL;
  if (!slots) return h;
  /* GPUML_DPC_CELLS_PER_POINT=c: another cap, for measurements */
  const char *knob = getenv("GPUML_DPC_CELLS_PER_POINT");
  if (knob && atof(knob) > 0) per_point = atof(knob);
  if (!(per_point > 1)) per_point = 1;
  const double max_total = (double)n * per_point + 1;
  for (int step = 0; step < 4; step++) {
    const double seen = occupancy(x, n, base, range, h, m, threads, slots + nslots * 2, slots, nslots);
    if (gm_trace_on()) {
      char note[160];
      snprintf(note, sizeof note, "dpc index: cells of side %g, %.0f cells, %.1f points in a point's cell",
               h, cells_for(range, dim, h, NULL), seen);
      gm_trace(note);
    }
    if (seen <= 1.5 * per_cell) break;
    double finer = h * pow(per_cell / seen, 1.0 / spread);
    if (finer < h_floor) finer = h_floor;
    while (finer < h && cells_for(range, dim, finer, NULL) > max_total) finer *= 1.05;
    if (!(finer < 0.95 * h)) break;
    h = finer;
  }
  free(slots);
  return h;
}

/* The cells' side and count over the box g->geom.lo + g->range (g's dim, n and threads
 * set). */
static void plan_in_box(const double *x, double per_cell, gm_dpc_cells sizing, double per_point,
                        gm_dpc_grid *g) {
  gm_dpc_geom *geo = &g->geom;
  double widest = 0, volume = 1;
  int spread = 0;
  for (int t = 0; t < geo->dim; t++) {
    if (g->range[t] > widest) widest = g->range[t];
    if (g->range[t] > 0) {
      volume *= g->range[t];
      spread++;
    }
  }
  const double h = cell_side(x, g->n, geo, g->range, widest, spread, volume, per_cell, sizing,
                             per_point, g->threads);
  g->ncells = (int64_t)geom_cells(geo, g->range, h);
}

void gm_dpc_grid_plan(const double *x, int64_t n, int64_t d, double per_cell, gm_dpc_cells sizing,
                      double per_point, int threads, gm_dpc_grid *g) {
  memset(g, 0, sizeof *g);
  /* the host loops of the index are memory-bound passes over n: below this many points
   * a parallel region costs more than it saves (and spins on a loaded machine) */
  g->threads = threads > 0 && n >= GM_DPC_GRID_PARALLEL_MIN ? threads : 1;
  g->geom.dim = (int)d;
  g->n = n;
  for (int t = 0; t < g->geom.dim; t++) {
    const double *col = x + (size_t)t * (size_t)n;
    double lo = col[0], hi = col[0];
#pragma omp parallel for reduction(min : lo) reduction(max : hi) num_threads(g->threads)
    for (int64_t i = 1; i < n; i++) {
      lo = col[i] < lo ? col[i] : lo;
      hi = col[i] > hi ? col[i] : hi;
    }
    g->geom.lo[t] = lo;
    g->range[t] = hi - lo;
  }
  plan_in_box(x, per_cell, sizing, per_point, g);
}

void gm_dpc_grid_replan(const double *x, const gm_dpc_grid *box, double per_cell,
                        gm_dpc_cells sizing, double per_point, gm_dpc_grid *g) {
  memset(g, 0, sizeof *g);
  g->threads = box->threads;
  g->geom.dim = box->geom.dim;
  g->n = box->n;
  for (int t = 0; t < g->geom.dim; t++) {
    g->geom.lo[t] = box->geom.lo[t];
    g->range[t] = box->range[t];
  }
  plan_in_box(x, per_cell, sizing, per_point, g);
}

gpuml_status gm_dpc_grid_build(const double *x, int64_t n, int64_t d, double per_cell,
                               gm_dpc_cells sizing, double per_point, int threads,
                               gm_dpc_grid *g) {
  gm_dpc_grid_plan(x, n, d, per_cell, sizing, per_point, threads, g);
  return gm_dpc_grid_sort(x, g);
}

gpuml_status gm_dpc_grid_sort(const double *x, gm_dpc_grid *g) {
  const int64_t n = g->n, d = g->geom.dim;
  const gm_dpc_geom *geo = &g->geom;
  g->start = gm_alloc((size_t)g->ncells + 1, sizeof *g->start);
  g->cell = gm_alloc((size_t)n, sizeof *g->cell);
  g->order = gm_alloc((size_t)n, sizeof *g->order);
  g->coords = gm_alloc((size_t)n * (size_t)d, sizeof *g->coords);
  if (!g->start || !g->cell || !g->order || !g->coords) {
    gm_dpc_grid_free(g);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the density peaks index",
                   ((double)n * (16.0 + 8.0 * (double)d) + 8.0 * (double)g->ncells) / 1e6);
  }
  /* The cell of each point (in g->cell, by original index for now), then a stable
   * counting sort: within a cell, points keep their index order. */
  int64_t *cell_of = g->cell;
#pragma omp parallel for schedule(static) num_threads(g->threads)
  for (int64_t i = 0; i < n; i++) cell_of[i] = gm_dpc_cell_of(geo, x, n, i);
  /* Per-thread counts over contiguous chunks of the points, so that the sort runs on
   * all threads and stays stable (chunks in index order); one thread when the counts
   * would take more than 2n entries. */
  const int64_t nc = g->ncells;
  int parts = g->threads;
  if ((double)parts * (double)nc > 2.0 * (double)n + 1024) parts = 1;
  const int64_t chunk = (n + parts - 1) / parts;
  int64_t *counts = gm_alloc((size_t)parts * (size_t)nc, sizeof *counts);
  if (!counts) {
    gm_dpc_grid_free(g);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the density peaks index");
  }
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int part = 0; part < parts; part++) {
    int64_t *mine = counts + (size_t)part * (size_t)nc;
    memset(mine, 0, (size_t)nc * sizeof *mine);
    const int64_t i1 = (part + 1) * chunk < n ? (part + 1) * chunk : n;
    for (int64_t i = part * chunk; i < i1; i++) mine[cell_of[i]]++;
  }
  g->start[0] = 0;
  for (int64_t c = 0; c < nc; c++) {
    int64_t run = g->start[c];
    for (int part = 0; part < parts; part++) {
      int64_t *at = counts + (size_t)part * (size_t)nc + c;
      const int64_t k = *at;
      *at = run; /* becomes this part's next position in cell c */
      run += k;
    }
    g->start[c + 1] = run;
  }
#pragma omp parallel for schedule(static, 1) num_threads(parts)
  for (int part = 0; part < parts; part++) {
    int64_t *next = counts + (size_t)part * (size_t)nc;
    const int64_t i1 = (part + 1) * chunk < n ? (part + 1) * chunk : n;
    for (int64_t i = part * chunk; i < i1; i++) g->order[next[cell_of[i]]++] = i;
  }
  free(counts);
  /* The cell of each sorted position, from the sorted ids in start[]. */
#pragma omp parallel for schedule(static) num_threads(g->threads)
  for (int64_t c = 0; c < g->ncells; c++)
    for (int64_t s = g->start[c]; s < g->start[c + 1]; s++) g->cell[s] = c;
#pragma omp parallel for schedule(static) num_threads(g->threads)
  for (int64_t s = 0; s < n; s++) {
    const int64_t i = g->order[s];
    for (int t = 0; t < geo->dim; t++)
      g->coords[(size_t)t * (size_t)n + (size_t)s] = x[i + (size_t)t * (size_t)n];
  }
  return GPUML_OK;
}

double gm_dpc_grid_rows(const gm_dpc_grid *g, double cut) {
  const double span = 2 * ceil(sqrt(cut) * g->geom.inv_h) + 2;
  double rows = 1;
  for (int t = 1; t < g->geom.dim; t++)
    rows *= span < (double)g->geom.cells[t] ? span : (double)g->geom.cells[t];
  return rows;
}

void gm_dpc_grid_merge_runs(int64_t nc, int64_t *label, int64_t *end, double *top) {
  /* from the last cell backwards (core/dpc_shared.h's maps, as the GPU scans them) */
  gm_dpc_run run = {GM_DPC_EMPTY, nc - 1, -1};
  for (int64_t c = nc - 1; c >= 0; c--) {
    run = gm_dpc_run_apply(gm_dpc_run_map_of(c, label[c], top[c]), run);
    label[c] = run.label;
    end[c] = run.end;
    top[c] = run.top;
  }
}

gpuml_status gm_dpc_grid_runs(gm_dpc_grid *g, const double *rho, const int64_t *cluster) {
  const int64_t nc = g->ncells;
  g->run_label = gm_alloc((size_t)nc, sizeof *g->run_label);
  g->run_end = gm_alloc((size_t)nc, sizeof *g->run_end);
  g->run_max = gm_alloc((size_t)nc, sizeof *g->run_max);
  if (!g->run_label || !g->run_end || !g->run_max)
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the halo's cell runs",
                   (double)nc * 24 / 1e6);
  int64_t top_cluster = -1;
  for (int64_t i = 0; i < g->n; i++)
    if (cluster[i] > top_cluster) top_cluster = cluster[i];
  g->nclusters = top_cluster + 1;
  /* Each cell's label and densest point (run_end holds nothing yet). */
#pragma omp parallel for schedule(static) num_threads(g->threads)
  for (int64_t c = 0; c < nc; c++) {
    int64_t label = GM_DPC_EMPTY;
    double top = -1;
    for (int64_t s = g->start[c]; s < g->start[c + 1]; s++) {
      const int64_t i = g->order[s];
      if (label == GM_DPC_EMPTY) label = cluster[i];
      else if (label != cluster[i]) label = GM_DPC_MIXED;
      if (rho[i] > top) top = rho[i];
    }
    g->run_label[c] = label;
    g->run_max[c] = top;
  }
  gm_dpc_grid_merge_runs(nc, g->run_label, g->run_end, g->run_max);
  return GPUML_OK;
}

/* ---- walking the points ------------------------------------------------------------ */

static void point_of(const gm_dpc_grid *g, int64_t s, double *p) {
  for (int t = 0; t < g->geom.dim; t++) p[t] = g->coords[(size_t)t * (size_t)g->n + (size_t)s];
}

/* The exact squared distance (gm_sqdist's sum) from the point p to sorted position j. */
static inline double grid_sqdist(const gm_dpc_grid *g, const double *p, int64_t j) {
  double s = 0;
  for (int t = 0; t < g->geom.dim; t++) {
    double diff = g->coords[(size_t)t * (size_t)g->n + (size_t)j] - p[t];
    s += diff * diff;
  }
  return s;
}

/* What one pass does for one item: a sorted position, or the points of one cell. */
typedef void (*gm_item_fn)(const gm_dpc_grid *g, const void *ctx, int64_t item);

/* Runs fn over the sorted positions (by_cell 0) or the cells (1) first .. last - 1 on the
 * OpenMP threads, in blocks, with progress (in points of the range) and interrupt checks
 * on the calling thread. */
static gpuml_status for_items(const gm_dpc_grid *g, const gpuml_options *opt, const char *stage,
                              int by_cell, int64_t first, int64_t last, gm_item_fn fn,
                              const void *ctx) {
  const int64_t count = last - first;
  const int64_t points = by_cell ? g->start[last] - g->start[first] : count;
  const int64_t per = by_cell ? GM_DPC_GRID_CELLS : GM_DPC_GRID_BLOCK;
  const int64_t nblocks = (count + per - 1) / per;
  const int threads = gm_threads(opt) < nblocks ? gm_threads(opt) : (int)(nblocks > 0 ? nblocks : 1);
  volatile int stop = 0;
  int64_t done = 0, reported = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t b = 0; b < nblocks; b++) {
    if (stop) continue;
    const int64_t i0 = first + b * per, i1 = i0 + per < last ? i0 + per : last;
    for (int64_t i = i0; i < i1; i++) fn(g, ctx, i);
    int64_t now;
#pragma omp atomic capture
    now = done += by_cell ? g->start[i1] - g->start[i0] : i1 - i0;
    if (gm_is_calling_thread()) {
      if (gm_interrupted(opt)) stop = 1;
      else gm_progress(opt, stage, reported = now, points);
    }
  }
  /* once more after the pass: the calling thread may have had no block of it */
  if (stop || gm_interrupted(opt))
    return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "density peaks interrupted");
  if (reported < points) gm_progress(opt, stage, points, points);
  return GPUML_OK;
}

/* The densest point of each cell (-1 when empty), from rho by sorted position. */
static double *cell_max_of(const gm_dpc_grid *g, const double *rho_sorted) {
  double *m = gm_alloc((size_t)g->ncells, sizeof *m);
  if (!m) return NULL;
#pragma omp parallel for schedule(static) num_threads(g->threads)
  for (int64_t c = 0; c < g->ncells; c++) {
    double top = -1;
    for (int64_t s = g->start[c]; s < g->start[c + 1]; s++)
      top = rho_sorted[s] > top ? rho_sorted[s] : top;
    m[c] = top;
  }
  return m;
}

/* ---- the cutoff density -------------------------------------------------------- */

typedef struct {
  double cut;
  double inv_dc2; /* the Gaussian kernel's 1 / dc^2; 0: the cutoff kernel */
  double *rho;
  /* The fp32 screen (gm_dpc_screen_for) where it is on: the sorted points less the
   * screen's origin in fp32 (dim x n, as coords), and the screen's bounds as bits. */
  const float *coords32;
  uint32_t in_bits, band; /* bits(in), and bits(out) - bits(in) */
  int wide;                /* the machine has AVX-512: 16 floats a vector */
} rho_ctx;

/* Adds to acc[k] (k < kn, a multiple of 8 with NaN padding) the points of sorted
 * positions a .. b - 1 with s < cut from the query k (coordinate t at q[t * KB + k]);
 * the loop over 8 queries vectorises and its counts stay in registers, each square sum
 * formed in dimension order. */
GM_VECTOR_CLONES
static void count_block(const double *restrict X, int64_t n, int dim, const double *restrict q,
                        int64_t kn, int64_t a, int64_t b, double cut, double *restrict acc) {
  const double *X0 = X, *X1 = X0 + n, *X2 = X1 + n;
  for (int64_t k8 = 0; k8 < kn; k8 += 8) {
    const double *q0 = q + k8, *q1 = q0 + GM_DPC_GRID_BLOCK_CELL,
                 *q2 = q1 + GM_DPC_GRID_BLOCK_CELL;
    double c8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    switch (dim) {
      case 1:
        for (int64_t j = a; j < b; j++) {
          const double x0 = X0[j];
#pragma omp simd
          for (int k = 0; k < 8; k++) {
            const double d0 = x0 - q0[k];
            c8[k] += d0 * d0 < cut ? 1.0 : 0.0;
          }
        }
        break;
      case 2: {
        /* two points per step into two sets of counts: the adds do not wait on each other */
        double e8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t j = a;
        for (; j + 1 < b; j += 2) {
          const double x0 = X0[j], x1 = X1[j], y0 = X0[j + 1], y1 = X1[j + 1];
#pragma omp simd
          for (int k = 0; k < 8; k++) {
            const double d0 = x0 - q0[k], d1 = x1 - q1[k];
            const double f0 = y0 - q0[k], f1 = y1 - q1[k];
            double s = d0 * d0, u = f0 * f0;
            s += d1 * d1;
            u += f1 * f1;
            c8[k] += s < cut ? 1.0 : 0.0;
            e8[k] += u < cut ? 1.0 : 0.0;
          }
        }
        for (; j < b; j++) {
          const double x0 = X0[j], x1 = X1[j];
#pragma omp simd
          for (int k = 0; k < 8; k++) {
            const double d0 = x0 - q0[k], d1 = x1 - q1[k];
            double s = d0 * d0;
            s += d1 * d1;
            c8[k] += s < cut ? 1.0 : 0.0;
          }
        }
        for (int k = 0; k < 8; k++) c8[k] += e8[k];
        break;
      }
      case 3:
        for (int64_t j = a; j < b; j++) {
          const double x0 = X0[j], x1 = X1[j], x2 = X2[j];
#pragma omp simd
          for (int k = 0; k < 8; k++) {
            const double d0 = x0 - q0[k], d1 = x1 - q1[k], d2 = x2 - q2[k];
            double s = d0 * d0;
            s += d1 * d1;
            s += d2 * d2;
            c8[k] += s < cut ? 1.0 : 0.0;
          }
        }
        break;
      default:
        for (int64_t j = a; j < b; j++) {
          double s8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          for (int t = 0; t < dim; t++) {
            const double xt = X[(size_t)t * (size_t)n + (size_t)j];
            const double *qt = q + t * GM_DPC_GRID_BLOCK_CELL + k8;
#pragma omp simd
            for (int k = 0; k < 8; k++) {
              const double diff = xt - qt[k];
              s8[k] += diff * diff;
            }
          }
#pragma omp simd
          for (int k = 0; k < 8; k++) c8[k] += s8[k] < cut ? 1.0 : 0.0;
        }
    }
    for (int k = 0; k < 8; k++) acc[k8 + k] += c8[k];
  }
}

/* The fp32 screen's pair test for 8 queries (fp32 coordinate t of query k at
 * q[t * GM_DPC_GRID_BLOCK_CELL + k]) against the point p: the fp32 square (products
 * added in dimension order, which gm_dpc_screen_for's margin covers as it does the GPU's
 * FMAs) less the screen's `in` as integer bits, rel, places the pair: rel >= 2^31 (as
 * unsigned) lies below `in`, inside the cut, counted in hits; rel < band lies in the band
 * around the cut, where only the fp64 square decides (core/dpc_shared.h); nearest keeps
 * the least rel. With width 16 the same for 16 queries in one loop (one AVX-512 vector).
 * The dimension and width are constants where it is inlined, so that its loops unroll. */
static inline __attribute__((always_inline)) void screen_lanes(
    const float *p, const int dim, const int width, const float *restrict q, uint32_t in_bits,
    uint32_t *restrict hits, uint32_t *restrict nearest) {
#pragma omp simd
  for (int k = 0; k < width; k++) {
    float diff = p[0] - q[k];
    float s = diff * diff;
    for (int t = 1; t < dim; t++) {
      diff = p[t] - q[t * GM_DPC_GRID_BLOCK_CELL + k];
      s += diff * diff;
    }
    uint32_t bits;
    memcpy(&bits, &s, sizeof bits);
    const uint32_t rel = bits - in_bits;
    hits[k] += rel >> 31;
    nearest[k] = rel < nearest[k] ? rel : nearest[k];
  }
}

/* screen_lanes over the sorted positions a .. b - 1 for 8 or 16 queries (lanes). 16
 * take one 16-float loop where the machine has AVX-512 (wide), else two 8-float loops
 * with their own counts: a 16-float loop on AVX2 keeps its counts in memory. */
static inline __attribute__((always_inline)) void screen_run(
    const float *restrict X, int64_t n, const int dim, const int lanes, const int wide,
    const float *restrict q, int64_t a, int64_t b, uint32_t in_bits, uint32_t *restrict hits,
    uint32_t *restrict nearest) {
  uint32_t h0[16], n0[16], h1[8], n1[8];
  for (int k = 0; k < 16; k++) {
    h0[k] = 0;
    n0[k] = UINT32_MAX;
  }
  for (int k = 0; k < 8; k++) {
    h1[k] = 0;
    n1[k] = UINT32_MAX;
  }
  const int one = lanes == 16 && wide ? 16 : 8; /* the first loop's width */
  for (int64_t j = a; j < b; j++) {
    float p[GM_DPC_GRID_MAX_DIM];
    for (int t = 0; t < dim; t++) p[t] = X[(size_t)t * (size_t)n + (size_t)j];
    screen_lanes(p, dim, one, q, in_bits, h0, n0);
    if (lanes > one) screen_lanes(p, dim, 8, q + 8, in_bits, h1, n1);
  }
  for (int k = 0; k < lanes; k++) {
    hits[k] = k < one ? h0[k] : h1[k - 8];
    nearest[k] = k < one ? n0[k] : n1[k - 8];
  }
}

/* count_block on the fp32 copy, the queries in groups of 16 and a last group of 8 (kn a
 * multiple of 8, NaN padding), so that a cell of 17-24 points does not pay for 32. A
 * group that met a pair in the band takes count_block's fp64 counts over the same points
 * instead, so that every count is the fp64 rule's. Twice the lanes of the fp64 loop,
 * and integer counts. */
GM_VECTOR_CLONES
static void count_block_screen(const rho_ctx *ctx, const gm_dpc_grid *g, const float *restrict q32,
                               const double *restrict q, int64_t kn, int64_t a, int64_t b,
                               double *restrict acc) {
  const int dim = g->geom.dim, wide = ctx->wide;
  const int64_t n = g->n;
  const float *X = ctx->coords32;
  const uint32_t in = ctx->in_bits;
  if (b - a > ((int64_t)1 << 30)) { /* the counts are 32-bit: 2^30 points at a time */
    count_block_screen(ctx, g, q32, q, kn, a, a + ((int64_t)1 << 30), acc);
    count_block_screen(ctx, g, q32, q, kn, a + ((int64_t)1 << 30), b, acc);
    return;
  }
  for (int64_t k0 = 0; k0 < kn; k0 += 16) {
    const int lanes = kn - k0 < 16 ? 8 : 16;
    uint32_t hits[16], nearest[16];
    const float *qk = q32 + k0;
    /* the dimension (at most GM_DPC_GRID_MAX_DIM, 8) and the width constants in each
     * copy of the loops, so that they unroll and vectorise */
#define GM_SCREEN_RUN(D)                                                      \
  (lanes == 8 ? screen_run(X, n, D, 8, 0, qk, a, b, in, hits, nearest)       \
   : wide     ? screen_run(X, n, D, 16, 1, qk, a, b, in, hits, nearest)      \
              : screen_run(X, n, D, 16, 0, qk, a, b, in, hits, nearest))
    switch (dim) {
      case 1: GM_SCREEN_RUN(1); break;
      case 2: GM_SCREEN_RUN(2); break;
      case 3: GM_SCREEN_RUN(3); break;
      case 4: GM_SCREEN_RUN(4); break;
      case 5: GM_SCREEN_RUN(5); break;
      case 6: GM_SCREEN_RUN(6); break;
      case 7: GM_SCREEN_RUN(7); break;
      default: GM_SCREEN_RUN(8);
    }
#undef GM_SCREEN_RUN
    uint32_t least = UINT32_MAX;
    for (int k = 0; k < lanes; k++) least = nearest[k] < least ? nearest[k] : least;
    if (least < ctx->band) {
      count_block(g->coords, n, dim, q + k0, lanes, a, b, ctx->cut, acc + k0);
      continue;
    }
    for (int k = 0; k < lanes; k++) acc[k0 + k] += (double)hits[k];
  }
}

/* Adds to acc[k] (k < mk) the Gaussian weights exp(-s / dc^2) of the sorted positions
 * a .. b - 1 with s < cut from the query k (sorted position self + k, left out: not its
 * own neighbour). Each square sum in dimension order, each point's weights added in
 * the order of the walk. */
static void gauss_block(const gm_dpc_grid *g, const double *q, int64_t mk, int64_t self,
                        int64_t a, int64_t b, double cut, double inv_dc2, double *acc) {
  const int dim = g->geom.dim;
  for (int64_t j = a; j < b; j++)
    for (int64_t k = 0; k < mk; k++) {
      if (j == self + k) continue;
      double s = 0;
      for (int t = 0; t < dim; t++) {
        const double diff = g->coords[(size_t)t * (size_t)g->n + (size_t)j] -
                            q[t * GM_DPC_GRID_BLOCK_CELL + k];
        s += diff * diff;
      }
      if (s < cut) acc[k] += exp(-s * inv_dc2);
    }
}

/* The cutoff density of the points of one cell together: the rows, and the cells wholly
 * inside the ball of every point of the cell, are found once for the cell (from the
 * bounding box of its points); only the points of the cells between are tested, against
 * all the cell's points at once. The truncated Gaussian density walks the same rows,
 * summing the weights of every point of their cells within the cut (no cell is taken
 * whole: the weights differ). */
static void rho_cell(const gm_dpc_grid *g, const void *vctx, int64_t cell) {
  const rho_ctx *ctx = vctx;
  double q[GM_DPC_GRID_MAX_DIM * GM_DPC_GRID_BLOCK_CELL], acc[GM_DPC_GRID_BLOCK_CELL];
  float q32[GM_DPC_GRID_MAX_DIM * GM_DPC_GRID_BLOCK_CELL];
  const gm_dpc_geom *geo = &g->geom;
  const int64_t *start = g->start, s0 = start[cell], m = start[cell + 1] - s0;
  if (m == 0) return;
  double qa[GM_DPC_GRID_MAX_DIM], qb[GM_DPC_GRID_MAX_DIM];
  for (int64_t k0 = 0; k0 < m; k0 += GM_DPC_GRID_BLOCK_CELL) {
    const int64_t mk = m - k0 < GM_DPC_GRID_BLOCK_CELL ? m - k0 : GM_DPC_GRID_BLOCK_CELL;
    const int64_t kn = (mk + 7) / 8 * 8;
    /* the queries, and their bounding box (tighter than the cell's) */
    for (int t = 0; t < geo->dim; t++) {
      const double *col = g->coords + (size_t)t * (size_t)g->n + (size_t)(s0 + k0);
      qa[t] = qb[t] = col[0];
      for (int64_t k = 0; k < kn; k++) {
        q[t * GM_DPC_GRID_BLOCK_CELL + k] = k < mk ? col[k] : NAN;
        if (k < mk && col[k] < qa[t]) qa[t] = col[k];
        if (k < mk && col[k] > qb[t]) qb[t] = col[k];
      }
      if (ctx->coords32) {
        const float *col32 = ctx->coords32 + (size_t)t * (size_t)g->n + (size_t)(s0 + k0);
        for (int64_t k = 0; k < kn; k++) q32[t * GM_DPC_GRID_BLOCK_CELL + k] = k < mk ? col32[k] : NAN;
      }
    }
    for (int64_t k = 0; k < kn; k++) acc[k] = 0;
    int64_t common = 0;
    gm_dpc_rows rows;
    if (gm_dpc_rows_ball(geo, geo->dim, qa, qb, sqrt(ctx->cut * GM_DPC_CUT_OUT), &rows)) do {
        double near_sq, far_sq;
        const int64_t base = gm_dpc_row_base(geo, geo->dim, &rows, qa, qb, &near_sq, &far_sq);
        int64_t o_lo, o_hi, i_lo, i_hi;
        if (!gm_dpc_row_cells(geo, qa[0], qb[0], near_sq, far_sq, ctx->cut, &o_lo, &o_hi, &i_lo,
                              &i_hi))
          continue;
        if (ctx->inv_dc2 > 0) {
          gauss_block(g, q, mk, s0 + k0, start[base + o_lo], start[base + o_hi + 1], ctx->cut,
                      ctx->inv_dc2, acc);
          continue;
        }
        /* the crossed cells: the whole run between the outer bounds, or its two ends
         * around the cells wholly inside */
        int64_t ends[2][2] = {{start[base + o_lo], start[base + o_hi + 1]}, {0, 0}};
        if (i_lo <= i_hi) {
          common += start[base + i_hi + 1] - start[base + i_lo];
          ends[0][1] = start[base + i_lo];
          ends[1][0] = start[base + i_hi + 1];
          ends[1][1] = start[base + o_hi + 1];
        }
        for (int e = 0; e < 2; e++) {
          if (ends[e][0] >= ends[e][1]) continue;
          if (ctx->coords32)
            count_block_screen(ctx, g, q32, q, kn, ends[e][0], ends[e][1], acc);
          else
            count_block(g->coords, g->n, geo->dim, q, kn, ends[e][0], ends[e][1], ctx->cut, acc);
        }
      } while (gm_dpc_rows_next(geo->dim, &rows));
    /* each point itself, at 0 < cut, is counted once: not a neighbour */
    for (int64_t k = 0; k < mk; k++)
      ctx->rho[g->order[s0 + k0 + k]] = ctx->inv_dc2 > 0 ? acc[k] : acc[k] + (double)(common - 1);
  }
}

/* Whether the machine has AVX-512 (16 floats a vector), which the screen's loops take. */
static int has_avx512(void) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  return __builtin_cpu_supports("avx512f");
#else
  return 0;
#endif
}

/* Whether the cutoff count takes the fp32 screen: on unless GPUML_DPC_FP32=0 (for
 * comparisons), and where gm_dpc_screen_for finds it safe for the data's scale. */
static int screen_wanted(void) {
  const char *knob = getenv("GPUML_DPC_FP32");
  return !(knob && strcmp(knob, "0") == 0);
}

/* The fp32 copy of the sorted points less the screen's origin, and the screen's bounds
 * as bits; NULL where the screen is off (or the copy could not be allocated: the fp64
 * count then runs alone). */
static float *screen_copy(const gm_dpc_grid *g, double cut, uint32_t *in_bits, uint32_t *band) {
  const int dim = g->geom.dim;
  const int64_t n = g->n;
  if (!screen_wanted() || n < 1) return NULL;
  float *c32 = malloc((size_t)n * (size_t)dim * sizeof *c32);
  if (!c32) return NULL;
  float reach[GM_DPC_GRID_MAX_DIM];
  for (int t = 0; t < dim; t++) {
    const double origin = gm_dpc_screen_origin(&g->geom, t);
    const double *col = g->coords + (size_t)t * (size_t)n;
    float *out = c32 + (size_t)t * (size_t)n, most = 0;
#pragma omp parallel for schedule(static) reduction(max : most) num_threads(g->threads) \
    if (n >= GM_DPC_GRID_PARALLEL_MIN)
    for (int64_t s = 0; s < n; s++) {
      out[s] = gm_dpc_screen_coord(col[s], origin);
      const float size = fabsf(out[s]);
      most = size > most ? size : most;
    }
    reach[t] = most;
  }
  const gm_dpc_screen screen = gm_dpc_screen_for(cut, dim, reach);
  if (!screen.on) {
    free(c32);
    return NULL;
  }
  uint32_t out_bits;
  memcpy(in_bits, &screen.in, sizeof *in_bits);
  memcpy(&out_bits, &screen.out, sizeof out_bits);
  *band = out_bits - *in_bits;
  return c32;
}

gpuml_status gm_dpc_grid_rho(const gm_dpc_grid *g, int gaussian, double dc, double cut,
                             int64_t first_cell, int64_t last_cell, double *rho,
                             const gpuml_options *opt) {
  rho_ctx ctx = {cut, gaussian ? 1 / (dc * dc) : 0, rho, NULL, 0, 0, has_avx512()};
  float *coords32 = gaussian ? NULL : screen_copy(g, cut, &ctx.in_bits, &ctx.band);
  ctx.coords32 = coords32;
  const gpuml_status st = for_items(g, opt, "dpc rho", 1, first_cell, last_cell, rho_cell, &ctx);
  free(coords32);
  return st;
}

/* ---- the nearest denser point ---------------------------------------------------- */

typedef struct {
  const double *rho_sorted; /* rho of each sorted position */
  const double *cell_max;   /* the densest point of each cell */
  int64_t top;
  double *delta_sq;
  int64_t *nearest;
} delta_ctx;

static void delta_point(const gm_dpc_grid *g, const void *vctx, int64_t s) {
  const delta_ctx *ctx = vctx;
  const gm_dpc_geom *geo = &g->geom;
  const int64_t i = g->order[s];
  if (i == ctx->top) return;
  const double rho_i = ctx->rho_sorted[s];
  double best = INFINITY;
  int64_t best_j = -1;
  double p[GM_DPC_GRID_MAX_DIM];
  int64_t c[GM_DPC_GRID_MAX_DIM];
  point_of(g, s, p);
  gm_dpc_cell_coords(&g->geom, g->geom.dim, g->cell[s], c);
  const int64_t m0 = geo->cells[0];
  for (int64_t r = 0; r < geo->max_cells; r++) {
    /* Rings 0 .. r-1 are done: every point not seen is beyond the bound. */
    if (r >= 1 && best < gm_dpc_ring_bound(geo, geo->dim, c, p, r)) break;
    gm_dpc_rows rows;
    gm_dpc_rows_cube(geo, geo->dim, c, r, &rows);
    do {
      int on_ring = r == 0;
      for (int t = 1; t < geo->dim; t++)
        if (rows.y[t] == c[t] - r || rows.y[t] == c[t] + r) on_ring = 1;
      double near_sq, far_sq;
      const int64_t base = gm_dpc_row_base(geo, geo->dim, &rows, p, p, &near_sq, &far_sq);
      if (near_sq > best * GM_DPC_CUT_OUT) continue;
      const int64_t lo = c[0] - r > 0 ? c[0] - r : 0, hi = c[0] + r < m0 - 1 ? c[0] + r : m0 - 1;
      const int64_t step = on_ring || r == 0 ? 1 : 2 * r;
      for (int64_t q = on_ring ? lo : c[0] - r; q <= hi; q += step) {
        if (q < 0) continue;
        const int64_t id = base + q;
        if (ctx->cell_max[id] < rho_i) continue;
        double gap, far;
        gm_dpc_gap(geo, 0, q, p[0], p[0], &gap, &far);
        if (near_sq + gap * gap > best * GM_DPC_CUT_OUT) continue;
        for (int64_t j = g->start[id]; j < g->start[id + 1]; j++) {
          const double rj = ctx->rho_sorted[j];
          if (rj < rho_i) continue;
          const int64_t oj = g->order[j];
          if (!gm_dpc_above(rj, oj, rho_i, i)) continue;
          const double sq = grid_sqdist(g, p, j);
          if (sq < best || (sq == best && oj < best_j)) {
            best = sq;
            best_j = oj;
          }
        }
      }
    } while (gm_dpc_rows_next(geo->dim, &rows));
  }
  ctx->delta_sq[i] = best;
  ctx->nearest[i] = best_j;
}

gpuml_status gm_dpc_grid_delta(const gm_dpc_grid *g, const double *rho, int64_t top,
                               int64_t first, int64_t last, double *delta_sq, int64_t *nearest,
                               const gpuml_options *opt) {
  double *rho_sorted = gm_alloc((size_t)g->n, sizeof *rho_sorted);
  double *cell_max = NULL;
  gpuml_status st;
  if (rho_sorted) {
#pragma omp parallel for schedule(static) num_threads(g->threads)
    for (int64_t s = 0; s < g->n; s++) rho_sorted[s] = rho[g->order[s]];
    cell_max = cell_max_of(g, rho_sorted);
  }
  if (!rho_sorted || !cell_max) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB of density peaks work space",
                 (double)(g->n + g->ncells) * 8 / 1e6);
  } else {
    delta_ctx ctx = {rho_sorted, cell_max, top, delta_sq, nearest};
    st = for_items(g, opt, "dpc delta", 0, first, last, delta_point, &ctx);
  }
  free(rho_sorted);
  free(cell_max);
  return st;
}

/* ---- the border densities of the halo ------------------------------------------- */

static int compare_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double gm_dpc_seed_rho(const double *rho, int64_t n) {
  /* the 99th percentile of an evenly spaced sample of up to 1024 densities */
  double sample[1024];
  const int64_t m = n < 1024 ? n : 1024;
  for (int64_t k = 0; k < m; k++) sample[k] = rho[(int64_t)((double)k * (double)n / (double)m)];
  qsort(sample, (size_t)m, sizeof *sample, compare_double);
  return sample[m - 1 - m / 100];
}

typedef struct {
  double cut;
  const double *rho_sorted;
  const int64_t *cluster_sorted;
  const double *cell_max;
  const double *reach; /* per cell: the largest rho of another cluster within the cut */
  double *found;    /* per cluster: the largest border density written so far */
  double *border;
  double seed_rho;  /* the points at or above this density go first */
  int seeding;      /* 1: the first pass (those points only), 0: the others */
} border_ctx;

/* The largest border density written so far for a cluster: pairs that cannot pass it
 * are skipped (they cannot raise the cluster's border, and the pair is also seen from
 * its other end for the other cluster). Only the clusters' largest values are exact;
 * the halo needs no more. */
static double found_of(const border_ctx *ctx, int64_t c) {
  double v;
#pragma omp atomic read
  v = ctx->found[c];
  return v;
}

static void border_point(const gm_dpc_grid *g, const void *vctx, int64_t s) {
  const border_ctx *ctx = vctx;
  const gm_dpc_geom *geo = &g->geom;
  const int64_t own = ctx->cluster_sorted[s];
  const double rho_i = ctx->rho_sorted[s];
  if ((rho_i >= ctx->seed_rho) != ctx->seeding) return;
  double best = 0, floor = found_of(ctx, own);
  ctx->border[g->order[s]] = 0;
  if ((rho_i + ctx->reach[g->cell[s]]) / 2 <= floor) return;
  double p[GM_DPC_GRID_MAX_DIM];
  point_of(g, s, p);
  gm_dpc_rows rows;
  if (gm_dpc_rows_ball(geo, geo->dim, p, p, sqrt(ctx->cut * GM_DPC_CUT_OUT), &rows)) do {
      double near_sq, far_sq;
      const int64_t base = gm_dpc_row_base(geo, geo->dim, &rows, p, p, &near_sq, &far_sq);
      int64_t o_lo, o_hi, i_lo, i_hi;
      if (!gm_dpc_row_cells(geo, p[0], p[0], near_sq, far_sq, ctx->cut, &o_lo, &o_hi, &i_lo,
                            &i_hi))
        continue;
      const double seen = found_of(ctx, own);
      double bar = best > seen ? best : seen;
      int64_t q = o_lo;
      while (q <= o_hi) {
        const int64_t id = base + q, label = g->run_label[id], end = g->run_end[id] - base;
        if (label == own || label == GM_DPC_EMPTY || (rho_i + g->run_max[id]) / 2 <= bar) {
          q = end + 1;
          continue;
        }
        const int64_t stop = end < o_hi ? end : o_hi;
        for (; q <= stop; q++) {
          const int64_t cq = base + q;
          const double top = ctx->cell_max[cq];
          if (top < 0 || (rho_i + top) / 2 <= bar) continue;
          if (label >= 0 && q >= i_lo && q <= i_hi) {
            best = bar = (rho_i + top) / 2; /* another cluster, every point within the cut */
            continue;
          }
          for (int64_t j = g->start[cq]; j < g->start[cq + 1]; j++) {
            if (ctx->cluster_sorted[j] == own) continue;
            const double avg = (rho_i + ctx->rho_sorted[j]) / 2;
            if (avg > bar && grid_sqdist(g, p, j) < ctx->cut) best = bar = avg;
          }
        }
      }
    } while (gm_dpc_rows_next(geo->dim, &rows));
  if (best > 0) {
    ctx->border[g->order[s]] = best;
#pragma omp critical(gm_dpc_border_found)
    if (best > ctx->found[own]) ctx->found[own] = best;
  }
}

/* The border densities of the points of one cell of one cluster together (a cell of
 * several clusters goes point by point): the rows, the runs and the cells of another
 * cluster wholly within dc of every point are found once from the bounding box of the
 * cell's points; the points of the other cells are tested for each point. */
static void border_cell(const gm_dpc_grid *g, const void *vctx, int64_t cell) {
  const border_ctx *ctx = vctx;
  const gm_dpc_geom *geo = &g->geom;
  const int64_t s0 = g->start[cell], m = g->start[cell + 1] - s0;
  if (m == 0) return;
  const int64_t own = ctx->cluster_sorted[s0];
  for (int64_t k = 1; k < m; k++)
    if (ctx->cluster_sorted[s0 + k] != own) {
      for (int64_t j = 0; j < m; j++) border_point(g, ctx, s0 + j);
      return;
    }
  for (int64_t k0 = 0; k0 < m; k0 += GM_DPC_GRID_BLOCK_CELL) {
    const int64_t mk = m - k0 < GM_DPC_GRID_BLOCK_CELL ? m - k0 : GM_DPC_GRID_BLOCK_CELL;
    int64_t pos[GM_DPC_GRID_BLOCK_CELL], na = 0;
    double best[GM_DPC_GRID_BLOCK_CELL], bar[GM_DPC_GRID_BLOCK_CELL], rk[GM_DPC_GRID_BLOCK_CELL];
    double pts[GM_DPC_GRID_BLOCK_CELL][GM_DPC_GRID_MAX_DIM];
    const double floor = found_of(ctx, own);
    double rho_hi = 0;
    for (int64_t k = 0; k < mk; k++) {
      const int64_t s = s0 + k0 + k;
      const double rho_i = ctx->rho_sorted[s];
      if (rho_i >= ctx->seed_rho) continue; /* done in the first pass */
      ctx->border[g->order[s]] = 0;
      if ((rho_i + ctx->reach[cell]) / 2 <= floor) continue;
      pos[na] = s;
      rk[na] = rho_i;
      best[na] = 0;
      bar[na] = floor;
      point_of(g, s, pts[na]);
      if (rho_i > rho_hi) rho_hi = rho_i;
      na++;
    }
    if (na == 0) continue;
    double qa[GM_DPC_GRID_MAX_DIM], qb[GM_DPC_GRID_MAX_DIM];
    for (int t = 0; t < geo->dim; t++) {
      qa[t] = qb[t] = pts[0][t];
      for (int64_t k = 1; k < na; k++) {
        if (pts[k][t] < qa[t]) qa[t] = pts[k][t];
        if (pts[k][t] > qb[t]) qb[t] = pts[k][t];
      }
    }
    gm_dpc_rows rows;
    if (gm_dpc_rows_ball(geo, geo->dim, qa, qb, sqrt(ctx->cut * GM_DPC_CUT_OUT), &rows)) do {
        double near_sq, far_sq;
        const int64_t base = gm_dpc_row_base(geo, geo->dim, &rows, qa, qb, &near_sq, &far_sq);
        int64_t o_lo, o_hi, i_lo, i_hi;
        if (!gm_dpc_row_cells(geo, qa[0], qb[0], near_sq, far_sq, ctx->cut, &o_lo, &o_hi, &i_lo,
                              &i_hi))
          continue;
        const double seen = found_of(ctx, own);
        double bar_min = INFINITY;
        for (int64_t k = 0; k < na; k++) {
          if (seen > bar[k]) bar[k] = seen;
          if (bar[k] < bar_min) bar_min = bar[k];
        }
        int64_t q = o_lo;
        while (q <= o_hi) {
          const int64_t id = base + q, label = g->run_label[id], end = g->run_end[id] - base;
          if (label == own || label == GM_DPC_EMPTY || (rho_hi + g->run_max[id]) / 2 <= bar_min) {
            q = end + 1;
            continue;
          }
          const int64_t stop = end < o_hi ? end : o_hi;
          for (; q <= stop; q++) {
            const int64_t cq = base + q;
            const double top = ctx->cell_max[cq];
            if (top < 0 || (rho_hi + top) / 2 <= bar_min) continue;
            const int inside = label >= 0 && q >= i_lo && q <= i_hi;
            for (int64_t k = 0; k < na; k++) {
              if ((rk[k] + top) / 2 <= bar[k]) continue;
              if (inside) {
                best[k] = bar[k] = (rk[k] + top) / 2; /* another cluster, all within the cut */
                continue;
              }
              for (int64_t j = g->start[cq]; j < g->start[cq + 1]; j++) {
                if (ctx->cluster_sorted[j] == own) continue;
                const double avg = (rk[k] + ctx->rho_sorted[j]) / 2;
                if (avg > bar[k] && grid_sqdist(g, pts[k], j) < ctx->cut) best[k] = bar[k] = avg;
              }
            }
            bar_min = INFINITY;
            for (int64_t k = 0; k < na; k++)
              if (bar[k] < bar_min) bar_min = bar[k];
          }
        }
      } while (gm_dpc_rows_next(geo->dim, &rows));
    double top_best = 0;
    for (int64_t k = 0; k < na; k++)
      if (best[k] > 0) {
        ctx->border[g->order[pos[k]]] = best[k];
        if (best[k] > top_best) top_best = best[k];
      }
    if (top_best > 0) {
#pragma omp critical(gm_dpc_border_found)
      if (top_best > ctx->found[own]) ctx->found[own] = top_best;
    }
  }
}

/* Blocks of cells for reach_of: at most this many block pairs per point of the data. */
#define GM_DPC_REACH_PAIRS_PER_POINT 1

/* A bound, per cell, on the rho of the points of other clusters within the cut of its
 * points: over blocks of about dc / 2 a side, the largest rho of the blocks within the
 * cut of the cell's block that hold a point of another cluster (a block of several
 * clusters counts whole). The densest points sit at the clusters' peaks, far from their
 * borders, so this bound is far below the largest rho near most borders, and the points
 * it cannot lift past their cluster's border density so far skip their walk. Where the
 * blocks would cost more than GM_DPC_REACH_PAIRS_PER_POINT pairs per point (high d),
 * the bound is rho_max everywhere. */
static double *reach_of(const gm_dpc_grid *g, double cut, const double *cell_max,
                        double rho_max) {
  const gm_dpc_geom *geo = &g->geom;
  const int dim = geo->dim;
  double *reach = gm_alloc((size_t)g->ncells, sizeof *reach);
  if (!reach) return NULL;
  const double per_dc = sqrt(cut) * geo->inv_h; /* cells per dc */
  const int64_t side = per_dc / 2 > 1 ? (int64_t)ceil(per_dc / 2) : 1;
  const int64_t m = (int64_t)ceil(per_dc / (double)side) + 1; /* block offsets reached */
  int64_t blocks[GM_DPC_GRID_MAX_DIM], bstride[GM_DPC_GRID_MAX_DIM];
  double nblocks = 1, offsets = 1;
  for (int t = 0; t < dim; t++) {
    blocks[t] = (geo->cells[t] + side - 1) / side;
    bstride[t] = t ? bstride[t - 1] * blocks[t - 1] : 1;
    nblocks *= (double)blocks[t];
    offsets *= (double)(2 * m + 1 < blocks[t] ? 2 * m + 1 : blocks[t]);
  }
  if (nblocks * offsets > GM_DPC_REACH_PAIRS_PER_POINT * (double)g->n + 4096) {
    for (int64_t c = 0; c < g->ncells; c++) reach[c] = rho_max;
    return reach;
  }
  const int64_t nb = (int64_t)nblocks;
  double *top = gm_alloc((size_t)nb, sizeof *top), *far = gm_alloc((size_t)nb, sizeof *far);
  int64_t *label = gm_alloc((size_t)nb, sizeof *label);
  int64_t *cell_block = gm_alloc((size_t)g->ncells, sizeof *cell_block);
  if (!top || !far || !label || !cell_block) {
    free(top);
    free(far);
    free(label);
    free(cell_block);
    free(reach);
    return NULL;
  }
  for (int64_t b = 0; b < nb; b++) {
    top[b] = -1;
    label[b] = GM_DPC_EMPTY;
  }
  /* each block's densest point and label (a cluster, GM_DPC_MIXED or GM_DPC_EMPTY) */
  for (int64_t c = 0; c < g->ncells; c++) {
    int64_t id = c, b = 0;
    for (int t = 0; t < dim; t++) {
      b += (id % geo->cells[t]) / side * bstride[t];
      id /= geo->cells[t];
    }
    cell_block[c] = b;
    if (cell_max[c] < 0) continue; /* empty */
    if (cell_max[c] > top[b]) top[b] = cell_max[c];
    const int64_t own = g->run_label[c]; /* a non-empty cell's own label */
    label[b] = label[b] == GM_DPC_EMPTY || label[b] == own ? own : GM_DPC_MIXED;
  }
  /* per block, the densest block within the cut holding another cluster: blocks whose
   * boxes (cells widened by their slack) come closer than the cut */
#pragma omp parallel for schedule(dynamic, 64) num_threads(g->threads)
  for (int64_t b = 0; b < nb; b++) {
    int64_t q[GM_DPC_GRID_MAX_DIM], o[GM_DPC_GRID_MAX_DIM], id = b;
    for (int t = 0; t < dim; t++) {
      q[t] = id % blocks[t];
      id /= blocks[t];
      o[t] = q[t] - m > 0 ? q[t] - m : 0;
    }
    double best = -1;
    for (;;) {
      double gap_sq = 0;
      int64_t p = 0;
      for (int t = 0; t < dim; t++) {
        const int64_t apart = o[t] > q[t] ? o[t] - q[t] : q[t] - o[t];
        const double gap = apart > 1 ? ((double)((apart - 1) * side) - 2 * geo->slack[t]) * geo->h : 0;
        gap_sq += gap > 0 ? gap * gap : 0;
        p += o[t] * bstride[t];
      }
      const int64_t lp = label[p];
      if (gap_sq < cut * GM_DPC_CUT_OUT && lp != GM_DPC_EMPTY &&
          (lp != label[b] || lp == GM_DPC_MIXED) && top[p] > best)
        best = top[p];
      int t = 0;
      for (; t < dim; t++) {
        const int64_t last = q[t] + m < blocks[t] - 1 ? q[t] + m : blocks[t] - 1;
        if (o[t] < last) {
          o[t]++;
          break;
        }
        o[t] = q[t] - m > 0 ? q[t] - m : 0;
      }
      if (t == dim) break;
    }
    far[b] = best;
  }
#pragma omp parallel for schedule(static) num_threads(g->threads)
  for (int64_t c = 0; c < g->ncells; c++) reach[c] = far[cell_block[c]];
  free(top);
  free(far);
  free(label);
  free(cell_block);
  return reach;
}

gpuml_status gm_dpc_grid_border(const gm_dpc_grid *g, double cut, const double *rho,
                                const int64_t *cluster, double *border,
                                const gpuml_options *opt) {
  double *rho_sorted = gm_alloc((size_t)g->n, sizeof *rho_sorted);
  int64_t *cluster_sorted = gm_alloc((size_t)g->n, sizeof *cluster_sorted);
  double *found = gm_alloc((size_t)g->nclusters, sizeof *found);
  double *cell_max = NULL, *reach = NULL;
  gpuml_status st;
  double rho_max = 0;
  if (rho_sorted && cluster_sorted && found) {
#pragma omp parallel for schedule(static) reduction(max : rho_max) num_threads(g->threads)
    for (int64_t s = 0; s < g->n; s++) {
      rho_sorted[s] = rho[g->order[s]];
      cluster_sorted[s] = cluster[g->order[s]];
      rho_max = rho_sorted[s] > rho_max ? rho_sorted[s] : rho_max;
    }
    for (int64_t c = 0; c < g->nclusters; c++) found[c] = 0;
    cell_max = cell_max_of(g, rho_sorted);
    if (cell_max) reach = reach_of(g, cut, cell_max, rho_max);
  }
  if (!rho_sorted || !cluster_sorted || !found || !cell_max || !reach) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB of density peaks work space",
                 (double)(2 * g->n + g->ncells) * 8 / 1e6);
  } else {
    border_ctx ctx = {cut, rho_sorted, cluster_sorted, cell_max, reach, found, border,
                      gm_dpc_seed_rho(rho, g->n), 1};
    /* The densest points first (about 1%): they raise each cluster's largest border
     * density early, so that most other points are skipped at once. */
#pragma omp parallel for schedule(dynamic, 256) num_threads(g->threads)
    for (int64_t s = 0; s < g->n; s++) border_point(g, &ctx, s);
    ctx.seeding = 0;
    st = for_items(g, opt, "dpc halo", 1, 0, g->ncells, border_cell, &ctx);
  }
  free(rho_sorted);
  free(cluster_sorted);
  free(found);
  free(cell_max);
  free(reach);
  return st;
}
