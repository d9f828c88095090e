/*
 * gpuml_gmm_mex: MEX gateway to gpuml_gmm_fit. Called by gpu_gmm.m.
 *
 *   [labels, model] = gpuml_gmm_mex (X, K, covariance, max_iter, tol, reg, n_init, seed,
 *                                    backend, verbose)
 *
 * X: n x d double. K: the numbers of components to try. labels: n x 1, 1-based.
 * model: struct with G, covariance, modelName, weights (1 x G), means (G x d, one row
 * per component), covariances (d x d x G), z (n x G), uncertainty (n x 1), loglik,
 * bic (one per K tried), K, n_iter, converged, backend.
 */
#include <math.h>
#include <string.h>
#include "gpuml_mex.h"

/* A real scalar as a double (values are checked by the core). */
static double gmm_scalar(const mxArray *a, const char *what) {
  if (!(mxIsNumeric(a) || mxIsLogical(a)) || mxIsComplex(a) || mxGetNumberOfElements(a) != 1)
    mexErrMsgIdAndTxt("gpuml:gmm:badOption", "%s must be a real scalar", what);
  return mxGetScalar(a);
}

/* A whole number as int64_t: only what type conversion needs is checked here. */
static int64_t gmm_whole(double v, const char *what) {
  if (isnan(v) || v != floor(v))
    mexErrMsgIdAndTxt("gpuml:gmm:badOption", "%s = %g must be a whole number", what, v);
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return (int64_t)v;
}

