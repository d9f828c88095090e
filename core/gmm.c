/* gpuml_gmm_fit() and gpuml_gmm_predict(): argument checks, the choice of G by BIC,
 * n_init starts, and the EM loop with its convergence test and collapse handling,
 * driving the CPU or the CUDA engine (gmm.h) through the same steps. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gmm.h"
#include "backend.h"
#include "params.h"

/* With n <= d rows a full sample covariance is singular; the fit is then allowed only
 * when reg is at least this fraction of the average column variance. */
#define GM_GMM_MIN_REG_FRACTION 1e-3
/* A fit that has re-seeded more than this many components per component fails. */
#define GM_GMM_MAX_RESEEDS_PER_COMPONENT 3

const char *gpuml_gmm_covariance_name(gpuml_gmm_covariance covariance) {
  switch (covariance) {
    case GPUML_GMM_FULL: return "full";
    case GPUML_GMM_DIAG: return "diag";
    case GPUML_GMM_SPHERICAL: return "spherical";
  }
  return "unknown";
}

const char *gpuml_gmm_model_name(gpuml_gmm_covariance covariance) {
  switch (covariance) {
    case GPUML_GMM_FULL: return "VVV";
    case GPUML_GMM_DIAG: return "VVI";
    case GPUML_GMM_SPHERICAL: return "VII";
  }
  return "";
}

gpuml_status gpuml_gmm_parse_covariance(const char *name, gpuml_gmm_covariance *out) {
  static const gpuml_gmm_covariance all[] = {GPUML_GMM_FULL, GPUML_GMM_DIAG, GPUML_GMM_SPHERICAL};
  for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
    if (gm_same_name(name, gpuml_gmm_covariance_name(all[i]))) {
      *out = all[i];
      return GPUML_OK;
    }
  return gm_fail(GPUML_ERR_ARG, "gmm:badCovariance",
                 "unknown covariance \"%s\": use \"full\", \"diag\" or \"spherical\"",
                 name ? name : "(null)");
}

int64_t gpuml_gmm_npar(gpuml_gmm_covariance covariance, int64_t G, int64_t d) {
  int64_t per = covariance == GPUML_GMM_FULL ? d * (d + 1) / 2
                : covariance == GPUML_GMM_DIAG ? d
                                               : 1;
  return (G - 1) + G * d + G * per;
}

/* The parameters by name (gpuml_params_set_*). */
/* The structures by their names and by mclust's (VVV, VVI, VII). */
static const char *const gmm_covariances[] = {"full", "diag", "spherical", "VVV", "VVI", "VII",
                                              NULL};
static const int gmm_covariance_values[] = {GPUML_GMM_FULL, GPUML_GMM_DIAG, GPUML_GMM_SPHERICAL,
                                            GPUML_GMM_FULL, GPUML_GMM_DIAG, GPUML_GMM_SPHERICAL};
const gm_param_spec gm_gmm_param_specs[] = {
    {GM_PARAM(gpuml_gmm_params, G, GM_PARAM_INT64_LIST),
     .count_offset = offsetof(gpuml_gmm_params, nG), .capacity = GPUML_GMM_MAX_G},
    {GM_PARAM(gpuml_gmm_params, covariance, GM_PARAM_CHOICE), .choices = gmm_covariances,
     .choice_values = gmm_covariance_values},
    {GM_PARAM(gpuml_gmm_params, max_iter, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_gmm_params, tol, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_gmm_params, reg, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_gmm_params, n_init, GM_PARAM_INT64)},
    {.name = NULL}};

void gpuml_gmm_params_init(gpuml_gmm_params *params) {
  if (!params) return;
  memset(params, 0, sizeof *params);
  for (int64_t g = 0; g < 9; g++) params->G[g] = g + 1;  /* mclust's 1:9 */
  params->nG = 9;
  params->covariance = GPUML_GMM_FULL;
  params->max_iter = 1000;
  params->tol = 1e-8;
  params->reg = 1e-6;
  params->n_init = 1;
}

/* ---- engines ------------------------------------------------------------------------ */

typedef struct {
  const gm_gmm_ops *ops;
  void *e;
} gm_engine;

