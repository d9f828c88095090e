/* gpuml_gmm_fit() and gpuml_gmm_predict(): argument checks, the choice of G by BIC,
 * n_init starts, and the EM loop with its convergence test and collapse handling,
 * driving the CPU or the CUDA engine (gmm.h) through the same steps. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "blas.h"
#include "gmm.h"
#include "backend.h"
#include "params.h"
#include "shards.h"

/* With n <= d rows a full sample covariance is singular; the fit is then allowed only
 * when reg is at least this fraction of the average column variance. */
#define GM_GMM_MIN_REG_FRACTION 1e-3
/* The hierarchical start's cost grows as d^2 to d^3 per merge (1.5 s at d = 100, minutes
 * at several hundred): above this many columns "hc" starts from k-means++ instead. */
#define GM_GMM_HC_MAX_DIM 100
/* mclust's default convergence tolerance (relative to 1 + |loglik|): see
 * gpuml_gmm_params_init and the R help for why it is ours too. */
#define GM_GMM_DEFAULT_TOL 1e-5
/* A fit that has re-seeded more than this many components per component fails. */
#define GM_GMM_MAX_RESEEDS_PER_COMPONENT 3

/* The parameters by name (gpuml_params_set_*). */
static const char *const gmm_inits[] = {"hc", "kmeans++", NULL};
const gm_param_spec gm_gmm_param_specs[] = {
    {GM_PARAM(gpuml_gmm_params, G, GM_PARAM_INT64_LIST),
     .count_offset = offsetof(gpuml_gmm_params, nG), .capacity = GPUML_GMM_MAX_G},
    {GM_PARAM(gpuml_gmm_params, models, GM_PARAM_CHOICE_LIST), .choices = gm_gmm_model_names,
     .choice_values = gm_gmm_model_values, .count_offset = offsetof(gpuml_gmm_params, n_models),
     .capacity = GPUML_GMM_N_MODELS},
    {GM_PARAM(gpuml_gmm_params, init, GM_PARAM_CHOICE), .choices = gmm_inits},
    {GM_PARAM(gpuml_gmm_params, max_iter, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_gmm_params, tol, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_gmm_params, reg, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_gmm_params, n_init, GM_PARAM_INT64)},
    {.name = NULL}};
/* The choice list stores ints. */
typedef char gm_models_are_ints[sizeof(gpuml_gmm_covariance) == sizeof(int) ? 1 : -1];

void gpuml_gmm_params_init(gpuml_gmm_params *params) {
  if (!params) return;
  memset(params, 0, sizeof *params);
  for (int64_t g = 0; g < 9; g++) params->G[g] = g + 1;  /* mclust's 1:9 */
  params->nG = 9;
  params->n_models = 0; /* all that apply */
  params->init = GPUML_GMM_INIT_HC;
  params->max_iter = 1000;
  params->tol = GM_GMM_DEFAULT_TOL;
  params->reg = 0; /* mclust has none: a ridge biases fits whose covariance is nearly singular */
  params->n_init = 1;
}

/* ---- engines ------------------------------------------------------------------------ */

typedef struct {
  const gm_gmm_ops *ops;
  void *e;
} gm_engine;

/* The backend's engine, or one over shards of the rows (several devices, GPUML_SHARDS). */
static gpuml_status open_engine(const gm_gmm_data *data, gm_engine *eng) {
  const gm_gmm_backend *g = gm_backend_used(data->opt)->gmm;
  eng->e = NULL;
  gm_shard_plan plan;
  GM_TRY(gm_shard_plan_make(data->opt, data->n, &plan));
  if (plan.count > 1) {
    eng->ops = &gm_gmm_sharded_ops;
    return gm_gmm_sharded_open(data, &plan, &eng->e);
  }
  eng->ops = g->ops;
  return g->open(data, &eng->e);
}

static void close_engine(gm_engine *eng) {
  if (eng->e) eng->ops->close(eng->e);
  eng->e = NULL;
}

/* Column means and the average column variance, each column by one thread. */
static void column_stats(const double *x, int64_t n, int64_t d, int threads, double *mean,
                         double *avg_var) {
  double total = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total) \
    if ((double)n * (double)d >= 262144)
  for (int64_t j = 0; j < d; j++) {
    const double *col = x + j * n;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += col[i];
    const double m = s / (double)n;
    double v = 0;
    for (int64_t i = 0; i < n; i++) v += (col[i] - m) * (col[i] - m);
    mean[j] = m;
    total += v / (double)n;
  }
  *avg_var = total / (double)d;
}

/* z (n x K) -> the component of largest probability (ties: the smaller index) and
 * 1 - that probability. */
static void classify(const double *z, int64_t n, int64_t K, int64_t *classification,
                     double *uncertainty) {
  for (int64_t i = 0; i < n; i++) {
    int64_t best = 0;
    for (int64_t k = 1; k < K; k++)
      if (z[i + k * n] > z[i + best * n]) best = k;
    if (classification) classification[i] = best;
    if (uncertainty) {
      const double u = 1 - z[i + best * n];
      uncertainty[i] = u > 0 ? u : 0;
    }
  }
}

/* ---- EM ----------------------------------------------------------------------------- */

/* Host space of one fit (sized for the largest G). */
typedef struct {
  double *w, *mu, *cov, *cov0, *nk, *logdens, *count, *centred;
  double *seeds; /* G x d: the rows re-seeded components start from */
  int *info, *active;
  int64_t *rows;
} gm_fit_space;

typedef struct {
  double loglik;
  int64_t n_iter;
  int converged;
  double seconds_em; /* the wall-clock time of the iterations */
} gm_fit_result;

/* What a fit needs beyond the engine's data. */
typedef struct {
  gpuml_gmm_covariance model;
  double reg;
  int reg_regularises; /* reg is at least GM_GMM_MIN_REG_FRACTION of the average variance */
  gm_gmm_mstep *mstep;
  const gm_gmm_spread *spread; /* rows on other processes too, or NULL */
} gm_fit_setup;

/* A hard partition of some rows of x (ld rows) into G groups: rows[i] (NULL: row i) is
 * in group labels[i * stride] (0 .. G-1), i < m. */
typedef struct {
  const double *x;
  int64_t ld;
  const int64_t *rows;
  const int32_t *labels;
  int64_t m, stride;
} gm_partition;

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The `count` rows of smallest log-density (ties: the smaller index), in that order. */
static void worst_rows(const double *logdens, int64_t n, int64_t count, int64_t *rows) {
  for (int64_t c = 0; c < count; c++) {
    int64_t pick = -1;
    for (int64_t i = 0; i < n; i++) {
      int taken = 0;
      for (int64_t p = 0; p < c && !taken; p++) taken = rows[p] == i;
      if (taken) continue;
      if (pick < 0 || logdens[i] < logdens[pick]) pick = i;
    }
    rows[c] = pick;
  }
}

/* Restarts the components flagged in `flag` at the worst-fitted rows (of the last
 * E-step), with the starting covariance and weight 1/G, the weights renormalised. */
static gpuml_status reseed(gm_engine *eng, const gm_gmm_data *data, const gm_fit_setup *fs,
                           int64_t G, const int *flag, gm_fit_space *s, int64_t *reseeds) {
  const gm_gmm_spread *spread = fs->spread;
  int64_t count = 0;
  for (int64_t k = 0; k < G; k++) count += flag[k] != 0;
  if (!count) return GPUML_OK;
  const int64_t n = spread ? spread->n : data->n, d = data->d;
  *reseeds += count;
  if (*reseeds > GM_GMM_MAX_RESEEDS_PER_COMPONENT * G || count >= n)
    return gm_fail(GPUML_ERR_NUMERIC, "gmm:collapse",
                   "the %s fit with G = %lld kept losing components (less than one point each, "
                   "or a covariance that is not positive definite): use fewer components, a "
                   "larger reg (now %g) or a simpler model",
                   gpuml_gmm_model_name(fs->model, d), (long long)G, fs->reg);
  gpuml_status st;
  if ((st = eng->ops->get_params(eng->e, G, s->w, NULL, NULL))) return st;
  if ((st = eng->ops->log_density(eng->e, s->logdens))) return st;
  if (spread) {
    if ((st = spread->smallest(spread->ctx, s->logdens, data->n, count, s->rows))) return st;
    if ((st = spread->gather(spread->ctx, data->x, data->n, d, s->rows, count, s->seeds)))
      return st;
  } else {
    worst_rows(s->logdens, n, count, s->rows);
    for (int64_t c = 0; c < count; c++)
      for (int64_t j = 0; j < d; j++) s->seeds[c + j * count] = data->x[s->rows[c] + j * n];
  }
  for (int64_t k = 0; k < G; k++)
    if (flag[k]) s->w[k] = 1.0 / (double)G;
  double total = 0;
  for (int64_t k = 0; k < G; k++) total += s->w[k];
  for (int64_t k = 0; k < G; k++) s->w[k] /= total;
  int64_t used = 0;
  for (int64_t k = 0; k < G; k++) {
    if (!flag[k]) continue;
    for (int64_t j = 0; j < d; j++) s->mu[j] = s->seeds[used + j * count];
    used++;
    if ((st = eng->ops->set_component(eng->e, G, s->w, k, s->mu, s->cov0))) return st;
  }
  return GPUML_OK;
}

