/* gpuml_r_gmm.c: the .Call glue of the Gaussian mixtures (R/gmm.R). Converts types,
 * calls gpuml_gmm_fit() / gpuml_gmm_predict() and reports the core's errors; the
 * core validates every value. */
#include <stdint.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Utils.h>
#include "gpuml_r.h"

/* A model name (a CHARSXP) -> the core's model. */
static gpuml_gmm_covariance covariance_of(SEXP name) {
  gpuml_gmm_covariance c = GPUML_GMM_VVV;
  if (gpuml_gmm_parse_covariance(CHAR(name), &c) != GPUML_OK)
    Rf_error("%s", gpuml_last_error());
  return c;
}

/* A named list of `count` elements, protected (1 on the stack); the caller fills it
 * with SET_VECTOR_ELT straight from each allocation. */
static SEXP new_list(int count, const char **names) {
  SEXP res = PROTECT(Rf_allocVector(VECSXP, count));
  SEXP nm = Rf_allocVector(STRSXP, count);
  Rf_setAttrib(res, R_NamesSymbol, nm);
  for (int i = 0; i < count; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  return res;
}

/* z (m x G, ld m), classification (0-based) and uncertainty as R objects, protected
 * (3 on the stack). */
static void outputs(const double *z, const int64_t *cls, const double *unc, int64_t m,
                    int64_t G, SEXP *rz, SEXP *rcls, SEXP *runc) {
  *rz = PROTECT(Rf_allocMatrix(REALSXP, (int)m, (int)G));
  memcpy(REAL(*rz), z, sizeof(double) * (size_t)m * (size_t)G);
  *rcls = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)m));
  int *c = INTEGER(*rcls);
  for (int64_t i = 0; i < m; i++) c[i] = (int)cls[i] + 1;
  *runc = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)m));
  memcpy(REAL(*runc), unc, sizeof(double) * (size_t)m);
}

/* x: double matrix; params: a named list of the parameters the user gave, by the core's
 * names (G, models, init, max_iter, tol, reg, n_init); the core holds the defaults. */
SEXP gpuml_r_gmm_fit(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose, SEXP threads,
                     SEXP devices) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  gpuml_r_devices(&opt, devices);
  gpuml_r_stop_on_failure(gpuml_options_set_seed(&opt, Rf_asReal(seed)));
  return gpuml_r_gmm_fit_with(x, params, &opt, Rf_nrows(x), gpuml_gmm_fit_here, NULL);
}