static gpuml_status open_engine(const gm_gmm_data *data, gm_engine *eng) {
  const gm_gmm_backend *g = gm_backend_used(data->opt)->gmm;
  eng->e = NULL;
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
  double *w, *mu, *cov, *cov0, *nk, *logdens;
  int *info;
  int64_t *rows;
} gm_fit_space;

typedef struct {
  double loglik;
  int64_t n_iter;
  int converged;
} gm_fit_result;

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
static gpuml_status reseed(gm_engine *eng, const gm_gmm_data *data, int64_t G,
                           const int *flag, gm_fit_space *s, int64_t *reseeds) {
  int64_t count = 0;
  for (int64_t k = 0; k < G; k++) count += flag[k] != 0;
  if (!count) return GPUML_OK;
  const int64_t n = data->n, d = data->d;
  *reseeds += count;
  if (*reseeds > GM_GMM_MAX_RESEEDS_PER_COMPONENT * G || count >= n)
    return gm_fail(GPUML_ERR_NUMERIC, "gmm:collapse",
                   "the fit with G = %lld kept losing components (less than one point each, or "
                   "a covariance that is not positive definite): use fewer components, a larger "
                   "reg (now %g) or a simpler covariance",
                   (long long)G, data->reg);
  gpuml_status st;
  if ((st = eng->ops->get_params(eng->e, G, s->w, NULL, NULL))) return st;
  if ((st = eng->ops->log_density(eng->e, s->logdens))) return st;
  worst_rows(s->logdens, n, count, s->rows);
  for (int64_t k = 0; k < G; k++)
    if (flag[k]) s->w[k] = 1.0 / (double)G;
  double total = 0;
  for (int64_t k = 0; k < G; k++) total += s->w[k];
  for (int64_t k = 0; k < G; k++) s->w[k] /= total;
  int64_t used = 0;
  for (int64_t k = 0; k < G; k++) {
    if (!flag[k]) continue;
    const int64_t row = s->rows[used++];
    for (int64_t j = 0; j < d; j++) s->mu[j] = data->x[row + j * n];
    if ((st = eng->ops->set_component(eng->e, G, s->w, k, s->mu, s->cov0))) return st;
  }
  return GPUML_OK;
}

static gpuml_status singular_start(const gm_gmm_data *data) {
  return gm_fail(GPUML_ERR_NUMERIC, "gmm:singular",
                 "the starting covariance is not positive definite: a column is constant "
                 "within the starting clusters; use reg > 0 (now %g)",
                 data->reg);
}

/* One EM fit of G components from a k-means++ start drawn with `seed`. On success
 * the engine holds the final parameters and their responsibilities. */
