/* gpuml_knn(): argument checks, then the kNN of the backend the call resolves to. */
#include <stdlib.h>
#include "backend.h"

static gpuml_status check_knn_args(int64_t n, int64_t d, const void *query, int64_t m,
                                   int64_t k, const int64_t *index, const void *dist,
                                   gpuml_options *opt) {
  gpuml_status st = gm_check_options(opt);
  if (st) return st;
  if (!index || !dist)
    return gm_fail(GPUML_ERR_ARG, "knn:badOutput", "the output arrays must not be NULL");
  const int64_t available = query ? n : n - 1;
  if (k < 1)
    return gm_fail(GPUML_ERR_ARG, "knn:badK", "k = %lld must be at least 1", (long long)k);
  if (k > available) {
    if (query)
      return gm_fail(GPUML_ERR_ARG, "knn:badK", "k = %lld exceeds the %lld data points",
                     (long long)k, (long long)n);
    return gm_fail(GPUML_ERR_ARG, "knn:badK",
                   "k = %lld exceeds the %lld other points (n - 1 when the data is searched against itself)",
                   (long long)k, (long long)available);
  }
  if (d > 0x7fffffff)
    return gm_fail(GPUML_ERR_ARG, "knn:badData", "%lld columns is more than supported",
                   (long long)d);
  const int64_t rows = query ? m : n;
  if (rows > INT64_MAX / k || rows * k > (int64_t)(SIZE_MAX / 8))
    return gm_fail(GPUML_ERR_ARG, "knn:tooLarge", "the %lld x %lld result is too large to hold",
                   (long long)rows, (long long)k);
  return GPUML_OK;
}

static gpuml_status knn_run(const gm_matrix *data, const gm_matrix *query, int64_t k,
                            int64_t *index, void *dist, gpuml_options *opt) {
  const gm_backend *b;
  const int64_t rows = query ? query->rows : data->rows;
  gpuml_status st = gm_backend_resolve(
      opt, GM_ALGO_NEIGHBOURS, (double)rows * (double)data->rows * (double)data->cols, "knn", &b);
  return st ? st : b->neighbours->knn(data, query, k, index, dist, opt);
}

gpuml_status gpuml_knn(const double *data, int64_t n, int64_t d, const double *query,
                       int64_t m, int64_t k, int64_t *index, double *dist,
                       gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = gm_check_matrix(data, n, d, "data", "knn");
  if (!st && query) st = gm_check_matrix(query, m, d, "query", "knn");
  if (!st) st = check_knn_args(n, d, query, m, k, index, dist, opt);
  if (st) return st;
  const gm_matrix D = {data, n, d, GM_F64}, Q = {query, m, d, GM_F64};
  return knn_run(&D, query ? &Q : NULL, k, index, dist, opt);
}

gpuml_status gpuml_knn_f(const float *data, int64_t n, int64_t d, const float *query,
                         int64_t m, int64_t k, int64_t *index, float *dist,
                         gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = gm_check_matrix_f(data, n, d, "data", "knn");
  if (!st && query) st = gm_check_matrix_f(query, m, d, "query", "knn");
  if (!st) st = check_knn_args(n, d, query, m, k, index, dist, opt);
  if (st) return st;
  const gm_matrix D = {data, n, d, GM_F32}, Q = {query, m, d, GM_F32};
  return knn_run(&D, query ? &Q : NULL, k, index, dist, opt);
}
