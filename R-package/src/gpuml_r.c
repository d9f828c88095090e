/* gpuml_r.c — the .Call glue between R and the gpuml C API (gpuml.h).
 *
 * The R wrappers in R/ coerce the arguments (double matrices, a backend string, a
 * logical verbose flag, k as a double); this file passes them to the core, turns the
 * 0-based int64 neighbour indices into 1-based R integers, and reports every failure
 * with the core's own message. It validates nothing itself. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Rdynload.h>
#include <R_ext/Utils.h>
#include "gpuml_r.h"

/* ---- callbacks --------------------------------------------------------------------- */

static void check_interrupt(void *unused) {
  (void)unused;
  R_CheckUserInterrupt();
}

/* Called by the core between blocks, from the calling (R main) thread. R_ToplevelExec
 * catches the longjmp of a pending interrupt, so the core can unwind and free. */
int gpuml_r_interrupted(void *ctx) {
  (void)ctx;
  return R_ToplevelExec(check_interrupt, NULL) == FALSE;
}

static void r_progress(void *ctx, const char *stage, int64_t done, int64_t total) {
  (void)ctx;
  REprintf("%s: %lld/%lld (%.0f%%)\n", stage, (long long)done, (long long)total,
           total > 0 ? 100.0 * (double)done / (double)total : 100.0);
}

/* ---- helpers ----------------------------------------------------------------------- */

void gpuml_r_options(gpuml_options *opt, SEXP backend, SEXP verbose, SEXP threads) {
  gpuml_options_init(opt);
  if (!Rf_isNull(backend) &&
      gpuml_parse_backend(CHAR(STRING_ELT(backend, 0)), &opt->backend) != GPUML_OK)
    Rf_error("%s", gpuml_last_error());
  opt->threads = Rf_asInteger(threads);
  if (opt->threads == NA_INTEGER) opt->threads = 0;
  opt->verbose = Rf_asLogical(verbose) == TRUE ? 1 : 0;
  opt->progress = r_progress;
  opt->interrupted = gpuml_r_interrupted;
  opt->callback_ctx = NULL;
}

void gpuml_r_devices(gpuml_options *opt, SEXP devices) {
  if (Rf_isNull(devices)) return;
  gpuml_status st = TYPEOF(devices) == STRSXP
                        ? gpuml_options_set_devices_word(opt, CHAR(STRING_ELT(devices, 0)))
                        : gpuml_options_set_devices(opt, REAL(devices), (int64_t)XLENGTH(devices));
  if (st) Rf_error("%s", gpuml_last_error());
}

void gpuml_r_words(gpuml_options *opt, SEXP precision, SEXP metric) {
  if (!Rf_isNull(precision) &&
      gpuml_parse_precision(CHAR(STRING_ELT(precision, 0)), &opt->precision) != GPUML_OK)
    Rf_error("%s", gpuml_last_error());
  if (!Rf_isNull(metric) &&
      gpuml_parse_metric(CHAR(STRING_ELT(metric, 0)), &opt->metric) != GPUML_OK)
    Rf_error("%s", gpuml_last_error());
}

/* Called after the core has returned and freed everything: R may now longjmp. */
void gpuml_r_stop_on_failure(gpuml_status st) {
  if (st == GPUML_OK) return;
  if (st == GPUML_ERR_INTERRUPTED) R_CheckUserInterrupt();
  const char *msg = gpuml_last_error();
  if (!msg || !*msg) msg = gpuml_status_string(st);
  Rf_error("%s", msg);
}

static int64_t nrows_of(SEXP x) { return (int64_t)Rf_nrows(x); }
static int64_t ncols_of(SEXP x) { return (int64_t)Rf_ncols(x); }

int64_t gpuml_r_int64(double v) {
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return (int64_t)v;
}