static gpuml_status em_fit(gm_engine *eng, const gm_gmm_data *data, int64_t G,
                           const gpuml_gmm_params *P, uint64_t seed, gm_fit_space *s,
                           gm_fit_result *out) {
  const gpuml_options *opt = data->opt;
  const int64_t d = data->d;
  gpuml_status st = gm_gmm_kmeanspp(data->x, data->n, d, G, data->covariance, data->reg, seed,
                                    opt, s->w, s->mu, s->cov);
  if (st) return st;
  memcpy(s->cov0, s->cov, (size_t)(d * d) * sizeof(double));
  if ((st = eng->ops->set_params(eng->e, G, s->w, s->mu, s->cov))) return st;
  if ((st = eng->ops->factor(eng->e, G, s->info))) return st;
  for (int64_t k = 0; k < G; k++)
    if (s->info[k]) return singular_start(data);
  double loglik;
  if ((st = eng->ops->estep(eng->e, G, &loglik))) return st;
  if (!isfinite(loglik))
    return gm_fail(GPUML_ERR_NUMERIC, "gmm:numeric",
                   "the log-likelihood of the starting mixture is not finite: rescale the data");
  int64_t reseeds = 0, iter = 0;
  int converged = 0;
  double last_report = now_seconds();
  for (iter = 1; iter <= P->max_iter; iter++) {
    if (gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture fit interrupted");
    if ((st = eng->ops->mstep(eng->e, G, s->nk))) return st;
    int changed = 0;
    for (int64_t k = 0; k < G; k++) {
      s->info[k] = !(s->nk[k] >= GM_GMM_MIN_POINTS);
      changed |= s->info[k];
    }
    if ((st = reseed(eng, data, G, s->info, s, &reseeds))) return st;
    if ((st = eng->ops->factor(eng->e, G, s->info))) return st;
    int bad = 0;
    for (int64_t k = 0; k < G; k++) bad |= s->info[k] != 0;
    if (bad) {
      changed = 1;
      if ((st = reseed(eng, data, G, s->info, s, &reseeds))) return st;
      if ((st = eng->ops->factor(eng->e, G, s->info))) return st;
      for (int64_t k = 0; k < G; k++)
        if (s->info[k]) return singular_start(data);
    }
    double next;
    if ((st = eng->ops->estep(eng->e, G, &next))) return st;
    if (!isfinite(next))
      return gm_fail(GPUML_ERR_NUMERIC, "gmm:numeric",
                     "the log-likelihood became non-finite at iteration %lld: rescale the data or "
                     "use a larger reg (now %g)",
                     (long long)iter, data->reg);
    const double change = fabs(next - loglik);
    loglik = next;
    if (!changed && P->tol > 0 && change <= P->tol * fabs(next)) {
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
  return GPUML_OK;
}

/* ---- argument checks ---------------------------------------------------------------- */

static int valid_covariance(gpuml_gmm_covariance c) {
  return c == GPUML_GMM_FULL || c == GPUML_GMM_DIAG || c == GPUML_GMM_SPHERICAL;
}

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
  if (!valid_covariance(P->covariance))
    return gm_fail(GPUML_ERR_ARG, "gmm:badCovariance",
                   "unknown covariance code %d: use full, diag or spherical", (int)P->covariance);
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
  free(s->info);
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
  s->info = gm_alloc((size_t)G, sizeof(int));
  s->rows = gm_alloc((size_t)G, sizeof(int64_t));
  return s->w && s->mu && s->cov && s->cov0 && s->nk && s->logdens && s->info && s->rows;
}

static uint64_t fit_seed(uint64_t seed, int64_t G, int64_t start) {
  return seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)G) ^
         (0xd1b54a32d192ed03ULL * (uint64_t)(start + 1));
}

