/* gpuml_dist(): argument checks, then the distances of the backend the call resolves to. */
#include <stdlib.h>
#include "backend.h"

static gpuml_status check_dist_args(int64_t n, const void *y, int64_t m,
                                    const void *out, gpuml_options *opt) {
  gpuml_status st = gm_check_options(opt);
  if (st) return st;
  if (!out) return gm_fail(GPUML_ERR_ARG, "dist:badOutput", "the output array must not be NULL");
  int64_t cols = y ? m : n;
  if (n > INT64_MAX / cols || n * cols > (int64_t)(SIZE_MAX / 8))
    return gm_fail(GPUML_ERR_ARG, "dist:tooLarge",
                   "the %lld x %lld distance matrix is too large to hold", (long long)n,
                   (long long)cols);
  return GPUML_OK;
}

static gpuml_status dist_run(const gm_matrix *x, const gm_matrix *y, int squared, void *out,
                             gpuml_options *opt) {
  const gm_backend *b;
  const int64_t cols = y ? y->rows : x->rows;
  gpuml_status st = gm_backend_resolve(opt, GM_ALGO_NEIGHBOURS,
                                       (double)x->rows * (double)cols * (double)x->cols, "dist", &b);
  return st ? st : b->neighbours->dist(x, y, squared, out, opt);
}

gpuml_status gpuml_dist(const double *x, int64_t n, int64_t d, const double *y, int64_t m,
                        int squared, double *out, gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = gm_check_matrix(x, n, d, "x", "dist");
  if (!st && y) st = gm_check_matrix(y, m, d, "y", "dist");
  if (!st) st = check_dist_args(n, y, m, out, opt);
  if (st) return st;
  const gm_matrix X = {x, n, d, GM_F64}, Y = {y, m, d, GM_F64};
  return dist_run(&X, y ? &Y : NULL, squared, out, opt);
}

gpuml_status gpuml_dist_f(const float *x, int64_t n, int64_t d, const float *y, int64_t m,
                          int squared, float *out, gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = gm_check_matrix_f(x, n, d, "x", "dist");
  if (!st && y) st = gm_check_matrix_f(y, m, d, "y", "dist");
  if (!st) st = check_dist_args(n, y, m, out, opt);
  if (st) return st;
  const gm_matrix X = {x, n, d, GM_F32}, Y = {y, m, d, GM_F32};
  return dist_run(&X, y ? &Y : NULL, squared, out, opt);
}
