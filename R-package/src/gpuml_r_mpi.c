/* gpuml_r_mpi.c: the .Call glue of the MPI functions (R/mpi.R), for a job started as
 * `mpirun -np N Rscript script.R` in which every rank calls them on its own rows over
 * MPI_COMM_WORLD. MPI is initialised by the first call when nobody has done it (then
 * gpuml finalises it: gpu_mpi_finalize(), or at R's exit; gpuml_mpi_start and
 * gpuml_mpi_end hold that rule). Built with MPI when the package's configure finds it
 * (GPUML_HAVE_MPI); without it every function says so. */
#include <stdint.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "gpuml_r.h"
#ifdef GPUML_HAVE_MPI
#include <mpi.h>
#include "gpuml_mpi.h"

int gpuml_r_mpi_built(void) { return 1; }

static void mpi_up(void) { gpuml_r_stop_on_failure(gpuml_mpi_start(NULL, NULL, NULL)); }

/* The devices of an MPI call: NULL (the default, "local"), a word or device numbers, as
 * R/coerce.R's as_devices() gives them, by the core's rule (a collective; MPI up and
 * opt->backend set). */
static void mpi_devices(gpuml_options *opt, SEXP devices) {
  const int word = TYPEOF(devices) == STRSXP;
  gpuml_r_stop_on_failure(gpuml_mpi_options_set_devices(
      MPI_COMM_WORLD, opt, word ? CHAR(STRING_ELT(devices, 0)) : NULL,
      TYPEOF(devices) == REALSXP ? REAL(devices) : NULL,
      TYPEOF(devices) == REALSXP ? (int64_t)XLENGTH(devices) : 0));
}

/* list(rank, size, started): started is TRUE when this call initialised MPI. */
SEXP gpuml_r_mpi_start(void) {
  int rank = 0, size = 1, started = 0;
  gpuml_r_stop_on_failure(gpuml_mpi_start(&rank, &size, &started));
  static const char *names[] = {"rank", "size", "started", ""};
  SEXP res = PROTECT(Rf_mkNamed(VECSXP, names));
  SET_VECTOR_ELT(res, 0, Rf_ScalarInteger(rank));
  SET_VECTOR_ELT(res, 1, Rf_ScalarInteger(size));
  SET_VECTOR_ELT(res, 2, Rf_ScalarLogical(started));
  UNPROTECT(1);
  return res;
}

/* Finalises MPI when gpuml initialised it and it is still up; TRUE then. */
SEXP gpuml_r_mpi_finalize(void) { return Rf_ScalarLogical(gpuml_mpi_end()); }

/* As gpuml_r_knn, over the ranks: data is this rank's rows; the indices are global. */
SEXP gpuml_r_mpi_knn(SEXP data, SEXP query, SEXP k, SEXP backend, SEXP precision, SEXP metric,
                     SEXP verbose, SEXP threads, SEXP devices) {
  mpi_up();
  gpuml_options opt;
  int64_t n_local, d, m;
  const int has_query = gpuml_r_knn_call(&opt, data, query, backend, precision, metric,
                                         verbose, threads, &n_local, &d, &m);
  mpi_devices(&opt, devices);
  int64_t n_total = 0;
  gpuml_r_stop_on_failure(gpuml_mpi_rows(MPI_COMM_WORLD, n_local, d, &n_total));
  /* A k the core will refuse must not size an allocation: it then gets placeholders and
   * reports the bad k on every rank. */
  const int64_t kk = gpuml_r_int64(Rf_asReal(k));
  const int64_t k_sized = kk >= 1 && kk <= n_total ? kk : 0;
  SEXP idx = PROTECT(Rf_allocMatrix(INTSXP, (int)m, (int)k_sized));
  SEXP dist = PROTECT(Rf_allocMatrix(REALSXP, (int)m, (int)k_sized));
  const size_t entries = (size_t)m * (size_t)k_sized;
  int64_t *index0 = (int64_t *)R_alloc(entries ? entries : 1, sizeof(int64_t));
  double dist_placeholder = 0;
  gpuml_knn_result result;
  gpuml_status st = gpuml_mpi_knn_search(
      MPI_COMM_WORLD, REAL(data), n_local, d, has_query ? REAL(query) : NULL, m, kk, index0,
      entries ? REAL(dist) : &dist_placeholder, &opt, &result);
  gpuml_r_stop_on_failure(st);
  SEXP res = gpuml_r_knn_list(idx, dist, index0, &result);
  UNPROTECT(2);
  return res;
}

/* As gpuml_r_gmm_fit, over the ranks: x is this rank's rows, and so are z,
 * classification and uncertainty; the model is the same on every rank. */
SEXP gpuml_r_mpi_gmm_fit(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                         SEXP threads, SEXP devices) {
  mpi_up();
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  mpi_devices(&opt, devices);
  gpuml_r_stop_on_failure(gpuml_options_set_seed(&opt, Rf_asReal(seed)));
  int64_t n_total = 0;
  gpuml_r_stop_on_failure(gpuml_mpi_rows(MPI_COMM_WORLD, Rf_nrows(x), Rf_ncols(x), &n_total));
  MPI_Comm world = MPI_COMM_WORLD;
  return gpuml_r_gmm_fit_with(x, params, &opt, n_total, gpuml_mpi_gmm_fit_comm, &world);
}

