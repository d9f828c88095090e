/* Gaussian mixtures inside core/: the EM driver (gmm.c) runs on an engine, the
 * backend's state between the steps of EM (gmm_cpu.c on the CPU, kernels/gmm.cu on
 * the GPU), so that initialisation, convergence, collapse handling, the choice of G
 * and the output are written once for both backends.
 *
 * An engine holds the data (n x d), parameters for up to kmax components and the
 * responsibilities of the last E-step. Parameter arrays crossing the interface are
 * host arrays in the caller's layout (weights K, means d x K, covariances d x d x K).
 * Every step may be interrupted (GPUML_ERR_INTERRUPTED) and fails with gm_fail(). */
#ifndef GPUML_GMM_H
#define GPUML_GMM_H

#include <stddef.h>
#include <stdint.h>
#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A component whose responsibilities sum to less than this (less than one point's
 * worth) has collapsed; its parameters are left as they were for the driver to
 * re-seed. */
#define GM_GMM_MIN_POINTS 1.0
/* Responsibilities below exp(this) times the largest of their row are set to 0: they
 * change nothing at double precision, and as subnormal numbers further down they
 * would slow every product they enter by a factor of ten or more. */
#define GM_GMM_LOG_FLUSH (-500.0)

typedef struct gm_gmm_ops {
  /* Sets all K components. */
  gpuml_status (*set_params)(void *e, int64_t K, const double *weights, const double *means,
                             const double *covariances);
  /* Sets the K weights and the mean and covariance of component k. */
  gpuml_status (*set_component)(void *e, int64_t K, const double *weights, int64_t k,
                                const double *mean, const double *covariance);
  /* Cholesky factors of the covariances: info[k] = 0, or > 0 where component k is not
   * positive definite (its factor is then unusable until it is set again). */
  gpuml_status (*factor)(void *e, int64_t K, int *info);
  /* E-step with the factored parameters: responsibilities and the log-likelihood. */
  gpuml_status (*estep)(void *e, int64_t K, double *loglik);
  /* The per-point log-densities log sum_k w_k N(x_i | k) of the last E-step (n). */
  gpuml_status (*log_density)(void *e, double *out);
  /* M-step from the responsibilities: weights, means, covariances (reg added), and
   * nk[k] = sum_i z_ik. Components with nk < GM_GMM_MIN_POINTS keep their parameters. */
  gpuml_status (*mstep)(void *e, int64_t K, double *nk);
  gpuml_status (*get_params)(void *e, int64_t K, double *weights, double *means,
                             double *covariances);
  /* The responsibilities of the last E-step, n x K (ld n). */
  gpuml_status (*get_z)(void *e, int64_t K, double *z);
  void (*close)(void *e);
} gm_gmm_ops;

typedef struct gm_gmm_data {
  const double *x; /* n x d, column-major, finite */
  int64_t n, d, kmax;
  gpuml_gmm_covariance covariance;
  double reg;
  const double *centre; /* d column means (the GPU engine works on centred data) */
  const gpuml_options *opt;
} gm_gmm_data;

/* The CPU engine. */
gpuml_status gm_gmm_cpu_open(const gm_gmm_data *data, void **engine);
extern const gm_gmm_ops gm_gmm_cpu_ops;

/* Greedy k-means++ start for G components: the centres are drawn with `seed`, every
 * point is assigned to its nearest centre (ties: the earlier centre), and the result
 * is weights = cluster sizes / n, means = cluster means, and one diagonal covariance
 * for all components: the pooled within-cluster variance of each column, plus reg
 * (the same for every column for "spherical"). GPUML_ERR_ARG "gmm:badG" when the
 * data have fewer than G distinct rows. */
gpuml_status gm_gmm_kmeanspp(const double *x, int64_t n, int64_t d, int64_t G,
                             gpuml_gmm_covariance covariance, double reg, uint64_t seed,
                             const gpuml_options *opt, double *weights, double *means,
                             double *covariances);

/* BLAS routines only the mixtures use (see blas.h for the convention). */
void dtrmm_(const char *side, const char *uplo, const char *transa, const char *diag,
            const int *m, const int *n, const double *alpha, const double *a, const int *lda,
            double *b, const int *ldb, size_t side_len, size_t uplo_len, size_t transa_len,
            size_t diag_len);

#ifdef __cplusplus
}
#endif

#endif