static gpuml_status singular_start(const gm_gmm_data *data, const gm_fit_setup *fs, int64_t G) {
  return gm_fail(GPUML_ERR_NUMERIC, "gmm:singular",
                 "the starting covariance of the %s fit with G = %lld is not positive "
                 "definite: a column is constant within the starting clusters; use reg > 0 "
                 "(now %g)",
                 gpuml_gmm_model_name(fs->model, data->d), (long long)G, fs->reg);
}

/* The M-step of the model: the engine's unconstrained statistics, constrained on the
 * host, and set back. s->info[k] flags the components left with too little weight. */
static gpuml_status model_mstep(gm_engine *eng, const gm_fit_setup *fs, int64_t G,
                                gm_fit_space *s, int *collapsed) {
  gpuml_status st;
  if ((st = eng->ops->mstep(eng->e, G, s->nk))) return st;
  *collapsed = 0;
  for (int64_t k = 0; k < G; k++) {
    s->active[k] = s->nk[k] >= GM_GMM_MIN_POINTS;
    s->info[k] = !s->active[k];
    *collapsed |= s->info[k];
  }
  /* The unconstrained models without a ridge are the engine's estimates: no round trip
   * of the covariances (on the GPU, 2 d^2 G values each way per iteration). */
  if (fs->reg == 0 && (fs->model == GPUML_GMM_VVV || fs->model == GPUML_GMM_VVI))
    return GPUML_OK;
  if ((st = eng->ops->get_params(eng->e, G, s->w, s->mu, s->cov))) return st;
  if ((st = gm_gmm_model_mstep(fs->mstep, fs->model, G, s->nk, s->active, s->cov, fs->reg)))
    return st;
  return eng->ops->set_params(eng->e, G, s->w, s->mu, s->cov);
}

/* One EM fit of G components from the parameters in s (w, mu, cov; cov0 for re-seeded
 * components). On success the engine holds the final parameters and their
 * responsibilities. */
