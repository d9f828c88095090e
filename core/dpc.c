/* Density peaks clustering (Rodriguez & Laio, Science 2014): the public entry points,
 * their argument checks, the dc estimate, the choice of centres, the assignment and
 * the halo. The passes over pairs run on the cell index or on distance tiles (CPU,
 * core/dpc_grid.c and core/dpc_tiles.c) or on the GPU (kernels/dpc.cu); everything
 * else is shared by both backends, so that they give the same answers. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "distance_tiles.h"
#include "params.h"
#include "rng.h"
#include "shards.h"

/* The parameters by name (gpuml_params_set_*): a number for dc means that dc, "auto"
 * the estimate; k and the thresholds mark themselves given. */
static const char *const dpc_kernels[] = {"cutoff", "gaussian", NULL};
const gm_param_spec gm_dpc_param_specs[] = {
    {GM_PARAM(gpuml_dpc_params, dc, GM_PARAM_REAL), .auto_name = "auto", .auto_value = 0,
     .has_flag = 1, .flag_offset = offsetof(gpuml_dpc_params, estimate_dc), .flag_on_number = 0},
    {GM_PARAM(gpuml_dpc_params, neighbor_rate, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_dpc_params, kernel, GM_PARAM_CHOICE), .choices = dpc_kernels},
    {GM_PARAM(gpuml_dpc_params, gaussian_cutoff, GM_PARAM_REAL)},
    {.name = "k", .type = GM_PARAM_INT64, .offset = offsetof(gpuml_dpc_params, select.k),
     .has_flag = 1, .flag_offset = offsetof(gpuml_dpc_params, select.has_k), .flag_on_number = 1},
    {.name = "rho", .type = GM_PARAM_REAL, .offset = offsetof(gpuml_dpc_params, select.rho_min),
     .has_flag = 1, .flag_offset = offsetof(gpuml_dpc_params, select.has_rho),
     .flag_on_number = 1},
    {.name = "delta", .type = GM_PARAM_REAL,
     .offset = offsetof(gpuml_dpc_params, select.delta_min), .has_flag = 1,
     .flag_offset = offsetof(gpuml_dpc_params, select.has_delta), .flag_on_number = 1},
    {.name = NULL}};

void gpuml_dpc_params_init(gpuml_dpc_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->estimate_dc = 1;
  p->neighbor_rate = 0.02;
  p->kernel = GPUML_DPC_CUTOFF;
}

void gpuml_dpc_selection_init(gpuml_dpc_selection *s) {
  if (!s) return;
  memset(s, 0, sizeof *s);
}

double gm_dpc_sq_threshold(double dc, int strict) {
  /* The smallest T with sqrt(T) >= dc (strict) or sqrt(T) > dc: dc * dc is within an
   * ulp or two of it, and the predicate is monotone in T. */
#define GM_DPC_PAST(t) (strict ? sqrt(t) >= dc : sqrt(t) > dc)
  double t = dc * dc;
  while (!GM_DPC_PAST(t)) t = nextafter(t, INFINITY);
  while (t > 0 && GM_DPC_PAST(nextafter(t, 0))) t = nextafter(t, 0);
#undef GM_DPC_PAST
  return t;
}

/* The first largest of each run of the array on its thread, then of the runs in order:
 * the first largest of all, as in one pass. */
#define GM_DPC_TOP_RUNS 64
int64_t gm_dpc_top(const double *rho, int64_t n, int threads) {
  if (threads > GM_DPC_TOP_RUNS) threads = GM_DPC_TOP_RUNS;
  if (threads < 1 || n < ((int64_t)1 << 16)) threads = 1;
  int64_t best[GM_DPC_TOP_RUNS];
#pragma omp parallel for schedule(static, 1) num_threads(threads)
  for (int t = 0; t < threads; t++) {
    const int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
    int64_t b = lo;
    for (int64_t i = lo + 1; i < hi; i++)
      if (rho[i] > rho[b]) b = i;
    best[t] = b;
  }
  int64_t top = best[0];
  for (int t = 1; t < threads; t++)
    if (rho[best[t]] > rho[top]) top = best[t];
  return top;
}

/* The rule of `auto` for the passes within a radius (the cutoff density and the halo
 * within dc, the truncated Gaussian density within gaussian_cutoff dc; the exact
 * Gaussian density always runs on the tiles): on the cell index when a point's ball
 * touches at most n / GM_DPC_ROW_COST rows of cells (a row costs about as much as that
 * many pairs of the all-pairs tiles), else on the tiles. Delta is always searched on the index when d <= GM_DPC_GRID_MAX_DIM. */
int gm_dpc_rows_fit(const gm_dpc_grid *g, double cut, int64_t n) {
  return gm_dpc_grid_rows(g, cut) * GM_DPC_ROW_COST <= (double)n;
}

/* ---- dc ------------------------------------------------------------------------ */

static void swap_d(double *a, double *b) {
  double t = *a;
  *a = *b;
  *b = t;
}

/* The k-th smallest (0-based) of v[0 .. n-1], reordering v. Hoare partitions around a
 * median of three, which also stays fast when many values are equal. */
static double select_kth(double *v, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1;
  while (hi > lo) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (v[mid] < v[lo]) swap_d(&v[mid], &v[lo]);
    if (v[hi] < v[lo]) swap_d(&v[hi], &v[lo]);
    if (v[hi] < v[mid]) swap_d(&v[hi], &v[mid]);
    const double pivot = v[mid];
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) i++;
      while (v[j] > pivot) j--;
      if (i <= j) {
        swap_d(&v[i], &v[j]);
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return v[k];
  }
  return v[k];
}

