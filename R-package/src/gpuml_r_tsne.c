/* gpuml_r_tsne.c — the .Call glue of gpu_tsne() (R/tsne.R). Converts types, runs
 * gpuml_tsne_fit() with progress (iteration, KL, elapsed) and interrupt callbacks, and
 * returns the embedding; every check of values is the core's. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Utils.h>
#include "gpuml_r.h"

typedef struct {
  const gpuml_tsne_result *result;
  double started;
  int verbose;
} tsne_progress;

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void tsne_report(void *ctx, const char *stage, int64_t done, int64_t total) {
  tsne_progress *p = ctx;
  const double elapsed = now_seconds() - p->started;
  if (strcmp(stage, "tsne") == 0)
    REprintf("Iteration %lld/%lld: KL divergence %.4f (%.1f s)\n", (long long)done,
             (long long)total, p->result->kl, elapsed);
  else if (done == total)
    REprintf("%s done (%.1f s)\n", stage, elapsed);
}

/* A whole number for an int argument; values out of range are clamped so that the
 * core reports them as out of range. */
static int as_int(double v) {
  if (isnan(v)) return INT_MIN;
  if (v > INT_MAX) return INT_MAX;
  if (v < INT_MIN + 1.0) return INT_MIN + 1;
  return (int)v;
}

/* x: n x d double matrix. params: dims, perplexity, max_iter, pca, initial_dims,
 * learning_rate (0 = auto), exaggeration, stop_lying_iter, momentum, final_momentum,
 * mom_switch_iter, max_step_norm (doubles). init: "pca"/"random", or an n x dims
 * double matrix. method, backend: strings. seed: a double holding a whole number. */
SEXP gpuml_r_tsne(SEXP x, SEXP params, SEXP init, SEXP method, SEXP seed, SEXP backend,
                  SEXP verbose, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  opt.seed = (uint64_t)Rf_asReal(seed);
  gpuml_tsne_result result;
  tsne_progress progress = {&result, now_seconds(), opt.verbose};
  opt.progress = tsne_report;  /* iteration, KL and elapsed time */
  opt.callback_ctx = &progress;

  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  const double *v = REAL(params);
  p.dims = as_int(v[0]);
  p.perplexity = v[1];
  p.max_iter = as_int(v[2]);
  p.pca = v[3] != 0;
  p.initial_dims = as_int(v[4]);
  p.learning_rate = v[5];
  p.exaggeration = v[6];
  p.stop_lying_iter = as_int(v[7]);
  p.momentum = v[8];
  p.final_momentum = v[9];
  p.mom_switch_iter = as_int(v[10]);
  p.max_step_norm = v[11];
  if (gpuml_tsne_parse_method(CHAR(STRING_ELT(method, 0)), &p.method) != GPUML_OK)
    Rf_error("%s", gpuml_last_error());
  const int64_t n = Rf_nrows(x), d = Rf_ncols(x);
  if (Rf_isString(init)) {
    if (gpuml_tsne_parse_init(CHAR(STRING_ELT(init, 0)), &p.init) != GPUML_OK)
      Rf_error("%s", gpuml_last_error());
  } else {
    if (Rf_nrows(init) != n || Rf_ncols(init) != p.dims)
      Rf_error("init must be a %lld x %d matrix (one row per point, dims columns), not %d x %d",
               (long long)n, p.dims, Rf_nrows(init), Rf_ncols(init));
    p.init = GPUML_TSNE_INIT_USER;
    p.init_y = REAL(init);
  }
  const int dims = p.dims >= 1 && p.dims <= 3 ? p.dims : 1;
  const int ncost = gpuml_tsne_cost_count(p.max_iter > 0 ? p.max_iter : 1);
  SEXP y = PROTECT(Rf_allocMatrix(REALSXP, (int)n, dims));
  SEXP costs = PROTECT(Rf_allocVector(REALSXP, ncost));
  gpuml_status st = gpuml_tsne_fit(REAL(x), n, d, &p, REAL(y), REAL(costs), &opt, &result);
  if (st != GPUML_OK) {
    UNPROTECT(2);
    if (st == GPUML_ERR_INTERRUPTED) R_CheckUserInterrupt();
    const char *msg = gpuml_last_error();
    Rf_error("%s", msg && *msg ? msg : gpuml_status_string(st));
  }
  const char *names[] = {"Y", "itercosts", "backend", "method", "learning_rate", "neighbours",
                         "time_affinities", "time_optimisation"};
  const int nn = (int)(sizeof names / sizeof names[0]);
  SEXP res = PROTECT(Rf_allocVector(VECSXP, nn));
  SEXP rn = PROTECT(Rf_allocVector(STRSXP, nn));
  for (int i = 0; i < nn; i++) SET_STRING_ELT(rn, i, Rf_mkChar(names[i]));
  SET_VECTOR_ELT(res, 0, y);
  SET_VECTOR_ELT(res, 1, costs);
  SET_VECTOR_ELT(res, 2, Rf_mkString(gpuml_backend_name(result.run.backend)));
  SET_VECTOR_ELT(res, 3, Rf_mkString(gpuml_tsne_method_name(result.method_used)));
  SET_VECTOR_ELT(res, 4, Rf_ScalarReal(result.learning_rate_used));
  SET_VECTOR_ELT(res, 5, Rf_ScalarReal((double)result.neighbours));
  SET_VECTOR_ELT(res, 6, Rf_ScalarReal(result.seconds_affinities));
  SET_VECTOR_ELT(res, 7, Rf_ScalarReal(result.seconds_optimisation));
  Rf_setAttrib(res, R_NamesSymbol, rn);
  UNPROTECT(4);
  return res;
}