SEXP gpuml_r_gmm_fit_with(SEXP x, SEXP params, const gpuml_options *opt, int64_t n_total,
                          gpuml_gmm_fit_fn fit, void *ctx) {
  const int64_t n = Rf_nrows(x), d = Rf_ncols(x);
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  gpuml_r_set_params(GPUML_PARAMS_GMM, &p, params);
  int64_t gmax = 0;
  gpuml_r_stop_on_failure(gpuml_gmm_check(n_total, d, &p, opt, &gmax));  /* before allocating */
  const int64_t nG = p.nG;
  gpuml_gmm_covariance models[GPUML_GMM_N_MODELS];
  const int64_t nM = gpuml_gmm_models_tried(n_total, d, &p, models);
  gpuml_gmm_model model;
  memset(&model, 0, sizeof model);
  model.weights = (double *)R_alloc((size_t)gmax, sizeof(double));
  model.means = (double *)R_alloc((size_t)d * (size_t)gmax, sizeof(double));
  model.covariances = (double *)R_alloc((size_t)(d * d) * (size_t)gmax, sizeof(double));
  double *z = (double *)R_alloc((size_t)n * (size_t)gmax, sizeof(double));
  double *unc = (double *)R_alloc((size_t)n, sizeof(double));
  int64_t *cls = (int64_t *)R_alloc((size_t)n, sizeof(int64_t));
  double *bic = (double *)R_alloc((size_t)(nG * nM), sizeof(double));
  gpuml_gmm_result result;
  gpuml_r_stop_on_failure(fit(ctx, REAL(x), n, d, &p, &model, z, cls, unc, bic, opt, &result));

  const int64_t Gb = model.G;
  SEXP rz, rcls, runc;
  outputs(z, cls, unc, n, Gb, &rz, &rcls, &runc);
  SEXP w = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)Gb));
  memcpy(REAL(w), model.weights, sizeof(double) * (size_t)Gb);
  SEXP mu = PROTECT(Rf_allocMatrix(REALSXP, (int)d, (int)Gb));
  memcpy(REAL(mu), model.means, sizeof(double) * (size_t)(d * Gb));
  SEXP sigma = PROTECT(Rf_alloc3DArray(REALSXP, (int)d, (int)d, (int)Gb));
  memcpy(REAL(sigma), model.covariances, sizeof(double) * (size_t)(d * d * Gb));
  SEXP rbic = PROTECT(Rf_allocMatrix(REALSXP, (int)nG, (int)nM));
  for (int64_t e = 0; e < nG * nM; e++) REAL(rbic)[e] = ISNAN(bic[e]) ? NA_REAL : bic[e];
  SEXP tried = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)nG));
  for (int64_t g = 0; g < nG; g++) INTEGER(tried)[g] = (int)p.G[g];
  SEXP model_names = PROTECT(Rf_allocVector(STRSXP, (R_xlen_t)nM));
  for (int64_t m = 0; m < nM; m++)
    SET_STRING_ELT(model_names, m, Rf_mkChar(gpuml_gmm_model_name(models[m], d)));
  const char *names[] = {"G",           "modelName", "pro",    "mean",   "sigma",
                         "z",           "classification", "uncertainty", "loglik", "BIC",
                         "df",          "n_iter",    "converged", "backend", "G_tried",
                         "models_tried", "settings"};
  SEXP res = new_list(17, names);
  SET_VECTOR_ELT(res, 0, Rf_ScalarInteger((int)Gb));
  SET_VECTOR_ELT(res, 1, Rf_mkString(gpuml_gmm_model_name(model.covariance, d)));
  SET_VECTOR_ELT(res, 2, w);
  SET_VECTOR_ELT(res, 3, mu);
  SET_VECTOR_ELT(res, 4, sigma);
  SET_VECTOR_ELT(res, 5, rz);
  SET_VECTOR_ELT(res, 6, rcls);
  SET_VECTOR_ELT(res, 7, runc);
  SET_VECTOR_ELT(res, 8, Rf_ScalarReal(model.loglik));
  SET_VECTOR_ELT(res, 9, rbic);
  SET_VECTOR_ELT(res, 10, Rf_ScalarReal((double)gpuml_gmm_npar(model.covariance, Gb, d)));
  SET_VECTOR_ELT(res, 11, Rf_ScalarInteger((int)model.n_iter));
  SET_VECTOR_ELT(res, 12, Rf_ScalarLogical(model.converged != 0));
  SET_VECTOR_ELT(res, 13, Rf_mkString(gpuml_backend_name(result.run.backend)));
  SET_VECTOR_ELT(res, 14, tried);
  SET_VECTOR_ELT(res, 15, model_names);
  SET_VECTOR_ELT(res, 16, gpuml_r_params_values(GPUML_PARAMS_GMM, &p));
  UNPROTECT(10);
  return res;
}

SEXP gpuml_r_gmm_predict(SEXP weights, SEXP means, SEXP covariances, SEXP covariance, SEXP x,
                         SEXP backend, SEXP verbose, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  const int64_t m = Rf_nrows(x), G = XLENGTH(weights), d = Rf_nrows(means);
  gpuml_r_stop_on_failure(gpuml_check_columns("gmm", "newdata", Rf_ncols(x), "the model", d));
  gpuml_gmm_model model;
  memset(&model, 0, sizeof model);
  model.covariance = covariance_of(STRING_ELT(covariance, 0));
  model.G = G;
  model.d = d;
  model.weights = REAL(weights);
  model.means = REAL(means);
  model.covariances = REAL(covariances);
  const size_t rows = m > 0 ? (size_t)m : 1;
  double *z = (double *)R_alloc(rows * (size_t)(G > 0 ? G : 1), sizeof(double));
  double *unc = (double *)R_alloc(rows, sizeof(double));
  int64_t *cls = (int64_t *)R_alloc(rows, sizeof(int64_t));
  gpuml_gmm_result result;
  gpuml_r_stop_on_failure(gpuml_gmm_predict(&model, REAL(x), m, z, cls, unc, &opt, &result));
  SEXP rz, rcls, runc;
  outputs(z, cls, unc, m, G, &rz, &rcls, &runc);
  const char *names[] = {"classification", "z", "uncertainty", "backend"};
  SEXP res = new_list(4, names);
  SET_VECTOR_ELT(res, 0, rcls);
  SET_VECTOR_ELT(res, 1, rz);
  SET_VECTOR_ELT(res, 2, runc);
  SET_VECTOR_ELT(res, 3, Rf_mkString(gpuml_backend_name(result.run.backend)));
  UNPROTECT(4);
  return res;
}
