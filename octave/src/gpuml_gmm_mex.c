/*
 * gpuml_gmm_mex: MEX gateway to gpuml_gmm_fit. Called by gpu_gmm.m.
 *
 *   [labels, model] = gpuml_gmm_mex (X, params, seed, backend, verbose, devices)
 *
 * X: n x d double. params: a cell {name, value, ...} of the parameters the user gave,
 * by the core's names (G, models, init, max_iter, tol, reg, n_init); the core holds the
 * defaults (G = 1:9 and every model that applies among them). labels: n x 1, 1-based.
 * model: struct with G, modelName, weights (1 x G), means (G x d, one row per component),
 * covariances (d x d x G), z (n x G), uncertainty (n x 1), loglik, bic (K tried x models
 * tried), K, modelNames, n_iter, converged, backend.
 */
#include "gpuml_gmm_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 6)
    mexErrMsgIdAndTxt("gpuml:gmm:nargs",
                      "usage: [labels, model] = gpuml_gmm_mex (X, params, seed, backend, "
                      "verbose, devices); call gpu_gmm instead");
  if (nlhs > 2) mexErrMsgIdAndTxt("gpuml:gmm:nargs", "gpuml_gmm_mex returns at most 2 outputs");
  gpuml_gmm_mex_check_x(prhs[0]);
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[3], prhs[4], &ps);
  gpuml_mex_devices(&opt, prhs[5]);
  gpuml_mex_seed(&opt, prhs[2]);
  gpuml_gmm_mex_fit_with(nlhs, plhs, prhs[0], prhs[1], &opt, (int64_t)mxGetM(prhs[0]),
                         gpuml_gmm_fit_here, NULL);
}