static int compare_index(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The first m of a seeded Fisher-Yates shuffle of 0 .. n-1 (m points without
 * replacement), sorted. Only the entries the shuffle touched differ from the identity:
 * they are kept in a small open-addressed table, not an array of n. */
static gpuml_status sample_rows(int64_t n, int64_t m, uint64_t seed, int64_t *pick) {
  if (m == n) {
    for (int64_t i = 0; i < n; i++) pick[i] = i;
    return GPUML_OK;
  }
  int64_t cap = 16;
  while (cap < 4 * m) cap <<= 1;
  int64_t *key = gm_alloc((size_t)cap, sizeof *key), *val = gm_alloc((size_t)cap, sizeof *val);
  if (!key || !val) {
    free(key);
    free(val);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the sample of dc's estimate");
  }
  for (int64_t e = 0; e < cap; e++) key[e] = -1;
  /* the slot of position p: its own, or the empty one where it would go */
#define GM_DC_SLOT(p, out)                                                    \
  do {                                                                        \
    uint64_t h = (uint64_t)(p) * 0x9E3779B97F4A7C15ULL;                       \
    int64_t e = (int64_t)(h >> 20) & (cap - 1);                               \
    while (key[e] != -1 && key[e] != (p)) e = (e + 1) & (cap - 1);            \
    (out) = e;                                                                \
  } while (0)
  gm_rng rng;
  gm_rng_seed(&rng, seed);
  for (int64_t i = 0; i < m; i++) {
    const int64_t j = i + gm_rng_below(&rng, n - i);
    int64_t ei, ej;
    GM_DC_SLOT(i, ei);
    const int64_t vi = key[ei] == i ? val[ei] : i;
    GM_DC_SLOT(j, ej);
    const int64_t vj = key[ej] == j ? val[ej] : j;
    pick[i] = vj; /* position i takes j's entry, position j takes i's */
    key[ej] = j;
    val[ej] = vi;
  }
#undef GM_DC_SLOT
  free(key);
  free(val);
  qsort(pick, (size_t)m, sizeof *pick, compare_index);
  return GPUML_OK;
}

/* The squared distances of the sample's pairs (j < i), row i after row i - 1: pair (i, j)
 * at i (i - 1) / 2 + j, as gm_dpc_direct_tile gives them. */
static void sample_row(const double *sample, int64_t m, int64_t d, int64_t i, double *out) {
  gm_dpc_direct_tile(sample, m, d, 0, i, i, 1, out);
}

/* The k-th smallest (0-based) of the sample's pairs, as select_kth over all of them
 * would give it, without holding them all: a bound from every 8th point's pairs, the
 * pairs at most that bound kept (by all threads), the k-th of those. *found = 0 when
 * fewer than k + 1 pairs pass the bound or the k-th is 0 (the caller then takes the
 * whole array). */
static gpuml_status kth_pair(const double *sample, int64_t m, int64_t d, int64_t k,
                             const gpuml_options *opt, double *kth, int *found) {
  *found = 0;
  const int64_t pairs = m * (m - 1) / 2;
  if (m < 64) return GPUML_OK;
  /* the bound: a quantile of every 8th point's pairs at twice the rate, plus a margin */
  const int64_t ms = (m + 7) / 8, spairs = ms * (ms - 1) / 2;
  double *sub = gm_alloc((size_t)spairs, sizeof *sub);
  double *strided = gm_alloc((size_t)ms * (size_t)d, sizeof *strided);
  gpuml_status st = GPUML_OK;
  if (!sub || !strided) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate dc's estimate");
    goto done;
  }
  for (int64_t t = 0; t < d; t++)
    for (int64_t i = 0; i < ms; i++) strided[i + t * ms] = sample[8 * i + t * m];
  for (int64_t i = 1; i < ms; i++) sample_row(strided, ms, d, i, sub + i * (i - 1) / 2);
  int64_t sk = (int64_t)ceil(2.0 * (double)(k + 1) / (double)pairs * (double)spairs) + 16;
  if (sk > spairs - 1) goto done; /* the bound would be the largest pair: no gain */
  const double bound = select_kth(sub, spairs, sk);
  /* the pairs at most the bound, in row order (each thread its rows, then joined) */
  const int threads = gm_threads(opt);
  int64_t *counts = gm_alloc((size_t)m + 1, sizeof *counts);
  if (!counts) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate dc's estimate");
    goto done;
  }
  counts[0] = 0;
  int64_t kept = 0;
  double *keep = NULL;
  int no_row = 0; /* a thread could not allocate its row */
  /* first pass: how many of each row pass; second: where they go */
  for (int pass = 0; pass < 2 && !no_row; pass++) {
#pragma omp parallel num_threads(threads)
    {
      double *r = gm_alloc((size_t)m, sizeof *r);
      if (!r) {
#pragma omp atomic write
        no_row = 1;
      }
#pragma omp for schedule(dynamic, 16)
      for (int64_t i = 1; i < m; i++) {
        if (!r) continue;
        sample_row(sample, m, d, i, r);
        if (pass == 0) {
          int64_t c = 0;
          for (int64_t j = 0; j < i; j++) c += r[j] <= bound;
          counts[i + 1] = c;
        } else {
          double *to = keep + counts[i];
          for (int64_t j = 0; j < i; j++)
            if (r[j] <= bound) *to++ = r[j];
        }
      }
      free(r);
    }
    if (no_row) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate dc's estimate");
      break;
    }
    if (pass == 0) {
      counts[1] = 0;
      for (int64_t i = 1; i < m; i++) counts[i + 1] += counts[i];
      kept = counts[m];
      if (kept < k + 1) break;
      keep = gm_alloc((size_t)kept, sizeof *keep);
      if (!keep) {
        st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate dc's estimate");
        break;
      }
    }
  }
  if (!st && keep && kept >= k + 1) {
    /* every pair below the k-th of all is at most the bound, so it is among those kept */
    const double v = select_kth(keep, kept, k);
    if (v > 0) {
      *kth = v;
      *found = 1;
    }
  }
  free(keep);
  free(counts);
done:
  free(sub);
  free(strided);
  return st;
}

static gpuml_status estimate_dc(const double *x, int64_t n, int64_t d, double rate, double *dc,
                                const gpuml_options *opt) {
  const int64_t m = n < GPUML_DPC_DC_SAMPLE ? n : GPUML_DPC_DC_SAMPLE;
  const int64_t pairs = m * (m - 1) / 2;
  int64_t *pick = gm_alloc((size_t)m, sizeof *pick);
  double *sample = gm_alloc((size_t)m * (size_t)d, sizeof *sample);
  double *sq = NULL;
  gpuml_status st = GPUML_OK;
  if (!pick || !sample) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to estimate dc",
                 ((double)m * (double)d + (double)m) * 8 / 1e6);
    goto done;
  }
  if ((st = sample_rows(n, m, opt->seed, pick))) goto done;
  for (int64_t t = 0; t < d; t++)
    for (int64_t i = 0; i < m; i++)
      sample[i + t * m] = x[pick[i] + t * n];
  int64_t k = (int64_t)ceil(rate * (double)pairs) - 1;
  if (k < 0) k = 0;
  if (k > pairs - 1) k = pairs - 1;
  double v = 0;
  int found = 0;
  if ((st = kth_pair(sample, m, d, k, opt, &v, &found))) goto done;
  if (!found) {
    /* all the pairs: small samples, a bound that kept too few, or a k-th of 0 */
    sq = gm_alloc((size_t)pairs, sizeof *sq);
    if (!sq) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to estimate dc",
                   (double)pairs * 8 / 1e6);
      goto done;
    }
#pragma omp parallel for schedule(dynamic, 16) num_threads(gm_threads(opt))
    for (int64_t i = 1; i < m; i++) sample_row(sample, m, d, i, sq + i * (i - 1) / 2);
    v = select_kth(sq, pairs, k);
  }
  if (v == 0) {
    /* Duplicates fill the quantile: take the smallest positive distance instead. */
    v = INFINITY;
    for (int64_t p = 0; p < pairs; p++)
      if (sq[p] > 0 && sq[p] < v) v = sq[p];
    if (v == INFINITY) {
      st = gm_fail(GPUML_ERR_ARG, "dpc:badData",
                   "all %s points are identical, so dc cannot be estimated: give dc",
                   m < n ? "sampled" : "the");
      goto done;
    }
  }
  *dc = sqrt(v);
done:
  free(pick);
  free(sample);
  free(sq);
  return st;
}

/* The cell index for backend b: the geometry alone when the backend sorts the points
 * itself, else the whole index. */
static gpuml_status grid_for(const gm_backend *b, const double *x, int64_t n, int64_t d,
                             gm_dpc_cells sizing, const gpuml_options *used, gm_dpc_grid *grid) {
  if (!b->dpc->sorts_index)
    return gm_dpc_grid_build(x, n, d, gm_dpc_grid_per_cell(d), sizing, b->dpc->cells_per_point,
                             gm_threads(used), grid);
  gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), sizing, b->dpc->cells_per_point,
                   gm_threads(used), grid);
  return GPUML_OK;
}

/* The cutoff density's own index (gm_dpc_cells: GM_DPC_CELLS_SEEN) into fine, when its
 * cells are clearly smaller than those of grid (the mean density's, which delta and
 * the halo walk) and a ball still touches few enough rows: 1 when made. On one device
 * or the shards of several (each session holds both indexes); processes spread over MPI
 * share grid. GPUML_DPC_CELLS=mean: never, for comparisons. */
