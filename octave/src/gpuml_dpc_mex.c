/*
 * gpuml_dpc_mex: MEX gateway to gpuml_dpc_fit. Called by gpu_dpc.m.
 *
 *   [rho, delta, nearest, gamma, dc, backend, peaks, clusters, halo] =
 *       gpuml_dpc_mex (x, params, seed, backend, verbose, devices)
 *
 * x: n x d double. params: a cell {name, value, ...} of the parameters the user gave, by
 * the core's names (dc, neighbor_rate, kernel, k, rho, delta). seed: a whole number (the
 * dc sample). nearest: 1-based, NaN for the densest point. peaks, clusters (1-based) and
 * halo (logical) are [] without a selection of centres. devices: [], device numbers or
 * "all" (checked by the core).
 */
#include <math.h>
#include "gpuml_dpc_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 6)
    mexErrMsgIdAndTxt("gpuml:dpc:nargs",
                      "usage: gpuml_dpc_mex (x, params, seed, backend, verbose, devices); call "
                      "gpu_dpc instead");
  if (nlhs > 9) mexErrMsgIdAndTxt("gpuml:dpc:nargs", "gpuml_dpc_mex returns at most 9 outputs");
  const mxArray *x = prhs[0];
  gpuml_mex_check_matrix(x, "X", "dpc");
  if (!mxIsDouble(x)) mexErrMsgIdAndTxt("gpuml:dpc:badType", "X must be double here (gpu_dpc converts it)");
  if (!(mxIsNumeric(prhs[2]) || mxIsLogical(prhs[2])) || mxGetNumberOfElements(prhs[2]) != 1)
    mexErrMsgIdAndTxt("gpuml:badSeed", "seed must be a single whole number");
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[3], prhs[4], &ps);
  gpuml_mex_devices(&opt, prhs[5]);
  gpuml_status st = gpuml_options_set_seed(&opt, mxGetScalar(prhs[2]));
  if (st) gpuml_mex_raise(st);
  gpuml_dpc_params params;
  gpuml_dpc_params_init(&params);
  gpuml_mex_set_params(GPUML_PARAMS_DPC, &params, prhs[1]);
  const int64_t n = (int64_t)mxGetM(x), d = (int64_t)mxGetN(x);
  const int cut = gpuml_dpc_mex_has_selection(&params);
  if (cut && (st = gpuml_dpc_check_selection(&params.select, n))) gpuml_mex_raise(st);

  const mwSize rows = n > 0 ? (mwSize)n : 0;
  const size_t len = n > 0 ? (size_t)n : 1;
  mxArray *rho = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *delta = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *gamma = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *nearest = mxCreateDoubleMatrix(rows, 1, mxREAL);
  double placeholder[3];
  int64_t *near0 = (int64_t *)mxMalloc(len * sizeof(int64_t));
  int64_t *centres = cut ? (int64_t *)mxMalloc(len * sizeof(int64_t)) : NULL;
  int64_t *cluster = cut ? (int64_t *)mxMalloc(len * sizeof(int64_t)) : NULL;
  int *halo = cut ? (int *)mxMalloc(len * sizeof(int)) : NULL;
  int64_t ncentres = 0;
  gpuml_dpc_result result;
  st = gpuml_dpc_fit((const double *)gpuml_mex_data(x), n, d, &params,
                     n > 0 ? mxGetPr(rho) : placeholder, n > 0 ? mxGetPr(delta) : placeholder + 1,
                     near0, n > 0 ? mxGetPr(gamma) : placeholder + 2, centres, &ncentres,
                     cluster, halo, &opt, &result);
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