static gpuml_status em_fit(gm_engine *eng, const gm_gmm_data *data, const gm_fit_setup *fs,
                           int64_t G, const gpuml_gmm_params *P, gm_fit_space *s,
                           gm_fit_result *out) {
  const gpuml_options *opt = data->opt;
  gpuml_status st;
  fs->mstep->warm = 0;
  if ((st = eng->ops->set_params(eng->e, G, s->w, s->mu, s->cov))) return st;
  if ((st = eng->ops->factor(eng->e, G, s->info))) return st;
  for (int64_t k = 0; k < G; k++)
    if (s->info[k]) return singular_start(data, fs, G);
  double loglik;
  if ((st = eng->ops->estep(eng->e, G, &loglik))) return st;
  if (!isfinite(loglik))
    return gm_fail(GPUML_ERR_NUMERIC, "gmm:numeric",
                   "the log-likelihood of the starting mixture is not finite: rescale the data");
  int64_t reseeds = 0, iter = 0;
  int converged = 0;
  const double t_em = now_seconds();
  double last_report = t_em;
  for (iter = 1; iter <= P->max_iter; iter++) {
    if (gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture fit interrupted");
    int changed = 0;
    if ((st = model_mstep(eng, fs, G, s, &changed))) return st;
    if ((st = reseed(eng, data, fs, G, s->info, s, &reseeds))) return st;
    if ((st = eng->ops->factor(eng->e, G, s->info))) return st;
    int bad = 0;
    for (int64_t k = 0; k < G; k++) bad |= s->info[k] != 0;
    if (bad) {
      changed = 1;
      if ((st = reseed(eng, data, fs, G, s->info, s, &reseeds))) return st;
      if ((st = eng->ops->factor(eng->e, G, s->info))) return st;
      for (int64_t k = 0; k < G; k++)
        if (s->info[k]) return singular_start(data, fs, G);
    }
    if (changed) fs->mstep->warm = 0;
    double next;
    if ((st = eng->ops->estep(eng->e, G, &next))) return st;
    if (!isfinite(next))
      return gm_fail(GPUML_ERR_NUMERIC, "gmm:numeric",
                     "the log-likelihood became non-finite at iteration %lld: rescale the data or "
                     "use a larger reg (now %g)",
                     (long long)iter, fs->reg);
    const double change = fabs(next - loglik);
    loglik = next;
    /* mclust's test: the change relative to 1 + |loglik|. */
    if (!changed && P->tol > 0 && change <= P->tol * (1 + fabs(next))) {
      converged = 1;
      break;
    }
    if (opt->verbose > 0 && now_seconds() - last_report >= 1.0) {
      gm_progress(opt, "em", iter, P->max_iter);
      last_report = now_seconds();
    }
  }
  out->loglik = loglik;
  out->n_iter = converged ? iter : P->max_iter;
  out->converged = converged;
  out->seconds_em = now_seconds() - t_em;
  return GPUML_OK;
}

/* ---- starts ------------------------------------------------------------------------- */

/* Whether the symmetric d x d matrix S is positive definite to working precision: its
 * Cholesky factorisation (LAPACK) succeeds with every pivot above 1e-10 of the largest
 * diagonal entry. */
static int positive_definite(const double *S, int64_t d) {
  double top = 0;
  for (int64_t j = 0; j < d; j++) top = S[j + j * d] > top ? S[j + j * d] : top;
  if (!(top > 0) || !isfinite(top)) return 0;
  double *L = gm_alloc((size_t)(d * d), sizeof(double));
  if (!L) return 1; /* cannot check: let the engine's factorisation decide */
  memcpy(L, S, (size_t)(d * d) * sizeof(double));
  const int di = (int)d;
  int info = 0;
  dpotrf_("L", &di, L, &di, &info, 1);
  int ok = info == 0;
  for (int64_t j = 0; j < d && ok; j++) ok = L[j + j * d] * L[j + j * d] > 1e-10 * top;
  free(L);
  return ok;
}

/* The starting parameters from a hard partition: the model's M-step on the groups'
 * sizes, means and scatter; cov0 (for components re-seeded later) is the pooled
 * within-group variance of each column (their average for the spherical models), plus
 * reg. */
static gpuml_status partition_start(const gm_gmm_data *data, const gm_fit_setup *fs, int64_t G,
                                    const gm_partition *part, gm_fit_space *s) {
  const int64_t n = part->ld, d = data->d, dd = d * d, m = part->m;
  const double *x = part->x;
  const int full = gm_gmm_model_structure(fs->model) == GM_GMM_FULL_STRUCTURE;
  memset(s->count, 0, (size_t)G * sizeof(double));
  memset(s->mu, 0, (size_t)(d * G) * sizeof(double));
  memset(s->cov, 0, (size_t)(dd * G) * sizeof(double));
  for (int64_t i = 0; i < m; i++) {
    const int64_t row = part->rows ? part->rows[i] : i;
    const int32_t k = part->labels[i * part->stride];
    s->count[k] += 1;
    for (int64_t j = 0; j < d; j++) s->mu[j + k * d] += x[row + j * n];
  }
  for (int64_t k = 0; k < G; k++) {
    if (s->count[k] < 1)
      return gm_fail(GPUML_ERR_ARG, "gmm:badG",
                     "the start for G = %lld left a group empty: the data have fewer than %lld "
                     "distinct rows",
                     (long long)G, (long long)G);
    for (int64_t j = 0; j < d; j++) s->mu[j + k * d] /= s->count[k];
  }
  double *t = s->centred;
  for (int64_t i = 0; i < m; i++) {
    const int64_t row = part->rows ? part->rows[i] : i;
    const int32_t k = part->labels[i * part->stride];
    double *S = s->cov + k * dd;
    for (int64_t j = 0; j < d; j++) t[j] = x[row + j * n] - s->mu[j + k * d];
    for (int64_t b = 0; b < d; b++)
      for (int64_t a = full ? 0 : b; a <= b; a++) S[a + b * d] += t[a] * t[b];
  }
  memset(s->cov0, 0, (size_t)dd * sizeof(double));
  double pooled_mean = 0;
  for (int64_t j = 0; j < d; j++) {
    double v = 0;
    for (int64_t k = 0; k < G; k++) v += s->cov[k * dd + j + j * d];
    s->cov0[j + j * d] = v / (double)m;
    pooled_mean += v / (double)m / (double)d;
  }
  const int spherical = gm_gmm_model_structure(fs->model) == GM_GMM_SPHERICAL_STRUCTURE;
  for (int64_t j = 0; j < d; j++)
    s->cov0[j + j * d] = (spherical ? pooled_mean : s->cov0[j + j * d]) + fs->reg;
  for (int64_t k = 0; k < G; k++) {
    double *S = s->cov + k * dd;
    for (int64_t b = 0; b < d; b++)
      for (int64_t a = 0; a <= b; a++) S[b + a * d] = S[a + b * d] /= s->count[k];
    s->w[k] = s->count[k] / (double)m;
    s->active[k] = 1;
  }
  /* As mclust does, a start whose model covariance is singular without reg (a group of
   * identical rows, or fewer rows than the model's covariance needs) cannot be fitted:
   * a small reg would turn it into a spike of nearly zero variance at those rows. A reg
   * large enough to regularise (as the n <= d rule asks) is used as given. */
  fs->mstep->warm = 0;
  gpuml_status st = gm_gmm_model_mstep(fs->mstep, fs->model, G, s->count, s->active, s->cov, 0);
  if (st) return st;
  for (int64_t k = 0; k < G && !fs->reg_regularises; k++)
    if (!positive_definite(s->cov + k * dd, d))
      return gm_fail(GPUML_ERR_NUMERIC, "gmm:singular",
                     "the hierarchical start of the %s fit with G = %lld has a group whose "
                     "covariance is singular (identical rows, or too few rows for the model)",
                     gpuml_gmm_model_name(fs->model, d), (long long)G);
  for (int64_t k = 0; k < G; k++)
    for (int64_t j = 0; j < d; j++) s->cov[k * dd + j + j * d] += fs->reg;
  return GPUML_OK;
}

/* The deterministic start of every G: hc partitions of a subset of rows (d > 1), or
 * the quantile classes of the one column (d = 1: the rows' ranks, ties by index, cut
 * into G groups of nearly equal size). */
typedef struct {
  int64_t m;
  int64_t *rows;  /* d > 1 */
  int32_t *labels; /* d > 1: m x gmax; d = 1: n (the rank of each row) */
  const double *x; /* the matrix rows index (ld rows): the data, or `own` */
  int64_t ld;
  double *own;     /* rows spread over processes: the rows the start uses, gathered */
} gm_hc_start;

typedef struct {
  double value;
  int64_t row;
} gm_ranked;
static int by_value(const void *a, const void *b) {
  const gm_ranked *p = a, *q = b;
  return p->value < q->value ? -1 : p->value > q->value ? 1 : (p->row > q->row) - (p->row < q->row);
}

static gpuml_status hc_start_local(const gm_gmm_data *data, int64_t gmax, gm_hc_start *h);

/* The start's rows (gathered from every process when spread) and their partitions. */
static gpuml_status hc_start_prepare(const gm_gmm_data *data, const gm_gmm_spread *spread,
                                     int64_t gmax, gm_hc_start *h) {
  const int64_t d = data->d, n = spread ? spread->n : data->n;
  memset(h, 0, sizeof *h);
  h->x = data->x;
  h->ld = n;
  if (spread) {
    /* the same rows on every process: the column (d = 1), or the rows gm_gmm_hc takes
     * (then all of the m gathered ones) */
    const int64_t m = d == 1 ? n : (n < GM_GMM_HC_SUBSET ? n : GM_GMM_HC_SUBSET);
    int64_t *rows = gm_alloc((size_t)m, sizeof *rows);
    h->own = gm_alloc((size_t)m * (size_t)d, sizeof(double));
    gpuml_status st = rows && h->own ? GPUML_OK
                                     : gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the start's rows");
    if ((st = gm_gmm_agree(spread, st))) {
      free(rows);
      return st;
    }
    if (d == 1)
      for (int64_t i = 0; i < m; i++) rows[i] = i;
    else
      gm_gmm_hc_rows(n, m, rows);
    st = spread->gather(spread->ctx, data->x, data->n, d, rows, m, h->own);
    free(rows);
    if (st) return st;
    h->x = h->own;
    h->ld = m;
  }
  return gm_gmm_agree(spread, hc_start_local(data, gmax, h));
}

/* hc_start_prepare() on the rows of h->x. */
static gpuml_status hc_start_local(const gm_gmm_data *data, int64_t gmax, gm_hc_start *h) {
  const int64_t d = data->d, n = h->ld;
  if (d == 1) {
    gm_ranked *order = gm_alloc((size_t)n, sizeof *order);
    h->labels = gm_alloc((size_t)n, sizeof(int32_t));
    if (!order || !h->labels) {
      free(order);
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the start's ranks");
    }
    for (int64_t i = 0; i < n; i++) order[i] = (gm_ranked){h->x[i], i};
    qsort(order, (size_t)n, sizeof *order, by_value);
    for (int64_t r = 0; r < n; r++) h->labels[order[r].row] = (int32_t)r;
    free(order);
    h->m = n;
    return GPUML_OK;
  }
  h->m = h->ld < GM_GMM_HC_SUBSET ? h->ld : GM_GMM_HC_SUBSET;
  h->rows = gm_alloc((size_t)h->m, sizeof(int64_t));
  h->labels = gm_alloc((size_t)h->m * (size_t)gmax, sizeof(int32_t));
  if (!h->rows || !h->labels)
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the hierarchical start");
  return gm_gmm_hc(h->x, h->ld, d, gmax, data->opt, h->rows, h->labels);
}

static void hc_start_free(gm_hc_start *h) {
  free(h->rows);
  free(h->labels);
  free(h->own);
}

/* The partition of G groups of the start (labels written into `scratch`, m entries,
 * when d = 1). */
static gm_partition hc_partition(const gm_gmm_data *data, const gm_hc_start *h, int64_t G,
                                 int32_t *scratch) {
  gm_partition p = {h->x, h->ld, NULL, NULL, h->m, 1};
  if (data->d == 1) {
    const int64_t n = h->m;
    for (int64_t i = 0; i < n; i++)
      scratch[i] = (int32_t)((int64_t)h->labels[i] * G / n);
    p.labels = scratch;
    return p;
  }
  p.rows = h->rows;
  p.labels = h->labels + (G - 1) * h->m;
  return p;
}

/* ---- refining the hierarchical start ------------------------------------------------ */

/* Per G, the GM_GMM_KEEP fits of largest BIC are kept; after the sweep each of the
 * GM_GMM_KEEP best fits overall is fitted again from the partitions that the other kept
 * fits of its G give the start's rows (when they differ from its own), and the better
 * fit is kept. A fit stuck in a poor optimum (two groups merged and another split, the
 * way a start from a subset of the rows can go wrong) is restarted from a better
 * partition; only the best fits are refined, so the extra fits are few. */
#define GM_GMM_KEEP 3
#define GM_GMM_REFINE_STARTS 1
#define GM_GMM_REFINE_SEED 0x6d69787475726573ULL

typedef struct {
  int64_t mi; /* index in the models tried; -1: empty */
  int refined;
  double bic;
  gm_fit_result fit;
  double *w, *mu, *cov; /* G, d x G, d x d x G */
} gm_kept;

static void kept_free(gm_kept *k, int64_t count) {
  for (int64_t i = 0; k && i < count; i++) {
    free(k[i].w);
    free(k[i].mu);
    free(k[i].cov);
  }
  free(k);
}

static gm_kept *kept_alloc(int64_t count, int64_t d, int64_t gmax) {
  gm_kept *k = gm_alloc((size_t)count, sizeof *k);
  if (!k) return NULL;
  memset(k, 0, (size_t)count * sizeof *k);
  for (int64_t i = 0; i < count; i++) {
    k[i].mi = -1;
    k[i].w = gm_alloc((size_t)gmax, sizeof(double));
    k[i].mu = gm_alloc((size_t)(d * gmax), sizeof(double));
    k[i].cov = gm_alloc((size_t)(d * d * gmax), sizeof(double));
    if (!k[i].w || !k[i].mu || !k[i].cov) {
      kept_free(k, count);
      return NULL;
    }
  }
  return k;
}

/* The slot of slots[0 .. GM_GMM_KEEP-1] a fit of this BIC replaces (an empty one, or the
 * one of least BIC when it is below), or NULL. */
static gm_kept *kept_slot(gm_kept *slots, double bic) {
  gm_kept *worst = NULL;
  for (int64_t i = 0; i < GM_GMM_KEEP; i++) {
    if (slots[i].mi < 0) return slots + i;
    if (!worst || slots[i].bic < worst->bic) worst = slots + i;
  }
  return worst->bic < bic ? worst : NULL;
}

/* labels[i] = the component of largest posterior weight of row rows[i] (rows NULL: row
 * i) under the mixture (ties: the smaller index). Returns 0 when a covariance is not
 * positive definite. work: d x d + d doubles. */
static int classify_rows(const double *x, int64_t n, int64_t d, const int64_t *rows, int64_t m,
                         int64_t G, const double *w, const double *mu, const double *cov,
                         double *work, double *score, int32_t *labels) {
  double *L = work, *y = work + d * d;
  const int di = (int)d;
  for (int64_t i = 0; i < m; i++) score[i] = -INFINITY;
  for (int64_t k = 0; k < G; k++) {
    memcpy(L, cov + k * d * d, (size_t)(d * d) * sizeof(double));
    int info = 0;
    dpotrf_("L", &di, L, &di, &info, 1);
    if (info) return 0;
    double logdet = 0;
    for (int64_t j = 0; j < d; j++) logdet += 2 * log(L[j + j * d]);
    const double c = log(w[k]) - 0.5 * logdet;
    for (int64_t i = 0; i < m; i++) {
      const int64_t row = rows ? rows[i] : i;
      double q = 0;
      for (int64_t j = 0; j < d; j++) { /* L y = x - mu */
        double t = x[row + j * n] - mu[j + k * d];
        for (int64_t p = 0; p < j; p++) t -= L[j + p * d] * y[p];
        y[j] = t / L[j + j * d];
        q += y[j] * y[j];
      }
      const double sc = c - 0.5 * q;
      if (sc > score[i]) {
        score[i] = sc;
        labels[i] = (int32_t)k;
      }
    }
  }
  return 1;
}

/* Whether two labellings of m rows into G groups are the same partition. map: 2 G ints. */
static int same_partition(const int32_t *a, const int32_t *b, int64_t m, int64_t G, int *map) {
  for (int64_t k = 0; k < 2 * G; k++) map[k] = -1;
  for (int64_t i = 0; i < m; i++) {
    if (map[a[i]] < 0 && map[G + b[i]] < 0) {
      map[a[i]] = b[i];
      map[G + b[i]] = a[i];
    } else if (map[a[i]] != b[i] || map[G + b[i]] != a[i]) {
      return 0;
    }
  }
  return 1;
}

/* Every group of a labelling into G groups has a row. */
static int all_groups_used(const int32_t *labels, int64_t m, int64_t G, int *seen) {
  for (int64_t k = 0; k < G; k++) seen[k] = 0;
  for (int64_t i = 0; i < m; i++) seen[labels[i]] = 1;
  for (int64_t k = 0; k < G; k++)
    if (!seen[k]) return 0;
  return 1;
}

/* ---- argument checks ---------------------------------------------------------------- */

gpuml_status gpuml_gmm_check(int64_t n, int64_t d, const gpuml_gmm_params *P,
                             const gpuml_options *opt, int64_t *gmax) {
  gm_clear_error();
  gpuml_status st = gm_check_options(opt);
  if (st) return st;
  if (!P) return gm_fail(GPUML_ERR_ARG, "gmm:badParams", "params must not be NULL");
  if (n < 1 || d < 1)
    return gm_fail(GPUML_ERR_ARG, "gmm:badData", "the data have %lld rows and %lld columns",
                   (long long)n, (long long)d);
  if (P->nG < 1 || P->nG > GPUML_GMM_MAX_G)
    return gm_fail(GPUML_ERR_ARG, "gmm:badG",
                   "nG = %lld numbers of components: give 1 .. %d", (long long)P->nG,
                   GPUML_GMM_MAX_G);
  int64_t largest = 0;
  for (int64_t g = 0; g < P->nG; g++) {
    const int64_t G = P->G[g];
    if (G < 1)
      return gm_fail(GPUML_ERR_ARG, "gmm:badG", "G = %lld must be at least 1", (long long)G);
    if (G > n)
      return gm_fail(GPUML_ERR_ARG, "gmm:badG", "G = %lld exceeds the %lld rows of the data",
                     (long long)G, (long long)n);
    if (G > largest) largest = G;
  }
  if (P->n_models < 0 || P->n_models > GPUML_GMM_N_MODELS)
    return gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                   "n_models = %lld: give 0 (all that apply) .. %d models",
                   (long long)P->n_models, GPUML_GMM_N_MODELS);
  for (int64_t i = 0; i < P->n_models; i++) {
    if (!gm_gmm_valid_model((int)P->models[i]))
      return gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                     "unknown covariance model code %d: use one of mclust's EII, VII, EEI, "
                     "VEI, EVI, VVI, EEE, VEE, EVE, VVE, EEV, VEV, EVV, VVV",
                     (int)P->models[i]);
    for (int64_t j = 0; j < i; j++)
      if (P->models[j] == P->models[i])
        return gm_fail(GPUML_ERR_ARG, "gmm:badModel", "the model %s is given twice",
                       gpuml_gmm_model_name(P->models[i], 2));
  }
  if (P->init != GPUML_GMM_INIT_HC && P->init != GPUML_GMM_INIT_KMEANSPP)
    return gm_fail(GPUML_ERR_ARG, "gmm:badInit", "unknown init code %d: use \"hc\" or \"kmeans++\"",
                   (int)P->init);
  if (P->max_iter < 1)
    return gm_fail(GPUML_ERR_ARG, "gmm:badMaxIter", "max_iter = %lld must be at least 1",
                   (long long)P->max_iter);
  if (!(P->tol >= 0) || !isfinite(P->tol))
    return gm_fail(GPUML_ERR_ARG, "gmm:badTol", "tol = %g must be a finite number >= 0", P->tol);
  if (!(P->reg >= 0) || !isfinite(P->reg))
    return gm_fail(GPUML_ERR_ARG, "gmm:badReg", "reg = %g must be a finite number >= 0", P->reg);
  if (P->n_init < 1)
    return gm_fail(GPUML_ERR_ARG, "gmm:badNInit", "n_init = %lld must be at least 1",
                   (long long)P->n_init);
  if (n > INT_MAX || d > 46340)
    return gm_fail(GPUML_ERR_ARG, "gmm:tooLarge",
                   "%lld x %lld data are more than the BLAS interface takes (2^31 - 1 rows, "
                   "46340 columns)",
                   (long long)n, (long long)d);
  if (gmax) *gmax = largest;
  return GPUML_OK;
}

