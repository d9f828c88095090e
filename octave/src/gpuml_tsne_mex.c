/*
 * gpuml_tsne_mex: MEX gateway to gpuml_tsne_fit. Called by gpu_tsne.m.
 *
 *   [Y, itercosts, backend, method, learning_rate, neighbours, seconds] =
 *       gpuml_tsne_mex (X, params, init, method, seed, backend, verbose)
 *
 * X: n x d double. params: [dims perplexity max_iter pca initial_dims learning_rate
 * exaggeration stop_lying_iter momentum final_momentum mom_switch_iter max_step_norm]
 * (learning_rate 0 = auto). init: "pca", "random" or an n x dims double matrix.
 * method, backend: strings. seed: a whole number. Y: n x dims double.
 */
#include <limits.h>
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

static int as_int(double v) {
  if (isnan(v)) return INT_MIN;
  if (v > INT_MAX) return INT_MAX;
  if (v < INT_MIN + 1.0) return INT_MIN + 1;
  return (int)v;
}

static char *string_arg(const mxArray *a, const char *what) {
  if (!mxIsChar(a) || mxGetM(a) > 1)
    mexErrMsgIdAndTxt("gpuml:badOption", "%s must be a string", what);
  char *s = mxArrayToString(a);
  if (!s) mexErrMsgIdAndTxt("gpuml:noMemory", "cannot read %s", what);
  return s;
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 7)
    mexErrMsgIdAndTxt("gpuml:tsne:nargs",
                      "usage: gpuml_tsne_mex (X, params, init, method, seed, backend, verbose); "
                      "call gpu_tsne instead");
  if (nlhs > 7) mexErrMsgIdAndTxt("gpuml:tsne:nargs", "gpuml_tsne_mex returns at most 7 outputs");
  const mxArray *x = prhs[0], *params = prhs[1], *init = prhs[2];
  gpuml_mex_check_matrix(x, "X", "tsne");
  if (!mxIsDouble(x)) mexErrMsgIdAndTxt("gpuml:tsne:badType", "X must be double (gpu_tsne converts it)");
  if (!mxIsDouble(params) || mxGetNumberOfElements(params) != 12)
    mexErrMsgIdAndTxt("gpuml:tsne:nargs", "params must hold 12 numbers");
  if (!(mxIsNumeric(prhs[4]) || mxIsLogical(prhs[4])) || mxGetNumberOfElements(prhs[4]) != 1)
    mexErrMsgIdAndTxt("gpuml:tsne:badSeed", "seed must be a single whole number");

  gpuml_options opt;
  tsne_progress progress;
  gpuml_mex_options(&opt, prhs[5], prhs[6], &progress.base);
  gpuml_tsne_result result;
  memset(&result, 0, sizeof result);
  progress.result = &result;
  progress.started = gpuml_mex_now();
  opt.progress = tsne_report;
  opt.callback_ctx = &progress;
  const double seed = mxGetScalar(prhs[4]);
  if (!(seed >= 0 && seed < 9007199254740992.0) || seed != floor(seed))
    mexErrMsgIdAndTxt("gpuml:tsne:badSeed", "seed = %g must be a whole number in [0, 2^53)", seed);
  opt.seed = (uint64_t)seed;

  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  const double *v = mxGetPr(params);
  p.dims = as_int(v[0]);
  p.perplexity = v[1];
  p.max_iter = as_int(v[2]);
  p.pca = v[3] != 0;
  p.initial_dims = as_int(v[4]);
  p.learning_rate = v[5];
  p.exaggeration = v[6];
  p.stop_lying_iter = as_int(v[7]);
  p.momentum = v[8];
  p.final_momentum = v[9];
  p.mom_switch_iter = as_int(v[10]);
  p.max_step_norm = v[11];
  char *name = string_arg(prhs[3], "method");
  gpuml_status st = gpuml_tsne_parse_method(name, &p.method);
  mxFree(name);
  if (st) gpuml_mex_raise(st);
  const int64_t n = (int64_t)mxGetM(x), d = (int64_t)mxGetN(x);
  if (mxIsChar(init)) {
    name = string_arg(init, "init");
    st = gpuml_tsne_parse_init(name, &p.init);
    mxFree(name);
    if (st) gpuml_mex_raise(st);
  } else {
    if (!mxIsDouble(init) || mxIsComplex(init) || mxIsSparse(init))
      mexErrMsgIdAndTxt("gpuml:tsne:badInit", "init must be \"pca\", \"random\" or a real matrix");
    if ((int64_t)mxGetM(init) != n || (int64_t)mxGetN(init) != p.dims)
      mexErrMsgIdAndTxt("gpuml:tsne:badInit", "init must be a %lld x %d matrix, not %d x %d",
                        (long long)n, p.dims, (int)mxGetM(init), (int)mxGetN(init));
    p.init = GPUML_TSNE_INIT_USER;
    p.init_y = mxGetPr(init);
  }
  const int dims = p.dims >= 1 && p.dims <= 3 ? p.dims : 1;
  const int ncost = gpuml_tsne_cost_count(p.max_iter > 0 ? p.max_iter : 1);
  mxArray *y = mxCreateDoubleMatrix((mwSize)n, (mwSize)dims, mxREAL);
  mxArray *costs = mxCreateDoubleMatrix((mwSize)ncost, 1, mxREAL);
  st = gpuml_tsne_fit((const double *)gpuml_mex_data(x), n, d, &p, mxGetPr(y), mxGetPr(costs),
                  &opt, &result);
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
}
