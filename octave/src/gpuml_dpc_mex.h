/*
 * gpuml_dpc_mex.h: what the density peaks gateways share (gpuml_dpc_mex, gpuml_dpc_cut_mex,
 * gpuml_mpi_mex): a fit and the core's centres, clusters and halo as mxArrays (1-based).
 */
#ifndef GPUML_DPC_MEX_H
#define GPUML_DPC_MEX_H

#include <math.h>
#include <stdint.h>
#include "gpuml_mex.h"

static inline void gpuml_dpc_mex_cut_outputs(const int64_t *centres, int64_t ncentres,
                                             const int64_t *cluster, const int *halo,
                                             int64_t n, mxArray **peaks, mxArray **clusters,
                                             mxArray **rhalo) {
  *peaks = mxCreateDoubleMatrix((mwSize)ncentres, 1, mxREAL);
  *clusters = mxCreateDoubleMatrix((mwSize)n, 1, mxREAL);
  *rhalo = mxCreateLogicalMatrix((mwSize)n, 1);
  double *pp = mxGetPr(*peaks), *cp = mxGetPr(*clusters);
  mxLogical *hp = mxGetLogicals(*rhalo);
  for (int64_t c = 0; c < ncentres; c++) pp[c] = (double)(centres[c] + 1);
  for (int64_t i = 0; i < n; i++) {
    cp[i] = (double)(cluster[i] + 1);
    hp[i] = halo[i] != 0;
  }
}

static inline int gpuml_dpc_mex_has_selection(const gpuml_dpc_params *p) {
  return p->select.has_k || p->select.has_rho || p->select.has_delta;
}

/* x must be a real, full, double matrix (gpu_dpc converts the other numeric classes). */
static inline void gpuml_dpc_mex_check_x(const mxArray *x) {
  gpuml_mex_check_matrix(x, "X", "dpc");
  if (!mxIsDouble(x))
    mexErrMsgIdAndTxt("gpuml:dpc:badType", "X must be double here (gpu_dpc converts it)");
}

/* Fits x's rows (n_total: the rows of the whole fit, those of every rank over MPI, which
 * a selection is checked against and the centres are counted in) with the parameters of
 * the cell params_cell by `fit`; plhs[0..8] = rho, delta, nearest, gamma, dc, backend,
 * peaks, clusters, halo as gpuml_dpc_mex returns them (as many as nlhs asks for). */
static inline void gpuml_dpc_mex_fit_with(int nlhs, mxArray *plhs[], const mxArray *x,
                                          const mxArray *params_cell,
                                          const gpuml_options *opt, int64_t n_total,
                                          gpuml_dpc_fit_fn fit, void *ctx) {
  gpuml_dpc_params params;
  gpuml_dpc_params_init(&params);
  gpuml_mex_set_params(GPUML_PARAMS_DPC, &params, params_cell);
  const int64_t n = (int64_t)mxGetM(x), d = (int64_t)mxGetN(x);
  const int cut = gpuml_dpc_mex_has_selection(&params);
  gpuml_status st;
  if (cut && (st = gpuml_dpc_check_selection(&params.select, n_total))) gpuml_mex_raise(st);

  const mwSize rows = n > 0 ? (mwSize)n : 0;
  const size_t len = n > 0 ? (size_t)n : 1;
  mxArray *rho = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *delta = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *gamma = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *nearest = mxCreateDoubleMatrix(rows, 1, mxREAL);
  double placeholder[3];
  int64_t *near0 = (int64_t *)mxMalloc(len * sizeof(int64_t));
  int64_t *centres = cut ? (int64_t *)mxMalloc((n_total > 0 ? (size_t)n_total : 1) * sizeof(int64_t))
                         : NULL;
  int64_t *cluster = cut ? (int64_t *)mxMalloc(len * sizeof(int64_t)) : NULL;
  int *halo = cut ? (int *)mxMalloc(len * sizeof(int)) : NULL;
  int64_t ncentres = 0;
  gpuml_dpc_result result;
  st = fit(ctx, (const double *)gpuml_mex_data(x), n, d, &params,
           n > 0 ? mxGetPr(rho) : placeholder, n > 0 ? mxGetPr(delta) : placeholder + 1, near0,
           n > 0 ? mxGetPr(gamma) : placeholder + 2, centres, &ncentres, cluster, halo, opt,
           &result);
  if (st) {
    mxDestroyArray(rho);
    mxDestroyArray(delta);
    mxDestroyArray(gamma);
    mxDestroyArray(nearest);
    gpuml_mex_raise(st); /* the mxMalloc'ed buffers are freed by Octave */
  }
  double *np = mxGetPr(nearest);
  for (int64_t i = 0; i < n; i++) np[i] = near0[i] < 0 ? NAN : (double)(near0[i] + 1);
  mxArray *peaks, *clusters, *rhalo;
  if (cut) {
    gpuml_dpc_mex_cut_outputs(centres, ncentres, cluster, halo, n, &peaks, &clusters, &rhalo);
  } else {
    peaks = mxCreateDoubleMatrix(0, 0, mxREAL);
    clusters = mxCreateDoubleMatrix(0, 0, mxREAL);
    rhalo = mxCreateLogicalMatrix(0, 0);
  }
  mxArray *out[9] = {rho, delta, nearest, gamma, mxCreateDoubleScalar(result.dc),
                     mxCreateString(gpuml_backend_name(result.run.backend)), peaks, clusters,
                     rhalo};
  for (int i = 0; i < 9; i++) {
    if (i < (nlhs > 0 ? nlhs : 1)) plhs[i] = out[i];
    else mxDestroyArray(out[i]);
  }
}

#endif