/* ---- fit ---------------------------------------------------------------------------- */

static void free_space(gm_fit_space *s) {
  free(s->w);
  free(s->mu);
  free(s->cov);
  free(s->cov0);
  free(s->nk);
  free(s->logdens);
  free(s->count);
  free(s->centred);
  free(s->seeds);
  free(s->info);
  free(s->active);
  free(s->rows);
}

static int alloc_space(gm_fit_space *s, int64_t n, int64_t d, int64_t G) {
  memset(s, 0, sizeof *s);
  s->w = gm_alloc((size_t)G, sizeof(double));
  s->mu = gm_alloc((size_t)(d * G), sizeof(double));
  s->cov = gm_alloc((size_t)(d * d * G), sizeof(double));
  s->cov0 = gm_alloc((size_t)(d * d), sizeof(double));
  s->nk = gm_alloc((size_t)G, sizeof(double));
  s->logdens = gm_alloc((size_t)n, sizeof(double));
  s->count = gm_alloc((size_t)G, sizeof(double));
  s->centred = gm_alloc((size_t)d, sizeof(double));
  s->seeds = gm_alloc((size_t)(d * G), sizeof(double));
  s->info = gm_alloc((size_t)G, sizeof(int));
  s->active = gm_alloc((size_t)G, sizeof(int));
  s->rows = gm_alloc((size_t)G, sizeof(int64_t));
  return s->w && s->mu && s->cov && s->cov0 && s->nk && s->logdens && s->count && s->centred &&
         s->seeds && s->info && s->active && s->rows;
}

static uint64_t fit_seed(uint64_t seed, int64_t G, int64_t start) {
  return seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)G) ^
         (0xd1b54a32d192ed03ULL * (uint64_t)(start + 1));
}

/* Switches the engine to the way the model's covariances are held. */
static gpuml_status use_model(gm_engine *eng, gpuml_gmm_covariance model) {
  return eng->ops->set_structure(eng->e, gm_gmm_model_structure(model) == GM_GMM_FULL_STRUCTURE
                                             ? GM_GMM_FULL_STRUCTURE
                                             : GM_GMM_DIAGONAL_STRUCTURE);
}

