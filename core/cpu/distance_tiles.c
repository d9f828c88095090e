#include <math.h>
#include <stdlib.h>
#include "distance_tiles.h"
#include "blas.h"

/* A GEMM value below this fraction of |a|^2 + |b|^2 is recomputed directly: the GEMM
 * form's absolute error is about d * eps * (|a|^2 + |b|^2), so what it keeps has a
 * relative error well below 1e-10. */
#define GM_CANCELLATION_GUARD 1e-3

int gm_use_gemm(int64_t d) { return d >= GM_GEMM_MIN_DIM; }

double gm_sqdist(const double *a, int64_t sa, const double *b, int64_t sb, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    double diff = a[t * sa] - b[t * sb];
    s += diff * diff;
  }
  return s;
}

static int all_integers(const double *x, int64_t count, double *max_abs) {
  for (int64_t i = 0; i < count; i++) {
    if (x[i] != nearbyint(x[i])) return 0;
    if (fabs(x[i]) > *max_abs) *max_abs = fabs(x[i]);
  }
  return 1;
}

gpuml_status gm_gemm_centre(const double *x, int64_t n, const double *y, int64_t m, int64_t d,
                            double **centre) {
  double *mu = gm_alloc((size_t)d, sizeof *mu);
  if (!mu) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate column means");
  for (int64_t t = 0; t < d; t++) {
    const double *col = x + t * n;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += col[i];
    mu[t] = s / (double)n;
  }
  /* Integer data keep an integer centre: then every product and sum in the GEMM is an
   * exact integer (while 4 d (2 max|x|)^2 < 2^53, the largest sum formed), so ties stay exact ties. */
  double max_abs = 0;
  if (all_integers(x, n * d, &max_abs) && (!y || all_integers(y, m * d, &max_abs)) &&
      (double)d * 16 * max_abs * max_abs < 9007199254740992.0)
    for (int64_t t = 0; t < d; t++) mu[t] = nearbyint(mu[t]);
  *centre = mu;
  return GPUML_OK;
}

gpuml_status gm_points_init(gm_points *p, const double *x, int64_t n, int64_t d,
                            const double *centre, int threads) {
  p->x = x;
  p->n = n;
  p->d = d;
  p->points = NULL;
  p->sqnorm = NULL;
  if (!gm_use_gemm(d)) return GPUML_OK;
  p->points = gm_alloc((size_t)n * (size_t)d, sizeof(double));
  p->sqnorm = gm_alloc((size_t)n, sizeof(double));
  if (!p->points || !p->sqnorm) {
    gm_points_free(p);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory",
                   "cannot allocate %.1f MB for a centred copy of the points",
                   (double)n * (double)d * 8 / 1e6);
  }
  double *pts = p->points, *sq = p->sqnorm;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    double s = 0, *dst = pts + i * d;
    for (int64_t t = 0; t < d; t++) {
      double v = x[i + t * n] - centre[t];
      dst[t] = v;
      s += v * v;
    }
    sq[i] = s;
  }
  return GPUML_OK;
}

void gm_points_free(gm_points *p) {
  free(p->points);
  free(p->sqnorm);
  p->points = NULL;
  p->sqnorm = NULL;
}

static void direct_tile(const gm_points *A, int64_t a0, int64_t an, const gm_points *B,
                        int64_t b0, int64_t bn, double *out, int64_t ld) {
  const int64_t d = A->d, na = A->n, nb = B->n;
  for (int64_t b = 0; b < bn; b++) {
    double *row = out + b * ld;
    for (int64_t a = 0; a < an; a++) row[a] = 0;
    /* Dimension by dimension, so each pair is summed in the order gm_sqdist() uses
     * while the loop over a vectorises. */
    for (int64_t t = 0; t < d; t++) {
      const double q = B->x[b0 + b + t * nb];
      const double *col = A->x + a0 + t * na;
      for (int64_t a = 0; a < an; a++) {
        double diff = col[a] - q;
        row[a] += diff * diff;
      }
    }
  }
}

static void gemm_tile(const gm_points *A, int64_t a0, int64_t an, const gm_points *B,
                      int64_t b0, int64_t bn, double *out, int64_t ld) {
  const int m = (int)an, n = (int)bn, k = (int)A->d, ldo = (int)ld;
  const double minus2 = -2.0, zero = 0.0;
  dgemm_("T", "N", &m, &n, &k, &minus2, A->points + a0 * A->d, &k, B->points + b0 * B->d, &k,
         &zero, out, &ldo, 1, 1);
  const double *sa = A->sqnorm + a0, *sb = B->sqnorm + b0;
  for (int64_t b = 0; b < bn; b++) {
    double *row = out + b * ld;
    for (int64_t a = 0; a < an; a++) {
      double norms = sa[a] + sb[b];
      double s = row[a] + norms;
      if (s < GM_CANCELLATION_GUARD * norms)
        s = gm_sqdist(A->x + a0 + a, A->n, B->x + b0 + b, B->n, A->d);
      row[a] = s;
    }
  }
}

void gm_sqdist_tile(const gm_points *A, int64_t a0, int64_t an, const gm_points *B,
                    int64_t b0, int64_t bn, double *out, int64_t ld) {
  if (A->points && B->points)
    gemm_tile(A, a0, an, B, b0, bn, out, ld);
  else
    direct_tile(A, a0, an, B, b0, bn, out, ld);
}
