/* Density peaks over parts of the points (several devices, GPUML_SHARDS, or the ranks of
 * an MPI job): rho of every part first, since delta needs the rho of all points, then
 * delta and nearest of every part. A part computes its points against all points with
 * the backend's part_rho and part_delta, which give each point the values of the whole
 * pass bit for bit (the same walk over its cell or its row of tiles), so the answers are
 * the single device's, ties included.
 *
 * Every device (or process) holds all the points in one session of the backend
 * (part_open .. part_close, core/backend.h): the points go to the device and its cell
 * index is built once, for its rho parts and its delta parts. Over the devices of one
 * process (or the threads of GPUML_SHARD_THREADS), part p runs in the session of device
 * p % devices, each device on a thread of its own (a gm_shard_pool kept for the opening
 * and both passes), its parts in turn; the sessions close on the calling thread.
 *
 * The parts: on the cell index, rho by runs of whole cells of about equal work
 * (cell_bounds; with the backend's symmetric count, GM_DPC_SYM_PARTS runs a session, each
 * crossed pair counted once for both points and the sessions' counts summed), and delta
 * in one part on the first device (its walk is short); over all pairs, rows (the
 * Gaussian density in multiples of GM_DPC_GAUSS_PART_ROWS, so that every point's weights
 * come from the same GEMM tile as on one device; fewer parts then get work below a few
 * thousand rows a part). Any split gives the same answers; every process of an MPI job
 * makes the same one from the same points. */
#include <stdio.h>
#include <stdlib.h>
#include "backend.h"
#include "shards.h"

typedef struct {
  const gm_backend *b;
  const double *x;
  int64_t n, d;
  const gm_dpc_grid *rho_grid, *delta_grid;
  int gaussian;
  double dc, cut;
  int parts;            /* delta's (1 on the index) */
  int rho_parts;        /* rho's: parts, or GM_DPC_SYM_PARTS a session with the counts */
  int64_t *rho_bounds; /* rho_parts + 1: the cells (or rows) of each part's rho */
  int slots;           /* the sessions; part p runs in session p % slots */
  void **sessions;
  int64_t top;
  double *rho, *delta_sq;
  int64_t *nearest;
  uint32_t *counts; /* the symmetric count's (part_counts): n a session, else NULL */
} dpc_job;

/* bounds[p] .. bounds[p + 1] - 1: the cells of part p, from the points before each cell
 * (start[], nc + 1 values). A cell's rho work is its points times the points of the cells
 * around it; for a density that changes slowly from cell to cell that is about the square
 * of its count, so the parts are runs of cells of about equal sums of squared counts. On
 * the CPU, 10^6 points in 20 blobs: the slowest of 4 parts took 1.04-1.07x the mean time
 * of a part (1.20-1.42x with equal counts), of 8 parts 1.07-1.14x (1.39-1.56x). The GPU's
 * rho kernel takes a cell per warp, so its cost per cell grows less than the square. The
 * rule is core/dpc_shared.h's gm_dpc_part_ends, which a backend that sorts on the device
 * applies there (part_bounds) and the host in one walk over the cells here. */
static void cell_bounds(const int64_t *start, int64_t nc, int parts, int64_t *bounds) {
  double total = 0;
  for (int64_t c = 0; c < nc; c++) {
    const double count = (double)(start[c + 1] - start[c]);
    total += count * count;
  }
  int64_t c = 0;
  double reached = 0; /* the weight of cells 0 .. c - 1 */
  bounds[0] = 0;
  for (int p = 1; p < parts; p++) {
    const double target = gm_dpc_part_target(total, parts, p);
    while (c < nc && reached < target) {
      const double count = (double)(start[c + 1] - start[c]);
      reached += count * count;
      c++;
    }
    bounds[p] = c;
  }
  bounds[parts] = nc;
}

/* A rho part in the session of `slot`: its points' rho, or with the symmetric count its
 * pairs counted on the session's device, and with the slot's last part all of them written
 * into the slot's counts (the slots' counts are summed after the pass). */
static gpuml_status rho_of_part(const dpc_job *job, int slot, int part,
                                const gpuml_options *opt) {
  const int64_t first = job->rho_bounds[part], last = job->rho_bounds[part + 1];
  const int slot_last = part + job->slots >= job->rho_parts;
  if (first == last && !(job->counts && slot_last)) return GPUML_OK;
  void *session = job->sessions[slot];
  if (job->counts)
    return job->b->dpc->part_counts(
        session, first, last, slot_last ? job->counts + (size_t)slot * (size_t)job->n : NULL, opt);
  return job->b->dpc->part_rho(session, first, last, job->rho, opt);
}

static gpuml_status delta_of_part(const dpc_job *job, void *session, int part,
                                  const gpuml_options *opt) {
  const int64_t first = gm_shard_start(job->n, job->parts, part),
                last = gm_shard_start(job->n, job->parts, part + 1);
  if (first == last) return GPUML_OK;
  return job->b->dpc->part_delta(session, job->rho, job->top, first, last, job->delta_sq,
                                 job->nearest, opt);
}

