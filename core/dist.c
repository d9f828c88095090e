/* gpuml_dist_compute(): argument checks, then the distances of the backend the call
 * resolves to. */
#include <stdlib.h>
#include "backend.h"
#include "metric.h"

static gpuml_status dist_run(const gm_matrix *x, const gm_matrix *y, int squared, void *out,
                             const gpuml_options *opt, gpuml_dist_result *result) {
  gm_clear_error();
  gpuml_status st = gm_check_values(x, "x", "dist");
  if (!st && y) st = gm_check_values(y, "y", "dist");
  if (!st) st = gm_check_options(opt);
  if (st) return st;
  if (!out) return gm_fail(GPUML_ERR_ARG, "dist:badOutput", "the output array must not be NULL");
  if (squared && opt->metric != GPUML_METRIC_EUCLIDEAN)
    return gm_fail(GPUML_ERR_ARG, "dist:badSquared",
                   "squared distances are defined for the Euclidean metric only, not for \"%s\"",
                   gpuml_metric_name(opt->metric));
  const int64_t n = x->rows, cols = y ? y->rows : x->rows;
  if (n > INT64_MAX / cols || n * cols > (int64_t)(SIZE_MAX / 8))
    return gm_fail(GPUML_ERR_ARG, "dist:tooLarge",
                   "the %lld x %lld distance matrix is too large to hold", (long long)n,
                   (long long)cols);
  const double t0 = gm_seconds();
  gpuml_options used;
  const gm_backend *b;
  if ((st = gm_backend_resolve(opt, GM_ALGO_NEIGHBOURS, (double)n * (double)cols * (double)x->cols,
                               "dist", &used, &b)))
    return st;
  gm_matrix X, Y;
  void *owned_x = NULL, *owned_y = NULL;
  if ((st = gm_metric_rows(x, used.metric, "x", "dist", &X, &owned_x)) ||
      (y && (st = gm_metric_rows(y, used.metric, "y", "dist", &Y, &owned_y)))) {
    free(owned_x);
    return st;
  }
  /* Other metrics come from the squared Euclidean distances of their rows. */
  const int euclidean = used.metric == GPUML_METRIC_EUCLIDEAN;
  st = b->neighbours->dist(&X, y ? &Y : NULL, squared || !euclidean, out, &used);
  free(owned_x);
  free(owned_y);
  if (!st) gm_metric_finish(out, (size_t)n * (size_t)cols, x->dtype, used.metric, 1);
  if (!st && result) gm_run_info_fill(&result->run, &used, x->dtype, t0);
  return st;
}

gpuml_status gpuml_dist_compute(const double *x, int64_t n, int64_t d, const double *y,
                                int64_t m, int squared, double *out, const gpuml_options *opt,
                                gpuml_dist_result *result) {
  const gm_matrix X = {x, n, d, GM_F64}, Y = {y, m, d, GM_F64};
  return dist_run(&X, y ? &Y : NULL, squared, out, opt, result);
}

gpuml_status gpuml_dist_compute_f(const float *x, int64_t n, int64_t d, const float *y,
                                  int64_t m, int squared, float *out, const gpuml_options *opt,
                                  gpuml_dist_result *result) {
  const gm_matrix X = {x, n, d, GM_F32}, Y = {y, m, d, GM_F32};
  return dist_run(&X, y ? &Y : NULL, squared, out, opt, result);
}