static double bic_of(double loglik, gpuml_gmm_covariance model, int64_t G, int64_t d, int64_t n) {
  return 2 * loglik - (double)gpuml_gmm_npar(model, G, d) * log((double)n);
}

/* The chosen model becomes this fit. */
static void choose(gpuml_gmm_model *out, gpuml_gmm_covariance model, int64_t G, int64_t d,
                   const gm_fit_result *fit, const double *w, const double *mu,
                   const double *cov) {
  out->covariance = model;
  out->G = G;
  out->d = d;
  out->loglik = fit->loglik;
  out->n_iter = fit->n_iter;
  out->converged = fit->converged;
  out->seconds_em = fit->seconds_em;
  memcpy(out->weights, w, (size_t)G * sizeof(double));
  memcpy(out->means, mu, (size_t)(d * G) * sizeof(double));
  memcpy(out->covariances, cov, (size_t)(d * d * G) * sizeof(double));
}

/* A start that cannot be fitted (the others go on). */
static int fit_failed(gpuml_status st) {
  return st == GPUML_ERR_NUMERIC ||
         (st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badG") == 0);
}

/* ---- the sweep: every model and G from its start ------------------------------------ */

/* What every cell of the sweep needs. */
typedef struct {
  const gpuml_gmm_params *params;
  const gpuml_gmm_covariance *models;
  int reg_regularises;
  const gm_gmm_spread *spread;
  const gm_hc_start *hc; /* NULL: k-means++ starts */
  int refine;            /* the refinement's k-means++ starts (GM_GMM_REFINE_SEED) instead */
} gm_sweep;

/* One cell of the BIC table (a model and a G): its params->n_init starts, the best kept. */
typedef struct {
  gpuml_status failure; /* the last start that could not be fitted (fit_failed), or OK */
  gpuml_status fatal;   /* an error that ends the call, or OK */
  char error_id[64], error_message[1024]; /* the error of the later of the two */
  int64_t best_run;     /* the run (start) of the best fit; -1: none was fitted */
  gm_fit_result fit;
  double *w, *mu, *cov; /* its parameters */
} gm_cell;

static void cell_note_error(gm_cell *c) {
  snprintf(c->error_id, sizeof c->error_id, "%s", gpuml_last_error_id());
  snprintf(c->error_message, sizeof c->error_message, "%s", gpuml_last_error());
}

/* Start r of the refinement of G components: k-means++ from GM_GMM_REFINE_SEED, with
 * the hierarchical start's rule that a start singular without reg is not fitted. */
static gpuml_status refine_start(const gm_gmm_data *data, const gm_fit_setup *fs, int64_t G,
                                 int64_t r, gm_fit_space *s) {
  const int64_t d = data->d;
  gpuml_status st = gm_gmm_kmeanspp_spread(
      fs->spread, data->x, data->n, d, G,
      gm_gmm_model_structure(fs->model) == GM_GMM_SPHERICAL_STRUCTURE, 0,
      fit_seed(GM_GMM_REFINE_SEED, G, r), data->opt, s->w, s->mu, s->cov);
  for (int64_t k = 0; !st && k < G; k++)
    for (int64_t j = 0; j < d; j++) {
      double *v = s->cov + k * d * d + j + j * d;
      if (!(*v > 0) && !fs->reg_regularises) {
        st = singular_start(data, fs, G);
        break;
      }
      *v += fs->reg;
    }
  if (!st) memcpy(s->cov0, s->cov, (size_t)(d * d) * sizeof(double));
  return st;
}

/* Fits cell (mi, gi) on `eng` with the work space s, ms (labels1: the start's d = 1
 * scratch). Runs are numbered across the sweep in cell order, n_init to a cell. */
static void run_cell(gm_engine *eng, const gm_gmm_data *data, const gm_sweep *sw,
                     gm_fit_space *s, gm_gmm_mstep *ms, int32_t *labels1, int64_t mi,
                     int64_t gi, gm_cell *cell) {
  const gpuml_gmm_params *P = sw->params;
  const gm_fit_setup fs = {sw->models[mi], P->reg, sw->reg_regularises, ms, sw->spread};
  const gm_gmm_structure structure = gm_gmm_model_structure(fs.model);
  const int64_t G = P->G[gi], d = data->d;
  cell->failure = cell->fatal = GPUML_OK;
  cell->best_run = -1;
  gpuml_status st = use_model(eng, fs.model);
  const int64_t first = sw->refine ? 1 : 0, last = sw->refine ? GM_GMM_REFINE_STARTS : P->n_init - 1;
  for (int64_t r = first; !st && r <= last; r++) {
    const int64_t run = (mi * P->nG + gi) * P->n_init + r;
    gm_fit_result fit = {0, 0, 0, 0};
    if (sw->refine) {
      st = refine_start(data, &fs, G, r, s);
    } else if (r == 0 && sw->hc) {
      const gm_partition part = hc_partition(data, sw->hc, G, labels1);
      st = partition_start(data, &fs, G, &part, s);
    } else {
      st = gm_gmm_kmeanspp_spread(sw->spread, data->x, data->n, d, G,
                                  structure == GM_GMM_SPHERICAL_STRUCTURE, fs.reg,
                                  fit_seed(data->opt->seed, G, r), data->opt, s->w, s->mu,
                                  s->cov);
      if (!st) memcpy(s->cov0, s->cov, (size_t)(d * d) * sizeof(double));
    }
    if (!st) st = em_fit(eng, data, &fs, G, P, s, &fit);
    if (fit_failed(st)) {
      cell->failure = st;
      cell_note_error(cell);
      st = GPUML_OK;
    } else if (!st && (cell->best_run < 0 || fit.loglik > cell->fit.loglik)) {
      cell->fit = fit;
      cell->best_run = run;
      st = eng->ops->get_params(eng->e, G, cell->w, cell->mu, cell->cov);
    }
  }
  if (st) {
    cell->fatal = st;
    cell_note_error(cell);
  }
}

/* The cells of the sweep side by side: on the CPU a fit of a few thousand rows splits
 * each E- and M-step over threads that meet several times an iteration, and on a busy
 * machine every meeting waits for a thread that lost its core (measured: the default
 * sweep 3-7x slower than on one thread while another job ran). Whole fits on threads of
 * their own meet once. Each fit computes what it would on the one engine (the CPU
 * engine's values do not depend on its threads). The number of threads this takes, 1
 * where the cells run one after the other: another backend, rows spread over processes
 * or shards, fewer than two cells a thread, or engines above 256 MB in all. */
#define GM_GMM_SIDE_BY_SIDE_BYTES 256e6
static int side_by_side_threads(const gm_gmm_data *data, const gm_gmm_spread *spread,
                                int64_t cells) {
  const int threads = gm_threads(data->opt);
  if (spread || data->opt->backend != GPUML_BACKEND_CPU || threads < 2 || cells < 2 * threads)
    return 1;
  gm_shard_plan plan;
  if (gm_shard_plan_make(data->opt, data->n, &plan) || plan.count > 1) {
    gm_clear_error();
    return 1;
  }
  const double bytes = (double)threads * 8 *
                       ((double)data->n * (double)(data->kmax + 2) +
                        (double)data->d * (double)data->d * (double)data->kmax * 4);
  return bytes <= GM_GMM_SIDE_BY_SIDE_BYTES ? threads : 1;
}

/* The interrupt callback of a side-by-side fit: the caller's thread asks the caller's
 * callback (only it may), and every fit stops once it said so. */
typedef struct {
  const gpuml_options *caller;
  volatile int *stop;
  int polls;
} gm_side_poll;

static int side_interrupted(void *ctx) {
  gm_side_poll *p = ctx;
  if (p->polls && !*p->stop && gm_interrupted(p->caller)) *p->stop = 1;
  return *p->stop;
}

/* Larger G first, full covariances before the others: the long fits start early and
 * the short ones fill the end. */
typedef struct {
  int64_t cost, index; /* cost: 2 G, plus 1 for full covariances */
} gm_cell_order;
static int by_cost(const void *a, const void *b) {
  const gm_cell_order *p = a, *q = b;
  return p->cost != q->cost ? (p->cost > q->cost ? -1 : 1)
                            : (p->index > q->index) - (p->index < q->index);
}

/* Runs the cells c = mi * nG + gi of list[0 .. count) (NULL: every one of count) into
 * cells[c] on `threads` threads, an engine, work space and options (one thread, the
 * interrupt shared) each. Returns GPUML_ERR_NOMEM, with nothing run, when those cannot
 * be had; errors of the fits are the cells'. */
static gpuml_status run_cells_side_by_side(const gm_gmm_data *data, const gm_sweep *sw,
                                           const int64_t *list, int64_t count, int threads,
                                           gm_cell *cells) {
  const int64_t nG = sw->params->nG, d = data->d, kmax = data->kmax;
  const gpuml_options *caller = data->opt;
  gm_engine *eng = gm_alloc((size_t)threads, sizeof *eng);
  gm_fit_space *space = gm_alloc((size_t)threads, sizeof *space);
  gm_gmm_mstep *ms = gm_alloc((size_t)threads, sizeof *ms);
  gpuml_options *opts = gm_alloc((size_t)threads, sizeof *opts);
  gm_gmm_data *datas = gm_alloc((size_t)threads, sizeof *datas);
  gm_side_poll *polls = gm_alloc((size_t)threads, sizeof *polls);
  int32_t **labels1 = gm_alloc((size_t)threads, sizeof *labels1);
  gm_cell_order *order = gm_alloc((size_t)count, sizeof *order);
  volatile int stop = 0;
  int ok = eng && space && ms && opts && datas && polls && labels1 && order;
  int opened = 0;
  for (int t = 0; ok && t < threads; t++, opened++) {
    opts[t] = *caller;
    opts[t].threads = 1;
    opts[t].verbose = 0;
    opts[t].progress = NULL;
    polls[t] = (gm_side_poll){caller, &stop, t == 0};
    opts[t].interrupted = side_interrupted;
    opts[t].callback_ctx = polls + t;
    datas[t] = *data;
    datas[t].opt = opts + t;
    eng[t] = (gm_engine){NULL, NULL};
    memset(ms + t, 0, sizeof ms[t]);
    labels1[t] = d == 1 && sw->hc ? gm_alloc((size_t)sw->hc->m, sizeof(int32_t)) : NULL;
    const int ok_space = alloc_space(space + t, data->n, d, kmax);
    ok = ok_space && gm_gmm_mstep_alloc(ms + t, d, kmax) && (labels1[t] || d != 1 || !sw->hc) &&
         open_engine(datas + t, eng + t) == GPUML_OK;
  }
  if (ok) {
    for (int64_t i = 0; i < count; i++) {
      const int64_t c = list ? list[i] : i;
      const int full = gm_gmm_model_structure(sw->models[c / nG]) == GM_GMM_FULL_STRUCTURE;
      order[i] = (gm_cell_order){2 * sw->params->G[c % nG] + full, c};
    }
    qsort(order, (size_t)count, sizeof *order, by_cost);
    const int blas_threads = gm_blas_serial_begin();
    int64_t done = 0, reported = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t o = 0; o < count; o++) {
      const int64_t c = order[o].index;
      const int t = gm_thread_id();
      gm_cell *cell = cells + c;
      if (stop) {
        cell->fatal = GPUML_ERR_INTERRUPTED;
        snprintf(cell->error_id, sizeof cell->error_id, "interrupted");
        snprintf(cell->error_message, sizeof cell->error_message,
                 "Gaussian mixture fit interrupted");
        continue;
      }
      run_cell(eng + t, datas + t, sw, space + t, ms + t, labels1[t], c / nG, c % nG, cell);
      if (cell->fatal) stop = 1;
      int64_t now;
#pragma omp atomic capture
      now = ++done;
      if (t == 0 && !sw->refine) { /* the refinement is not counted in the fits */
        gm_progress(caller, "gmm", now * sw->params->n_init, count * sw->params->n_init);
        reported = now;
      }
    }
    gm_blas_serial_end(blas_threads);
    /* the cells the other threads finished last */
    if (reported < done && !sw->refine) gm_progress(caller, "gmm", done * sw->params->n_init, count * sw->params->n_init);
  }
  for (int t = 0; t < opened; t++) {
    close_engine(eng + t);
    free_space(space + t);
    gm_gmm_mstep_free(ms + t);
    free(labels1[t]);
  }
  free(eng);
  free(space);
  free(ms);
  free(opts);
  free(datas);
  free(polls);
  free(labels1);
  free(order);
  return ok ? GPUML_OK : gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate side-by-side fits");
}