/* The pool's work, one slot (device) each: its session opened, then its parts of a pass
 * in turn. */
static gpuml_status open_slot(void *ctx, int slot, const gpuml_options *opt) {
  const dpc_job *job = ctx;
  return job->b->dpc->part_open(job->x, job->n, job->d, job->rho_grid, job->delta_grid,
                                job->gaussian, job->dc, job->cut, opt, &job->sessions[slot]);
}

static gpuml_status parts_of_slot(const dpc_job *job, int slot, int delta,
                                  const gpuml_options *opt) {
  for (int p = slot; p < (delta ? job->parts : job->rho_parts); p += job->slots) {
    if (gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "density peaks interrupted");
    const double t0 = gm_trace_on() ? gm_seconds() : 0;
    GM_TRY(delta ? delta_of_part(job, job->sessions[slot], p, opt)
                 : rho_of_part(job, slot, p, opt));
    if (gm_trace_on()) { /* each part's own time: the devices' steps interleave */
      char note[160];
      snprintf(note, sizeof note, "dpc shards: %s part %d of %d in session %d took %.1f ms",
               delta ? "delta" : "rho", p, delta ? job->parts : job->rho_parts, slot,
               (gm_seconds() - t0) * 1e3);
      gm_trace(note);
    }
  }
  return GPUML_OK;
}

static gpuml_status rho_of_slot(void *ctx, int slot, const gpuml_options *opt) {
  return parts_of_slot(ctx, slot, 0, opt);
}

static gpuml_status delta_of_slot(void *ctx, int slot, const gpuml_options *opt) {
  return parts_of_slot(ctx, slot, 1, opt);
}

/* The job of the passes over `parts` parts in `slots` sessions (none open yet); freed by
 * job_free() whatever this returns. */
static gpuml_status job_make(dpc_job *job, const gm_backend *b, int parts, int slots,
                             const double *x, int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                             const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                             double *rho, double *delta_sq, int64_t *nearest) {
  *job = (dpc_job){.b = b, .x = x, .n = n, .d = d, .rho_grid = rho_grid,
                   .delta_grid = delta_grid, .gaussian = gaussian, .dc = dc, .cut = cut,
                   .parts = parts, .rho_parts = parts, .slots = slots, .top = -1,
                   .rho = rho, .delta_sq = delta_sq, .nearest = nearest};
  job->sessions = calloc((size_t)slots, sizeof *job->sessions);
  if (!job->sessions) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the parts");
  return GPUML_OK;
}

/* The rho parts, once the sessions are open: on the index, from its cells' counts (those
 * of the first session's index where the backend sorts the points itself); over all
 * pairs, rows (the Gaussian's whole tiles of GM_DPC_GAUSS_PART_ROWS, since its weights
 * carry the rounding of their tile). */
static gpuml_status job_bounds(dpc_job *job, const gpuml_options *opt) {
  const gm_dpc_grid *g = job->rho_grid;
  const int parts = job->rho_parts;
  int64_t *bounds = job->rho_bounds = gm_alloc((size_t)parts + 1, sizeof *job->rho_bounds);
  if (!bounds) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the parts");
  if (!g) {
    const int64_t n = job->n, unit = job->gaussian ? GM_DPC_GAUSS_PART_ROWS : 1;
    for (int p = 0; p <= parts; p++) {
      const int64_t at = (gm_shard_start(n, parts, p) + unit / 2) / unit * unit;
      bounds[p] = p == parts || at > n ? n : at;
    }
    return GPUML_OK;
  }
  if (g->start) {
    cell_bounds(g->start, g->ncells, parts, bounds);
    return GPUML_OK;
  }
  return job->b->dpc->part_bounds
             ? job->b->dpc->part_bounds(job->sessions[0], parts, bounds, opt)
             : gm_fail(GPUML_ERR_CUDA, "internal", "a backend that sorts on the device without "
                                                   "part_bounds");
}

/* Closes the sessions (on the calling thread, outside any call of the backend) and frees
 * the job. */
static void job_free(dpc_job *job) {
  for (int s = 0; job->sessions && s < job->slots; s++)
    if (job->sessions[s]) job->b->dpc->part_close(job->sessions[s]);
  free(job->sessions);
  free(job->rho_bounds);
  free(job->counts);
}

/* The symmetric count over the parts where the backend's sessions count so (the GPU's: each
 * crossed pair of cells tested once instead of from both sides, about 1.4 times less work
 * on one device, bench/RESULTS.md round 18): a count of all n points a session, zero;
 * NULL (part_rho) where the host lacks their memory. A cell's work then lies with its
 * pairs with the cells after it, which the squared counts of the parts' rule do not
 * weigh, so each session takes GM_DPC_SYM_PARTS runs of cells spread over the index
 * (part p in session p % slots) instead of one; their counts stay on the device until
 * the session's last part. */
