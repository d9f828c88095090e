/* Metrics beyond the Euclidean one, built on the backends' Euclidean distances, so that
 * every backend and every search path (certified, sharded, indexed) serves them alike:
 * the cosine distance 1 - cos(x, y) equals ||u - v||^2 / 2 for the rows scaled to unit
 * length, u = x / ||x||. The scaled copies are made here, once, for both backends, which
 * therefore give the same answers as for Euclidean input; the half square also avoids
 * the cancellation of 1 - <u, v> for close points. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "metric.h"

/* Rows per block of the column-major passes (each column's slice of a block is read
 * contiguously). */
#define GM_METRIC_BLOCK 256

gpuml_status gm_metric_rows(const gm_matrix *x, gpuml_metric metric, const char *what,
                            const char *stage, gm_matrix *out, void **owned) {
  *out = *x;
  *owned = NULL;
  if (metric == GPUML_METRIC_EUCLIDEAN) return GPUML_OK;
  const int64_t n = x->rows, d = x->cols;
  const double *xd = x->dtype == GM_F64 ? x->values : NULL;
  const float *xf = x->dtype == GM_F32 ? x->values : NULL;
  const size_t item = x->dtype == GM_F64 ? sizeof(double) : sizeof(float);
  double *scale = gm_alloc((size_t)n, sizeof *scale);
  void *u = gm_alloc((size_t)n * (size_t)d, item);
  if (!scale || !u) {
    free(scale);
    free(u);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory",
                   "cannot allocate %.1f MB for the unit-length rows of the %s",
                   (double)n * (double)d * (double)item / 1e6, what);
  }
  /* The largest magnitude of each row first, so that the squares cannot overflow. */
  const int64_t blocks = (n + GM_METRIC_BLOCK - 1) / GM_METRIC_BLOCK;
#pragma omp parallel for schedule(static) if (n * d > 65536)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t i0 = b * GM_METRIC_BLOCK, i1 = i0 + GM_METRIC_BLOCK < n ? i0 + GM_METRIC_BLOCK : n;
    for (int64_t i = i0; i < i1; i++) scale[i] = 0;
    for (int64_t j = 0; j < d; j++)
      for (int64_t i = i0; i < i1; i++) {
        const double v = fabs(xd ? xd[i + j * n] : (double)xf[i + j * n]);
        if (v > scale[i]) scale[i] = v;
      }
  }
  for (int64_t i = 0; i < n; i++)
    if (scale[i] == 0) {
      free(scale);
      free(u);
      char id[64];
      snprintf(id, sizeof id, "%s:zeroRow", stage);
      return gm_fail(GPUML_ERR_ARG, id,
                     "row %lld of the %s is all zeros: its cosine distance is undefined "
                     "(remove it or use metric \"euclidean\")",
                     (long long)(i + 1), what);
    }
  double *ud = x->dtype == GM_F64 ? u : NULL;
  float *uf = x->dtype == GM_F32 ? u : NULL;
#pragma omp parallel for schedule(static) if (n * d > 65536)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t i0 = b * GM_METRIC_BLOCK, i1 = i0 + GM_METRIC_BLOCK < n ? i0 + GM_METRIC_BLOCK : n;
    double sum[GM_METRIC_BLOCK] = {0};
    for (int64_t j = 0; j < d; j++)
      for (int64_t i = i0; i < i1; i++) {
        const double v = (xd ? xd[i + j * n] : (double)xf[i + j * n]) / scale[i];
        sum[i - i0] += v * v;
      }
    for (int64_t i = i0; i < i1; i++) sum[i - i0] = scale[i] * sqrt(sum[i - i0]);  /* ||x_i|| */
    for (int64_t j = 0; j < d; j++)
      for (int64_t i = i0; i < i1; i++) {
        const double v = (xd ? xd[i + j * n] : (double)xf[i + j * n]) / sum[i - i0];
        if (ud) ud[i + j * n] = v;
        else uf[i + j * n] = (float)v;
      }
  }
  free(scale);
  out->values = u;
  *owned = u;
  return GPUML_OK;
}

void gm_metric_finish(void *values, size_t count, gm_dtype dtype, gpuml_metric metric,
                      int squared) {
  if (metric != GPUML_METRIC_COSINE) return;
  double *vd = dtype == GM_F64 ? values : NULL;
  float *vf = dtype == GM_F32 ? values : NULL;
#pragma omp parallel for schedule(static) if (count > 65536)
  for (size_t i = 0; i < count; i++) {
    const double e = vd ? vd[i] : (double)vf[i];
    double c = squared ? e / 2 : e * e / 2;
    if (c > 2) c = 2;  /* unit vectors are at most 2 apart (rounding aside) */
    if (vd) vd[i] = c;
    else vf[i] = (float)c;
  }
}

void gm_knn_order_ties(int64_t *index, void *dist, int64_t m, int64_t k, gm_dtype dtype) {
  double *dd = dtype == GM_F64 ? dist : NULL;
  float *df = dtype == GM_F32 ? dist : NULL;
#pragma omp parallel for schedule(static) if (m * k > 65536)
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 1; j < k; j++) {
      /* Insertion by (distance, index): the lists are sorted by distance already, so
       * only equal distances move. */
      const int64_t idx = index[i + j * m];
      const double v = dd ? dd[i + j * m] : (double)df[i + j * m];
      int64_t t = j;
      while (t > 0) {
        const double w = dd ? dd[i + (t - 1) * m] : (double)df[i + (t - 1) * m];
        if (w < v || (w == v && index[i + (t - 1) * m] < idx)) break;
        index[i + t * m] = index[i + (t - 1) * m];
        if (dd) dd[i + t * m] = dd[i + (t - 1) * m];
        else df[i + t * m] = df[i + (t - 1) * m];
        t--;
      }
      if (t != j) {
        index[i + t * m] = idx;
        if (dd) dd[i + t * m] = v;
        else df[i + t * m] = (float)v;
      }
    }
}