static int fine_rho_grid(const gm_backend *b, const double *x, int64_t n, int64_t d,
                         const gm_dpc_grid *grid, double cut, gm_dpc_grid *fine) {
  const char *knob = getenv("GPUML_DPC_CELLS");
  if (knob && strcmp(knob, "mean") == 0) return 0;
  /* GPUML_DPC_POINTS_PER_CELL=p: another target occupancy, for measurements */
  const char *per = getenv("GPUML_DPC_POINTS_PER_CELL");
  const double own = b->dpc->rho_per_cell ? b->dpc->rho_per_cell(d) : 0;
  const double per_cell =
      per && atof(per) > 0 ? atof(per) : own > 0 ? own : gm_dpc_grid_per_cell(d);
  gm_dpc_grid_replan(x, grid, per_cell, GM_DPC_CELLS_SEEN, b->dpc->cells_per_point, fine);
  if (!(fine->geom.h < 0.8 * grid->geom.h) || !gm_dpc_rows_fit(fine, cut, n) ||
      (!b->dpc->sorts_index && gm_dpc_grid_sort(x, fine) != GPUML_OK)) {
    gm_clear_error();
    memset(fine, 0, sizeof *fine);
    return 0;
  }
  return 1;
}

static gpuml_status check_data(const double *x, int64_t n, int64_t d) {
  gpuml_status st = gm_check_matrix(x, n, d, "x", "dpc");
  if (st) return st;
  if (n < 2)
    return gm_fail(GPUML_ERR_ARG, "dpc:badData", "density peaks needs at least 2 points, not %lld",
                   (long long)n);
  return GPUML_OK;
}

static gpuml_status check_rate(double rate) {
  if (!(rate > 0 && rate < 1))
    return gm_fail(GPUML_ERR_ARG, "dpc:badRate",
                   "neighbor_rate = %g must lie strictly between 0 and 1 (0.02: about 2%% of "
                   "the points within dc)",
                   rate);
  return GPUML_OK;
}

static gpuml_status check_gaussian_cutoff(double c) {
  if (!(c >= 0) || !isfinite(c))
    return gm_fail(GPUML_ERR_ARG, "dpc:badGaussianCutoff",
                   "gaussian_cutoff = %g must be a finite number >= 0, in units of dc (0: the "
                   "exact sum over all points; 3: pairs beyond 3 dc, of weight below e^-9, "
                   "dropped)",
                   c);
  return GPUML_OK;
}

static gpuml_status check_dc(double dc) {
  if (!(dc > 0) || !isfinite(dc))
    return gm_fail(GPUML_ERR_ARG, "dpc:badDc", "dc = %g must be a positive finite distance", dc);
  return GPUML_OK;
}

gpuml_status gpuml_dpc_estimate_dc(const double *x, int64_t n, int64_t d, double neighbor_rate,
                                   double *dc, const gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = check_data(x, n, d);
  if (!st) st = check_rate(neighbor_rate);
  if (!st) st = gm_check_options(opt);
  if (st) return st;
  if (!dc) return gm_fail(GPUML_ERR_ARG, "dpc:badOutput", "the output dc must not be NULL");
  return estimate_dc(x, n, d, neighbor_rate, dc, opt);
}

/* ---- rho and delta --------------------------------------------------------------- */

/* The top point's delta: its largest distance to any point (squared, exact; the largest
 * of exact values in any order). */
static double farthest_sq(const double *x, int64_t n, int64_t d, int64_t top, int threads) {
  double best = 0;
#pragma omp parallel for schedule(static) reduction(max : best) num_threads(threads) \
    if (n >= ((int64_t)1 << 16))
  for (int64_t j = 0; j < n; j++) {
    const double s = gm_sqdist(x + j, n, x + top, n, d);
    if (s > best) best = s;
  }
  return best;
}

/* gpuml_dpc_density(); when keep is given, the index it built (if any) is handed over
 * there for the halo of the same call to reuse (else keep->start stays NULL), and when
 * kept is, what the backend left on its device for the cut and halo (gm_dpc_ops.density;
 * NULL where it kept nothing or the passes ran on several devices); when order is, it
 * receives the density order (made by the backend where rho lies when the passes ran on
 * one device, else here). The passes
 * over pairs run on one device, over the shards of several (core/dpc_shards.c), or
 * spread over processes (spread not NULL). */
static gpuml_status density_impl(const double *x, int64_t n, int64_t d,
                                 const gpuml_dpc_params *params, double *rho, double *delta,
                                 int64_t *nearest, double *gamma, int64_t *order,
                                 const gpuml_options *opt, gpuml_dpc_result *result,
                                 gm_dpc_grid *keep, void **kept,
                                 const gm_dpc_spread *spread, gpuml_options *used_out,
                                 gm_pages_touched *pages) {
  gpuml_status st = check_data(x, n, d);
  if (st) return st;
  if (!params) return gm_fail(GPUML_ERR_ARG, "dpc:badArgument", "params must not be NULL");
  if (!rho || !delta || !nearest)
    return gm_fail(GPUML_ERR_ARG, "dpc:badOutput", "the output arrays rho, delta and nearest must not be NULL");
  if (params->kernel != GPUML_DPC_CUTOFF && params->kernel != GPUML_DPC_GAUSSIAN)
    return gm_fail(GPUML_ERR_ARG, "dpc:badKernel", "unknown density kernel code %d",
                   (int)params->kernel);
  if ((st = params->estimate_dc ? check_rate(params->neighbor_rate) : check_dc(params->dc)))
    return st;
  if ((st = check_gaussian_cutoff(params->gaussian_cutoff))) return st;
  if ((st = gm_check_options(opt))) return st;
  const double t0 = gm_seconds();
  gpuml_options used;
  const gm_backend *b;
  if ((st = gm_backend_resolve(opt, GM_ALGO_DPC, 2.0 * (double)n * (double)n * (double)d, "dpc",
                               &used, &b)))
    return st;

  gm_trace("dpc: start");
  double dc = params->dc;
  if (params->estimate_dc && (st = estimate_dc(x, n, d, params->neighbor_rate, &dc, &used)))
    return st;
  gm_trace("dpc: dc");
  const int gaussian = params->kernel == GPUML_DPC_GAUSSIAN;
  const int truncated = gaussian && params->gaussian_cutoff > 0;
  /* The pairs rho sums over, s < cut: within dc (cutoff kernel), within gaussian_cutoff
   * dc (truncated Gaussian), or all of them (exact Gaussian). */
  const double cut = !gaussian ? gm_dpc_sq_threshold(dc, 1)
                     : truncated ? gm_dpc_sq_threshold(params->gaussian_cutoff * dc, 1)
                                 : INFINITY;
  /* The index for d <= GM_DPC_GRID_MAX_DIM (gm_dpc_rows_fit): delta always on it, rho
   * (not the exact Gaussian) when a point's ball touches few enough rows of cells. */
  gm_dpc_grid grid, fine;
  memset(&grid, 0, sizeof grid);
  memset(&fine, 0, sizeof fine);
  const int use_grid = gm_dpc_grid_usable(d);
  if (use_grid) st = grid_for(b, x, n, d, GM_DPC_CELLS_MEAN, &used, &grid);
  const int rho_on_grid = !st && use_grid && (!gaussian || truncated) && gm_dpc_rows_fit(&grid, cut, n);
  const gm_dpc_grid *rho_grid = rho_on_grid ? &grid : NULL, *delta_grid = use_grid ? &grid : NULL;
  int ordered = 0; /* whether the backend made the order */
  if (!st && spread) {
    gm_trace("dpc: index geometry");
    st = gm_dpc_spread_density(b, spread, x, n, d, rho_grid, delta_grid, gaussian, dc, cut, rho,
                               delta, nearest, &used);
  } else if (!st) {
    gm_shard_plan plan;
    st = gm_shard_plan_make(&used, n, &plan);
    ordered = !st && plan.count == 1;
    /* the cutoff counts only (exact integers on any cells): the truncated Gaussian's sums
     * follow the cells' order, and a fit on shards must give one device's bits */
    if (!st && rho_on_grid && !gaussian && fine_rho_grid(b, x, n, d, &grid, cut, &fine))
      rho_grid = &fine;
    gm_trace("dpc: index geometry");
    if (!st)
      st = plan.count > 1 ? gm_dpc_sharded(b, &plan, x, n, d, rho_grid, delta_grid, gaussian, dc,
                                           cut, rho, delta, nearest, order, &ordered, &used)
                          : b->dpc->density(x, n, d, rho_grid, delta_grid, gaussian, dc, cut,
                                            rho, delta, nearest, order, kept, &used);
  }
  gm_dpc_grid_free(&fine);
  if (!st && order && !ordered) st = gm_dpc_density_order(rho, n, order, gm_threads(&used));
  if (keep && !st && use_grid) *keep = grid;
  else gm_dpc_grid_free(&grid);
  if (st) return st;
  gm_trace("dpc: density passes");
  if (pages) gm_pages_wait(pages); /* gamma's among them */
  const int64_t top = gm_dpc_top(rho, n, gm_threads(&used));
  delta[top] = farthest_sq(x, n, d, top, gm_threads(&used));
  nearest[top] = -1;
#pragma omp parallel for schedule(static) num_threads(gm_threads(&used))
  for (int64_t i = 0; i < n; i++) {
    delta[i] = sqrt(delta[i]);
    if (gamma) gamma[i] = rho[i] * delta[i];
  }
  gm_trace("dpc: top point's delta, gamma");
  if (used_out) *used_out = used;
  if (result) {
    gm_run_info_fill(&result->run, &used, GM_F64, t0);
    result->dc = dc;
  }
  return GPUML_OK;
}

