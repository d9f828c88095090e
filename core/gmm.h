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

/* How the engines hold and factor the covariances: full matrices, or diagonal ones
 * (the spherical models are diagonal for the engines). */
typedef enum {
  GM_GMM_FULL_STRUCTURE = 0,
  GM_GMM_DIAGONAL_STRUCTURE = 1,
  GM_GMM_SPHERICAL_STRUCTURE = 2
} gm_gmm_structure;

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
  /* M-step statistics from the responsibilities: nk[k] = sum_i z_ik, the weights
   * nk / n, the means, and as covariances the scatter about the means over nk, without
   * reg (the full matrix, or its diagonal with zeros elsewhere): the unconstrained
   * (VVV or VVI) estimates, which gm_gmm_model_mstep() turns into the model's.
   * Components with nk = 0 keep their parameters; those below GM_GMM_MIN_POINTS get
   * their statistics too (the driver re-seeds them; a shard's few points of a component
   * count in the shards' sum, gmm_shards.c). */
  gpuml_status (*mstep)(void *e, int64_t K, double *nk);
  gpuml_status (*get_params)(void *e, int64_t K, double *weights, double *means,
                             double *covariances);
  /* The responsibilities of the last E-step, n x K (ld n). */
  gpuml_status (*get_z)(void *e, int64_t K, double *z);
  /* Switches between full and diagonal covariances (the data's `structure`); an engine
   * opened for full ones can run both, one opened for diagonal ones only those. */
  gpuml_status (*set_structure)(void *e, gm_gmm_structure structure);
  void (*close)(void *e);
} gm_gmm_ops;

typedef struct gm_gmm_data {
  const double *x; /* n x d, column-major, finite */
  int64_t n, d, kmax;
  gm_gmm_structure structure; /* full, or diagonal (spherical is diagonal here) */
  const double *centre; /* d column means (the GPU engine works on centred data) */
  const gpuml_options *opt;
} gm_gmm_data;

/* An engine over shards of the rows (gmm_shards.c): one backend engine per shard of
 * `plan` (plan->count > 1), each on its device, combined so that the driver sees one. */
struct gm_shard_plan;
gpuml_status gm_gmm_sharded_open(const gm_gmm_data *data, const struct gm_shard_plan *plan,
                                 void **engine);
extern const gm_gmm_ops gm_gmm_sharded_ops;

/* The parameters an engine made of parts (shards, MPI ranks) holds on the host: the
 * same on every part, set on each. */
typedef struct {
  int64_t d;
  double *w, *mu, *cov; /* kmax, d x kmax, d x d x kmax */
} gm_gmm_held;
int gm_gmm_held_alloc(gm_gmm_held *h, int64_t d, int64_t kmax);
void gm_gmm_held_free(gm_gmm_held *h);
void gm_gmm_held_set(gm_gmm_held *h, int64_t K, const double *w, const double *mu,
                     const double *cov);
void gm_gmm_held_set_component(gm_gmm_held *h, int64_t K, const double *w, int64_t k,
                               const double *mu, const double *cov);
void gm_gmm_held_get(const gm_gmm_held *h, int64_t K, double *w, double *mu, double *cov);

/* The M-step of the whole data (n rows) from the statistics of `parts` parts of its rows:
 * part s has nk_s[s K + k], means mu_s (d x K at s K d) and covariances cov_s (the
 * scatter about its means over nk_s, d x d x K at s K d d; full, or diagonal when !full)
 * as gm_gmm_ops.mstep leaves them. Out: nk (K), and in `held` the weights nk / n, the
 * means and the scatter about them over nk (components with nk = 0 left as they are).
 * Sums in part order: every caller that combines the same parts gets the same bits. */
void gm_gmm_combine(int64_t parts, int64_t K, int64_t d, int full, int64_t n,
                    const double *nk_s, const double *mu_s, const double *cov_s, double *nk,
                    gm_gmm_held *held);

/* The CPU engine. */
gpuml_status gm_gmm_cpu_open(const gm_gmm_data *data, void **engine);
extern const gm_gmm_ops gm_gmm_cpu_ops;

/* Rows spread over processes (the MPI entry points, core/mpi/gmm_mpi.c): each process
 * holds a block of the rows, and these collective operations see all of them. Every
 * process calls them in the same order with the same arguments (but its own rows and
 * values), and every process gets the same bits back; a failure on any process is every
 * process's (its message). NULL where all rows are in this process. */
