/* gpuml_r_dpc.c — the .Call glue of density peaks clustering (R/dpc.R): converts types
 * and indices (R's 1-based integers, the core's 0-based int64) and reports the core's
 * errors. The sequence (the selection checked, densities, centres, clusters, halo) is the
 * core's gpuml_dpc_fit / gpuml_dpc_recut. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Utils.h>
#include "gpuml_r.h"

/* list(peaks, clusters, halo), 1-based, from the core's outputs. */
SEXP gpuml_r_dpc_cut_list(const int64_t *centres, int64_t ncentres, const int64_t *cluster,
                     const int *halo, int64_t n) {
  SEXP peaks = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)ncentres));
  SEXP clusters = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)n));
  SEXP rhalo = PROTECT(Rf_allocVector(LGLSXP, (R_xlen_t)n));
  for (int64_t c = 0; c < ncentres; c++) INTEGER(peaks)[c] = (int)(centres[c] + 1);
  int *cl = INTEGER(clusters), *hl = LOGICAL(rhalo);
  /* on all threads, as the other conversions of a fit: at 10^7 points each is tens of ms
   * on one */
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) {
    cl[i] = (int)(cluster[i] + 1);
    hl[i] = halo[i] != 0;
  }
  SEXP res = PROTECT(Rf_allocVector(VECSXP, 3));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 3));
  SET_VECTOR_ELT(res, 0, peaks);
  SET_VECTOR_ELT(res, 1, clusters);
  SET_VECTOR_ELT(res, 2, rhalo);
  SET_STRING_ELT(names, 0, Rf_mkChar("peaks"));
  SET_STRING_ELT(names, 1, Rf_mkChar("clusters"));
  SET_STRING_ELT(names, 2, Rf_mkChar("halo"));
  Rf_setAttrib(res, R_NamesSymbol, names);
  UNPROTECT(5);
  return res;
}

/* The index kept with a fit (gpuml_dpc_index) as an R external pointer, freed by the
 * garbage collector's finalizer; one restored from a saved session comes back empty and
 * reaches the core as NULL (the recut then builds its own). */
static SEXP dpc_index_tag(void) { return Rf_install("gpuml_dpc_index"); }

static void dpc_index_finalizer(SEXP ptr) {
  gpuml_dpc_index *ix = (gpuml_dpc_index *)R_ExternalPtrAddr(ptr);
  if (!ix) return;
  R_ClearExternalPtr(ptr);
  gpuml_dpc_index_free(ix);
}

static gpuml_dpc_index *dpc_index_of(SEXP ptr) {
  if (Rf_isNull(ptr)) return NULL;
  if (TYPEOF(ptr) != EXTPTRSXP || R_ExternalPtrTag(ptr) != dpc_index_tag())
    Rf_error("the fit's index is not a density peaks index: pass the fit of gpu_dpc()");
  return (gpuml_dpc_index *)R_ExternalPtrAddr(ptr);
}

SEXP gpuml_r_dpc_index(SEXP x, SEXP dc, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, R_NilValue, Rf_ScalarLogical(0), threads);
  SEXP ptr = PROTECT(R_MakeExternalPtr(NULL, dpc_index_tag(), R_NilValue));
  R_RegisterCFinalizerEx(ptr, dpc_index_finalizer, TRUE);
  gpuml_dpc_index *ix = NULL;
  gpuml_r_stop_on_failure(gpuml_dpc_index_build(REAL(x), (int64_t)Rf_nrows(x),
                                                (int64_t)Rf_ncols(x), Rf_asReal(dc), &opt, &ix));
  R_SetExternalPtrAddr(ptr, ix);
  UNPROTECT(1);
  return ptr;
}

static int has_selection(const gpuml_dpc_params *p) {
  return p->select.has_k || p->select.has_rho || p->select.has_delta;
}

/* x: double matrix; params: a named list of the parameters the user gave, by the core's
 * names (dc, neighbor_rate, kernel, k, rho, delta); seed: a double (the dc sample).
 * Returns list(rho, delta, nearest (1-based, NA for the top point), gamma, dc, backend,
 * cut, order), cut being NULL without a selection, else list(peaks, clusters, halo), and
 * order the fit's density order (1-based). */