gpuml_status gpuml_dpc_density(const double *x, int64_t n, int64_t d,
                               const gpuml_dpc_params *params, double *rho, double *delta,
                               int64_t *nearest, double *gamma, const gpuml_options *opt,
                               gpuml_dpc_result *result) {
  gm_clear_error();
  return density_impl(x, n, d, params, rho, delta, nearest, gamma, NULL, opt, result, NULL,
                      NULL, NULL, NULL, NULL);
}

/* ---- centres and clusters --------------------------------------------------------- */

typedef struct {
  double key;    /* gamma, or rho for the density order */
  double rho;
  int64_t index;
} ranked;

/* Decreasing key, then the density order (denser first, then the smaller index). */
static int compare_ranked(const void *pa, const void *pb) {
  const ranked *a = pa, *b = pb;
  if (a->key != b->key) return a->key > b->key ? -1 : 1;
  if (a->rho != b->rho) return a->rho > b->rho ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

static gpuml_status not_denser(int64_t i) {
  return gm_fail(GPUML_ERR_ARG, "dpc:badInput",
                 "the nearest denser point of point %lld is not a denser point: pass the "
                 "output of the density peaks fit",
                 (long long)(i + 1));
}

/* The checks of a fit that read it in sequence (in parallel): finite non-negative rho and
 * delta, nearest (unless NULL) a point or -1, exactly one -1. That each nearest is above
 * its point is checked where the cut follows them (assign_in_order). */
static gpuml_status check_fit(const double *rho, const double *delta, const int64_t *nearest,
                              int64_t n, int threads) {
  int64_t tops = 0, bad_value = n, bad_near = n;
#pragma omp parallel for reduction(+ : tops) reduction(min : bad_value, bad_near) \
    num_threads(threads)
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(rho[i]) || rho[i] < 0 || !isfinite(delta[i]) || delta[i] < 0) {
      bad_value = i < bad_value ? i : bad_value;
      continue;
    }
    const int64_t j = nearest ? nearest[i] : -1;
    if (j == -1) tops++;
    else if (j < 0 || j >= n || j == i) bad_near = i < bad_near ? i : bad_near;
  }
  if (bad_value < n && bad_value <= bad_near)
    return gm_fail(GPUML_ERR_ARG, "dpc:badInput",
                   "rho and delta must be finite and non-negative (point %lld has rho = %g, "
                   "delta = %g): pass the output of the density peaks fit",
                   (long long)(bad_value + 1), rho[bad_value], delta[bad_value]);
  if (bad_near < n) return not_denser(bad_near);
  if (nearest && tops != 1)
    return gm_fail(GPUML_ERR_ARG, "dpc:badInput",
                   "exactly one point (the densest) must have no nearest denser point, not "
                   "%lld: pass the output of the density peaks fit",
                   (long long)tops);
  return GPUML_OK;
}

static gpuml_status check_selection(const gpuml_dpc_selection *sel, int64_t n) {
  if (!sel) return gm_fail(GPUML_ERR_ARG, "dpc:badSelection", "the selection must not be NULL");
  const int thresholds = sel->has_rho || sel->has_delta;
  if (sel->has_k && thresholds)
    return gm_fail(GPUML_ERR_ARG, "dpc:badSelection",
                   "give either k or the rho and delta thresholds, not both");
  if (sel->has_k) {
    if (sel->k < 1)
      return gm_fail(GPUML_ERR_ARG, "dpc:badK", "k = %lld must be at least 1", (long long)sel->k);
    if (sel->k > n)
      return gm_fail(GPUML_ERR_ARG, "dpc:badK", "k = %lld exceeds the %lld points",
                     (long long)sel->k, (long long)n);
    return GPUML_OK;
  }
  if (!thresholds)
    return gm_fail(GPUML_ERR_ARG, "dpc:badSelection",
                   "no selection of centres: give k, or both the rho and delta thresholds");
  if (sel->has_rho != sel->has_delta)
    return gm_fail(GPUML_ERR_ARG, "dpc:badSelection",
                   "give both the rho and the delta threshold (only %s was given)",
                   sel->has_rho ? "rho" : "delta");
  if (!isfinite(sel->rho_min) || !isfinite(sel->delta_min))
    return gm_fail(GPUML_ERR_ARG, "dpc:badSelection",
                   "the thresholds must be finite numbers (rho = %g, delta = %g)", sel->rho_min,
                   sel->delta_min);
  return GPUML_OK;
}

gpuml_status gpuml_dpc_check_selection(const gpuml_dpc_selection *sel, int64_t n) {
  gm_clear_error();
  return check_selection(sel, n);
}

/* ---- the density order ------------------------------------------------------------ */

/* rho as a key whose ascending order is the density order: rho >= 0 (0 and -0 alike),
 * so its bits grow with it; complemented, they fall. */
static inline uint64_t order_key(double rho) {
  uint64_t bits = 0;
  if (rho != 0) memcpy(&bits, &rho, sizeof bits);
  return ~bits;
}

/* The density order by a stable radix sort on the keys (a byte a pass; passes whose
 * byte is the same for every point are skipped, so that counts, whose low bytes are all
 * zero, take about three): equal densities keep the index order. Threaded: each run of
 * the array counts its own bytes and the offsets are laid out byte value by byte value
 * and, within one, run by run, so every pass stays stable and the order is the one-thread
 * order for any number of threads (10^8 points took 7.5 s on one core). */