/* The sums of column_stats over the rows of every process: the column means, then the
 * average column variance about them. */
static gpuml_status spread_column_stats(const gm_gmm_spread *spread, const double *x,
                                        int64_t n_local, int64_t d, double *mean,
                                        double *avg_var) {
  double *var = gm_alloc((size_t)d, sizeof(double));
  gpuml_status st = gm_gmm_agree(
      spread, var ? GPUML_OK : gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate column variances"));
  for (int64_t j = 0; !st && j < d; j++) {
    double s = 0;
    for (int64_t i = 0; i < n_local; i++) s += x[i + j * n_local];
    mean[j] = s;
  }
  if (!st) st = spread->sum(spread->ctx, mean, d);
  if (st) {
    free(var);
    return st;
  }
  for (int64_t j = 0; j < d; j++) {
    mean[j] /= (double)spread->n;
    double v = 0;
    for (int64_t i = 0; i < n_local; i++) {
      const double t = x[i + j * n_local] - mean[j];
      v += t * t;
    }
    var[j] = v;
  }
  st = spread->sum(spread->ctx, var, d);
  double total = 0;
  for (int64_t j = 0; j < d; j++) total += var[j] / (double)spread->n;
  *avg_var = total / (double)d;
  free(var);
  return st;
}

gpuml_status gpuml_gmm_fit(const double *x, int64_t n, int64_t d,
                           const gpuml_gmm_params *params, gpuml_gmm_model *model,
                           double *z, int64_t *classification, double *uncertainty,
                           double *bic, const gpuml_options *opt, gpuml_gmm_result *result) {
  return gm_gmm_fit_spread(NULL, x, n, d, params, model, z, classification, uncertainty, bic,
                           opt, result);
}

gpuml_status gm_gmm_fit_spread(const gm_gmm_spread *spread, const double *x, int64_t n_local,
                               int64_t d, const gpuml_gmm_params *params,
                               gpuml_gmm_model *model, double *z, int64_t *classification,
                               double *uncertainty, double *bic, const gpuml_options *opt,
                               gpuml_gmm_result *result) {
  gm_clear_error();
  int64_t gmax = 0;
  const int64_t n = spread ? spread->n : n_local; /* the rows of every process */
  gpuml_status st = gm_check_matrix(x, n_local, d, "data", "gmm");
  if (!st) st = gpuml_gmm_check(n, d, params, opt, &gmax);
  if (st) return st;
  if (!model || !model->weights || !model->means || !model->covariances)
    return gm_fail(GPUML_ERR_ARG, "gmm:badOutput",
                   "the model's weights, means and covariances must be allocated");
  gpuml_gmm_covariance models[GPUML_GMM_N_MODELS];
  const int64_t n_models = gpuml_gmm_models_tried(n, d, params, models);
  int any_full = 0;
  for (int64_t mi = 0; mi < n_models; mi++)
    any_full |= gm_gmm_model_structure(models[mi]) == GM_GMM_FULL_STRUCTURE;
  const int threads = gm_threads(opt);
  double *centre = gm_alloc((size_t)d, sizeof(double));
  if (!centre) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate column means");
  double avg_var = 0;
  if (spread) {
    if ((st = spread_column_stats(spread, x, n_local, d, centre, &avg_var))) {
      free(centre);
      return st;
    }
  } else {
    column_stats(x, n, d, threads, centre, &avg_var);
  }
  if (any_full && n <= d && params->reg < GM_GMM_MIN_REG_FRACTION * avg_var) {
    free(centre);
    return gm_fail(GPUML_ERR_ARG, "gmm:tooFewRows",
                   "models with full covariance matrices of %lld variables need more than %lld "
                   "rows (the data have %lld): use the spherical or diagonal models (EII, VII, "
                   "EEI, VEI, EVI, VVI), or reg >= %.3g (a thousandth of the average variance)",
                   (long long)d, (long long)d, (long long)n, GM_GMM_MIN_REG_FRACTION * avg_var);
  }
  const double work = (double)n * (double)d * (double)gmax * (any_full ? (double)d : 1.0) * 10 *
                      (double)n_models;
  const double t0 = gm_seconds();
  gpuml_options used;
  if ((st = gm_backend_resolve(opt, GM_ALGO_GMM, work, "gmm", &used, NULL))) {
    free(centre);
    return st;
  }

  gm_fit_space s, best_g;
  gm_gmm_mstep ms;
  gm_hc_start hc;
  memset(&ms, 0, sizeof ms);
  memset(&hc, 0, sizeof hc);
  double *zbuf = NULL, *score = NULL, *cwork = NULL, *own_cells = NULL;
  int32_t *labels1 = NULL, *lab_t = NULL, *lab_s = NULL;
  int *map = NULL;
  gm_kept *kept = NULL;
  gm_cell *sweep_cells = NULL; /* the sweep's results (their parameters owned) */
  int64_t sweep_count = 0;
  int64_t *refine_list = gm_alloc((size_t)(params->nG * GPUML_GMM_N_MODELS), sizeof(int64_t));
  gm_engine eng = {NULL, NULL};
  const int ok_s = alloc_space(&s, n_local, d, gmax), ok_b = alloc_space(&best_g, 1, d, gmax);
  if (!ok_s || !ok_b || !gm_gmm_mstep_alloc(&ms, d, gmax))
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the mixture parameters");
  if ((st = gm_gmm_agree(spread, st))) goto done;
  const gm_gmm_data data = {x, n_local, d, gmax,
                            any_full ? GM_GMM_FULL_STRUCTURE : GM_GMM_DIAGONAL_STRUCTURE,
                            centre, &used};
  if ((st = spread ? spread->open(spread->ctx, &data, &eng.ops, &eng.e) : open_engine(&data, &eng)))
    goto done;
  const int use_hc = params->init == GPUML_GMM_INIT_HC && d <= GM_GMM_HC_MAX_DIM;
  if (use_hc && (st = hc_start_prepare(&data, spread, gmax, &hc))) goto done;
  if (use_hc && d == 1 && !(labels1 = gm_alloc((size_t)hc.m, sizeof(int32_t))))
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the start's classes");
  if (use_hc && !st) {
    kept = kept_alloc(params->nG * GM_GMM_KEEP, d, gmax);
    score = gm_alloc((size_t)hc.m, sizeof(double));
    cwork = gm_alloc((size_t)(d * d + d), sizeof(double));
    lab_t = gm_alloc((size_t)hc.m, sizeof(int32_t));
    lab_s = gm_alloc((size_t)hc.m, sizeof(int32_t));
    map = gm_alloc((size_t)(2 * gmax), sizeof(int));
    if (!kept || !score || !cwork || !lab_t || !lab_s || !map)
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the start's refinement");
  }

  const int64_t nG = params->nG, total_fits = nG * n_models * params->n_init;
  /* the BIC table, the caller's or ours */
  double *cells = bic ? bic : (own_cells = gm_alloc((size_t)(nG * n_models), sizeof(double)));
  if (!st && !cells) st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the BIC table");
  if ((st = gm_gmm_agree(spread, st))) goto done;
  const int reg_regularises = params->reg >= GM_GMM_MIN_REG_FRACTION * avg_var;
  int64_t best_run = -1, last_run = -1;
  gpuml_status last_failure = GPUML_OK;
  double best_bic = 0;
  const gm_sweep sweep = {params, models, reg_regularises, spread, use_hc ? &hc : NULL, 0};
  const int64_t n_cells = nG * n_models;
  const int side_threads = side_by_side_threads(&data, spread, n_cells);
  /* the cells' results: all of them when side by side, else one at a time (in best_g) */
  sweep_count = side_threads > 1 ? n_cells : 1;
  if ((sweep_cells = gm_alloc((size_t)sweep_count, sizeof *sweep_cells)))
    memset(sweep_cells, 0, (size_t)sweep_count * sizeof *sweep_cells);
  int side = side_threads > 1 && sweep_cells;
  for (int64_t c = 0; side && c < n_cells; c++) {
    const int64_t G = params->G[c % nG];
    sweep_cells[c].w = gm_alloc((size_t)G, sizeof(double));
    sweep_cells[c].mu = gm_alloc((size_t)(d * G), sizeof(double));
    sweep_cells[c].cov = gm_alloc((size_t)(d * d * G), sizeof(double));
    side = sweep_cells[c].w && sweep_cells[c].mu && sweep_cells[c].cov;
  }
  if (side && run_cells_side_by_side(&data, &sweep, NULL, n_cells, side_threads, sweep_cells)) {
    gm_clear_error(); /* no memory for that: one after the other */
    side = 0;
  }
  if (!sweep_cells || !refine_list) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the mixture parameters");
    goto done;
  }
  gm_cell one_cell = {.w = best_g.w, .mu = best_g.mu, .cov = best_g.cov};
  for (int64_t mi = 0; mi < n_models; mi++) {
    const gpuml_gmm_covariance cell_model = models[mi];
    for (int64_t gi = 0; gi < nG; gi++) {
      const int64_t G = params->G[gi];
      gm_cell *c = side ? sweep_cells + mi * nG + gi : &one_cell;
      if (!side) {
        run_cell(&eng, &data, &sweep, &s, &ms, labels1, mi, gi, c);
        last_run = (mi * nG + gi + 1) * params->n_init - 1;
        gm_progress(&used, "gmm", (mi * nG + gi + 1) * params->n_init, total_fits);
      }
      if (c->failure) {
        last_failure = c->failure;
        gm_fail(c->failure, c->error_id, "%s", c->error_message);
      }
      if (c->fatal) {
        st = gm_fail(c->fatal, c->error_id, "%s", c->error_message);
        goto done;
      }
      double *cell = cells + gi + mi * nG;
      if (c->best_run < 0) {
        *cell = NAN;
        continue;
      }
      const double b = bic_of(c->fit.loglik, cell_model, G, d, n);
      *cell = b;
      gm_kept *slot = kept ? kept_slot(kept + gi * GM_GMM_KEEP, b) : NULL;
      if (slot) {
        slot->mi = mi;
        slot->bic = b;
        slot->fit = c->fit;
        memcpy(slot->w, c->w, (size_t)G * sizeof(double));
        memcpy(slot->mu, c->mu, (size_t)(d * G) * sizeof(double));
        memcpy(slot->cov, c->cov, (size_t)(d * d * G) * sizeof(double));
      }
      if (best_run < 0 || b > best_bic) {
        best_bic = b;
        best_run = c->best_run;
        choose(model, cell_model, G, d, &c->fit, c->w, c->mu, c->cov);
      }
    }
  }
  if (side) last_run = -2; /* the fits ran on engines of their own */
  if (best_run < 0) {
    st = last_failure;  /* its message is the last error */
    goto done;
  }

  for (int t = 0; kept && t < GM_GMM_KEEP; t++) {
    gm_kept *target = NULL;
    int64_t tgi = -1;
    for (int64_t gi = 0; gi < nG; gi++)
      for (int64_t i = 0; i < GM_GMM_KEEP; i++) {
        gm_kept *c = kept + gi * GM_GMM_KEEP + i;
        if (c->mi >= 0 && !c->refined && (!target || c->bic > target->bic)) {
          target = c;
          tgi = gi;
        }
      }
    if (!target) break;
    target->refined = 1;
    const int64_t G = params->G[tgi];
    if (G < 2 || !classify_rows(hc.x, hc.ld, d, hc.rows, hc.m, G, target->w, target->mu, target->cov,
                                cwork, score, lab_t))
      continue;
    const gm_fit_setup fs = {models[target->mi], params->reg, reg_regularises, &ms, spread};
    if ((st = use_model(&eng, fs.model))) goto done;
    /* sources: the other kept fits of this G, by their partitions of the start's rows */
    for (int64_t i = 0; i < GM_GMM_KEEP; i++) {
      const gm_kept *src = kept + tgi * GM_GMM_KEEP + i;
      if (src->mi < 0 || src == target ||
          !classify_rows(hc.x, hc.ld, d, hc.rows, hc.m, G, src->w, src->mu, src->cov, cwork, score,
                         lab_s) ||
          same_partition(lab_t, lab_s, hc.m, G, map) || !all_groups_used(lab_s, hc.m, G, map))
        continue;
      const gm_partition part = {hc.x, hc.ld, hc.rows, lab_s, hc.m, 1};
      gm_fit_result fit = {0, 0, 0, 0};
      st = partition_start(&data, &fs, G, &part, &s);
      if (!st) st = em_fit(&eng, &data, &fs, G, params, &s, &fit);
      last_run = -2; /* the engine holds this fit */
      if (fit_failed(st)) {
        st = GPUML_OK;
        continue;
      }
      if (st) goto done;
      const double b = bic_of(fit.loglik, fs.model, G, d, n);
      /* a real improvement, not a tie the two backends would break apart */
      if (!(b > target->bic + 1e-9 * fabs(target->bic))) continue;
      target->bic = b;
      target->fit = fit;
      if ((st = eng.ops->get_params(eng.e, G, target->w, target->mu, target->cov))) goto done;
      cells[tgi + target->mi * nG] = b;
      if (b > best_bic) {
        best_bic = b;
        best_run = -3; /* not the engine's: evaluated again below */
        choose(model, fs.model, G, d, &fit, target->w, target->mu, target->cov);
      }
      /* its own partition of the start's rows is now this fit's */
      if (!classify_rows(hc.x, hc.ld, d, hc.rows, hc.m, G, target->w, target->mu, target->cov, cwork,
                         score, lab_t))
        break;
    }
  }

  /* Every G of the models among the best fits is also fitted from GM_GMM_REFINE_STARTS
   * k-means++ starts (drawn from fixed seeds, so that the default fit stays the same from
   * run to run): hierarchical starts can leave a whole G far below its optimum (mclust's
   * as well; bench/gmm_start.R), and it would never be compared with its neighbours. */
  int64_t n_refine = 0;
  for (int64_t mi = 0; kept && mi < n_models; mi++) {
    int top = 0;
    for (int64_t c = 0; c < nG * GM_GMM_KEEP; c++) top |= kept[c].mi == mi && kept[c].refined;
    for (int64_t gi = 0; top && gi < nG; gi++)
      if (params->G[gi] >= 2) refine_list[n_refine++] = mi * nG + gi;
  }
  const gm_sweep refinement = {params, models, reg_regularises, spread, NULL, 1};
  /* side by side into the sweep's cells (their results are committed), else one by one */
  side = side && side_by_side_threads(&data, spread, n_refine) > 1 &&
         !run_cells_side_by_side(&data, &refinement, refine_list, n_refine, side_threads,
                                 sweep_cells);
  gm_clear_error();
  for (int64_t i = 0; i < n_refine; i++) {
    const int64_t mi = refine_list[i] / nG, gi = refine_list[i] % nG, G = params->G[gi];
    gm_cell *c = side ? sweep_cells + refine_list[i] : &one_cell;
    if (!side) run_cell(&eng, &data, &refinement, &s, &ms, labels1, mi, gi, c);
    last_run = -2;
    if (c->fatal) {
      st = gm_fail(c->fatal, c->error_id, "%s", c->error_message);
      goto done;
    }
    if (c->best_run < 0) continue;
    const double b = bic_of(c->fit.loglik, models[mi], G, d, n);
    double *cell = cells + gi + mi * nG;
    if (!isnan(*cell) && !(b > *cell + 1e-9 * fabs(*cell))) continue;
    *cell = b;
    if (b > best_bic) {
      best_bic = b;
      best_run = -3;
      choose(model, models[mi], G, d, &c->fit, c->w, c->mu, c->cov);
    }
  }

  if (z || classification || uncertainty) {
    const int64_t G = model->G;
    double *zz = z;
    if (!zz && !(zz = zbuf = gm_alloc((size_t)n_local * (size_t)G, sizeof(double))))
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the responsibilities");
    if ((st = gm_gmm_agree(spread, st))) goto done;
    if (best_run != last_run) {  /* the engine holds another fit: evaluate the chosen one */
      double loglik;
      if ((st = use_model(&eng, model->covariance)) ||
          (st = eng.ops->set_params(eng.e, G, model->weights, model->means, model->covariances)) ||
          (st = eng.ops->factor(eng.e, G, s.info)) || (st = eng.ops->estep(eng.e, G, &loglik)))
        goto done;
    }
    if ((st = eng.ops->get_z(eng.e, G, zz))) goto done;
    classify(zz, n_local, G, classification, uncertainty);
  }
  gm_clear_error();
  if (result) gm_run_info_fill(&result->run, &used, GM_F64, t0);
done:
  for (int64_t c = 0; sweep_cells && c < sweep_count; c++) {
    free(sweep_cells[c].w);
    free(sweep_cells[c].mu);
    free(sweep_cells[c].cov);
  }
  free(sweep_cells);
  free(refine_list);
  close_engine(&eng);
  free_space(&s);
  free_space(&best_g);
  gm_gmm_mstep_free(&ms);
  hc_start_free(&hc);
  kept_free(kept, params->nG * GM_GMM_KEEP);
  free(own_cells);
  free(score);
  free(cwork);
  free(lab_t);
  free(lab_s);
  free(map);
  free(labels1);
  free(zbuf);
  free(centre);
  return st;
}

