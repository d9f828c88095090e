/*
 * gpuml_dpc_mex.h: what the density peaks gateways share: optional numbers, the
 * selection of centres, and the cut (centres, clusters, halo) into mxArrays. Type
 * conversion only; the core validates the values.
 */
#ifndef GPUML_DPC_MEX_H
#define GPUML_DPC_MEX_H

#include <math.h>
#include <stdint.h>
#include "gpuml_mex.h"

/* A real scalar, or [] when *given is not NULL (then *given says which). */
static inline double gpuml_dpc_mex_number(const mxArray *a, const char *what, int *given) {
  if (given) *given = 0;
  if (given && mxIsEmpty(a) && (mxIsNumeric(a) || mxIsLogical(a))) return NAN;
  if (!(mxIsNumeric(a) || mxIsLogical(a)) || mxIsComplex(a) || mxGetNumberOfElements(a) != 1)
    mexErrMsgIdAndTxt("gpuml:badOption", "%s must be a real number%s", what,
                      given ? " or [] (not given)" : "");
  if (given) *given = 1;
  return mxGetScalar(a);
}

/* k as int64 (whole numbers only; the range is the core's to check). */
static inline int64_t gpuml_dpc_mex_k(double k) {
  if (isnan(k) || k != floor(k))
    mexErrMsgIdAndTxt("gpuml:dpc:badK", "k = %g must be a whole number", k);
  if (k >= 9.2e18) return INT64_MAX;
  if (k <= -9.2e18) return INT64_MIN;
  return (int64_t)k;
}

static inline gpuml_dpc_selection gpuml_dpc_mex_selection(const mxArray *k, const mxArray *rho,
                                                          const mxArray *delta) {
  gpuml_dpc_selection sel;
  gpuml_dpc_selection_init(&sel);
  int given = 0;
  double v = gpuml_dpc_mex_number(k, "k", &given);
  if (given) {
    sel.has_k = 1;
    sel.k = gpuml_dpc_mex_k(v);
  }
  sel.rho_min = gpuml_dpc_mex_number(rho, "rho", &sel.has_rho);
  sel.delta_min = gpuml_dpc_mex_number(delta, "delta", &sel.has_delta);
  return sel;
}

/* Centres, clusters and halo of a fit; raises the core's errors. */
static inline void gpuml_dpc_mex_cut(const mxArray *x, double dc, const double *rho,
                                     const double *delta, const int64_t *nearest,
                                     const gpuml_dpc_selection *sel, const gpuml_options *opt,
                                     gpuml_dpc_result *result, mxArray **peaks,
                                     mxArray **clusters, mxArray **halo) {
  const int64_t n = (int64_t)mxGetM(x), d = (int64_t)mxGetN(x);
  const size_t len = (size_t)(n > 0 ? n : 1);
  int64_t *centres = (int64_t *)mxMalloc(len * sizeof(int64_t));
  int64_t *cluster = (int64_t *)mxMalloc(len * sizeof(int64_t));
  int *is_halo = (int *)mxMalloc(len * sizeof(int));
  int64_t ncentres = 0;
  gpuml_status st = gpuml_dpc_cut(rho, delta, nearest, n, sel, centres, &ncentres, cluster);
  if (!st)
    st = gpuml_dpc_halo((const double *)gpuml_mex_data(x), n, d, dc, rho, cluster, ncentres,
                        is_halo, opt, result);
  if (st) gpuml_mex_raise(st); /* the buffers are mxMalloc'ed: Octave frees them */
  *peaks = mxCreateDoubleMatrix((mwSize)ncentres, 1, mxREAL);
  *clusters = mxCreateDoubleMatrix((mwSize)n, 1, mxREAL);
  *halo = mxCreateLogicalMatrix((mwSize)n, 1);
  double *pp = mxGetPr(*peaks), *cp = mxGetPr(*clusters);
  mxLogical *hp = mxGetLogicals(*halo);
  for (int64_t c = 0; c < ncentres; c++) pp[c] = (double)(centres[c] + 1);
  for (int64_t i = 0; i < n; i++) {
    cp[i] = (double)(cluster[i] + 1);
    hp[i] = is_halo[i] != 0;
  }
  mxFree(centres);
  mxFree(cluster);
  mxFree(is_halo);
}

#endif