#define GM_ORDER_MAX_THREADS 64
gpuml_status gm_dpc_density_order(const double *rho, int64_t n, int64_t *order, int threads) {
  uint64_t *key = gm_alloc((size_t)n, sizeof *key), *key2 = gm_alloc((size_t)n, sizeof *key2);
  int64_t *tmp = gm_alloc((size_t)n, sizeof *tmp);
  if (!key || !key2 || !tmp) {
    free(key);
    free(key2);
    free(tmp);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to sort the densities",
                   (double)n * 24 / 1e6);
  }
  if (threads > GM_ORDER_MAX_THREADS) threads = GM_ORDER_MAX_THREADS;
  if (threads > 1 && n < (int64_t)threads * 65536) threads = (int)(n / 65536) + 1;
  if (threads < 1) threads = 1;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; i++) {
    key[i] = order_key(rho[i]);
    order[i] = i;
  }
  int64_t(*cnt)[256] = gm_alloc((size_t)threads, sizeof *cnt);
  if (!cnt) {
    free(key);
    free(key2);
    free(tmp);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the radix counts");
  }
  int64_t *src = order, *dst = tmp;
  for (int shift = 0; shift < 64; shift += 8) {
#pragma omp parallel for schedule(static, 1) num_threads(threads)
    for (int t = 0; t < threads; t++) {
      const int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
      int64_t *c = cnt[t];
      for (int b = 0; b < 256; b++) c[b] = 0;
      for (int64_t i = lo; i < hi; i++) c[(key[i] >> shift) & 0xff]++;
    }
    /* a digit that all keys share leaves the order as it is */
    int trivial = 0;
    for (int b = 0; b < 256 && !trivial; b++) {
      int64_t total = 0;
      for (int t = 0; t < threads; t++) total += cnt[t][b];
      trivial = total == n;
    }
    if (trivial) continue;
    int64_t at = 0;
    for (int b = 0; b < 256; b++)
      for (int t = 0; t < threads; t++) {
        const int64_t c = cnt[t][b];
        cnt[t][b] = at;
        at += c;
      }
#pragma omp parallel for schedule(static, 1) num_threads(threads)
    for (int t = 0; t < threads; t++) {
      const int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
      int64_t *c = cnt[t];
      for (int64_t i = lo; i < hi; i++) {
        const int64_t to = c[(key[i] >> shift) & 0xff]++;
        key2[to] = key[i];
        dst[to] = src[i];
      }
    }
    uint64_t *kt = key;
    key = key2;
    key2 = kt;
    int64_t *tt = src;
    src = dst;
    dst = tt;
  }
  if (src != order) memcpy(order, src, (size_t)n * sizeof *order);
  free(cnt);
  free(key);
  free(key2);
  free(tmp);
  return GPUML_OK;
}

static gpuml_status check_rho(const double *rho, int64_t n) {
  int64_t bad = n;
#pragma omp parallel for reduction(min : bad)
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(rho[i]) || rho[i] < 0) bad = i < bad ? i : bad;
  if (bad < n)
    return gm_fail(GPUML_ERR_ARG, "dpc:badInput",
                   "rho must be finite and non-negative (point %lld has rho = %g): pass the "
                   "output of the density peaks fit",
                   (long long)(bad + 1), rho[bad]);
  return GPUML_OK;
}

gpuml_status gpuml_dpc_order(const double *rho, int64_t n, int64_t *order) {
  gm_clear_error();
  if (!rho) return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "rho must not be NULL");
  if (!order) return gm_fail(GPUML_ERR_ARG, "dpc:badOutput", "the output order must not be NULL");
  if (n < 1) return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "there are no points");
  gpuml_status st = check_rho(rho, n);
  if (st) return st;
  gpuml_options opt;
  gpuml_options_init(&opt);
  gm_trace("dpc order: start");
  st = gm_dpc_density_order(rho, n, order, gm_threads(&opt));
  gm_trace("dpc order: sorted");
  return st;
}

/* Each point but the centres joins the cluster of its nearest denser point, as if in the
 * order given (in the density order that point has its cluster already), on `threads`,
 * in the order's positions: the positions are cut into one block per thread; each block
 * is walked in order, a position taking the label of its nearest's position when that
 * lies earlier in the block, else noting that position; then every position follows the
 * notes (each to an earlier block, so at most one per block) to a label, written to
 * cluster by point. The same clusters as the walk in order on one thread, in O(n) with
 * four reads or writes anywhere in memory per point. centres[c] gets cluster c; the
 * order is checked to be a permutation when check_order. Returns n when every point got
 * a cluster, else the first position where the order names no point, or a point whose
 * nearest is not earlier in the order (with the density order: a nearest that is not
 * denser, or the top point not a centre), or n + 1 when the order is not a permutation;
 * -1 when out of memory. */
static int64_t assign_in_order(const int64_t *order, const int64_t *nearest, int64_t n,
                               const int64_t *centres, int64_t k, int check_order,
                               int64_t *cluster, int threads) {
  /* pos[i]: the position of point i; label[s]: the cluster of position s, or -2 - p when
   * it takes position p's (of an earlier block) */
  int64_t *pos = gm_alloc((size_t)n, sizeof *pos), *label = gm_alloc((size_t)n, sizeof *label);
  if (!pos || !label) {
    free(pos);
    free(label);
    return -1;
  }
  if (threads < 1) threads = 1;
  if (n < (int64_t)threads * 4096) threads = (int)(n / 4096) + 1;
  int64_t first_bad = n, not_permutation = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static) reduction(min : first_bad)
    for (int64_t s = 0; s < n; s++) {
      const int64_t i = order[s];
      label[s] = -1;
      if (i < 0 || i >= n) first_bad = s < first_bad ? s : first_bad;
      else {
#pragma omp atomic write
        pos[i] = s;
      }
    }
    /* a point named twice leaves another out, and one of its positions unrecorded */
    if (check_order) {
#pragma omp for schedule(static) reduction(max : not_permutation)
      for (int64_t s = 0; s < n; s++) {
        const int64_t i = order[s];
        if (i >= 0 && i < n && pos[i] != s) not_permutation = 1;
      }
    }
  }
  const int ok = first_bad == n && !not_permutation;
  if (ok)
    for (int64_t c = 0; c < k; c++) label[pos[centres[c]]] = c;
  if (ok) {
#pragma omp parallel for schedule(static, 1) reduction(min : first_bad) num_threads(threads)
    for (int b = 0; b < threads; b++) {
      const int64_t lo = n * b / threads, hi = n * (b + 1) / threads;
      for (int64_t s = lo; s < hi; s++) {
        if (label[s] >= 0) continue; /* a centre */
        const int64_t j = nearest[order[s]];
        const int64_t p = j >= 0 && j < n ? pos[j] : n;
        if (p >= s) {
          first_bad = s < first_bad ? s : first_bad;
          break;
        }
        label[s] = p >= lo ? label[p] : -2 - p;
      }
    }
  }
  if (first_bad == n && !not_permutation) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t s = 0; s < n; s++) {
      int64_t c = label[s];
      while (c < 0) c = label[-2 - c];
      cluster[order[s]] = c;
    }
  }
  free(pos);
  free(label);
  return first_bad < n ? first_bad : not_permutation ? n + 1 : n;
}

/* Up to GM_DPC_RANK_SAMPLE evenly spaced gammas bound the k-th largest from below, so
 * that the ranking looks at a few more than k points instead of all n. */
#define GM_DPC_RANK_SAMPLE 65536

/* The points that may be centres (with k: gamma at least a bound of the k-th largest;
 * with thresholds: rho > rho_min and delta > delta_min), in r, *count of them; in
 * parallel, in index order. */
#define GM_DPC_CUT_PARTS 256
static void candidates(const double *rho, const double *delta, int64_t n,
                       const gpuml_dpc_selection *sel, double floor_key, int threads, ranked *r,
                       int64_t *count) {
  int64_t found[GM_DPC_CUT_PARTS + 1] = {0};
  const int np = threads < 1 ? 1 : threads < GM_DPC_CUT_PARTS ? threads : GM_DPC_CUT_PARTS;
  const int64_t chunk = (n + np - 1) / np;
#pragma omp parallel num_threads(np)
  {
#pragma omp for schedule(static, 1)
    for (int part = 0; part < np; part++) {
      const int64_t i1 = (part + 1) * chunk < n ? (part + 1) * chunk : n;
      int64_t c = 0;
      for (int64_t i = part * chunk; i < i1; i++) {
        if (!sel->has_k && !(rho[i] > sel->rho_min && delta[i] > sel->delta_min)) continue;
        if (rho[i] * delta[i] >= floor_key) c++;
      }
      found[part + 1] = c;
    }
#pragma omp single
    for (int part = 0; part < np; part++) found[part + 1] += found[part];
#pragma omp for schedule(static, 1)
    for (int part = 0; part < np; part++) {
      const int64_t i1 = (part + 1) * chunk < n ? (part + 1) * chunk : n;
      int64_t c = found[part];
      for (int64_t i = part * chunk; i < i1; i++) {
        if (!sel->has_k && !(rho[i] > sel->rho_min && delta[i] > sel->delta_min)) continue;
        const double key = rho[i] * delta[i];
        if (key < floor_key) continue;
        r[c].key = key;
        r[c].rho = rho[i];
        r[c].index = i;
        c++;
      }
    }
  }
  *count = found[np];
}

