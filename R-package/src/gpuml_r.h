/* gpuml_r.h: what the .Call glue files share (defined in gpuml_r.c): options carrying
 * R's interrupt check and progress printer, error reporting, whole numbers as int64,
 * and the entry points that gpuml_r.c registers. */
#ifndef GPUML_R_H
#define GPUML_R_H
#include <stdint.h>
#include <R.h>
#include <Rinternals.h>
#include "gpuml.h"

/* Options for one call: backend (a string), verbose (a logical) and threads (an
 * integer, NA = default), with R's interrupt check and the default progress printer. */
void gpuml_r_options(gpuml_options *opt, SEXP backend, SEXP verbose, SEXP threads);
/* The interrupt callback on its own, for glue with a progress printer of its own. */
int gpuml_r_interrupted(void *ctx);
/* Raises the core's error (or R's interrupt) after the core has freed everything. */
void gpuml_r_stop_on_failure(gpuml_status st);
/* A whole number held in a double as int64; values past int64 are clamped so that the
 * core reports them. */
int64_t gpuml_r_int64(double v);

SEXP gpuml_r_dpc(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP gpuml_r_dpc_cut(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP gpuml_r_tsne(SEXP x, SEXP params, SEXP init, SEXP method, SEXP seed, SEXP backend,
                  SEXP verbose, SEXP threads);
SEXP gpuml_r_gmm_fit(SEXP x, SEXP G, SEXP covariance, SEXP max_iter, SEXP tol, SEXP reg,
                     SEXP n_init, SEXP seed, SEXP backend, SEXP verbose, SEXP threads);
SEXP gpuml_r_gmm_predict(SEXP weights, SEXP means, SEXP covariances, SEXP covariance, SEXP x,
                         SEXP backend, SEXP verbose, SEXP threads);

#endif
