/*
 * gpuml_dpc_mex: MEX gateway to gpuml_dpc_density, gpuml_dpc_cut and gpuml_dpc_halo.
 * Called by gpu_dpc.m.
 *
 *   [rho, delta, nearest, gamma, dc, backend, peaks, clusters, halo] =
 *       gpuml_dpc_mex (x, dc, gaussian, seed, k, rho_min, delta_min, backend, verbose)
 *
 * x: n x d double. dc, k, rho_min, delta_min: a number, or [] when not given. seed: a
 * number (the dc sample). nearest: 1-based, NaN for the densest point. peaks,
 * clusters (1-based) and halo (logical) are [] without a selection of centres.
 */
#include <math.h>
#include "gpuml_dpc_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 9)
    mexErrMsgIdAndTxt("gpuml:dpc:nargs",
                      "usage: gpuml_dpc_mex (x, dc, gaussian, seed, k, rho, delta, backend, "
                      "verbose); call gpu_dpc instead");
  if (nlhs > 9) mexErrMsgIdAndTxt("gpuml:dpc:nargs", "gpuml_dpc_mex returns at most 9 outputs");
  const mxArray *x = prhs[0];
  gpuml_mex_check_matrix(x, "X", "dpc");
  if (!mxIsDouble(x)) mexErrMsgIdAndTxt("gpuml:dpc:badType", "X must be double here (gpu_dpc converts it)");
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[7], prhs[8], &ps);
  opt.seed = (uint64_t)gpuml_dpc_mex_number(prhs[3], "seed", NULL);
  const int64_t n = (int64_t)mxGetM(x), d = (int64_t)mxGetN(x);
  gpuml_dpc_selection sel = gpuml_dpc_mex_selection(prhs[4], prhs[5], prhs[6]);
  const int cut = sel.has_k || sel.has_rho || sel.has_delta;
  if (cut) {
    gpuml_status st = gpuml_dpc_check_selection(&sel, n);
    if (st) gpuml_mex_raise(st);
  }
  gpuml_dpc_params params;
  gpuml_dpc_params_init(&params);
  int given = 0;
  double dc = gpuml_dpc_mex_number(prhs[1], "dc", &given);
  if (given) {
    params.estimate_dc = 0;
    params.dc = dc;
  }
  params.kernel = gpuml_mex_flag(prhs[2], "gaussian") ? GPUML_DPC_GAUSSIAN : GPUML_DPC_CUTOFF;

  const mwSize rows = n > 0 ? (mwSize)n : 0;
  mxArray *rho = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *delta = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *gamma = mxCreateDoubleMatrix(rows, 1, mxREAL);
  mxArray *nearest = mxCreateDoubleMatrix(rows, 1, mxREAL);
  double placeholder[4];
  int64_t index_placeholder = 0;
  int64_t *near0 = n > 0 ? (int64_t *)mxMalloc((size_t)n * sizeof(int64_t)) : &index_placeholder;
  gpuml_dpc_result result;
  gpuml_status st = gpuml_dpc_density((const double *)gpuml_mex_data(x), n, d, &params,
                                      n > 0 ? mxGetPr(rho) : placeholder,
                                      n > 0 ? mxGetPr(delta) : placeholder + 1, near0,
                                      n > 0 ? mxGetPr(gamma) : placeholder + 2, &opt, &result);
  if (st) {
    mxDestroyArray(rho);
    mxDestroyArray(delta);
    mxDestroyArray(gamma);
    mxDestroyArray(nearest);
    gpuml_mex_raise(st); /* near0 is mxMalloc'ed: Octave frees it */
  }
  double *np = mxGetPr(nearest);
  for (int64_t i = 0; i < n; i++) np[i] = near0[i] < 0 ? NAN : (double)(near0[i] + 1);
  mxArray *peaks = mxCreateDoubleMatrix(0, 0, mxREAL);
  mxArray *clusters = mxCreateDoubleMatrix(0, 0, mxREAL);
  mxArray *halo = mxCreateLogicalMatrix(0, 0);
  if (cut) {
    mxDestroyArray(peaks);
    mxDestroyArray(clusters);
    mxDestroyArray(halo);
    gpuml_dpc_mex_cut(x, result.dc, mxGetPr(rho), mxGetPr(delta), near0, &sel, &opt, NULL,
                      &peaks, &clusters, &halo);
  }
  if (near0 != &index_placeholder) mxFree(near0);
  mxArray *out[9] = {rho, delta, nearest, gamma, mxCreateDoubleScalar(result.dc),
                     mxCreateString(gpuml_backend_name(result.run.backend)), peaks, clusters, halo};
  for (int i = 0; i < 9; i++) {
    if (i < (nlhs > 0 ? nlhs : 1)) plhs[i] = out[i];
    else mxDestroyArray(out[i]);
  }
}