gpuml_status gpuml_gmm_fit(const double *x, int64_t n, int64_t d,
                           const gpuml_gmm_params *params, gpuml_gmm_model *model,
                           double *z, int64_t *classification, double *uncertainty,
                           double *bic, const gpuml_options *opt, gpuml_gmm_result *result) {
  gm_clear_error();
  int64_t gmax = 0;
  gpuml_status st = gm_check_matrix(x, n, d, "data", "gmm");
  if (!st) st = gpuml_gmm_check(n, d, params, opt, &gmax);
  if (st) return st;
  if (!model || !model->weights || !model->means || !model->covariances)
    return gm_fail(GPUML_ERR_ARG, "gmm:badOutput",
                   "the model's weights, means and covariances must be allocated");
  const gpuml_gmm_covariance cov_type = params->covariance;
  const int threads = gm_threads(opt);
  double *centre = gm_alloc((size_t)d, sizeof(double));
  if (!centre) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate column means");
  double avg_var = 0;
  column_stats(x, n, d, threads, centre, &avg_var);
  if (cov_type == GPUML_GMM_FULL && n <= d && params->reg < GM_GMM_MIN_REG_FRACTION * avg_var) {
    free(centre);
    return gm_fail(GPUML_ERR_ARG, "gmm:tooFewRows",
                   "full covariance matrices of %lld variables need more than %lld rows (the "
                   "data have %lld): use covariance \"diag\" or \"spherical\", or reg >= %.3g "
                   "(a thousandth of the average variance)",
                   (long long)d, (long long)d, (long long)n, GM_GMM_MIN_REG_FRACTION * avg_var);
  }
  const double work = (double)n * (double)d * (double)gmax *
                      (cov_type == GPUML_GMM_FULL ? (double)d : 1.0) * 10;
  const double t0 = gm_seconds();
  gpuml_options used;
  if ((st = gm_backend_resolve(opt, GM_ALGO_GMM, work, "gmm", &used, NULL))) {
    free(centre);
    return st;
  }

  gm_fit_space s, best_g;
  double *zbuf = NULL;
  gm_engine eng = {NULL, NULL};
  const int ok_s = alloc_space(&s, n, d, gmax), ok_b = alloc_space(&best_g, 1, d, gmax);
  if (!ok_s || !ok_b) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the mixture parameters");
    goto done;
  }
  const gm_gmm_data data = {x, n, d, gmax, cov_type, params->reg, centre, &used};
  if ((st = open_engine(&data, &eng))) goto done;

  const int64_t total_fits = params->nG * params->n_init;
  int64_t fits_done = 0, best_index = -1, best_run = -1, last_run = -1, run = 0;
  gpuml_status last_failure = GPUML_OK;
  double best_bic = 0;
  for (int64_t gi = 0; gi < params->nG; gi++) {
    const int64_t G = params->G[gi];
    gm_fit_result best_fit = {0, 0, 0};
    int64_t best_fit_run = -1;
    for (int64_t r = 0; r < params->n_init; r++, run++) {
      gm_fit_result fit = {0, 0, 0};
      st = em_fit(&eng, &data, G, params, fit_seed(used.seed, G, r), &s, &fit);
      last_run = run;
      if (st == GPUML_ERR_NUMERIC ||
          (st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badG") == 0)) {
        last_failure = st;  /* this start cannot be fitted; the others go on */
        st = GPUML_OK;
      } else if (st) {
        goto done;
      } else if (best_fit_run < 0 || fit.loglik > best_fit.loglik) {
        best_fit = fit;
        best_fit_run = run;
        if ((st = eng.ops->get_params(eng.e, G, best_g.w, best_g.mu, best_g.cov))) goto done;
      }
      gm_progress(&used, "gmm", ++fits_done, total_fits);
    }
    if (best_fit_run < 0) {
      if (bic) bic[gi] = NAN;
      continue;
    }
    const double b = 2 * best_fit.loglik -
                     (double)gpuml_gmm_npar(cov_type, G, d) * log((double)n);
    if (bic) bic[gi] = b;
    if (best_index < 0 || b > best_bic) {
      best_bic = b;
      best_index = gi;
      best_run = best_fit_run;
      model->covariance = cov_type;
      model->G = G;
      model->d = d;
      model->loglik = best_fit.loglik;
      model->n_iter = best_fit.n_iter;
      model->converged = best_fit.converged;
      memcpy(model->weights, best_g.w, (size_t)G * sizeof(double));
      memcpy(model->means, best_g.mu, (size_t)(d * G) * sizeof(double));
      memcpy(model->covariances, best_g.cov, (size_t)(d * d * G) * sizeof(double));
    }
  }
  if (best_index < 0) {
    st = last_failure;  /* its message is the last error */
    goto done;
  }

  if (z || classification || uncertainty) {
    const int64_t G = model->G;
    double *zz = z;
    if (!zz && !(zz = zbuf = gm_alloc((size_t)n * (size_t)G, sizeof(double)))) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the responsibilities");
      goto done;
    }
    if (best_run != last_run) {  /* the engine holds another fit: evaluate the chosen one */
      double loglik;
      if ((st = eng.ops->set_params(eng.e, G, model->weights, model->means, model->covariances)) ||
          (st = eng.ops->factor(eng.e, G, s.info)) || (st = eng.ops->estep(eng.e, G, &loglik)))
        goto done;
    }
    if ((st = eng.ops->get_z(eng.e, G, zz))) goto done;
    classify(zz, n, G, classification, uncertainty);
  }
  gm_clear_error();
  if (result) gm_run_info_fill(&result->run, &used, GM_F64, t0);
done:
  close_engine(&eng);
  free_space(&s);
  free_space(&best_g);
  free(zbuf);
  free(centre);
  return st;
}

/* ---- predict ------------------------------------------------------------------------ */

static gpuml_status check_model(const gpuml_gmm_model *model) {
  if (!model || !model->weights || !model->means || !model->covariances)
    return gm_fail(GPUML_ERR_ARG, "gmm:badModel",
                   "the model must have weights, means and covariances");
  if (!valid_covariance(model->covariance))
    return gm_fail(GPUML_ERR_ARG, "gmm:badModel", "unknown covariance code %d",
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
  const double work = (double)m * (double)d * (double)G *
                      (model->covariance == GPUML_GMM_FULL ? (double)d : 1.0);
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
  const gm_gmm_data data = {x, m, d, G, model->covariance, 0, centre, &used};
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
