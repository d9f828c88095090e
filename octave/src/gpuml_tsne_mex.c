/*
 * gpuml_tsne_mex: MEX gateway to gpuml_tsne_fit. Called by gpu_tsne.m.
 *
 *   [Y, itercosts, backend, method, learning_rate, neighbours, seconds, costs_at] =
 *       gpuml_tsne_mex (X, params, init_y, seed, backend, verbose, input, nn_dist, devices)
 *
 * input: "data" (X: n x d double), "distance" (X: the n x n distances) or "neighbours"
 * (X: nn_index, n x k 1-based indices as double; nn_dist: their n x k distances). params: a cell {name, value, ...} of the parameters the user gave,
 * by the core's names (the core holds the defaults). init_y: [] or the user's n x dims
 * start. seed: a whole number. devices: [], device numbers or "all". Y: n x dims double.
 */
#include <math.h>
#include "gpuml_mex.h"

typedef struct {
  gpuml_mex_progress_state base;
  const gpuml_tsne_result *result;
  double started;
} tsne_progress;

/* Every KL report (each 50 iterations) is printed; other stages when they finish. */
static void tsne_report(void *ctx, const char *stage, int64_t done, int64_t total) {
  tsne_progress *p = (tsne_progress *)ctx;
  const double elapsed = gpuml_mex_now() - p->started;
  if (strcmp(stage, "tsne") == 0)
    mexPrintf("gpuml tsne: iteration %lld/%lld, KL divergence %.4f (%.1f s)\n", (long long)done,
              (long long)total, p->result->kl, elapsed);
  else if (done == total)
    mexPrintf("gpuml tsne: %s done (%.1f s)\n", stage, elapsed);
  else
    return;
  if (!gpuml_mex_interrupted(NULL)) {
    mxArray *fid = mxCreateDoubleScalar(1);
    mexCallMATLAB(0, NULL, 1, &fid, "fflush");
    mxDestroyArray(fid);
  }
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 9)
    mexErrMsgIdAndTxt("gpuml:tsne:nargs",
                      "usage: gpuml_tsne_mex (X, params, init_y, seed, backend, verbose, input, "
                      "nn_dist, devices); call gpu_tsne instead");
  if (nlhs > 8) mexErrMsgIdAndTxt("gpuml:tsne:nargs", "gpuml_tsne_mex returns at most 8 outputs");
  const mxArray *x = prhs[0], *init = prhs[2];
  gpuml_mex_check_matrix(x, "X", "tsne");
  if (!mxIsDouble(x)) mexErrMsgIdAndTxt("gpuml:tsne:badType", "X must be double (gpu_tsne converts it)");
  if (!(mxIsNumeric(prhs[3]) || mxIsLogical(prhs[3])) || mxGetNumberOfElements(prhs[3]) != 1)
    mexErrMsgIdAndTxt("gpuml:badSeed", "seed must be a single whole number");

  gpuml_options opt;
  tsne_progress progress;
  gpuml_mex_options(&opt, prhs[4], prhs[5], &progress.base);
  gpuml_mex_devices(&opt, prhs[8]);
  gpuml_tsne_result result;
  memset(&result, 0, sizeof result);
  progress.result = &result;
  progress.started = gpuml_mex_now();
  opt.progress = tsne_report;
  opt.callback_ctx = &progress;
  gpuml_status st = gpuml_options_set_seed(&opt, mxGetScalar(prhs[3]));
  if (st) gpuml_mex_raise(st);

  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  gpuml_mex_set_params(GPUML_PARAMS_TSNE, &p, prhs[1]);
  const int64_t n = (int64_t)mxGetM(x), d = (int64_t)mxGetN(x);
  if (!mxIsEmpty(init)) {
    if (!mxIsDouble(init) || mxIsComplex(init) || mxIsSparse(init))
      mexErrMsgIdAndTxt("gpuml:tsne:badInit", "init must be \"pca\", \"random\" or a real matrix");
    if ((int64_t)mxGetM(init) != n || (int64_t)mxGetN(init) != p.dims)
      mexErrMsgIdAndTxt("gpuml:tsne:badInit", "init must be a %lld x %lld matrix, not %d x %d",
                        (long long)n, (long long)p.dims, (int)mxGetM(init), (int)mxGetN(init));
    p.init = GPUML_TSNE_INIT_USER;
    p.init_y = mxGetPr(init);
  }
  const int dims = p.dims >= 1 && p.dims <= 3 ? (int)p.dims : 1;
  const int64_t ncost =
      gpuml_tsne_cost_count(p.max_iter > 0 && p.max_iter <= INT32_MAX ? p.max_iter : 1);
  mxArray *y = mxCreateDoubleMatrix((mwSize)n, (mwSize)dims, mxREAL);
  mxArray *costs = mxCreateDoubleMatrix((mwSize)ncost, 1, mxREAL);
  char *input = mxArrayToString(prhs[6]);
  if (input && strcmp(input, "distance") == 0) {
    st = gpuml_tsne_fit_distance((const double *)gpuml_mex_data(x), n, d, &p, mxGetPr(y),
                                 mxGetPr(costs), &opt, &result);
  } else if (input && strcmp(input, "neighbours") == 0) {
    const mxArray *nd = prhs[7];
    gpuml_mex_check_matrix(nd, "nn_dist", "tsne");
    if ((int64_t)mxGetM(nd) != n || (int64_t)mxGetN(nd) != d || !mxIsDouble(nd)) {
      mxDestroyArray(y);
      mxDestroyArray(costs);
      mexErrMsgIdAndTxt("gpuml:tsne:badNeighbours",
                        "nn_index is %lld x %lld but nn_dist %d x %d: they must have the same shape",
                        (long long)n, (long long)d, (int)mxGetM(nd), (int)mxGetN(nd));
    }
    int64_t *index = (int64_t *)mxMalloc((size_t)(n * d > 0 ? n * d : 1) * sizeof *index);
    const double *xi = (const double *)gpuml_mex_data(x);
    for (int64_t e = 0; e < n * d; e++)  /* 1-based to 0-based; non-integers out of range */
      index[e] = xi[e] != floor(xi[e]) || fabs(xi[e]) > 1e15 ? -1 : (int64_t)xi[e] - 1;
    st = gpuml_tsne_fit_neighbours(index, mxGetPr(nd), n, d, &p, mxGetPr(y), mxGetPr(costs),
                                   &opt, &result);
    mxFree(index);
  } else {
    st = gpuml_tsne_fit((const double *)gpuml_mex_data(x), n, d, &p, mxGetPr(y),
                        mxGetPr(costs), &opt, &result);
  }
  mxFree(input);
  if (st) {
    mxDestroyArray(y);
    mxDestroyArray(costs);
    gpuml_mex_raise(st);
  }
  plhs[0] = y;
  if (nlhs > 1) plhs[1] = costs;
  else mxDestroyArray(costs);
  if (nlhs > 2) plhs[2] = mxCreateString(gpuml_backend_name(result.run.backend));
  if (nlhs > 3) plhs[3] = mxCreateString(gpuml_tsne_method_name(result.method_used));
  if (nlhs > 4) plhs[4] = mxCreateDoubleScalar(result.learning_rate_used);
  if (nlhs > 5) plhs[5] = mxCreateDoubleScalar((double)result.neighbours);
  if (nlhs > 6) {
    plhs[6] = mxCreateDoubleMatrix(1, 2, mxREAL);
    mxGetPr(plhs[6])[0] = result.seconds_affinities;
    mxGetPr(plhs[6])[1] = result.seconds_optimisation;
  }
  if (nlhs > 7) {
    plhs[7] = mxCreateDoubleMatrix((mwSize)ncost, 1, mxREAL);
    for (int64_t i = 0; i < ncost; i++)
      mxGetPr(plhs[7])[i] = (double)gpuml_tsne_cost_iteration(p.max_iter, i);
  }
}
