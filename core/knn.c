/* gpuml_knn_search(): argument checks, then the kNN of the backend the call resolves to. */
#include <stdlib.h>
#include "backend.h"
#include "shards.h"

gpuml_status gpuml_knn_check(int64_t n, int64_t d, int64_t query_rows, int64_t k,
                             const gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = gm_check_options(opt);
  if (st) return st;
  const int self = query_rows < 0;
  if (n < 1) return gm_fail(GPUML_ERR_ARG, "knn:badData", "data has no rows");
  if (d < 1) return gm_fail(GPUML_ERR_ARG, "knn:badData", "data has no columns");
  if (!self && query_rows < 1) return gm_fail(GPUML_ERR_ARG, "knn:badData", "query has no rows");
  const int64_t available = self ? n - 1 : n;
  if (k < 1)
    return gm_fail(GPUML_ERR_ARG, "knn:badK", "k = %lld must be at least 1", (long long)k);
  if (k > available) {
    if (!self)
      return gm_fail(GPUML_ERR_ARG, "knn:badK", "k = %lld exceeds the %lld data points",
                     (long long)k, (long long)n);
    return gm_fail(GPUML_ERR_ARG, "knn:badK",
                   "k = %lld exceeds the %lld other points (n - 1 when the data is searched against itself)",
                   (long long)k, (long long)available);
  }
  if (d > 0x7fffffff)
    return gm_fail(GPUML_ERR_ARG, "knn:badData", "%lld columns is more than supported",
                   (long long)d);
  const int64_t rows = self ? n : query_rows;
  if (rows > INT64_MAX / k || rows * k > (int64_t)(SIZE_MAX / 8))
    return gm_fail(GPUML_ERR_ARG, "knn:tooLarge", "the %lld x %lld result is too large to hold",
                   (long long)rows, (long long)k);
  return GPUML_OK;
}

static gpuml_status knn_run(const gm_matrix *data, const gm_matrix *query, int64_t k,
                            int64_t *index, void *dist, const gpuml_options *opt,
                            gpuml_knn_result *result) {
  gpuml_status st = gm_check_values(data, "data", "knn");
  if (!st && query) st = gm_check_values(query, "query", "knn");
  if (!st) st = gpuml_knn_check(data->rows, data->cols, query ? query->rows : -1, k, opt);
  if (st) return st;
  if (!index || !dist)
    return gm_fail(GPUML_ERR_ARG, "knn:badOutput", "the output arrays must not be NULL");
  const double t0 = gm_seconds();
  const int64_t rows = query ? query->rows : data->rows;
  gpuml_options used;
  const gm_backend *b;
  if ((st = gm_backend_resolve(opt, GM_ALGO_NEIGHBOURS,
                               (double)rows * (double)data->rows * (double)data->cols, "knn",
                               &used, &b)))
    return st;
  gm_shard_plan plan;
  if ((st = gm_shard_plan_make(&used, data->rows, &plan))) return st;
  int64_t rechecked = 0;
  st = plan.count > 1 ? gm_knn_sharded(b, &plan, data, query, k, index, dist, &used, &rechecked)
                      : b->neighbours->knn(data, query, k, index, dist, &used, &rechecked);
  if (!st && result) {
    gm_run_info_fill(&result->run, &used, data->dtype, t0);
    result->rechecked = rechecked;
  }
  return st;
}

gpuml_status gpuml_knn_search(const double *data, int64_t n, int64_t d, const double *query,
                              int64_t m, int64_t k, int64_t *index, double *dist,
                              const gpuml_options *opt, gpuml_knn_result *result) {
  const gm_matrix D = {data, n, d, GM_F64}, Q = {query, m, d, GM_F64};
  return knn_run(&D, query ? &Q : NULL, k, index, dist, opt, result);
}

gpuml_status gpuml_knn_search_f(const float *data, int64_t n, int64_t d, const float *query,
                                int64_t m, int64_t k, int64_t *index, float *dist,
                                const gpuml_options *opt, gpuml_knn_result *result) {
  const gm_matrix D = {data, n, d, GM_F32}, Q = {query, m, d, GM_F32};
  return knn_run(&D, query ? &Q : NULL, k, index, dist, opt, result);
}
