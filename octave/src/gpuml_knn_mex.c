/*
 * gpuml_knn_mex: MEX gateway to gpuml_knn_search / gpuml_knn_search_f. Called by gpu_knn.m.
 *
 *   [idx, dist, backend_used, rechecked] = gpuml_knn_mex (data, query, k, backend, verbose,
 *                                                         precision, metric, devices)
 *
 * data: n x d, query: m x d or [] (0 x 0) to search the data against itself; both
 * double or both single. idx: m x k double, 1-based. dist: m x k, of the class of
 * data. backend_used: "cpu" or "cuda". rechecked: queries searched again in fp64
 * (precision "auto" on the GPU).
 */
#include "gpuml_mex.h"

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 8)
    mexErrMsgIdAndTxt("gpuml:knn:nargs",
                      "usage: [idx, dist, backend, rechecked] = gpuml_knn_mex (data, query, k, "
                      "backend, verbose, precision, metric, devices); call gpu_knn instead");
  if (nlhs > 4) mexErrMsgIdAndTxt("gpuml:knn:nargs", "gpuml_knn_mex returns at most 4 outputs");
  const mxArray *data = prhs[0], *query = prhs[1];
  int64_t k = 0;
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  const int self = gpuml_mex_knn_args(prhs, &k, &opt, &ps);
  gpuml_mex_devices(&opt, prhs[7]);

  const int64_t n = (int64_t)mxGetM(data), d = (int64_t)mxGetN(data);
  const int64_t m = self ? n : (int64_t)mxGetM(query);
  const int single = mxIsSingle(data);

  /* The outputs are m x k. A k the core will refuse (k < 1 or k > n) must not size an
   * allocation (k = 1e12 would fail for memory, not for k), so the core then gets
   * one-element placeholders and reports the bad k itself before writing anything. */
  const int k_allocatable = k >= 1 && k <= n;
  const int64_t kk = k_allocatable ? k : 0;
  mxArray *dist = mxCreateNumericMatrix((mwSize)m, (mwSize)kk,
                                        single ? mxSINGLE_CLASS : mxDOUBLE_CLASS, mxREAL);
  int64_t index_placeholder = 0;
  double dist_placeholder = 0;
  int64_t *index = &index_placeholder;
  if (m * kk > 0) {
    index = (int64_t *)mxMalloc((size_t)(m * kk) * sizeof *index);
    if (!index)
      mexErrMsgIdAndTxt("gpuml:knn:noMemory", "cannot allocate %.1f MB for the neighbour indices",
                        (double)(m * kk) * 8 / 1e6);
  }
  void *dout = m * kk > 0 ? mxGetData(dist) : (void *)&dist_placeholder;

  gpuml_knn_result result;
  gpuml_status st;
  if (single)
    st = gpuml_knn_search_f((const float *)gpuml_mex_data(data), n, d,
                     self ? NULL : (const float *)gpuml_mex_data(query), m, k, index,
                     (float *)dout, &opt, &result);
  else
    st = gpuml_knn_search((const double *)gpuml_mex_data(data), n, d,
                   self ? NULL : (const double *)gpuml_mex_data(query), m, k, index,
                   (double *)dout, &opt, &result);
  if (!st && !k_allocatable)
    mexErrMsgIdAndTxt("gpuml:knn:internal", "the core accepted k = %lld for %lld points",
                      (long long)k, (long long)n);
  if (st) {
    mxDestroyArray(dist);
    gpuml_mex_raise(st); /* index is mxMalloc'ed: Octave frees it */
  }

  mxArray *idx = gpuml_mex_indices(index, m, k);
  if (index != &index_placeholder) mxFree(index);
  plhs[0] = idx;
  if (nlhs > 1) plhs[1] = dist;
  else mxDestroyArray(dist);
  if (nlhs > 2) plhs[2] = mxCreateString(gpuml_backend_name(result.run.backend));
  if (nlhs > 3) plhs[3] = mxCreateDoubleScalar((double)result.rechecked);
}
