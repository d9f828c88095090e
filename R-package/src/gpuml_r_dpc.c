/* gpuml_r_dpc.c — the .Call glue of density peaks clustering (R/dpc.R).
 *
 * R/dpc.R coerces the types (a double matrix, numbers as doubles or NULL, flags); this
 * file passes them to the core, converts indices between R's 1-based integers and the
 * core's 0-based int64, and reports the core's errors. It validates nothing itself. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Utils.h>
#include "gpuml_r.h"

/* k, rho, delta: NULL or a double each. */
static gpuml_dpc_selection dpc_selection(SEXP k, SEXP rho_min, SEXP delta_min) {
  gpuml_dpc_selection sel;
  gpuml_dpc_selection_init(&sel);
  if (!Rf_isNull(k)) {
    sel.has_k = 1;
    sel.k = gpuml_r_int64(Rf_asReal(k));
  }
  if (!Rf_isNull(rho_min)) {
    sel.has_rho = 1;
    sel.rho_min = Rf_asReal(rho_min);
  }
  if (!Rf_isNull(delta_min)) {
    sel.has_delta = 1;
    sel.delta_min = Rf_asReal(delta_min);
  }
  return sel;
}

static int dpc_has_selection(const gpuml_dpc_selection *sel) {
  return sel->has_k || sel->has_rho || sel->has_delta;
}

/* Centres, clusters and halo for a fit: list(peaks, clusters, halo), 1-based. */
static SEXP dpc_cut(SEXP x, double dc, const double *rho, const double *delta,
                    const int64_t *nearest, const gpuml_dpc_selection *sel,
                    const gpuml_options *opt) {
  const int64_t n = (int64_t)Rf_nrows(x), d = (int64_t)Rf_ncols(x);
  int64_t *centres = (int64_t *)R_alloc((size_t)n, sizeof(int64_t));
  int64_t *cluster = (int64_t *)R_alloc((size_t)n, sizeof(int64_t));
  int64_t ncentres = 0;
  gpuml_r_stop_on_failure(gpuml_dpc_cut(rho, delta, nearest, n, sel, centres, &ncentres, cluster));
  SEXP halo = PROTECT(Rf_allocVector(LGLSXP, (R_xlen_t)n));
  gpuml_r_stop_on_failure(
      gpuml_dpc_halo(REAL(x), n, d, dc, rho, cluster, ncentres, LOGICAL(halo), opt, NULL));
  SEXP peaks = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)ncentres));
  SEXP clusters = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)n));
  for (int64_t c = 0; c < ncentres; c++) INTEGER(peaks)[c] = (int)(centres[c] + 1);
  for (int64_t i = 0; i < n; i++) INTEGER(clusters)[i] = (int)(cluster[i] + 1);
  SEXP res = PROTECT(Rf_allocVector(VECSXP, 3));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 3));
  SET_VECTOR_ELT(res, 0, peaks);
  SET_VECTOR_ELT(res, 1, clusters);
  SET_VECTOR_ELT(res, 2, halo);
  SET_STRING_ELT(names, 0, Rf_mkChar("peaks"));
  SET_STRING_ELT(names, 1, Rf_mkChar("clusters"));
  SET_STRING_ELT(names, 2, Rf_mkChar("halo"));
  Rf_setAttrib(res, R_NamesSymbol, names);
  UNPROTECT(5);
  return res;
}

/* x: double matrix; dc: NULL (estimate) or a double; gaussian: logical; seed: a double
 * (for the dc sample); k, rho_min, delta_min: NULL or doubles. Returns list(rho, delta,
 * nearest (1-based, NA for the top point), gamma, dc, backend, cut), cut being NULL
 * without a selection, else list(peaks, clusters, halo). A selection is checked before
 * anything is computed. */