/* A bound below the k-th largest gamma from an evenly spaced sample: the sample's
 * (k m / n + margin)-th largest, -INFINITY when that runs past the sample. Only a bound:
 * the ranking checks that at least k points reach it. */
static double gamma_floor(const double *rho, const double *delta, int64_t n, int64_t k) {
  if (n <= GM_DPC_RANK_SAMPLE) return -INFINITY;
  const int64_t m = GM_DPC_RANK_SAMPLE;
  const double expect = (double)k * (double)m / (double)n;
  const int64_t rank = (int64_t)(expect + 4 * sqrt(expect) + 16);
  if (rank >= m) return -INFINITY;
  double *v = gm_alloc((size_t)m, sizeof *v);
  if (!v) return -INFINITY;
  for (int64_t t = 0; t < m; t++) {
    const int64_t i = (int64_t)((double)t * (double)n / (double)m);
    v[t] = rho[i] * delta[i];
  }
  const double floor_key = select_kth(v, m, m - 1 - rank);
  free(v);
  return floor_key;
}

/* The centres of a checked selection in their order (decreasing gamma, then the denser,
 * then the smaller index): *k of them (k, or all that pass the thresholds) into
 * centres. */
static gpuml_status rank_centres(const double *rho, const double *delta, int64_t n,
                                 const gpuml_dpc_selection *sel, int threads, int64_t *centres,
                                 int64_t *k) {
  ranked *r = gm_alloc((size_t)n, sizeof *r);
  if (!r) {
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to rank the points",
                   (double)n * sizeof *r / 1e6);
  }
  /* With k, only the points whose gamma reaches a bound of the k-th largest are ranked
   * (all of them when fewer than k do), then those that reach the k-th largest itself
   * (found in O(count) by selection), so the cut stays O(n) at any n. */
  int64_t count = 0;
  if (sel->has_k) {
    candidates(rho, delta, n, sel, gamma_floor(rho, delta, n, sel->k), threads, r, &count);
    if (count < sel->k) candidates(rho, delta, n, sel, -INFINITY, threads, r, &count);
    double *keys = gm_alloc((size_t)count, sizeof *keys);
    if (!keys) {
      free(r);
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to rank the points",
                     (double)count * 8 / 1e6);
    }
    for (int64_t c = 0; c < count; c++) keys[c] = r[c].key;
    const double kth = select_kth(keys, count, count - sel->k);
    free(keys);
    int64_t kept = 0;
    for (int64_t c = 0; c < count; c++)
      if (r[c].key >= kth) r[kept++] = r[c];
    count = kept;
  } else {
    candidates(rho, delta, n, sel, -INFINITY, threads, r, &count);
  }
  if (count == 0) {
    double max_rho = 0, max_delta = 0;
    for (int64_t i = 0; i < n; i++) {
      if (rho[i] > max_rho) max_rho = rho[i];
      if (delta[i] > max_delta) max_delta = delta[i];
    }
    free(r);
    return gm_fail(GPUML_ERR_ARG, "dpc:noCentres",
                   "no point has rho > %g and delta > %g: lower the thresholds (the largest rho "
                   "is %g, the largest delta %g)",
                   sel->rho_min, sel->delta_min, max_rho, max_delta);
  }
  qsort(r, (size_t)count, sizeof *r, compare_ranked);
  *k = sel->has_k ? sel->k : count;
  for (int64_t c = 0; c < *k; c++) centres[c] = r[c].index;
  free(r);
  return GPUML_OK;
}

gpuml_status gpuml_dpc_rank(const double *rho, const double *delta, int64_t n, int64_t m,
                            int64_t *top, const gpuml_options *opt) {
  gm_clear_error();
  if (!rho || !delta)
    return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "rho and delta must not be NULL");
  if (!top) return gm_fail(GPUML_ERR_ARG, "dpc:badOutput", "the output top must not be NULL");
  if (n < 1) return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "there are no points");
  gpuml_dpc_selection sel;
  gpuml_dpc_selection_init(&sel);
  sel.has_k = 1;
  sel.k = m;
  gpuml_status st = check_selection(&sel, n);
  if (!st) st = gm_check_options(opt);
  if (st) return st;
  const int threads = gm_threads(opt);
  if ((st = check_fit(rho, delta, NULL, n, threads))) return st;
  int64_t k = 0;
  return rank_centres(rho, delta, n, &sel, threads, top, &k);
}

/* gpuml_dpc_cut(), with the density order when given (else sorted here; a caller's
 * order is checked to be a permutation) and the threads of the options. fit_values: rho,
 * delta, nearest and order are the fit's own, made in this call, and not checked again
 * (a caller's are). */
static gpuml_status cut_impl(const double *rho, const double *delta, const int64_t *nearest,
                             const int64_t *order, int fit_values, int64_t n,
                             const gpuml_dpc_selection *sel, int64_t *centres, int64_t *ncentres,
                             int64_t *cluster, int threads, const gm_backend *b,
                             void *kept, const gpuml_options *used) {
  if (!rho || !delta || !nearest)
    return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "rho, delta and nearest must not be NULL");
  if (!centres || !ncentres || !cluster)
    return gm_fail(GPUML_ERR_ARG, "dpc:badOutput", "the output arrays must not be NULL");
  if (n < 1) return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "there are no points");
  gm_trace("dpc cut: start");
  gpuml_status st = check_selection(sel, n);
  if (!st && !fit_values) st = check_fit(rho, delta, nearest, n, threads);
  if (st) return st;
  gm_trace("dpc cut: the fit checked");

  int64_t k = 0;
  if ((st = rank_centres(rho, delta, n, sel, threads, centres, &k))) return st;
  gm_trace("dpc cut: centres ranked");
  /* The fit's own order on the backend that made it, where it labels (b->dpc->assign);
   * a position before its nearest there is left to the walk below, which names it. */
  if (order && fit_values && b && b->dpc->assign) {
    int done = 0;
    int64_t bad = n;
    if ((st = b->dpc->assign(order, nearest, n, centres, k, cluster, &done, &bad, kept, used)))
      return st;
    if (done && bad == n) {
      gm_trace("dpc cut: clusters (backend)");
      *ncentres = k;
      return GPUML_OK;
    }
  }
  /* In the order kept with the fit; when that is not the density order (it names no
   * point, leaves one out, or reaches a point before its nearest), in the density order
   * sorted here. There, a point before its nearest is an error of the input. */
  int64_t *own_order = NULL;
  for (int pass = order ? 0 : 1; pass < 2; pass++) {
    if (pass == 1) {
      own_order = gm_alloc((size_t)n, sizeof *own_order);
      if (!own_order)
        return gm_fail(GPUML_ERR_NOMEM, "noMemory",
                       "cannot allocate %.1f MB for the density order", (double)n * 8 / 1e6);
      if ((st = gm_dpc_density_order(rho, n, own_order, threads))) break;
      order = own_order;
    }
    const int64_t at = assign_in_order(order, nearest, n, centres, k,
                                       pass == 0 && !fit_values, cluster, threads);
    if (at < 0) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to follow the nearest points",
                   (double)n * 16 / 1e6);
      break;
    }
    if (at == n) break;
    if (pass == 1) {
      /* the top point has no nearest: it is always a centre in a fit (its gamma and,
       * with thresholds, its rho and delta are the largest) */
      const int64_t i = at < n ? order[at] : 0;
      st = at < n && nearest[i] < 0
               ? gm_fail(GPUML_ERR_ARG, "dpc:badInput",
                         "the densest point is not a centre: pass the output of the density "
                         "peaks fit")
               : not_denser(i);
    }
  }
  free(own_order);
  if (st) return st;
  gm_trace("dpc cut: clusters");
  *ncentres = k;
  return GPUML_OK;
}

