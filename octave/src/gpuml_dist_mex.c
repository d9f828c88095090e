/*
 * gpuml_dist_mex: MEX gateway to gpuml_dist_compute / gpuml_dist_compute_f. Called by gpu_dist.m.
 *
 *   [D, backend_used] = gpuml_dist_mex (X, Y, squared, backend, verbose, metric)
 *
 * X: n x d, Y: m x d or [] (0 x 0) for X against itself; both double or both single.
 * D: n x m, of the class of X. backend_used: "cpu" or "cuda".
 */
#include "gpuml_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 6)
    mexErrMsgIdAndTxt("gpuml:dist:nargs",
                      "usage: [D, backend] = gpuml_dist_mex (X, Y, squared, backend, verbose, "
                      "metric); call gpu_dist instead");
  if (nlhs > 2) mexErrMsgIdAndTxt("gpuml:dist:nargs", "gpuml_dist_mex returns at most 2 outputs");
  const mxArray *X = prhs[0], *Y = prhs[1];
  gpuml_mex_check_matrix(X, "X", "dist");
  /* Only [] (0 x 0) means "Y = X"; other empty matrices go to the core, which says so. */
  const int self = mxGetM(Y) == 0 && mxGetN(Y) == 0 && mxIsNumeric(Y);
  if (!self) {
    gpuml_mex_check_matrix(Y, "Y", "dist");
    if (mxIsSingle(X) != mxIsSingle(Y))
      mexErrMsgIdAndTxt("gpuml:dist:badType", "X and Y must both be double or both single");
    gpuml_status st = gpuml_check_columns("dist", "Y", (int64_t)mxGetN(Y), "X", (int64_t)mxGetN(X));
    if (st) gpuml_mex_raise(st);
  }
  const int squared = gpuml_mex_flag(prhs[2], "squared");
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[3], prhs[4], &ps);
  opt.metric = gpuml_mex_metric(prhs[5]);

  const int64_t n = (int64_t)mxGetM(X), d = (int64_t)mxGetN(X);
  const int64_t m = self ? n : (int64_t)mxGetM(Y);
  const int single = mxIsSingle(X);
  mxArray *D = mxCreateNumericMatrix((mwSize)n, (mwSize)m,
                                     single ? mxSINGLE_CLASS : mxDOUBLE_CLASS, mxREAL);
  /* An empty result may have no storage; the core still gets a pointer to check. */
  double placeholder = 0;
  void *out = mxGetData(D) ? mxGetData(D) : (void *)&placeholder;
  gpuml_dist_result result;
  gpuml_status st;
  if (single)
    st = gpuml_dist_compute_f((const float *)gpuml_mex_data(X), n, d,
                      self ? NULL : (const float *)gpuml_mex_data(Y), m, squared,
                      (float *)out, &opt, &result);
  else
    st = gpuml_dist_compute((const double *)gpuml_mex_data(X), n, d,
                    self ? NULL : (const double *)gpuml_mex_data(Y), m, squared,
                    (double *)out, &opt, &result);
  if (st) {
    mxDestroyArray(D);
    gpuml_mex_raise(st);
  }
  plhs[0] = D;
  if (nlhs > 1) plhs[1] = mxCreateString(gpuml_backend_name(result.run.backend));
}
