/*
 * gpuml_dpc_cut_mex: MEX gateway to gpuml_dpc_cut and gpuml_dpc_halo, for
 * choosing the centres of a fit again. Called by gpu_dpc_clusters.m.
 *
 *   [peaks, clusters, halo, backend] =
 *       gpuml_dpc_cut_mex (x, dc, rho, delta, nearest, k, rho_min, delta_min, backend, verbose)
 *
 * x: n x d double; dc, rho, delta, nearest (1-based, NaN for the densest point) as
 * returned by gpu_dpc; k, rho_min, delta_min: a number or [].
 */
#include <math.h>
#include "gpuml_dpc_mex.h"

static const double *column(const mxArray *a, int64_t n, const char *what) {
  if (!mxIsDouble(a) || mxIsComplex(a) || mxIsSparse(a) || (int64_t)mxGetNumberOfElements(a) != n)
    mexErrMsgIdAndTxt("gpuml:dpc:badInput",
                      "info.%s must be a real double vector with one value per row of X: pass "
                      "the info of gpu_dpc for the same X",
                      what);
  return mxGetPr(a);
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 10)
    mexErrMsgIdAndTxt("gpuml:dpc:nargs",
                      "usage: gpuml_dpc_cut_mex (x, dc, rho, delta, nearest, k, rho, delta, "
                      "backend, verbose); call gpu_dpc_clusters instead");
  const mxArray *x = prhs[0];
  gpuml_mex_check_matrix(x, "X", "dpc");
  if (!mxIsDouble(x)) mexErrMsgIdAndTxt("gpuml:dpc:badType", "X must be double here (gpu_dpc_clusters converts it)");
  const int64_t n = (int64_t)mxGetM(x);
  const double *rho = column(prhs[2], n, "rho");
  const double *delta = column(prhs[3], n, "delta");
  const double *nearest = column(prhs[4], n, "nearest");
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[8], prhs[9], &ps);
  int given = 0;
  const double dc = gpuml_dpc_mex_number(prhs[1], "dc", &given);
  gpuml_dpc_selection sel = gpuml_dpc_mex_selection(prhs[5], prhs[6], prhs[7]);
  int64_t *near0 = (int64_t *)mxMalloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++)
    near0[i] = isnan(nearest[i]) ? -1 : (int64_t)nearest[i] - 1;
  mxArray *peaks, *clusters, *halo;
  gpuml_dpc_result result;
  gpuml_dpc_mex_cut(x, given ? dc : NAN, rho, delta, near0, &sel, &opt, &result, &peaks,
                    &clusters, &halo);
  mxFree(near0);
  mxArray *out[4] = {peaks, clusters, halo,
                     mxCreateString(gpuml_backend_name(result.run.backend))};
  for (int i = 0; i < 4; i++) {
    if (i < (nlhs > 0 ? nlhs : 1)) plhs[i] = out[i];
    else mxDestroyArray(out[i]);
  }
}
