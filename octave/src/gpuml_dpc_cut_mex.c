/*
 * gpuml_dpc_cut_mex: MEX gateway to gpuml_dpc_recut, for recutting a fit. Called by
 * gpu_dpc_clusters.m.
 *
 *   [peaks, clusters, halo, backend] =
 *       gpuml_dpc_cut_mex (x, dc, rho, delta, nearest, params, backend, verbose)
 *
 * x, dc, rho, delta, nearest (1-based, NaN for the densest point) as gpu_dpc returned
 * them; params: the selection as a cell {name, value, ...} (k, rho, delta).
 */
#include <math.h>
#include "gpuml_dpc_mex.h"

/* A column of n doubles (the fit's rho, delta or nearest). */
static const double *column(const mxArray *a, int64_t n, const char *what) {
  if (!mxIsDouble(a) || mxIsComplex(a) || (int64_t)mxGetNumberOfElements(a) != n)
    mexErrMsgIdAndTxt("gpuml:dpc:badInput",
                      "info.%s must hold one real number per point of X (%lld)", what,
                      (long long)n);
  return mxGetPr(a);
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 8)
    mexErrMsgIdAndTxt("gpuml:dpc:nargs",
                      "usage: gpuml_dpc_cut_mex (x, dc, rho, delta, nearest, params, backend, "
                      "verbose); call gpu_dpc_clusters instead");
  if (nlhs > 4) mexErrMsgIdAndTxt("gpuml:dpc:nargs", "gpuml_dpc_cut_mex returns at most 4 outputs");
  const mxArray *x = prhs[0];
  gpuml_mex_check_matrix(x, "X", "dpc");
  if (!mxIsDouble(x)) mexErrMsgIdAndTxt("gpuml:dpc:badType", "X must be double here (gpu_dpc_clusters converts it)");
  const int64_t n = (int64_t)mxGetM(x), d = (int64_t)mxGetN(x);
  if (!(mxIsNumeric(prhs[1]) && mxGetNumberOfElements(prhs[1]) == 1))
    mexErrMsgIdAndTxt("gpuml:dpc:badInput", "info.dc must be a number");
  const double dc = mxGetScalar(prhs[1]);
  const double *rho = column(prhs[2], n, "rho");
  const double *delta = column(prhs[3], n, "delta");
  const double *nearest = column(prhs[4], n, "nearest");
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[6], prhs[7], &ps);
  gpuml_dpc_params params;
  gpuml_dpc_params_init(&params);
  gpuml_mex_set_params(GPUML_PARAMS_DPC, &params, prhs[5]);
  const size_t len = n > 0 ? (size_t)n : 1;
  int64_t *near0 = (int64_t *)mxMalloc(len * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) near0[i] = isnan(nearest[i]) ? -1 : (int64_t)nearest[i] - 1;
  int64_t *centres = (int64_t *)mxMalloc(len * sizeof(int64_t));
  int64_t *cluster = (int64_t *)mxMalloc(len * sizeof(int64_t));
  int *halo = (int *)mxMalloc(len * sizeof(int));
  int64_t ncentres = 0;
  gpuml_dpc_result result;
  gpuml_status st = gpuml_dpc_recut((const double *)gpuml_mex_data(x), n, d, dc, rho, delta,
                                    near0, NULL, NULL, &params, centres, &ncentres, cluster, halo, &opt,
                                    &result);
  if (st) gpuml_mex_raise(st);
  mxArray *peaks, *clusters, *rhalo;
  gpuml_dpc_mex_cut_outputs(centres, ncentres, cluster, halo, n, &peaks, &clusters, &rhalo);
  mxArray *out[4] = {peaks, clusters, rhalo,
                     mxCreateString(gpuml_backend_name(result.run.backend))};
  for (int i = 0; i < 4; i++) {
    if (i < (nlhs > 0 ? nlhs : 1)) plhs[i] = out[i];
    else mxDestroyArray(out[i]);
  }
}
