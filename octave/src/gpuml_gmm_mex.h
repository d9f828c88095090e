/*
 * gpuml_gmm_mex.h: what the mixture gateways share (gpuml_gmm_mex, gpuml_mpi_mex): the
 * checks and buffers around a fit, and its outputs as mxArrays.
 */
#ifndef GPUML_GMM_MEX_H
#define GPUML_GMM_MEX_H

#include <math.h>
#include <string.h>
#include "gpuml_mex.h"

/* X must be a real, full, double matrix (gpu_gmm converts the other numeric classes). */
static inline void gpuml_gmm_mex_check_x(const mxArray *X) {
  gpuml_mex_check_matrix(X, "X", "gmm");
  if (!mxIsDouble(X)) mexErrMsgIdAndTxt("gpuml:gmm:badType", "X must be double");
}

/* Fits X's rows (n_total: the rows of the whole fit, those of every rank over MPI, which
 * G and the models are checked against) with the parameters of the cell `params` by
 * `fit`; plhs[0] = labels (X's rows, 1-based), plhs[1] = the model struct. */
static inline void gpuml_gmm_mex_fit_with(int nlhs, mxArray *plhs[], const mxArray *X,
                                          const mxArray *params, const gpuml_options *opt,
                                          int64_t n_total, gpuml_gmm_fit_fn fit,
                                          void *ctx) {
  const int64_t n = (int64_t)mxGetM(X), d = (int64_t)mxGetN(X);
  gpuml_status st;
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  gpuml_mex_set_params(GPUML_PARAMS_GMM, &p, params);
  int64_t kmax = 0;
  if ((st = gpuml_gmm_check(n_total, d, &p, opt, &kmax))) gpuml_mex_raise(st);  /* before allocating */
  const int64_t nK = p.nG;
  gpuml_gmm_covariance models[GPUML_GMM_N_MODELS];
  const int64_t nM = gpuml_gmm_models_tried(n_total, d, &p, models);
  const size_t rows = n > 0 ? (size_t)n : 1, dd = d > 0 ? (size_t)d : 1;
  gpuml_gmm_model model;
  memset(&model, 0, sizeof model);
  model.weights = (double *)mxMalloc((size_t)kmax * sizeof(double));
  model.means = (double *)mxMalloc(dd * (size_t)kmax * sizeof(double));
  model.covariances = (double *)mxMalloc(dd * dd * (size_t)kmax * sizeof(double));
  double *z = (double *)mxMalloc(rows * (size_t)kmax * sizeof(double));
  double *unc = (double *)mxMalloc(rows * sizeof(double));
  int64_t *cls = (int64_t *)mxMalloc(rows * sizeof(int64_t));
  double *bic = (double *)mxMalloc((size_t)(nK * nM) * sizeof(double));
  gpuml_gmm_result result;
  st = fit(ctx, (const double *)gpuml_mex_data(X), n, d, &p, &model, z, cls, unc, bic, opt,
           &result);
  if (st) gpuml_mex_raise(st); /* the mxMalloc'ed buffers are freed by Octave */

  const int64_t G = model.G;
  mxArray *labels = mxCreateDoubleMatrix((mwSize)n, 1, mxREAL);
  for (int64_t i = 0; i < n; i++) mxGetPr(labels)[i] = (double)(cls[i] + 1);
  plhs[0] = labels;
  if (nlhs > 1) {
    const char *fields[] = {"G",           "modelName", "weights", "means",
                            "covariances", "z",         "uncertainty", "loglik", "bic",
                            "K",           "modelNames", "n_iter",   "converged", "backend"};
    mxArray *s = mxCreateStructMatrix(1, 1, 14, fields);
    mxSetField(s, 0, "G", mxCreateDoubleScalar((double)G));
    mxSetField(s, 0, "modelName", mxCreateString(gpuml_gmm_model_name(model.covariance, d)));
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
    mxArray *b = mxCreateDoubleMatrix((mwSize)nK, (mwSize)nM, mxREAL);
    memcpy(mxGetPr(b), bic, (size_t)(nK * nM) * sizeof(double));
    mxArray *kt = mxCreateDoubleMatrix(1, (mwSize)nK, mxREAL);
    for (int64_t g = 0; g < nK; g++) mxGetPr(kt)[g] = (double)p.G[g];
    mxArray *mn = mxCreateCellMatrix(1, (mwSize)nM);
    for (int64_t m = 0; m < nM; m++)
      mxSetCell(mn, (mwIndex)m, mxCreateString(gpuml_gmm_model_name(models[m], d)));
    mxSetField(s, 0, "bic", b);
    mxSetField(s, 0, "K", kt);
    mxSetField(s, 0, "modelNames", mn);
    mxSetField(s, 0, "n_iter", mxCreateDoubleScalar((double)model.n_iter));
    mxSetField(s, 0, "converged", mxCreateLogicalScalar(model.converged != 0));
    mxSetField(s, 0, "backend", mxCreateString(gpuml_backend_name(result.run.backend)));
    plhs[1] = s;
  }
  mxFree(model.weights);
  mxFree(model.means);
  mxFree(model.covariances);
  mxFree(z);
  mxFree(unc);
  mxFree(cls);
  mxFree(bic);
}

#endif
