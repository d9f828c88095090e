/* gpuml_r_mpi.c: the .Call glue of the MPI functions (R/mpi.R), for a job started as
 * `mpirun -np N Rscript script.R` in which every rank calls them on its own rows over
 * MPI_COMM_WORLD. MPI is initialised by the first call when nobody has done it (then
 * gpuml finalises it: gpu_mpi_finalize(), or at R's exit). Built with MPI when the
 * package's configure finds it (GPUML_HAVE_MPI); without it every function says so. */
#define _GNU_SOURCE /* dladdr */
#include <stdint.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include "gpuml_r.h"
#ifdef GPUML_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>
#include "gpuml_mpi.h"

int gpuml_r_mpi_built(void) { return 1; }

static int started_here; /* MPI_Init was called by this package */

/* Open MPI loads its components as plugins that need libmpi's symbols; R loads this
 * package's library with local symbols, so libmpi is made global first. */
static void make_libmpi_global(void) {
  Dl_info info;
  if (dladdr((void *)&MPI_Init, &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static void mpi_up(void) {
  int up = 0, down = 0;
  MPI_Finalized(&down);
  if (down)
    Rf_error("MPI has been finalised in this R session (gpu_mpi_finalize()): it cannot "
             "start again");
  MPI_Initialized(&up);
  if (up) return;
  make_libmpi_global();
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS) Rf_error("MPI_Init failed");
  started_here = 1;
}

/* list(rank, size, started): started is TRUE when this call initialised MPI. */
SEXP gpuml_r_mpi_start(void) {
  const int before = started_here;
  mpi_up();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static const char *names[] = {"rank", "size", "started", ""};
  SEXP res = PROTECT(Rf_mkNamed(VECSXP, names));
  SET_VECTOR_ELT(res, 0, Rf_ScalarInteger(rank));
  SET_VECTOR_ELT(res, 1, Rf_ScalarInteger(size));
  SET_VECTOR_ELT(res, 2, Rf_ScalarLogical(started_here && !before));
  UNPROTECT(1);
  return res;
}

/* Finalises MPI when this package initialised it and it is still up; TRUE then. */
SEXP gpuml_r_mpi_finalize(void) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (!started_here || !up || down) return Rf_ScalarLogical(FALSE);
  MPI_Finalize();
  return Rf_ScalarLogical(TRUE);
}

/* As gpuml_r_knn, over the ranks: data is this rank's rows; the indices are global. */
SEXP gpuml_r_mpi_knn(SEXP data, SEXP query, SEXP k, SEXP backend, SEXP precision, SEXP metric,
                     SEXP verbose, SEXP threads) {
  mpi_up();
  gpuml_options opt;
  int64_t n_local, d, m;
  const int has_query = gpuml_r_knn_call(&opt, data, query, backend, precision, metric,
                                         verbose, threads, &n_local, &d, &m);
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

static gpuml_status fit_over_ranks(void *ctx, const double *x, int64_t n, int64_t d,
                                   const gpuml_gmm_params *params, gpuml_gmm_model *model,
                                   double *z, int64_t *classification, double *uncertainty,
                                   double *bic, const gpuml_options *opt,
                                   gpuml_gmm_result *result) {
  (void)ctx;
  return gpuml_mpi_gmm_fit(MPI_COMM_WORLD, x, n, d, params, model, z, classification,
                           uncertainty, bic, opt, result);
}

/* As gpuml_r_gmm_fit, over the ranks: x is this rank's rows, and so are z,
 * classification and uncertainty; the model is the same on every rank. */
SEXP gpuml_r_mpi_gmm_fit(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                         SEXP threads) {
  mpi_up();
  gpuml_options opt;
  gpuml_r_options(&opt, backend, verbose, threads);
  gpuml_r_stop_on_failure(gpuml_options_set_seed(&opt, Rf_asReal(seed)));
  int64_t n_total = 0;
  gpuml_r_stop_on_failure(gpuml_mpi_rows(MPI_COMM_WORLD, Rf_nrows(x), Rf_ncols(x), &n_total));
  return gpuml_r_gmm_fit_with(x, params, &opt, n_total, fit_over_ranks, NULL);
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
                     SEXP verbose, SEXP threads) {
  (void)data, (void)query, (void)k, (void)backend, (void)precision, (void)metric;
  (void)verbose, (void)threads;
  return without_mpi();
}
SEXP gpuml_r_mpi_gmm_fit(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                         SEXP threads) {
  (void)x, (void)params, (void)seed, (void)backend, (void)verbose, (void)threads;
  return without_mpi();
}

#endif