/* As gpuml_r_dpc, over the ranks: x is this rank's rows, and so are rho, delta, nearest,
 * gamma, the clusters and the halo; nearest and the peaks are global 1-based rows, the
 * same peaks on every rank. Returns list(rho, delta, nearest, gamma, dc, backend, cut,
 * rows), rows the global 1-based numbers of this rank's rows. */
SEXP gpuml_r_mpi_dpc(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                     SEXP threads, SEXP devices) {
  mpi_up();
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  mpi_devices(&opt, devices);
  gpuml_r_stop_on_failure(gpuml_options_set_seed(&opt, Rf_asReal(seed)));
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  gpuml_r_set_params(GPUML_PARAMS_DPC, &p, params);
  const int64_t n_local = (int64_t)Rf_nrows(x), d = (int64_t)Rf_ncols(x);
  int64_t n_total = 0, offset = 0;
  gpuml_r_stop_on_failure(gpuml_mpi_block(MPI_COMM_WORLD, n_local, d, &n_total, &offset));
  const int cut = p.select.has_k || p.select.has_rho || p.select.has_delta;
  const size_t len = n_local > 0 ? (size_t)n_local : 1;
  SEXP rho = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)n_local));
  SEXP delta = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)n_local));
  SEXP gamma = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)n_local));
  SEXP nearest = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)n_local));
  SEXP rows = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)n_local));
  double placeholder[3];
  int64_t *nearest0 = (int64_t *)R_alloc(len, sizeof(int64_t));
  int64_t *centres = cut ? (int64_t *)R_alloc(n_total > 0 ? (size_t)n_total : 1, sizeof(int64_t)) : NULL;
  int64_t *cluster = cut ? (int64_t *)R_alloc(len, sizeof(int64_t)) : NULL;
  int *halo = cut ? (int *)R_alloc(len, sizeof(int)) : NULL;
  int64_t ncentres = 0;
  gpuml_dpc_result result;
  gpuml_r_stop_on_failure(gpuml_mpi_dpc_fit(
      MPI_COMM_WORLD, REAL(x), n_local, d, &p, n_local ? REAL(rho) : placeholder,
      n_local ? REAL(delta) : placeholder + 1, nearest0, n_local ? REAL(gamma) : placeholder + 2,
      centres, &ncentres, cluster, halo, &opt, &result));
  for (int64_t i = 0; i < n_local; i++) {
    INTEGER(nearest)[i] = nearest0[i] < 0 ? NA_INTEGER : (int)(nearest0[i] + 1);
    INTEGER(rows)[i] = (int)(offset + i + 1);
  }
  SEXP cuts = PROTECT(cut ? gpuml_r_dpc_cut_list(centres, ncentres, cluster, halo, n_local)
                          : R_NilValue);
  static const char *names[] = {"rho", "delta", "nearest", "gamma", "dc", "backend", "cut",
                                "rows", ""};
  SEXP res = PROTECT(Rf_mkNamed(VECSXP, names));
  SET_VECTOR_ELT(res, 0, rho);
  SET_VECTOR_ELT(res, 1, delta);
  SET_VECTOR_ELT(res, 2, nearest);
  SET_VECTOR_ELT(res, 3, gamma);
  SET_VECTOR_ELT(res, 4, Rf_ScalarReal(result.dc));
  SET_VECTOR_ELT(res, 5, Rf_mkString(gpuml_backend_name(result.run.backend)));
  SET_VECTOR_ELT(res, 6, cuts);
  SET_VECTOR_ELT(res, 7, rows);
  UNPROTECT(7);
  return res;
}

#else /* built without MPI */

int gpuml_r_mpi_built(void) { return 0; }

static SEXP without_mpi(void) {
  Rf_error("gpuml was built without MPI: install Open MPI (Debian: libopenmpi-dev) and "
           "reinstall gpuml, whose configure then finds it");
  return R_NilValue;
}

SEXP gpuml_r_mpi_start(void) { return without_mpi(); }
SEXP gpuml_r_mpi_finalize(void) { return Rf_ScalarLogical(FALSE); }
SEXP gpuml_r_mpi_knn(SEXP data, SEXP query, SEXP k, SEXP backend, SEXP precision, SEXP metric,
                     SEXP verbose, SEXP threads, SEXP devices) {
  (void)data, (void)query, (void)k, (void)backend, (void)precision, (void)metric;
  (void)verbose, (void)threads, (void)devices;
  return without_mpi();
}
SEXP gpuml_r_mpi_gmm_fit(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                         SEXP threads, SEXP devices) {
  (void)x, (void)params, (void)seed, (void)backend, (void)verbose, (void)threads, (void)devices;
  return without_mpi();
}
SEXP gpuml_r_mpi_dpc(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                     SEXP threads, SEXP devices) {
  (void)x, (void)params, (void)seed, (void)backend, (void)verbose, (void)threads, (void)devices;
  return without_mpi();
}

#endif