static char *gmm_string(const mxArray *a, const char *what) {
  if (!mxIsChar(a) || mxGetM(a) > 1)
    mexErrMsgIdAndTxt("gpuml:gmm:badOption", "%s must be a string", what);
  char *s = mxArrayToString(a);
  if (!s) mexErrMsgIdAndTxt("gpuml:noMemory", "cannot read %s", what);
  return s;
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 10)
    mexErrMsgIdAndTxt("gpuml:gmm:nargs",
                      "usage: [labels, model] = gpuml_gmm_mex (X, K, covariance, max_iter, tol, "
                      "reg, n_init, seed, backend, verbose); call gpu_gmm instead");
  if (nlhs > 2) mexErrMsgIdAndTxt("gpuml:gmm:nargs", "gpuml_gmm_mex returns at most 2 outputs");
  const mxArray *X = prhs[0], *K = prhs[1];
  gpuml_mex_check_matrix(X, "X", "gmm");
  if (!mxIsDouble(X)) mexErrMsgIdAndTxt("gpuml:gmm:badType", "X must be double");
  if (!mxIsDouble(K) || mxIsComplex(K) || mxGetNumberOfElements(K) < 1)
    mexErrMsgIdAndTxt("gpuml:gmm:badK", "K must be one or more whole numbers");
  const int64_t nK = (int64_t)mxGetNumberOfElements(K), n = (int64_t)mxGetM(X),
                d = (int64_t)mxGetN(X);
  int64_t *ks = (int64_t *)mxMalloc((size_t)nK * sizeof(int64_t));
  int64_t kmax = 1;
  for (int64_t g = 0; g < nK; g++) {
    const double v = mxGetPr(K)[g];
    if (isnan(v) || v != floor(v))
      mexErrMsgIdAndTxt("gpuml:gmm:badK", "K = %g must be a whole number", v);
    ks[g] = gmm_whole(v, "K");
    if (ks[g] > kmax) kmax = ks[g];
  }
  /* The core refuses K > n before writing; sizing by min(K, n) keeps an absurd K from
   * failing in an allocation first. */
  if (kmax > n) kmax = n > 0 ? n : 1;

  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  p.G = ks;
  p.nG = nK;
  char *cov_name = gmm_string(prhs[2], "covariance");
  gpuml_status st = gpuml_gmm_parse_covariance(cov_name, &p.covariance);
  mxFree(cov_name);
  if (st) gpuml_mex_raise(st);
  p.max_iter = gmm_whole(gmm_scalar(prhs[3], "max_iter"), "max_iter");
  p.tol = gmm_scalar(prhs[4], "tol");
  p.reg = gmm_scalar(prhs[5], "reg");
  p.n_init = gmm_whole(gmm_scalar(prhs[6], "n_init"), "n_init");
  const double seed = gmm_scalar(prhs[7], "seed");
  if (!(seed >= 0) || seed != floor(seed) || seed >= 18446744073709551616.0)
    mexErrMsgIdAndTxt("gpuml:gmm:badSeed", "seed = %g must be a whole number >= 0", seed);

  gpuml_options opt;
  gpuml_mex_progress_state ps;
  gpuml_mex_options(&opt, prhs[8], prhs[9], &ps);
  opt.seed = (uint64_t)seed;

  const size_t rows = n > 0 ? (size_t)n : 1, dd = d > 0 ? (size_t)d : 1;
  gpuml_gmm_model model;
  memset(&model, 0, sizeof model);
  model.weights = (double *)mxMalloc((size_t)kmax * sizeof(double));
  model.means = (double *)mxMalloc(dd * (size_t)kmax * sizeof(double));
  model.covariances = (double *)mxMalloc(dd * dd * (size_t)kmax * sizeof(double));
  double *z = (double *)mxMalloc(rows * (size_t)kmax * sizeof(double));
  double *unc = (double *)mxMalloc(rows * sizeof(double));
  int64_t *cls = (int64_t *)mxMalloc(rows * sizeof(int64_t));
  double *bic = (double *)mxMalloc((size_t)nK * sizeof(double));
  gpuml_gmm_result result;
  st = gpuml_gmm_fit((const double *)gpuml_mex_data(X), n, d, &p, &model, z, cls, unc, bic, &opt,
                     &result);
  if (st) gpuml_mex_raise(st); /* the mxMalloc'ed buffers are freed by Octave */

  const int64_t G = model.G;
  mxArray *labels = mxCreateDoubleMatrix((mwSize)n, 1, mxREAL);
  for (int64_t i = 0; i < n; i++) mxGetPr(labels)[i] = (double)(cls[i] + 1);
  plhs[0] = labels;
  if (nlhs > 1) {
    const char *fields[] = {"G",           "covariance", "modelName", "weights", "means",
                            "covariances", "z",          "uncertainty", "loglik", "bic",
                            "K",           "n_iter",     "converged", "backend"};
    mxArray *s = mxCreateStructMatrix(1, 1, 14, fields);
    mxSetField(s, 0, "G", mxCreateDoubleScalar((double)G));
    mxSetField(s, 0, "covariance", mxCreateString(gpuml_gmm_covariance_name(model.covariance)));
    mxSetField(s, 0, "modelName", mxCreateString(gpuml_gmm_model_name(model.covariance)));
    mxArray *w = mxCreateDoubleMatrix(1, (mwSize)G, mxREAL);
    memcpy(mxGetPr(w), model.weights, (size_t)G * sizeof(double));
    mxSetField(s, 0, "weights", w);
    mxArray *mu = mxCreateDoubleMatrix((mwSize)G, (mwSize)d, mxREAL); /* rows: components */
    for (int64_t k = 0; k < G; k++)
      for (int64_t j = 0; j < d; j++) mxGetPr(mu)[k + j * G] = model.means[j + k * d];
    mxSetField(s, 0, "means", mu);
    const mwSize dims[3] = {(mwSize)d, (mwSize)d, (mwSize)G};
    mxArray *sigma = mxCreateNumericArray(3, dims, mxDOUBLE_CLASS, mxREAL);
    memcpy(mxGetPr(sigma), model.covariances, (size_t)(d * d * G) * sizeof(double));
    mxSetField(s, 0, "covariances", sigma);
    mxArray *zz = mxCreateDoubleMatrix((mwSize)n, (mwSize)G, mxREAL);
    memcpy(mxGetPr(zz), z, (size_t)n * (size_t)G * sizeof(double));
    mxSetField(s, 0, "z", zz);
    mxArray *u = mxCreateDoubleMatrix((mwSize)n, 1, mxREAL);
    memcpy(mxGetPr(u), unc, (size_t)n * sizeof(double));
    mxSetField(s, 0, "uncertainty", u);
    mxSetField(s, 0, "loglik", mxCreateDoubleScalar(model.loglik));
    mxArray *b = mxCreateDoubleMatrix(1, (mwSize)nK, mxREAL);
    mxArray *kt = mxCreateDoubleMatrix(1, (mwSize)nK, mxREAL);
    for (int64_t g = 0; g < nK; g++) {
      mxGetPr(b)[g] = bic[g];
      mxGetPr(kt)[g] = (double)ks[g];
    }
    mxSetField(s, 0, "bic", b);
    mxSetField(s, 0, "K", kt);
    mxSetField(s, 0, "n_iter", mxCreateDoubleScalar((double)model.n_iter));
    mxSetField(s, 0, "converged", mxCreateLogicalScalar(model.converged != 0));
    mxSetField(s, 0, "backend", mxCreateString(gpuml_backend_name(result.run.backend)));
    plhs[1] = s;
  }
  mxFree(ks);
  mxFree(model.weights);
  mxFree(model.means);
  mxFree(model.covariances);
  mxFree(z);
  mxFree(unc);
  mxFree(cls);
  mxFree(bic);
}
