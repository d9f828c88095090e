/*
 * gpuml_tsne_transform_mex: MEX gateway to gpuml_tsne_transform. Called by
 * gpu_tsne_transform.m.
 *
 *   [Ynew, backend, method, neighbours] =
 *       gpuml_tsne_transform_mex (X, Y, Xnew, params, backend, verbose)
 *
 * X: n x d double (the training data; [] when there is none). Y: the fit's n x dims
 * embedding. Xnew: m x d' double. params: a cell {name, value, ...} of the parameters the
 * user gave, by the core's names (the core holds the defaults and checks the values).
 */
#include "gpuml_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 6)
    mexErrMsgIdAndTxt("gpuml:tsne:nargs",
                      "usage: gpuml_tsne_transform_mex (X, Y, Xnew, params, backend, verbose); "
                      "call gpu_tsne_transform instead");
  if (nlhs > 4)
    mexErrMsgIdAndTxt("gpuml:tsne:nargs", "gpuml_tsne_transform_mex returns at most 4 outputs");
  const mxArray *x = prhs[0], *y = prhs[1], *xn = prhs[2];
  const int has_x = !mxIsEmpty(x);
  if (has_x) gpuml_mex_check_matrix(x, "X", "tsne");
  gpuml_mex_check_matrix(y, "Y", "tsne");
  gpuml_mex_check_matrix(xn, "Xnew", "tsne");
  if ((has_x && !mxIsDouble(x)) || !mxIsDouble(y) || !mxIsDouble(xn))
    mexErrMsgIdAndTxt("gpuml:tsne:badType", "X, Y and Xnew must be double (gpu_tsne_transform converts them)");
  const int64_t n = has_x ? (int64_t)mxGetM(x) : 0, d = has_x ? (int64_t)mxGetN(x) : 0;
  if (has_x && (int64_t)mxGetM(y) != n)
    mexErrMsgIdAndTxt("gpuml:tsne:badEmbedding",
                      "Y has %d rows but X %lld: give the data and the embedding of one fit",
                      (int)mxGetM(y), (long long)n);
  gpuml_options opt;
  gpuml_mex_progress_state progress;
  gpuml_mex_options(&opt, prhs[4], prhs[5], &progress);
  gpuml_tsne_transform_params p;
  gpuml_tsne_transform_params_init(&p);
  gpuml_mex_set_params(GPUML_PARAMS_TSNE_TRANSFORM, &p, prhs[3]);
  const int64_t m = (int64_t)mxGetM(xn), d_new = (int64_t)mxGetN(xn), dims = (int64_t)mxGetN(y);
  mxArray *out = mxCreateDoubleMatrix((mwSize)m, (mwSize)(dims >= 1 && dims <= 3 ? dims : 1), mxREAL);
  gpuml_tsne_result result;
  gpuml_status st = gpuml_tsne_transform(has_x ? mxGetPr(x) : NULL, n, d, mxGetPr(y), dims,
                                         mxGetPr(xn), m, d_new, &p, mxGetPr(out), &opt, &result);
  if (st) {
    mxDestroyArray(out);
    gpuml_mex_raise(st);
  }
  plhs[0] = out;
  if (nlhs > 1) plhs[1] = mxCreateString(gpuml_backend_name(result.run.backend));
  if (nlhs > 2) plhs[2] = mxCreateString(gpuml_tsne_method_name(result.method_used));
  if (nlhs > 3) plhs[3] = mxCreateDoubleScalar((double)result.neighbours);
}