typedef struct gm_gmm_spread {
  int64_t n;      /* the rows of all processes */
  void *ctx;
  /* v[0 .. count) summed over the processes, in process order */
  gpuml_status (*sum)(void *ctx, double *v, int64_t count);
  /* the global rows rows[0 .. m) of the d columns into out (m x d, column-major) */
  gpuml_status (*gather)(void *ctx, const double *x_local, int64_t n_local, int64_t d,
                         const int64_t *rows, int64_t m, double *out);
  /* the `count` global rows of smallest value (values: this process's rows; ties: the
   * smaller row), in that order */
  gpuml_status (*smallest)(void *ctx, const double *values, int64_t n_local, int64_t count,
                           int64_t *rows);
  /* an engine on this process's rows whose steps see all the rows */
  gpuml_status (*open)(void *ctx, const gm_gmm_data *data, const gm_gmm_ops **ops,
                       void **engine);
  /* every process's status: a failure on any is every one's (called where a process
   * may fail alone, out of memory, so that all leave together) */
  gpuml_status (*agree)(void *ctx, gpuml_status st);
} gm_gmm_spread;

static inline gpuml_status gm_gmm_agree(const gm_gmm_spread *spread, gpuml_status st) {
  return spread ? spread->agree(spread->ctx, st) : st;
}

/* gpuml_gmm_fit() on rows spread over processes (x: this process's n_local rows; z,
 * classification and uncertainty for those rows; the model and the BIC table the same on
 * every process). spread NULL: gpuml_gmm_fit() itself. */
gpuml_status gm_gmm_fit_spread(const gm_gmm_spread *spread, const double *x, int64_t n_local,
                               int64_t d, const gpuml_gmm_params *params,
                               gpuml_gmm_model *model, double *z, int64_t *classification,
                               double *uncertainty, double *bic, const gpuml_options *opt,
                               gpuml_gmm_result *result);

/* Greedy k-means++ start for G components: the centres are drawn with `seed`, every
 * point is assigned to its nearest centre (ties: the earlier centre), and the result
 * is weights = cluster sizes / n, means = cluster means, and one diagonal covariance
 * for all components: the pooled within-cluster variance of each column, plus reg
 * (their average in every column when `spherical`). GPUML_ERR_ARG "gmm:badG" when the
 * data have fewer than G distinct rows. */
gpuml_status gm_gmm_kmeanspp(const double *x, int64_t n, int64_t d, int64_t G,
                             int spherical, double reg, uint64_t seed,
                             const gpuml_options *opt, double *weights, double *means,
                             double *covariances);
/* The same with the rows spread over processes (x: this process's n rows; spread NULL:
 * gm_gmm_kmeanspp): the centres are drawn from the same rows (gathered), the assignment
 * and the clusters' sums are each process's, summed over them. */
gpuml_status gm_gmm_kmeanspp_spread(const gm_gmm_spread *spread, const double *x, int64_t n,
                                    int64_t d, int64_t G, int spherical, double reg,
                                    uint64_t seed, const gpuml_options *opt, double *weights,
                                    double *means, double *covariances);

/* The covariance models (gmm_models.c). */
int gm_gmm_valid_model(int model);
gm_gmm_structure gm_gmm_model_structure(gpuml_gmm_covariance model);
/* The names the "models" parameter takes, NULL-terminated, and the model of each. */
extern const char *const gm_gmm_model_names[];
extern const int gm_gmm_model_values[];

/* Work space of the models' M-steps for d dimensions and up to gmax components; it
 * also carries the iterative models' common parts (the shape B of VEI and VEE, the
 * shape A of VEV, the orientation D of EVE and VVE) from one EM iteration to the next,
 * where the next M-step starts (warm: set it to 0 when a fit starts or its components
 * are re-seeded). */
