/* gpuml_r.h: what the .Call glue files share (defined in gpuml_r.c): options carrying
 * R's interrupt check and progress printer, error reporting, whole numbers as int64,
 * and the entry points that gpuml_r.c registers. */
#ifndef GPUML_R_H
#define GPUML_R_H
#include <stdint.h>
#include <R.h>
#include <Rinternals.h>
#include "gpuml.h"

/* Options for one call: backend (a string, or NULL to keep the default), verbose (a
 * logical) and threads (an integer, NA = default), with R's interrupt check and the
 * default progress printer. */
void gpuml_r_options(gpuml_options *opt, SEXP backend, SEXP verbose, SEXP threads);
/* The device list: NULL (none), a double vector of CUDA ordinals or one string ("all"),
 * as R/coerce.R's as_devices() gives it; the core checks the values. */
void gpuml_r_devices(gpuml_options *opt, SEXP devices);
/* The precision and metric words (each a string, or NULL to keep the default). */
void gpuml_r_words(gpuml_options *opt, SEXP precision, SEXP metric);
/* The options and shape of a kNN search (gpu_knn, gpu_mpi_knn): *n and *d of the data,
 * *m the queries (or *n); returns whether a query was given. */
int gpuml_r_knn_call(gpuml_options *opt, SEXP data, SEXP query, SEXP backend, SEXP precision,
                     SEXP metric, SEXP verbose, SEXP threads, int64_t *n, int64_t *d,
                     int64_t *m);
/* A search's outputs as R's list(nn.index (1-based), nn.dist, backend, rechecked);
 * idx (integer) and dist (double) are the m x k matrices, index0 the 0-based indices. */
SEXP gpuml_r_knn_list(SEXP idx, SEXP dist, const int64_t *index0,
                      const gpuml_knn_result *result);
/* The interrupt callback on its own, for glue with a progress printer of its own. */
int gpuml_r_interrupted(void *ctx);
/* Raises the core's error (or R's interrupt) after the core has freed everything. */
void gpuml_r_stop_on_failure(gpuml_status st);
/* A whole number held in a double as int64; values past int64 are clamped so that the
 * core reports them. */
int64_t gpuml_r_int64(double v);
/* Sets the parameters named in the list (the arguments the user gave) by name: numbers
 * and logicals as numbers, character vectors as words; NULL entries are skipped. Raises
 * the core's error for an unknown name or a value of the wrong kind. */
void gpuml_r_set_params(gpuml_params_kind kind, void *params, SEXP list);
/* Every scalar parameter's value as a named numeric vector (what the call used). */
SEXP gpuml_r_params_values(gpuml_params_kind kind, const void *params);

/* A mixture fit of the rows x by `fit` (gpuml_gmm_fit's arguments): the parameters set
 * from the list, checked and the outputs sized for n_total rows in all (the rows of x
 * alone, or of every rank of an MPI fit), the result as R/gmm.R takes it. */
SEXP gpuml_r_gmm_fit_with(SEXP x, SEXP params, const gpuml_options *opt, int64_t n_total,
                          gpuml_gmm_fit_fn fit, void *ctx);

SEXP gpuml_r_params_defaults(SEXP algo);
SEXP gpuml_r_knn_index_build(SEXP data, SEXP backend, SEXP precision, SEXP metric,
                             SEXP verbose, SEXP threads);
SEXP gpuml_r_knn_index_search(SEXP index, SEXP query, SEXP k, SEXP verbose, SEXP threads);
SEXP gpuml_r_knn_index_info(SEXP index);
SEXP gpuml_r_knn_index_free(SEXP index);
SEXP gpuml_r_dpc(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose, SEXP threads,
                 SEXP devices);
/* list(peaks, clusters, halo), 1-based, from the outputs of a density peaks fit. */
SEXP gpuml_r_dpc_cut_list(const int64_t *centres, int64_t ncentres, const int64_t *cluster,
                          const int *halo, int64_t n);
SEXP gpuml_r_dpc_cut(SEXP x, SEXP dc, SEXP rho, SEXP delta, SEXP nearest, SEXP order,
                     SEXP index, SEXP params, SEXP backend, SEXP verbose, SEXP threads);
SEXP gpuml_r_dpc_index(SEXP x, SEXP dc, SEXP threads);
SEXP gpuml_r_dpc_rank(SEXP rho, SEXP delta, SEXP m, SEXP threads);
SEXP gpuml_r_tsne(SEXP x, SEXP params, SEXP init_y, SEXP seed, SEXP backend, SEXP verbose,
                  SEXP threads, SEXP input, SEXP nn_dist, SEXP devices);
SEXP gpuml_r_tsne_transform(SEXP x, SEXP y, SEXP newdata, SEXP params, SEXP backend,
                            SEXP verbose, SEXP threads);
SEXP gpuml_r_gmm_fit(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose, SEXP threads,
                     SEXP devices);
/* Whether this package was built with MPI (the gpu_mpi_* functions). */
int gpuml_r_mpi_built(void);
SEXP gpuml_r_mpi_start(void);
SEXP gpuml_r_mpi_finalize(void);
SEXP gpuml_r_mpi_knn(SEXP data, SEXP query, SEXP k, SEXP backend, SEXP precision, SEXP metric,
                     SEXP verbose, SEXP threads, SEXP devices);
SEXP gpuml_r_mpi_dpc(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                     SEXP threads, SEXP devices);
SEXP gpuml_r_mpi_gmm_fit(SEXP x, SEXP params, SEXP seed, SEXP backend, SEXP verbose,
                         SEXP threads, SEXP devices);
SEXP gpuml_r_gmm_predict(SEXP weights, SEXP means, SEXP covariances, SEXP covariance, SEXP x,
                         SEXP backend, SEXP verbose, SEXP threads);

#endif