void gpuml_r_set_params(gpuml_params_kind kind, void *params, SEXP list) {
  if (Rf_isNull(list)) return;
  if (TYPEOF(list) != VECSXP) Rf_error("internal: the parameters must come as a list");
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  const R_xlen_t count = XLENGTH(list);
  if (count > 0 && Rf_isNull(names)) Rf_error("internal: the parameters must be named");
  for (R_xlen_t i = 0; i < count; i++) {
    const char *name = CHAR(STRING_ELT(names, i));
    SEXP v = VECTOR_ELT(list, i);
    const R_xlen_t len = XLENGTH(v);
    gpuml_status st;
    switch (TYPEOF(v)) {
      case NILSXP:
        continue;
      case REALSXP:
        st = gpuml_params_set_numbers(kind, params, name, REAL(v), (int64_t)len);
        break;
      case INTSXP:
      case LGLSXP: {
        double *d = (double *)R_alloc(len > 0 ? (size_t)len : 1, sizeof(double));
        const int *iv = TYPEOF(v) == INTSXP ? INTEGER(v) : LOGICAL(v);
        for (R_xlen_t j = 0; j < len; j++) d[j] = iv[j] == NA_INTEGER ? NAN : (double)iv[j];
        st = gpuml_params_set_numbers(kind, params, name, d, (int64_t)len);
        break;
      }
      case STRSXP: {
        const char **s = (const char **)R_alloc(len > 0 ? (size_t)len : 1, sizeof(char *));
        for (R_xlen_t j = 0; j < len; j++) {
          if (STRING_ELT(v, j) == NA_STRING) Rf_error("%s must not be NA", name);
          s[j] = CHAR(STRING_ELT(v, j));
        }
        st = gpuml_params_set_strings(kind, params, name, s, (int64_t)len);
        break;
      }
      default:
        Rf_error("%s must be a number, a logical or a string, not a %s", name,
                 Rf_type2char(TYPEOF(v)));
    }
    gpuml_r_stop_on_failure(st);
  }
}

SEXP gpuml_r_params_values(gpuml_params_kind kind, const void *params) {
  int count = 0;
  double v;
  for (int i = 0; gpuml_params_name(kind, i); i++)
    if (gpuml_params_get(kind, params, gpuml_params_name(kind, i), &v) == GPUML_OK) count++;
  SEXP out = PROTECT(Rf_allocVector(REALSXP, count));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, count));
  for (int i = 0, j = 0; gpuml_params_name(kind, i); i++) {
    const char *name = gpuml_params_name(kind, i);
    if (gpuml_params_get(kind, params, name, &v) != GPUML_OK) continue;
    REAL(out)[j] = v;
    SET_STRING_ELT(names, j++, Rf_mkChar(name));
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

/* The core's default parameters of an algorithm ("tsne", "gmm", "dpc"), by name. */
SEXP gpuml_r_params_defaults(SEXP algo) {
  const char *a = CHAR(STRING_ELT(algo, 0));
  if (strcmp(a, "tsne") == 0) {
    gpuml_tsne_params p;
    gpuml_tsne_params_init(&p);
    return gpuml_r_params_values(GPUML_PARAMS_TSNE, &p);
  }
  if (strcmp(a, "gmm") == 0) {
    gpuml_gmm_params p;
    gpuml_gmm_params_init(&p);
    return gpuml_r_params_values(GPUML_PARAMS_GMM, &p);
  }
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  return gpuml_r_params_values(GPUML_PARAMS_DPC, &p);
}

/* ---- entry points ------------------------------------------------------------------ */

/* x, y: double matrices (y may be NULL); returns list(dist = n x m matrix, backend). */
SEXP gpuml_r_dist(SEXP x, SEXP y, SEXP squared, SEXP metric, SEXP backend, SEXP verbose,
                  SEXP threads) {
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  gpuml_r_words(&opt, R_NilValue, metric);
  const int64_t n = nrows_of(x), d = ncols_of(x);
  const int has_y = !Rf_isNull(y);
  const int64_t m = has_y ? nrows_of(y) : n;
  if (has_y) gpuml_r_stop_on_failure(gpuml_check_columns("dist", "y", ncols_of(y), "x", d));
  SEXP out = PROTECT(Rf_allocMatrix(REALSXP, (int)n, (int)m));
  gpuml_dist_result result;
  gpuml_status st = gpuml_dist_compute(REAL(x), n, d, has_y ? REAL(y) : NULL, m,
                                       Rf_asLogical(squared) == TRUE, REAL(out), &opt, &result);
  gpuml_r_stop_on_failure(st);
  SEXP res = PROTECT(Rf_allocVector(VECSXP, 2));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 2));
  SET_VECTOR_ELT(res, 0, out);
  SET_VECTOR_ELT(res, 1, Rf_mkString(gpuml_backend_name(result.run.backend)));
  SET_STRING_ELT(names, 0, Rf_mkChar("dist"));
  SET_STRING_ELT(names, 1, Rf_mkChar("backend"));
  Rf_setAttrib(res, R_NamesSymbol, names);
  UNPROTECT(3);
  return res;
}

