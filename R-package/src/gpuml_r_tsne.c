/* gpuml_r_tsne.c — the .Call glue of gpu_tsne() and predict.gpu_tsne() (R/tsne.R).
 * Converts types, runs gpuml_tsne_fit() with progress (iteration, KL, elapsed) and
 * interrupt callbacks and returns the embedding, or gpuml_tsne_transform() and returns
 * the new points' places; every check of values is the core's. */
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

/* x: by input ("data", "distance" or "neighbours"): the n x d data, the n x n distances,
 * or nn_index (n x k, 1-based, as doubles) with nn_dist (n x k). params: a named
 * list of the parameters the user gave (by the core's names: dims, perplexity, ..., init
 * as "pca"/"random", learning_rate a number or "auto", method). init_y: NULL or an
 * n x dims double matrix (the user's start). seed: a double holding a whole number.
 * backend: a string. */
SEXP gpuml_r_tsne(SEXP x, SEXP params, SEXP init_y, SEXP seed, SEXP backend, SEXP verbose,
                  SEXP threads, SEXP input, SEXP nn_dist, SEXP devices) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  gpuml_r_devices(&opt, devices);
  gpuml_r_stop_on_failure(gpuml_options_set_seed(&opt, Rf_asReal(seed)));
  gpuml_tsne_result result;
  tsne_progress progress = {&result, now_seconds(), opt.verbose};
  opt.progress = tsne_report;  /* iteration, KL and elapsed time */
  opt.callback_ctx = &progress;

  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  gpuml_r_set_params(GPUML_PARAMS_TSNE, &p, params);
  const int64_t n = Rf_nrows(x), d = Rf_ncols(x);
  if (!Rf_isNull(init_y)) {
    if (Rf_nrows(init_y) != n || Rf_ncols(init_y) != p.dims)
      Rf_error("init must be a %lld x %lld matrix (one row per point, dims columns), not %d x %d",
               (long long)n, (long long)p.dims, Rf_nrows(init_y), Rf_ncols(init_y));
    p.init = GPUML_TSNE_INIT_USER;
    p.init_y = REAL(init_y);
  }
  const int dims = p.dims >= 1 && p.dims <= 3 ? (int)p.dims : 1;
  const int64_t ncost =
      gpuml_tsne_cost_count(p.max_iter > 0 && p.max_iter <= INT32_MAX ? p.max_iter : 1);
  SEXP y = PROTECT(Rf_allocMatrix(REALSXP, (int)n, dims));
  SEXP costs = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)ncost));
  const char *kind = CHAR(STRING_ELT(input, 0));
  gpuml_status st;
  if (strcmp(kind, "distance") == 0) {
    st = gpuml_tsne_fit_distance(REAL(x), n, d, &p, REAL(y), REAL(costs), &opt, &result);
  } else if (strcmp(kind, "neighbours") == 0) {
    if (Rf_nrows(nn_dist) != n || Rf_ncols(nn_dist) != d) {
      UNPROTECT(2);
      Rf_error("nn_index is %lld x %lld but nn_dist %d x %d: they must have the same shape "
               "(one row per point, one column per neighbour)",
               (long long)n, (long long)d, Rf_nrows(nn_dist), Rf_ncols(nn_dist));
    }
    int64_t *index = (int64_t *)R_alloc((size_t)(n * d > 0 ? n * d : 1), sizeof *index);
    for (int64_t e = 0; e < n * d; e++) {  /* 1-based (R) to 0-based; NA stays out of range */
      const double v = REAL(x)[e];
      index[e] = ISNAN(v) || v != floor(v) || fabs(v) > 1e15 ? -1 : (int64_t)v - 1;
    }
    st = gpuml_tsne_fit_neighbours(index, REAL(nn_dist), n, d, &p, REAL(y), REAL(costs), &opt, &result);
  } else {
    st = gpuml_tsne_fit(REAL(x), n, d, &p, REAL(y), REAL(costs), &opt, &result);
  }
  if (st != GPUML_OK) {
    UNPROTECT(2);
    if (st == GPUML_ERR_INTERRUPTED) R_CheckUserInterrupt();
    const char *msg = gpuml_last_error();
    Rf_error("%s", msg && *msg ? msg : gpuml_status_string(st));
  }
  const char *names[] = {"Y",          "itercosts",       "backend",           "method",
                         "learning_rate", "neighbours",   "time_affinities",   "time_optimisation",
                         "costs_at",   "settings"};
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
  SEXP at = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)ncost));
  for (int64_t i = 0; i < ncost; i++) REAL(at)[i] = (double)gpuml_tsne_cost_iteration(p.max_iter, i);
  SET_VECTOR_ELT(res, 8, at);
  SET_VECTOR_ELT(res, 9, gpuml_r_params_values(GPUML_PARAMS_TSNE, &p));
  Rf_setAttrib(res, R_NamesSymbol, rn);
  UNPROTECT(5);
  return res;
}

/* x: the training data (n x d double matrix) or NULL when the fit kept none. y: the fit's
 * n x dims embedding. newdata: m x d' double matrix. params: a named list of the
 * transform's parameters the user gave (by the core's names). */
SEXP gpuml_r_tsne_transform(SEXP x, SEXP y, SEXP newdata, SEXP params, SEXP backend,
                            SEXP verbose, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  gpuml_tsne_transform_params p;
  gpuml_tsne_transform_params_init(&p);
  gpuml_r_set_params(GPUML_PARAMS_TSNE_TRANSFORM, &p, params);
  const int has_x = !Rf_isNull(x);
  const int64_t n = has_x ? Rf_nrows(x) : 0, d = has_x ? Rf_ncols(x) : 0;
  const int64_t m = Rf_nrows(newdata), d_new = Rf_ncols(newdata), dims = Rf_ncols(y);
  if (Rf_nrows(y) != n && has_x)
    Rf_error("the fit's embedding has %d rows but its data %lld", Rf_nrows(y), (long long)n);
  SEXP out = PROTECT(Rf_allocMatrix(REALSXP, (int)m, (int)(dims >= 1 && dims <= 3 ? dims : 1)));
  gpuml_tsne_result result;
  gpuml_status st = gpuml_tsne_transform(has_x ? REAL(x) : NULL, n, d, REAL(y), dims,
                                         REAL(newdata), m, d_new, &p, REAL(out), &opt, &result);
  if (st != GPUML_OK) {
    UNPROTECT(1);
    if (st == GPUML_ERR_INTERRUPTED) R_CheckUserInterrupt();
    const char *msg = gpuml_last_error();
    Rf_error("%s", msg && *msg ? msg : gpuml_status_string(st));
  }
  const char *names[] = {"Y", "backend", "method", "neighbours", "time"};
  SEXP res = PROTECT(Rf_allocVector(VECSXP, 5));
  SEXP rn = PROTECT(Rf_allocVector(STRSXP, 5));
  for (int i = 0; i < 5; i++) SET_STRING_ELT(rn, i, Rf_mkChar(names[i]));
  SET_VECTOR_ELT(res, 0, out);
  SET_VECTOR_ELT(res, 1, Rf_mkString(gpuml_backend_name(result.run.backend)));
  SET_VECTOR_ELT(res, 2, Rf_mkString(gpuml_tsne_method_name(result.method_used)));
  SET_VECTOR_ELT(res, 3, Rf_ScalarReal((double)result.neighbours));
  SET_VECTOR_ELT(res, 4, Rf_ScalarReal(result.seconds_affinities + result.seconds_optimisation));
  Rf_setAttrib(res, R_NamesSymbol, rn);
  UNPROTECT(3);
  return res;
}