SEXP gpuml_r_dpc(SEXP x, SEXP dc, SEXP gaussian, SEXP seed, SEXP k, SEXP rho_min,
                 SEXP delta_min, SEXP backend, SEXP verbose, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  opt.seed = (uint64_t)Rf_asReal(seed);
  const int64_t n = (int64_t)Rf_nrows(x), d = (int64_t)Rf_ncols(x);
  gpuml_dpc_selection sel = dpc_selection(k, rho_min, delta_min);
  const int cut_wanted = dpc_has_selection(&sel);
  if (cut_wanted) gpuml_r_stop_on_failure(gpuml_dpc_check_selection(&sel, n));
  gpuml_dpc_params params;
  gpuml_dpc_params_init(&params);
  if (!Rf_isNull(dc)) {
    params.estimate_dc = 0;
    params.dc = Rf_asReal(dc);
  }
  params.kernel = Rf_asLogical(gaussian) == TRUE ? GPUML_DPC_GAUSSIAN : GPUML_DPC_CUTOFF;
  const R_xlen_t len = n > 0 ? (R_xlen_t)n : 1;
  SEXP rho = PROTECT(Rf_allocVector(REALSXP, len));
  SEXP delta = PROTECT(Rf_allocVector(REALSXP, len));
  SEXP gamma = PROTECT(Rf_allocVector(REALSXP, len));
  SEXP nearest = PROTECT(Rf_allocVector(INTSXP, len));
  int64_t *nearest0 = (int64_t *)R_alloc((size_t)len, sizeof(int64_t));
  gpuml_dpc_result result;
  gpuml_r_stop_on_failure(gpuml_dpc_density(REAL(x), n, d, &params, REAL(rho), REAL(delta),
                                            nearest0, REAL(gamma), &opt, &result));
  for (int64_t i = 0; i < n; i++)
    INTEGER(nearest)[i] = nearest0[i] < 0 ? NA_INTEGER : (int)(nearest0[i] + 1);
  SEXP cut = R_NilValue;
  if (cut_wanted) cut = dpc_cut(x, result.dc, REAL(rho), REAL(delta), nearest0, &sel, &opt);
  PROTECT(cut);
  const char *keys[] = {"rho", "delta", "nearest", "gamma", "dc", "backend", "cut"};
  SEXP res = PROTECT(Rf_allocVector(VECSXP, 7));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 7));
  SET_VECTOR_ELT(res, 0, rho);
  SET_VECTOR_ELT(res, 1, delta);
  SET_VECTOR_ELT(res, 2, nearest);
  SET_VECTOR_ELT(res, 3, gamma);
  SET_VECTOR_ELT(res, 4, Rf_ScalarReal(result.dc));
  SET_VECTOR_ELT(res, 5, Rf_mkString(gpuml_backend_name(result.run.backend)));
  SET_VECTOR_ELT(res, 6, cut);
  for (int i = 0; i < 7; i++) SET_STRING_ELT(names, i, Rf_mkChar(keys[i]));
  Rf_setAttrib(res, R_NamesSymbol, names);
  UNPROTECT(7);
  return res;
}

/* Recuts a fit: x, dc, rho, delta, nearest (1-based, NA for the top point) as stored by
 * gpu_dpc(); k, rho_min, delta_min: NULL or doubles. Returns list(peaks, clusters, halo). */
SEXP gpuml_r_dpc_cut(SEXP x, SEXP dc, SEXP rho, SEXP delta, SEXP nearest, SEXP k,
                     SEXP rho_min, SEXP delta_min, SEXP backend, SEXP verbose, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  const int64_t n = (int64_t)XLENGTH(rho);
  if ((int64_t)Rf_nrows(x) != n || (int64_t)XLENGTH(delta) != n || (int64_t)XLENGTH(nearest) != n)
    Rf_error("the fit is inconsistent: x, rho, delta and nearest must describe the same points");
  int64_t *nearest0 = (int64_t *)R_alloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) {
    const int v = INTEGER(nearest)[i];
    nearest0[i] = v == NA_INTEGER ? -1 : (int64_t)v - 1;
  }
  gpuml_dpc_selection sel = dpc_selection(k, rho_min, delta_min);
  return dpc_cut(x, Rf_asReal(dc), REAL(rho), REAL(delta), nearest0, &sel, &opt);
}