SEXP gpuml_r_knn_list(SEXP idx, SEXP dist, const int64_t *index0,
                      const gpuml_knn_result *result) {
  int *ip = INTEGER(idx);
  const R_xlen_t count = XLENGTH(idx);
  /* on all threads: the fresh vector's pages fault in in parallel */
#pragma omp parallel for schedule(static) if (count > 65536)
  for (R_xlen_t i = 0; i < count; i++) ip[i] = (int)(index0[i] + 1);
  static const char *names[] = {"nn.index", "nn.dist", "backend", "rechecked", ""};
  SEXP res = PROTECT(Rf_mkNamed(VECSXP, names));
  SET_VECTOR_ELT(res, 0, idx);
  SET_VECTOR_ELT(res, 1, dist);
  SET_VECTOR_ELT(res, 2, Rf_mkString(gpuml_backend_name(result->run.backend)));
  SET_VECTOR_ELT(res, 3, Rf_ScalarReal((double)result->rechecked));
  UNPROTECT(1);
  return res;
}

int gpuml_r_knn_call(gpuml_options *opt, SEXP data, SEXP query, SEXP backend, SEXP precision,
                     SEXP metric, SEXP verbose, SEXP threads, int64_t *n, int64_t *d,
                     int64_t *m) {
  gpuml_r_options(opt, backend, verbose, threads);
  gpuml_r_words(opt, precision, metric);
  *n = nrows_of(data);
  *d = ncols_of(data);
  const int has_query = !Rf_isNull(query);
  *m = has_query ? nrows_of(query) : *n;
  if (has_query)
    gpuml_r_stop_on_failure(gpuml_check_columns("knn", "query", ncols_of(query), "data", *d));
  return has_query;
}

/* data, query: double matrices (query may be NULL for a self-search); k: a double;
 * devices as gpuml_r_devices takes them.
 * Returns list(nn.index = m x k integer (1-based), nn.dist = m x k double, backend,
 * rechecked). */
SEXP gpuml_r_knn(SEXP data, SEXP query, SEXP k, SEXP backend, SEXP precision, SEXP metric,
                 SEXP verbose, SEXP threads, SEXP devices) {
  gpuml_options opt;
  int64_t n, d, m;
  const int has_query = gpuml_r_knn_call(&opt, data, query, backend, precision, metric,
                                         verbose, threads, &n, &d, &m);
  gpuml_r_devices(&opt, devices);
  const int64_t kk = gpuml_r_int64(Rf_asReal(k));
  gpuml_r_stop_on_failure(gpuml_knn_check(n, d, has_query ? m : -1, kk, &opt));
  SEXP idx = PROTECT(Rf_allocMatrix(INTSXP, (int)m, (int)kk));
  SEXP dist = PROTECT(Rf_allocMatrix(REALSXP, (int)m, (int)kk));
  int64_t *index0 = (int64_t *)R_alloc((size_t)m * (size_t)kk, sizeof(int64_t));
  gpuml_knn_result result;
  gpuml_status st = gpuml_knn_search(REAL(data), n, d, has_query ? REAL(query) : NULL, m, kk,
                                     index0, REAL(dist), &opt, &result);
  gpuml_r_stop_on_failure(st);
  SEXP res = gpuml_r_knn_list(idx, dist, index0, &result);
  UNPROTECT(2);
  return res;
}