typedef struct {
  int64_t d, gmax;
  int warm;
  double *W, *vec;                 /* d x d x gmax: scatter matrices, eigenvectors */
  double *val, *psi, *scale;       /* d x gmax */
  double *lambda;                  /* gmax: volumes */
  double *matrices;                /* the d x d matrices below */
  double *D, *B, *Binv, *a, *tmp;
  double *shape; /* d: VEV's common shape, kept between M-steps */
  double *work;
  int *iwork;
  int lwork;
} gm_gmm_mstep;
int gm_gmm_mstep_alloc(gm_gmm_mstep *s, int64_t d, int64_t gmax);
void gm_gmm_mstep_free(gm_gmm_mstep *s);
/* cov (d x d x G): in: for the components with active[k], the engine's unconstrained
 * estimates W_k / nk[k] (gm_gmm_ops.mstep); out: the model's maximum-likelihood
 * covariances plus reg on the diagonal. Other components are left as they are. A
 * covariance the model cannot form from singular statistics is left NaN. */
gpuml_status gm_gmm_model_mstep(gm_gmm_mstep *s, gpuml_gmm_covariance model, int64_t G,
                                const double *nk, const int *active, double *cov, double reg);

/* BLAS routines only the mixtures use (see blas.h for the convention). */
void dtrmm_(const char *side, const char *uplo, const char *transa, const char *diag,
            const int *m, const int *n, const double *alpha, const double *a, const int *lda,
            double *b, const int *ldb, size_t side_len, size_t uplo_len, size_t transa_len,
            size_t diag_len);

/* ---- the hierarchical start (gmm_hc.c) ----------------------------------------------- */

/* The most rows the hierarchical start clusters (its pair table holds m (m - 1) / 2
 * doubles: 16 MB at this size). */
#define GM_GMM_HC_SUBSET 2000

/* Deterministic start for the mixtures: model-based agglomerative hierarchical
 * clustering with the VVV criterion, as mclust's hc(X, "VVV", use = "SVD") does.
 * The m = min(n, GM_GMM_HC_SUBSET) rows used are all n rows when n <= GM_GMM_HC_SUBSET,
 * otherwise one row of each of m consecutive strata of equal length (at a fixed
 * pseudo-random offset within it), so that sorted or grouped input is sampled in
 * proportion and periodic input does not alias; the result depends only on x. Those rows
 * are scaled (columns centred, divided by their standard deviation; constant columns
 * dropped), projected on the right singular vectors with each direction divided by the
 * square root of its singular value (directions of numerically zero singular value
 * dropped), and merged down to one group (gmm_hc.c says how, and what ties do).
 *   x       n x d, column-major, finite
 *   gmax    1 .. m: partitions into 1 .. gmax groups come back
 *   opt     threads and the interrupt callback
 *   rows    m entries: the (0-based, increasing) rows used
 *   labels  m x gmax int32, column-major: column g-1 is the partition of the m rows into g
 *           groups, labelled 0 .. g-1 in order of first appearance; partition g+1 refines
 *           partition g
 * GPUML_ERR_ARG "gmm:badG" when gmax is outside 1 .. m (so G > n is this error),
 * "gmm:badData" / "gmm:nonFinite" for x (NULL, no rows, NaN or Inf), "gmm:badOutput"
 * for NULL outputs, "gmm:tooLarge" for d > 46340, "badOptions" for NULL opt;
 * GPUML_ERR_INTERRUPTED (the callback is polled every 32 merges, or every merge when
 * merges are slow); GPUML_ERR_NOMEM.
 * Nothing is written to rows or labels unless the arguments are valid.
 * Time O(m^2 (p + log)) for the trace-only pairs plus O(p^2 k) or O(p^3) for each pair
 * cost that needs a determinant: at m = 2000 on one core about 0.2 s for p <= 10, 0.7 s
 * for p = 50, 1.5 s for p = 100, minutes for p in the hundreds (reduce the dimension
 * first there). Memory 4 m^2 bytes (the pair table), 16 m d bytes (the scaled copy),
 * up to 32 MB of scatter matrices, and 16 p^2 bytes per group of more than p rows. */
gpuml_status gm_gmm_hc(const double *x, int64_t n, int64_t d, int64_t gmax,
                       const gpuml_options *opt, int64_t *rows, int32_t *labels);

/* The rows gm_gmm_hc() clusters out of n (m = min(n, GM_GMM_HC_SUBSET) of them). */
void gm_gmm_hc_rows(int64_t n, int64_t m, int64_t *rows);

/* LAPACK's SVD (the hierarchical start's transformation). */
void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a,
             const int *lda, double *s, double *u, const int *ldu, double *vt, const int *ldvt,
             double *work, const int *lwork, int *info, size_t jobu_len, size_t jobvt_len);

#ifdef __cplusplus
}
#endif

#endif