/* ---- predict ------------------------------------------------------------------------ */

static gpuml_status check_model(const gpuml_gmm_model *model) {
  if (!model || !model->weights || !model->means || !model->covariances)
    return gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                   "the model must have weights, means and covariances");
  if (!gm_gmm_valid_model((int)model->covariance))
    return gm_fail(GPUML_ERR_ARG, "gmm:badModel", "unknown covariance model code %d",
                   (int)model->covariance);
  if (model->G < 1 || model->d < 1)
    return gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                   "the model must have G >= 1 components in d >= 1 dimensions (G = %lld, d = %lld)",
                   (long long)model->G, (long long)model->d);
  const int64_t G = model->G, d = model->d;
  for (int64_t k = 0; k < G; k++)
    if (!(model->weights[k] > 0) || !isfinite(model->weights[k]))
      return gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                     "the weight of component %lld is %g: weights must be positive and finite",
                     (long long)k + 1, model->weights[k]);
  for (int64_t i = 0; i < d * G; i++)
    if (!isfinite(model->means[i]))
      return gm_fail(GPUML_ERR_ARG, "gmm:badModel", "the means must be finite");
  for (int64_t i = 0; i < d * d * G; i++)
    if (!isfinite(model->covariances[i]))
      return gm_fail(GPUML_ERR_ARG, "gmm:badModel", "the covariances must be finite");
  return GPUML_OK;
}

