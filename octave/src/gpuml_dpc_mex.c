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
#include "gpuml_dpc_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 6)
    mexErrMsgIdAndTxt("gpuml:dpc:nargs",
                      "usage: gpuml_dpc_mex (x, params, seed, backend, verbose, devices); call "
                      "gpu_dpc instead");
  if (nlhs > 9) mexErrMsgIdAndTxt("gpuml:dpc:nargs", "gpuml_dpc_mex returns at most 9 outputs");
  gpuml_dpc_mex_check_x(prhs[0]);
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[3], prhs[4], &ps);
  gpuml_mex_devices(&opt, prhs[5]);
  gpuml_mex_seed(&opt, prhs[2]);
  gpuml_dpc_mex_fit_with(nlhs, plhs, prhs[0], prhs[1], &opt, (int64_t)mxGetM(prhs[0]),
                         gpuml_dpc_fit_here, NULL);
}