static SEXP string_or_na(const char *s) {
  return (s && *s) ? Rf_mkString(s) : Rf_ScalarString(NA_STRING);
}

/* Returns what was compiled in and which device was found, as a named list. */
SEXP gpuml_r_info(void) {
  gpuml_info info;
  if (gpuml_backend_info(&info) != GPUML_OK) Rf_error("%s", gpuml_last_error());
  gpuml_build build;
  if (gpuml_build_info(&build) != GPUML_OK) Rf_error("%s", gpuml_last_error());
  const char *keys[] = {"version",       "openmp",         "threads",
                        "cuda_compiled", "cuda_runtime",   "cuda_driver",
                        "device_count",  "device_name",    "compute_capability",
                        "device_memory_gb", "cuda_message", "cuda_architectures",
                        "compiler",      "environment",    "mpi"};
  const int nk = (int)(sizeof keys / sizeof keys[0]);
  SEXP res = PROTECT(Rf_allocVector(VECSXP, nk));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, nk));
  for (int i = 0; i < nk; i++) SET_STRING_ELT(names, i, Rf_mkChar(keys[i]));
  char buf[64];
  SET_VECTOR_ELT(res, 0, Rf_mkString(info.version));
  SET_VECTOR_ELT(res, 1, Rf_ScalarLogical(info.openmp != 0));
  SET_VECTOR_ELT(res, 2, Rf_ScalarInteger(info.max_threads));
  SET_VECTOR_ELT(res, 3, Rf_ScalarLogical(info.cuda_compiled != 0));
  if (info.cuda_runtime_version > 0) {
    snprintf(buf, sizeof buf, "%d.%d", info.cuda_runtime_version / 1000,
             (info.cuda_runtime_version % 1000) / 10);
    SET_VECTOR_ELT(res, 4, Rf_mkString(buf));
  } else {
    SET_VECTOR_ELT(res, 4, Rf_ScalarString(NA_STRING));
  }
  if (info.cuda_driver_version > 0) {
    snprintf(buf, sizeof buf, "%d.%d", info.cuda_driver_version / 1000,
             (info.cuda_driver_version % 1000) / 10);
    SET_VECTOR_ELT(res, 5, Rf_mkString(buf));
  } else {
    SET_VECTOR_ELT(res, 5, Rf_ScalarString(NA_STRING));
  }
  SET_VECTOR_ELT(res, 6, Rf_ScalarInteger(info.device_count));
  SET_VECTOR_ELT(res, 7, string_or_na(info.device_name));
  if (info.device_count > 0) {
    snprintf(buf, sizeof buf, "%d.%d", info.compute_major, info.compute_minor);
    SET_VECTOR_ELT(res, 8, Rf_mkString(buf));
    SET_VECTOR_ELT(res, 9, Rf_ScalarReal((double)info.device_memory / (1024.0 * 1024.0 * 1024.0)));
  } else {
    SET_VECTOR_ELT(res, 8, Rf_ScalarString(NA_STRING));
    SET_VECTOR_ELT(res, 9, Rf_ScalarReal(NA_REAL));
  }
  SET_VECTOR_ELT(res, 10, string_or_na(info.cuda_message));
  SET_VECTOR_ELT(res, 11, string_or_na(build.cuda_architectures));
  SET_VECTOR_ELT(res, 12, string_or_na(build.compiler));
  int nenv = 0;
  while (gpuml_env_name(nenv)) nenv++;
  SEXP env = PROTECT(Rf_allocVector(STRSXP, nenv));
  SEXP env_names = PROTECT(Rf_allocVector(STRSXP, nenv));
  for (int i = 0; i < nenv; i++) {
    SET_STRING_ELT(env, i, Rf_mkChar(gpuml_env_meaning(i)));
    SET_STRING_ELT(env_names, i, Rf_mkChar(gpuml_env_name(i)));
  }
  Rf_setAttrib(env, R_NamesSymbol, env_names);
  SET_VECTOR_ELT(res, 13, env);
  SET_VECTOR_ELT(res, 14, Rf_ScalarLogical(gpuml_r_mpi_built()));
  Rf_setAttrib(res, R_NamesSymbol, names);
  UNPROTECT(4);
  return res;
}