gpuml_status gpuml_gmm_predict(const gpuml_gmm_model *model, const double *x, int64_t m,
                               double *z, int64_t *classification, double *uncertainty,
                               const gpuml_options *opt, gpuml_gmm_result *result) {
  gm_clear_error();
  gpuml_status st = gm_check_options(opt);
  if (!st) st = check_model(model);
  if (st) return st;
  const int64_t G = model->G, d = model->d;
  if ((st = gm_check_matrix(x, m, d, "data", "gmm"))) return st;
  if (m > INT_MAX)
    return gm_fail(GPUML_ERR_ARG, "gmm:tooLarge", "%lld rows are more than 2^31 - 1",
                   (long long)m);
  const gm_gmm_structure structure = gm_gmm_model_structure(model->covariance);
  const double work = (double)m * (double)d * (double)G *
                      (structure == GM_GMM_FULL_STRUCTURE ? (double)d : 1.0);
  const double t0 = gm_seconds();
  gpuml_options used;
  if ((st = gm_backend_resolve(opt, GM_ALGO_GMM, work, "gmm", &used, NULL))) return st;
  double *centre = gm_alloc((size_t)d, sizeof(double)), *zbuf = NULL;
  int *info = gm_alloc((size_t)G, sizeof(int));
  gm_engine eng = {NULL, NULL};
  if (!centre || !info) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the model's work space");
    goto done;
  }
  double avg_var;
  column_stats(x, m, d, gm_threads(&used), centre, &avg_var);
  const gm_gmm_data data = {
      x,      m,    d, G, structure == GM_GMM_FULL_STRUCTURE ? GM_GMM_FULL_STRUCTURE : GM_GMM_DIAGONAL_STRUCTURE,
      centre, &used};
  if ((st = open_engine(&data, &eng))) goto done;
  if ((st = eng.ops->set_params(eng.e, G, model->weights, model->means, model->covariances)) ||
      (st = eng.ops->factor(eng.e, G, info)))
    goto done;
  for (int64_t k = 0; k < G; k++)
    if (info[k]) {
      st = gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                   "the covariance of component %lld is not positive definite", (long long)k + 1);
      goto done;
    }
  double loglik;
  if ((st = eng.ops->estep(eng.e, G, &loglik))) goto done;
  double *zz = z;
  if (!zz && !(zz = zbuf = gm_alloc((size_t)m * (size_t)G, sizeof(double)))) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the responsibilities");
    goto done;
  }
  if ((st = eng.ops->get_z(eng.e, G, zz))) goto done;
  classify(zz, m, G, classification, uncertainty);
  if (result) gm_run_info_fill(&result->run, &used, GM_F64, t0);
done:
  close_engine(&eng);
  free(centre);
  free(info);
  free(zbuf);
  return st;
}

gpuml_status gpuml_gmm_fit_here(void *ctx, const double *x, int64_t n, int64_t d,
                                const gpuml_gmm_params *params, gpuml_gmm_model *model,
                                double *z, int64_t *classification, double *uncertainty,
                                double *bic, const gpuml_options *opt,
                                gpuml_gmm_result *result) {
  (void)ctx;
  return gpuml_gmm_fit(x, n, d, params, model, z, classification, uncertainty, bic, opt, result);
}
