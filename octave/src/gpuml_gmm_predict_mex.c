/*
 * gpuml_gmm_predict_mex: MEX gateway to gpuml_gmm_predict. Called by gpu_gmm_predict.m.
 *
 *   [labels, z, uncertainty, backend] = gpuml_gmm_predict_mex (weights, means,
 *                                          covariances, covariance, X, backend, verbose)
 *
 * weights: 1 x G, means: G x d (one row per component), covariances: d x d x G, all
 * double; X: m x d double. labels: m x 1, 1-based; z: m x G; uncertainty: m x 1.
 */
#include <string.h>
#include "gpuml_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 7)
    mexErrMsgIdAndTxt("gpuml:gmm:nargs",
                      "usage: [labels, z, uncertainty, backend] = gpuml_gmm_predict_mex "
                      "(weights, means, covariances, covariance, X, backend, verbose); call "
                      "gpu_gmm_predict instead");
  if (nlhs > 4)
    mexErrMsgIdAndTxt("gpuml:gmm:nargs", "gpuml_gmm_predict_mex returns at most 4 outputs");
  const mxArray *W = prhs[0], *M = prhs[1], *S = prhs[2], *X = prhs[4];
  if (!mxIsDouble(W) || !mxIsDouble(M) || !mxIsDouble(S) || mxIsComplex(W) ||
      mxIsComplex(M) || mxIsComplex(S))
    mexErrMsgIdAndTxt("gpuml:gmm:badModel", "the model's weights, means and covariances must be real double arrays");
  gpuml_mex_check_matrix(X, "X", "gmm");
  if (!mxIsDouble(X)) mexErrMsgIdAndTxt("gpuml:gmm:badType", "X must be double");
  const int64_t G = (int64_t)mxGetNumberOfElements(W), d = (int64_t)mxGetN(M);
  const mwSize *sd = mxGetDimensions(S);
  const int64_t sG = mxGetNumberOfDimensions(S) > 2 ? (int64_t)sd[2] : 1;
  if ((int64_t)mxGetM(M) != G || (int64_t)sd[0] != d || (int64_t)sd[1] != d || sG != G)
    mexErrMsgIdAndTxt("gpuml:gmm:badModel",
                      "the model's sizes disagree: %lld weights, %lld x %lld means, %lld x %lld x %lld covariances",
                      (long long)G, (long long)mxGetM(M), (long long)d, (long long)sd[0],
                      (long long)sd[1], (long long)sG);
  gpuml_status st = gpuml_check_columns("gmm", "X", (int64_t)mxGetN(X), "the model", d);
  if (st) gpuml_mex_raise(st);
  if (!mxIsChar(prhs[3]) || mxGetM(prhs[3]) > 1)
    mexErrMsgIdAndTxt("gpuml:gmm:badOption", "the model's modelName must be a string");
  char *cov_name = mxArrayToString(prhs[3]);
  gpuml_gmm_model model;
  memset(&model, 0, sizeof model);
  st = gpuml_gmm_parse_covariance(cov_name, &model.covariance);
  mxFree(cov_name);
  if (st) gpuml_mex_raise(st);
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[5], prhs[6], &ps);

  const int64_t m = (int64_t)mxGetM(X);
  const size_t rows = m > 0 ? (size_t)m : 1, Gs = G > 0 ? (size_t)G : 1, ds = d > 0 ? (size_t)d : 1;
  model.G = G;
  model.d = d;
  model.weights = mxGetPr(W);
  model.covariances = mxGetPr(S);
  model.means = (double *)mxMalloc(ds * Gs * sizeof(double)); /* d x G, as the core holds them */
  for (int64_t k = 0; k < G; k++)
    for (int64_t j = 0; j < d; j++) model.means[j + k * d] = mxGetPr(M)[k + j * G];
  double *z = (double *)mxMalloc(rows * Gs * sizeof(double));
  double *unc = (double *)mxMalloc(rows * sizeof(double));
  int64_t *cls = (int64_t *)mxMalloc(rows * sizeof(int64_t));
  gpuml_gmm_result result;
  st = gpuml_gmm_predict(&model, (const double *)gpuml_mex_data(X), m, z, cls, unc, &opt, &result);
  if (st) gpuml_mex_raise(st);
  mxArray *labels = mxCreateDoubleMatrix((mwSize)m, 1, mxREAL);
  for (int64_t i = 0; i < m; i++) mxGetPr(labels)[i] = (double)(cls[i] + 1);
  plhs[0] = labels;
  if (nlhs > 1) {
    plhs[1] = mxCreateDoubleMatrix((mwSize)m, (mwSize)G, mxREAL);
    memcpy(mxGetPr(plhs[1]), z, (size_t)m * (size_t)G * sizeof(double));
  }
  if (nlhs > 2) {
    plhs[2] = mxCreateDoubleMatrix((mwSize)m, 1, mxREAL);
    memcpy(mxGetPr(plhs[2]), unc, (size_t)m * sizeof(double));
  }
  if (nlhs > 3) plhs[3] = mxCreateString(gpuml_backend_name(result.run.backend));
  mxFree(model.means);
  mxFree(z);
  mxFree(unc);
  mxFree(cls);
}