/* ---- registration ------------------------------------------------------------------ */

static const R_CallMethodDef call_methods[] = {
    {"gpuml_r_dist", (DL_FUNC)&gpuml_r_dist, 7},
    {"gpuml_r_knn", (DL_FUNC)&gpuml_r_knn, 9},
    /* the kNN index (gpuml_r_knn_index.c) */
    {"gpuml_r_knn_index_build", (DL_FUNC)&gpuml_r_knn_index_build, 6},
    {"gpuml_r_knn_index_search", (DL_FUNC)&gpuml_r_knn_index_search, 5},
    {"gpuml_r_knn_index_info", (DL_FUNC)&gpuml_r_knn_index_info, 1},
    {"gpuml_r_knn_index_free", (DL_FUNC)&gpuml_r_knn_index_free, 1},
    {"gpuml_r_info", (DL_FUNC)&gpuml_r_info, 0},
    {"gpuml_r_params_defaults", (DL_FUNC)&gpuml_r_params_defaults, 1},
    /* density peaks (gpuml_r_dpc.c) */
    {"gpuml_r_dpc", (DL_FUNC)&gpuml_r_dpc, 7},
    {"gpuml_r_dpc_cut", (DL_FUNC)&gpuml_r_dpc_cut, 11},
    {"gpuml_r_dpc_index", (DL_FUNC)&gpuml_r_dpc_index, 3},
    {"gpuml_r_dpc_rank", (DL_FUNC)&gpuml_r_dpc_rank, 4},

    /* t-SNE (gpuml_r_tsne.c) */
    {"gpuml_r_tsne", (DL_FUNC)&gpuml_r_tsne, 10},
    {"gpuml_r_tsne_transform", (DL_FUNC)&gpuml_r_tsne_transform, 7},

    /* Gaussian mixtures (gpuml_r_gmm.c) */
    {"gpuml_r_gmm_fit", (DL_FUNC)&gpuml_r_gmm_fit, 7},
    {"gpuml_r_mpi_start", (DL_FUNC)&gpuml_r_mpi_start, 0},
    {"gpuml_r_mpi_finalize", (DL_FUNC)&gpuml_r_mpi_finalize, 0},
    {"gpuml_r_mpi_knn", (DL_FUNC)&gpuml_r_mpi_knn, 9},
    {"gpuml_r_mpi_gmm_fit", (DL_FUNC)&gpuml_r_mpi_gmm_fit, 7},
    {"gpuml_r_mpi_dpc", (DL_FUNC)&gpuml_r_mpi_dpc, 7},
    {"gpuml_r_gmm_predict", (DL_FUNC)&gpuml_r_gmm_predict, 8},

    {NULL, NULL, 0}};

void R_init_gpuml(DllInfo *dll) {
  R_registerRoutines(dll, NULL, call_methods, NULL, NULL);
  R_useDynamicSymbols(dll, FALSE);
  R_forceSymbols(dll, TRUE);
}

/* The GPU contexts the library kept across calls go with the package. */
void R_unload_gpuml(DllInfo *dll) {
  (void)dll;
  gpuml_shutdown();
}