#define GM_DPC_SYM_PARTS 8
static void job_counts(dpc_job *job, const gpuml_options *opt) {
  const gm_dpc_ops *ops = job->b->dpc;
  if (!job->rho_grid || job->gaussian || !ops->part_counts_on || !ops->part_counts ||
      !ops->part_counts_on(job->sessions[0], opt))
    return;
  job->counts = calloc((size_t)job->slots * (size_t)job->n, sizeof *job->counts);
  if (job->counts && job->rho_parts < job->slots * GM_DPC_SYM_PARTS)
    job->rho_parts = job->slots * GM_DPC_SYM_PARTS;
  gm_trace(job->counts ? "dpc shards: each crossed pair once" : "dpc shards: no memory for "
                                                                "the symmetric counts");
}

/* rho = the sessions' counts summed, less each point itself. */
static void job_rho_of_counts(const dpc_job *job, int threads) {
  const int64_t n = job->n;
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= 65536)
  for (int64_t i = 0; i < n; i++) {
    uint64_t total = 0;
    for (int s = 0; s < job->slots; s++) total += job->counts[(size_t)s * (size_t)n + (size_t)i];
    job->rho[i] = (double)total - 1;
  }
}

gpuml_status gm_dpc_sharded(const gm_backend *b, const gm_shard_plan *plan, const double *x,
                            int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                            const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                            double *rho, double *delta_sq, int64_t *nearest, int64_t *order,
                            int *ordered, const gpuml_options *used) {
  /* one slot per device of the plan (one per thread of GPUML_SHARD_THREADS), each looping
   * over its parts */
  gm_shard_plan per_device = *plan;
  per_device.count = plan->ndevices;
  dpc_job job;
  gpuml_status st = job_make(&job, b, plan->count, plan->ndevices, x, n, d, rho_grid,
                             delta_grid, gaussian, dc, cut, rho, delta_sq, nearest);
  /* delta on the index in one part, on the first device: its walk is short beside what
   * putting several parts' values in place costs (2.4 x 10^7 x 3 on two devices: the
   * whole pass on one 0.14 s, two parts 0.36 s; bench/RESULTS.md round 19) */
  if (delta_grid) job.parts = 1;
  gm_shard_pool *pool = NULL;
  if (!st) st = gm_shard_pool_open(&per_device, used, &pool);
  if (!st) st = gm_shard_pool_run(pool, open_slot, &job, NULL);
  if (!st) gm_trace("dpc shards: sessions open");
  if (!st) job_counts(&job, used);
  if (!st) st = job_bounds(&job, used);
  if (!st) gm_trace("dpc shards: the rho parts' cells");
  if (!st) st = gm_shard_pool_run(pool, rho_of_slot, &job, "dpc rho");
  if (!st && job.counts) job_rho_of_counts(&job, gm_threads(used));
  if (!st) gm_trace("dpc shards: rho parts");
  if (!st) {
    job.top = gm_dpc_top(rho, n, gm_threads(used));
    st = gm_shard_pool_run(pool, delta_of_slot, &job, "dpc delta");
  }
  if (!st) gm_trace("dpc shards: delta parts");
  /* the density order where the first session holds all rho (the host's sort of 2.4 x 10^7
   * points took about 0.2 s of a two-device fit on a 32-core host) */
  *ordered = 0;
  if (!st && order && b->dpc->part_order) {
    st = b->dpc->part_order(job.sessions[0], order, used);
    *ordered = !st;
    if (!st) gm_trace("dpc shards: the density order");
  }
  gm_shard_pool_close(pool);
  job_free(&job);
  return st;
}

void gm_dpc_scatter(const int64_t *rows, int64_t count, int64_t skip, const double *values,
                    double *to, const int64_t *indices, int64_t *to_index, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (count >= 65536)
  for (int64_t k = 0; k < count; k++) {
    const int64_t i = rows[k];
    if (i == skip) continue;
    to[i] = values[k];
    if (indices) to_index[i] = indices[k];
  }
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
  /* one session, for this process's part of both passes */
  dpc_job job;
  gpuml_status st = job_make(&job, b, spread->parts, 1, x, n, d, rho_grid, delta_grid, gaussian,
                             dc, cut, rho, delta_sq, nearest);
  if (!st) st = open_slot(&job, 0, used);
  if (!st) st = job_bounds(&job, used);
  if (!st) st = rho_of_part(&job, 0, spread->part, used);
  if (!(st = spread->merge(spread->ctx, st, rho, NULL, n))) {
    job.top = gm_dpc_top(rho, n, gm_threads(used));
    st = delta_of_part(&job, job.sessions[0], spread->part, used);
    st = spread->merge(spread->ctx, st, delta_sq, nearest, n);
  }
  job_free(&job);
  return st;
}