SEXP gpuml_r_dpc(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose, SEXP threads,
                 SEXP devices) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  gpuml_r_devices(&opt, devices);
  gpuml_r_stop_on_failure(gpuml_options_set_seed(&opt, Rf_asReal(seed)));
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  gpuml_r_set_params(GPUML_PARAMS_DPC, &p, params);
  const int64_t n = (int64_t)Rf_nrows(x), d = (int64_t)Rf_ncols(x);
  const int cut = has_selection(&p);
  if (cut) gpuml_r_stop_on_failure(gpuml_dpc_check_selection(&p.select, n));
  const size_t len = n > 0 ? (size_t)n : 1;
  SEXP rho = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)len));
  SEXP delta = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)len));
  SEXP gamma = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)len));
  SEXP nearest = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)len));
  int64_t *nearest0 = (int64_t *)R_alloc(len, sizeof(int64_t));
  int64_t *order0 = (int64_t *)R_alloc(len, sizeof(int64_t));
  int64_t *centres = cut ? (int64_t *)R_alloc(len, sizeof(int64_t)) : NULL;
  int64_t *cluster = cut ? (int64_t *)R_alloc(len, sizeof(int64_t)) : NULL;
  int *halo = cut ? (int *)R_alloc(len, sizeof(int)) : NULL;
  int64_t ncentres = 0;
  gpuml_dpc_result result;
  gpuml_r_stop_on_failure(gpuml_dpc_fit(REAL(x), n, d, &p, REAL(rho), REAL(delta), nearest0,
                                        REAL(gamma), order0, centres, &ncentres, cluster, halo,
                                        &opt, &result));
  /* the density order, kept with the fit for recutting */
  SEXP order = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)len));
  int *np = INTEGER(nearest), *op = INTEGER(order);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) {
    np[i] = nearest0[i] < 0 ? NA_INTEGER : (int)(nearest0[i] + 1);
    op[i] = (int)(order0[i] + 1);
  }
  SEXP cuts = cut ? gpuml_r_dpc_cut_list(centres, ncentres, cluster, halo, n) : R_NilValue;
  PROTECT(cuts);
  const char *keys[] = {"rho", "delta", "nearest", "gamma", "dc", "backend", "cut", "order"};
  SEXP res = PROTECT(Rf_allocVector(VECSXP, 8));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 8));
  SET_VECTOR_ELT(res, 0, rho);
  SET_VECTOR_ELT(res, 1, delta);
  SET_VECTOR_ELT(res, 2, nearest);
  SET_VECTOR_ELT(res, 3, gamma);
  SET_VECTOR_ELT(res, 4, Rf_ScalarReal(result.dc));
  SET_VECTOR_ELT(res, 5, Rf_mkString(gpuml_backend_name(result.run.backend)));
  SET_VECTOR_ELT(res, 6, cuts);
  SET_VECTOR_ELT(res, 7, order);
  for (int i = 0; i < 8; i++) SET_STRING_ELT(names, i, Rf_mkChar(keys[i]));
  Rf_setAttrib(res, R_NamesSymbol, names);
  UNPROTECT(8);
  return res;
}

/* Recuts a fit: x, dc, rho, delta, nearest (1-based, NA for the top point), order
 * (1-based, or NULL: a fit saved before it was kept) and index (an external pointer or
 * NULL) as gpu_dpc() stored them; params:
 * the selection (k, rho, delta) by name. Returns list(peaks, clusters, halo). */
SEXP gpuml_r_dpc_cut(SEXP x, SEXP dc, SEXP rho, SEXP delta, SEXP nearest, SEXP order,
                     SEXP index, SEXP params, SEXP backend, SEXP verbose, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  const int64_t n = (int64_t)XLENGTH(rho), d = (int64_t)Rf_ncols(x);
  const int has_order = !Rf_isNull(order);
  if ((int64_t)Rf_nrows(x) != n || (int64_t)XLENGTH(delta) != n || (int64_t)XLENGTH(nearest) != n ||
      (has_order && (int64_t)XLENGTH(order) != n))
    Rf_error("the fit is inconsistent: x, rho, delta, nearest and order must describe the same points");
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  gpuml_r_set_params(GPUML_PARAMS_DPC, &p, params);
  const size_t len = n > 0 ? (size_t)n : 1;
  int64_t *nearest0 = (int64_t *)R_alloc(len, sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) {
    const int v = INTEGER(nearest)[i];
    nearest0[i] = v == NA_INTEGER ? -1 : (int64_t)v - 1;
  }
  int64_t *order0 = has_order ? (int64_t *)R_alloc(len, sizeof(int64_t)) : NULL;
  for (int64_t s = 0; has_order && s < n; s++) {
    const int v = INTEGER(order)[s];
    order0[s] = v == NA_INTEGER ? -1 : (int64_t)v - 1;
  }
  int64_t *centres = (int64_t *)R_alloc(len, sizeof(int64_t));
  int64_t *cluster = (int64_t *)R_alloc(len, sizeof(int64_t));
  int *halo = (int *)R_alloc(len, sizeof(int));
  int64_t ncentres = 0;
  gpuml_r_stop_on_failure(gpuml_dpc_recut(REAL(x), n, d, Rf_asReal(dc), REAL(rho), REAL(delta),
                                          nearest0, order0, dpc_index_of(index), &p, centres, &ncentres, cluster, halo, &opt,
                                          NULL));
  return gpuml_r_dpc_cut_list(centres, ncentres, cluster, halo, n);
}

/* The m points of largest gamma (gpuml_dpc_rank), 1-based, in the centres' order. */
SEXP gpuml_r_dpc_rank(SEXP rho, SEXP delta, SEXP m, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, R_NilValue, Rf_ScalarLogical(0), threads);
  const int64_t n = (int64_t)XLENGTH(rho);
  if ((int64_t)XLENGTH(delta) != n)
    Rf_error("the fit is inconsistent: rho and delta must describe the same points");
  const double mm = Rf_asReal(m);
  const int64_t k = R_FINITE(mm) && fabs(mm) < 9e18 ? (int64_t)mm : 0;
  int64_t *top = (int64_t *)R_alloc(k > 0 && k <= n ? (size_t)k : 1, sizeof(int64_t));
  gpuml_r_stop_on_failure(gpuml_dpc_rank(REAL(rho), REAL(delta), n, k, top, &opt));
  SEXP res = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)k));
  for (int64_t c = 0; c < k; c++) INTEGER(res)[c] = (int)(top[c] + 1);
  UNPROTECT(1);
  return res;
}