gpuml_status gpuml_dpc_cut(const double *rho, const double *delta, const int64_t *nearest,
                           int64_t n, const gpuml_dpc_selection *sel, int64_t *centres,
                           int64_t *ncentres, int64_t *cluster) {
  gm_clear_error();
  gpuml_options opt;
  gpuml_options_init(&opt);
  return cut_impl(rho, delta, nearest, NULL, 0, n, sel, centres, ncentres, cluster,
                  gm_threads(&opt), NULL, NULL, NULL);
}

/* ---- halo ---------------------------------------------------------------------- */

/* gpuml_dpc_halo(); reuse, when it holds an index of the same data (from density_impl),
 * spares building it again; the caller frees it. kept: what the fit's backend left on its
 * device (density_impl), taken where the halo runs on that backend. fit_values: x was
 * checked and rho and cluster are the fit's own, made in this call, and are not checked
 * again (a caller's are). */
static gpuml_status halo_impl(const double *x, int64_t n, int64_t d, double dc, const double *rho,
                              const int64_t *cluster, int64_t ncentres, int *halo,
                              const gpuml_options *opt, gpuml_dpc_result *result,
                              gm_dpc_grid *reuse, const gm_backend *kept_by, void *kept,
                              int fit_values) {
  gpuml_status st = fit_values ? GPUML_OK : check_data(x, n, d);
  if (!st) st = check_dc(dc);
  if (st) return st;
  if (!rho || !cluster) return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "rho and cluster must not be NULL");
  if (!halo) return gm_fail(GPUML_ERR_ARG, "dpc:badOutput", "the output halo must not be NULL");
  if (ncentres < 1 || ncentres > n)
    return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "ncentres = %lld must lie in 1 .. %lld",
                   (long long)ncentres, (long long)n);
  if ((st = gm_check_options(opt))) return st;
  if (!fit_values) {
    /* the first bad point, found on all threads */
    int64_t bad = n;
#pragma omp parallel for schedule(static) reduction(min : bad) num_threads(gm_threads(opt)) \
    if (n > 65536)
    for (int64_t i = 0; i < n; i++)
      if (cluster[i] < 0 || cluster[i] >= ncentres || !isfinite(rho[i]) || rho[i] < 0)
        bad = i < bad ? i : bad;
    if (bad < n && (cluster[bad] < 0 || cluster[bad] >= ncentres))
      return gm_fail(GPUML_ERR_ARG, "dpc:badInput",
                     "point %lld has cluster %lld, outside 1 .. %lld", (long long)(bad + 1),
                     (long long)(cluster[bad] + 1), (long long)ncentres);
    if (bad < n)
      return gm_fail(GPUML_ERR_ARG, "dpc:badInput", "rho of point %lld is %g, not a density",
                     (long long)(bad + 1), rho[bad]);
  }
  const double t0 = gm_seconds();
  gpuml_options used;
  const gm_backend *b;
  if ((st = gm_backend_resolve(opt, GM_ALGO_DPC, (double)n * (double)n * (double)d, "dpc", &used,
                               &b)))
    return st;

  const double cut = gm_dpc_sq_threshold(dc, 0);
  double *cluster_border = gm_alloc((size_t)ncentres, sizeof *cluster_border);
  if (!cluster_border)
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the halo",
                   (double)ncentres * 8 / 1e6);
  gm_dpc_grid own;
  memset(&own, 0, sizeof own);
  /* a grid of the geometry alone serves only a backend that sorts the points itself */
  const int reused = reuse && reuse->ncells && (reuse->start || b->dpc->sorts_index);
  gm_dpc_grid *grid = reused ? reuse : &own;
  int use_grid = gm_dpc_grid_usable(d);
  if (use_grid && !reused) st = grid_for(b, x, n, d, GM_DPC_CELLS_MEAN, &used, grid);
  if (!st && use_grid && !gm_dpc_rows_fit(grid, cut, n)) use_grid = 0;
  if (!st && use_grid && reused && grid->run_label) {
    /* a kept index (gpuml_dpc_index) holds the runs of the previous cut's clusters */
    free(grid->run_label);
    free(grid->run_end);
    free(grid->run_max);
    grid->run_label = grid->run_end = NULL;
    grid->run_max = NULL;
  }
  if (!st && use_grid && !b->dpc->sorts_index && !grid->run_label)
    st = gm_dpc_grid_runs(grid, rho, cluster);
  if (!st)
    st = b->dpc->border(x, n, d, use_grid ? grid : NULL, cut, rho, cluster, ncentres,
                        kept_by == b ? kept : NULL, cluster_border, &used);
  gm_trace("dpc halo: border densities");
  gm_dpc_grid_free(&own);
  if (!st) {
#pragma omp parallel for schedule(static) num_threads(gm_threads(&used)) if (n > 65536)
    for (int64_t i = 0; i < n; i++) halo[i] = rho[i] < cluster_border[cluster[i]];
    if (result) {
      gm_run_info_fill(&result->run, &used, GM_F64, t0);
      result->dc = dc;
    }
  }
  free(cluster_border);
  return st;
}

void gm_dpc_cluster_max(const double *border, const int64_t *cluster, int64_t n,
                        int64_t ncentres, double *out, int threads) {
  /* a copy per thread, then merged (one thread where the clusters are too many for
   * copies, or their memory is not there) */
  if (!(ncentres <= 65536 && n > 65536)) threads = 1;
  double *copies = threads > 1 ? calloc((size_t)threads * (size_t)ncentres, sizeof *copies) : NULL;
  if (!copies) threads = 1;
  for (int64_t c = 0; c < ncentres; c++) out[c] = 0;
#pragma omp parallel num_threads(threads)
  {
    double *own = copies ? copies + (size_t)gm_thread_id() * (size_t)ncentres : out;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++)
      if (border[i] > own[cluster[i]]) own[cluster[i]] = border[i];
  }
  for (int k = 0; copies && k < threads; k++)
    for (int64_t c = 0; c < ncentres; c++)
      if (copies[(size_t)k * (size_t)ncentres + (size_t)c] > out[c])
        out[c] = copies[(size_t)k * (size_t)ncentres + (size_t)c];
  free(copies);
}

gpuml_status gpuml_dpc_halo(const double *x, int64_t n, int64_t d, double dc, const double *rho,
                            const int64_t *cluster, int64_t ncentres, int *halo,
                            const gpuml_options *opt, gpuml_dpc_result *result) {
  gm_clear_error();
  return halo_impl(x, n, d, dc, rho, cluster, ncentres, halo, opt, result, NULL, NULL, NULL, 0);
}

/* ---- the index kept with a fit ---------------------------------------------------- */

struct gpuml_dpc_index {
  int64_t n, d;
  gm_dpc_grid grid; /* ncells 0: the halo of these data runs on the tiles */
};

