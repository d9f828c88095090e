/* gpuml_r_knn_index.c — the kNN index as an R external pointer: built by the core,
 * freed by gpu_free() or by the garbage collector's finalizer (and at the end of the
 * session). A pointer whose index is gone (freed, or restored from a saved session,
 * where external pointers come back empty) reaches the core as NULL, which reports it. */
#include <R.h>
#include <Rinternals.h>
#include "gpuml_r.h"

static SEXP index_tag(void) { return Rf_install("gpuml_knn_index"); }

static gpuml_knn_index *index_of(SEXP ptr) {
  if (TYPEOF(ptr) != EXTPTRSXP || R_ExternalPtrTag(ptr) != index_tag())
    Rf_error("not a kNN index: build one with gpu_knn_index()");
  return (gpuml_knn_index *)R_ExternalPtrAddr(ptr);
}

static void index_finalizer(SEXP ptr) {
  gpuml_knn_index *ix = (gpuml_knn_index *)R_ExternalPtrAddr(ptr);
  if (!ix) return;
  R_ClearExternalPtr(ptr);
  gpuml_knn_index_free(ix);
}

SEXP gpuml_r_knn_index_build(SEXP data, SEXP backend, SEXP precision, SEXP metric,
                             SEXP verbose, SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  gpuml_r_words(&opt, precision, metric);
  /* The pointer (empty) and its finalizer first, so that nothing R allocates after the
   * build can fail and leave the index unowned. The pointer holds the matrix, which the
   * index borrows: R keeps it alive, and copies it before any change, while the index
   * lives. */
  SEXP ptr = PROTECT(R_MakeExternalPtr(NULL, index_tag(), data));
  R_RegisterCFinalizerEx(ptr, index_finalizer, TRUE);
  gpuml_knn_index *ix = NULL;
  gpuml_r_stop_on_failure(gpuml_knn_index_build_borrowed(REAL(data), (int64_t)Rf_nrows(data),
                                                         (int64_t)Rf_ncols(data), &opt, &ix));
  R_SetExternalPtrAddr(ptr, ix);
  UNPROTECT(1);
  return ptr;
}

/* query: a double matrix or NULL (the indexed data against itself); k: a double. */
SEXP gpuml_r_knn_index_search(SEXP index, SEXP query, SEXP k, SEXP verbose, SEXP threads) {
  gpuml_knn_index *ix = index_of(index);
  gpuml_options opt;
  gpuml_r_options(&opt, R_NilValue, verbose, threads);
  const int has_query = !Rf_isNull(query);
  const int64_t kk = gpuml_r_int64(Rf_asReal(k));
  gpuml_knn_index_info info;
  gpuml_r_stop_on_failure(gpuml_knn_index_describe(ix, &info));
  if (has_query)
    gpuml_r_stop_on_failure(gpuml_check_columns("knn", "query", (int64_t)Rf_ncols(query),
                                                "the index", info.cols));
  const int64_t m = has_query ? (int64_t)Rf_nrows(query) : info.rows;
  gpuml_r_stop_on_failure(gpuml_knn_index_check(ix, has_query ? m : -1, kk, &opt));
  SEXP idx = PROTECT(Rf_allocMatrix(INTSXP, (int)m, (int)kk));
  SEXP dist = PROTECT(Rf_allocMatrix(REALSXP, (int)m, (int)kk));
  int64_t *index0 = (int64_t *)R_alloc((size_t)m * (size_t)kk, sizeof(int64_t));
  gpuml_knn_result result;
  gpuml_r_stop_on_failure(gpuml_knn_index_search(ix, has_query ? REAL(query) : NULL, m, kk,
                                                 index0, REAL(dist), &opt, &result));
  SEXP res = gpuml_r_knn_list(idx, dist, index0, &result);
  UNPROTECT(2);
  return res;
}

/* list(rows, cols, metric, backend, device, precision, host_bytes, device_bytes,
 * build_seconds), or NULL when the index is gone. */
SEXP gpuml_r_knn_index_info(SEXP index) {
  gpuml_knn_index *ix = index_of(index);
  if (!ix) return R_NilValue;
  gpuml_knn_index_info info;
  gpuml_r_stop_on_failure(gpuml_knn_index_describe(ix, &info));
  static const char *names[] = {"rows", "cols", "metric", "backend", "device", "precision",
                                "host_bytes", "device_bytes", "build_seconds", ""};
  SEXP res = PROTECT(Rf_mkNamed(VECSXP, names));
  SET_VECTOR_ELT(res, 0, Rf_ScalarReal((double)info.rows));
  SET_VECTOR_ELT(res, 1, Rf_ScalarReal((double)info.cols));
  SET_VECTOR_ELT(res, 2, Rf_mkString(gpuml_metric_name(info.metric)));
  SET_VECTOR_ELT(res, 3, Rf_mkString(gpuml_backend_name(info.run.backend)));
  SET_VECTOR_ELT(res, 4, Rf_ScalarInteger(info.run.device));
  SET_VECTOR_ELT(res, 5, Rf_mkString(info.run.precision == GPUML_PRECISION_SINGLE ? "single" : "double"));
  SET_VECTOR_ELT(res, 6, Rf_ScalarReal((double)info.host_bytes));
  SET_VECTOR_ELT(res, 7, Rf_ScalarReal((double)info.device_bytes));
  SET_VECTOR_ELT(res, 8, Rf_ScalarReal(info.run.seconds));
  UNPROTECT(1);
  return res;
}

/* Frees the index now; TRUE when there was one to free. */
SEXP gpuml_r_knn_index_free(SEXP index) {
  const int alive = index_of(index) != NULL;
  index_finalizer(index);
  return Rf_ScalarLogical(alive);
}
