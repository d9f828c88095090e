/* Squared Euclidean distances between blocks of two point sets: the piece that
 * gpuml_dist_compute() and gpuml_knn_search() share on the CPU. */
#ifndef GPUML_DISTANCE_TILES_H
#define GPUML_DISTANCE_TILES_H
#include <stdint.h>
#include "internal.h"

/* Below this dimension the direct form is as fast as GEMM and needs no guard. */
#define GM_GEMM_MIN_DIM 16

typedef struct {
  const double *x; /* the caller's n x d column-major matrix */
  int64_t n, d;
  double *points;  /* GEMM form only: d x n, one centred point per column */
  double *sqnorm;  /* GEMM form only: squared norms of the centred points */
} gm_points;

int gm_use_gemm(int64_t d);

/* The common centre of x and y (y may be NULL) for the GEMM form: the column means of
 * x, rounded to integers when all the data are integers. */
gpuml_status gm_gemm_centre(const double *x, int64_t n, const double *y, int64_t m, int64_t d,
                            double **centre);

/* Prepares x for gm_sqdist_tile(); `centre` (length d) is needed for the GEMM form and
 * must be the same for both point sets of a tile. */
gpuml_status gm_points_init(gm_points *p, const double *x, int64_t n, int64_t d,
                            const double *centre, int threads);
void gm_points_free(gm_points *p);

/* out[a + b * ld] = ||A[a0 + a] - B[b0 + b]||^2 for a < an, b < bn, on the calling
 * thread (callers give each OpenMP thread its own tiles; see blas.c). The direct form
 * gives exactly gm_sqdist(); the GEMM form recomputes with gm_sqdist() any pair whose
 * value is small next to the norms (where cancellation would cost accuracy), so the
 * result is never negative and is exactly 0 for identical points. */
void gm_sqdist_tile(const gm_points *A, int64_t a0, int64_t an, const gm_points *B,
                    int64_t b0, int64_t bn, double *out, int64_t ld);

/* The reference squared distance between a (stride sa) and b (stride sb): a plain
 * sum in dimension order, which the direct tile reproduces bit for bit. */
double gm_sqdist(const double *a, int64_t sa, const double *b, int64_t sb, int64_t d);

#endif