gpuml_status gpuml_dpc_index_build(const double *x, int64_t n, int64_t d, double dc,
                                   const gpuml_options *opt, gpuml_dpc_index **out) {
  gm_clear_error();
  if (!out) return gm_fail(GPUML_ERR_ARG, "dpc:badOutput", "the output index must not be NULL");
  *out = NULL;
  gpuml_status st = check_data(x, n, d);
  if (!st) st = check_dc(dc);
  if (!st) st = gm_check_options(opt);
  if (st) return st;
  gpuml_dpc_index *ix = calloc(1, sizeof *ix);
  if (!ix) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the density peaks index");
  ix->n = n;
  ix->d = d;
  /* Only where the halo walks the index (the rule of halo_impl), the whole index. */
  if (gm_dpc_grid_usable(d)) {
    gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_MEAN, 0, gm_threads(opt),
                     &ix->grid);
    if (gm_dpc_rows_fit(&ix->grid, gm_dpc_sq_threshold(dc, 0), n))
      st = gm_dpc_grid_build(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_MEAN, 0,
                             gm_threads(opt), &ix->grid);
    else
      memset(&ix->grid, 0, sizeof ix->grid);
  }
  if (st) {
    free(ix);
    return st;
  }
  *out = ix;
  return GPUML_OK;
}

void gpuml_dpc_index_free(gpuml_dpc_index *ix) {
  if (!ix) return;
  gm_dpc_grid_free(&ix->grid);
  free(ix);
}

/* ---- density, centres, clusters and halo in one call ------------------------------- */

static int has_selection(const gpuml_dpc_selection *s) { return s->has_k || s->has_rho || s->has_delta; }

gpuml_status gpuml_dpc_fit(const double *x, int64_t n, int64_t d, const gpuml_dpc_params *params,
                           double *rho, double *delta, int64_t *nearest, double *gamma,
                           int64_t *order, int64_t *centres, int64_t *ncentres, int64_t *cluster,
                           int *halo, const gpuml_options *opt, gpuml_dpc_result *result) {
  gm_clear_error();
  return gm_dpc_fit_spread(NULL, x, n, d, params, rho, delta, nearest, gamma, order, centres,
                           ncentres, cluster, halo, opt, result);
}

gpuml_status gm_dpc_fit_spread(const gm_dpc_spread *spread, const double *x, int64_t n,
                               int64_t d, const gpuml_dpc_params *params, double *rho,
                               double *delta, int64_t *nearest, double *gamma, int64_t *order,
                               int64_t *centres, int64_t *ncentres, int64_t *cluster, int *halo,
                               const gpuml_options *opt, gpuml_dpc_result *result) {
  if (!params) return gm_fail(GPUML_ERR_ARG, "dpc:badArgument", "params must not be NULL");
  const int cut = has_selection(&params->select);
  gpuml_status st = check_data(x, n, d);
  if (!st && cut) st = gpuml_dpc_check_selection(&params->select, n);
  if (st) return st;
  if (ncentres) *ncentres = 0;
  if (cut && (!centres || !ncentres || !cluster || !halo))
    return gm_fail(GPUML_ERR_ARG, "dpc:badOutput",
                   "with a selection, the outputs centres, ncentres, cluster and halo must not be NULL");
  gpuml_dpc_result local;
  if (!result) result = &local;
  const double t0 = gm_seconds();
  /* The cut follows the density order, made once with the densities (the caller's
   * array when it wants it too); the halo reuses the index of the density pass. */
  int64_t *own_order = NULL;
  if (cut && !order) {
    if (!(order = own_order = gm_alloc((size_t)n, sizeof *order)))
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the density order",
                     (double)n * 8 / 1e6);
  }
  gm_dpc_grid index;
  memset(&index, 0, sizeof index);
  gpuml_options used;
  /* what the backend keeps on its device for the cut and the halo (one process) */
  void *kept = NULL;
  /* gamma's pages and the cut's clusters and halo faulted in while the density passes
   * run (the backend's own results are its to touch: it writes them; of centres only
   * the first *ncentres are written) */
  gm_pages_touched pages;
  gm_pages_init(&pages);
  gm_pages_add(&pages, gamma, (size_t)n * sizeof *gamma);
  if (cut) {
    gm_pages_add(&pages, cluster, (size_t)n * sizeof *cluster);
    gm_pages_add(&pages, halo, (size_t)n * sizeof *halo);
  }
  gm_pages_start(&pages, gm_threads(opt));
  st = density_impl(x, n, d, params, rho, delta, nearest, gamma, order, opt, result,
                    cut ? &index : NULL, cut && !spread ? &kept : NULL, spread, &used, &pages);
  gm_pages_wait(&pages); /* done already, but where density_impl failed */
  if (st || !cut) {
    const gm_backend *b = kept ? gm_backend_used(&used) : NULL;
    if (b) b->dpc->release_kept(kept);
    gm_dpc_grid_free(&index);
    free(own_order);
    return st;
  }
  const gpuml_run_info run = result->run;
  const gm_backend *b = spread ? NULL : gm_backend_used(&used);
  /* the clusters on the fit's backend (one process: the ranks of a spread fit cut alone) */
  st = cut_impl(rho, delta, nearest, order, 1, n, &params->select, centres, ncentres, cluster,
                gm_threads(opt), b, kept, &used);
  free(own_order);
  gm_trace("dpc: centres and clusters");
  if (!st) {
    gm_clear_error();
    st = halo_impl(x, n, d, result->dc, rho, cluster, *ncentres, halo, opt, result, &index, b,
                   kept, 1);
  }
  gm_trace("dpc: halo");
  if (kept) b->dpc->release_kept(kept);
  gm_dpc_grid_free(&index);
  if (st) return st;
  result->run = run;
  result->run.seconds = gm_seconds() - t0;
  return GPUML_OK;
}

gpuml_status gpuml_dpc_recut(const double *x, int64_t n, int64_t d, double dc, const double *rho,
                             const double *delta, const int64_t *nearest, const int64_t *order,
                             gpuml_dpc_index *index, const gpuml_dpc_params *params,
                             int64_t *centres,
                             int64_t *ncentres, int64_t *cluster, int *halo,
                             const gpuml_options *opt, gpuml_dpc_result *result) {
  gm_clear_error();
  if (!params) return gm_fail(GPUML_ERR_ARG, "dpc:badArgument", "params must not be NULL");
  if (!centres || !ncentres || !cluster || !halo)
    return gm_fail(GPUML_ERR_ARG, "dpc:badOutput",
                   "the outputs centres, ncentres, cluster and halo must not be NULL");
  gpuml_status st = gm_check_options(opt);
  if (!st && index && (index->n != n || index->d != d))
    st = gm_fail(GPUML_ERR_ARG, "dpc:badIndex",
                 "the index was built for %lld x %lld data, not these %lld x %lld: pass the "
                 "index of this fit, or none",
                 (long long)index->n, (long long)index->d, (long long)n, (long long)d);
  if (!st) st = cut_impl(rho, delta, nearest, order, 0, n, &params->select, centres, ncentres,
                         cluster, gm_threads(opt), NULL, NULL, NULL);
  if (!st) {
    gm_clear_error();
    st = halo_impl(x, n, d, dc, rho, cluster, *ncentres, halo, opt, result,
                   index ? &index->grid : NULL, NULL, NULL, 0);
  }
  return st;
}

gpuml_status gpuml_dpc_fit_here(void *ctx, const double *x, int64_t n, int64_t d,
                                const gpuml_dpc_params *params, double *rho, double *delta,
                                int64_t *nearest, double *gamma, int64_t *centres,
                                int64_t *ncentres, int64_t *cluster, int *halo,
                                const gpuml_options *opt, gpuml_dpc_result *result) {
  (void)ctx;
  return gpuml_dpc_fit(x, n, d, params, rho, delta, nearest, gamma, NULL, centres, ncentres,
                       cluster, halo, opt, result);
}
