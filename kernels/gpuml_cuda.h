/* The C interface of kernels/ as core/ sees it. core/ includes this only when
 * configure found CUDA (GPUML_HAVE_CUDA). Every function checks each CUDA call and
 * reports failures through gm_fail(); none aborts. */
#ifndef GPUML_CUDA_H
#define GPUML_CUDA_H

#include "gpuml.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills the cuda_* and device fields of *info. Returns the number of usable devices;
 * 0 with info->cuda_message saying why when there are none. */
int gpuml_cuda_query(gpuml_info *info);

/* The CUDA halves of gpuml_dist() and gpuml_knn(). Arguments are the caller's, already
 * validated by core/ (finite, k in range, sizes); `is_float` says whether x/y/out (and
 * data/query/dist) are float rather than double. Layouts and semantics are exactly
 * those of gpuml.h; opt->precision picks fp32 or fp64 accumulation. */
gpuml_status gpuml_cuda_dist(const void *x, int64_t n, int64_t d, const void *y, int64_t m,
                             int squared, int is_float, void *out, const gpuml_options *opt);
gpuml_status gpuml_cuda_knn(const void *data, int64_t n, int64_t d, const void *query,
                            int64_t m, int64_t k, int is_float, int64_t *index, void *dist,
                            const gpuml_options *opt);

/* ---- density peaks (kernels/dpc.cu) ---- */

struct gm_dpc_grid; /* core/dpc.h */

/* The passes of gpuml_dpc() on the GPU, arguments validated by core/. rho_grid (cells
 * of side >= dc; NULL for the Gaussian density or d > 3) and delta_grid (finer cells;
 * NULL when d > 3) hold the points bucketed by cells; without them all pairs are
 * visited. gaussian picks the kernel; cut is gm_dpc_sq_threshold(dc, 1). Writes rho,
 * and for every point but the top of the density order the squared distance to its
 * nearest denser point (delta_sq) and that point's index (nearest), all by original
 * index. Exact fp64 decisions, as on the CPU. */
gpuml_status gpuml_cuda_dpc(const double *x, int64_t n, int64_t d,
                            const struct gm_dpc_grid *rho_grid,
                            const struct gm_dpc_grid *delta_grid, int gaussian, double dc,
                            double cut, double *rho, double *delta_sq, int64_t *nearest,
                            const gpuml_options *opt);
/* border[i] = the largest (rho_i + rho_j) / 2 over the j of other clusters with
 * s_ij < cut (cut = gm_dpc_sq_threshold(dc, 0)), 0 when there is none. */
gpuml_status gpuml_cuda_dpc_border(const double *x, int64_t n, int64_t d,
                                   const struct gm_dpc_grid *grid, double cut, const double *rho,
                                   const int64_t *cluster, double *border,
                                   const gpuml_options *opt);

/* ---- t-SNE (kernels/tsne.cu) ---- */

/* Conditional affinities: dist (n x k, column-major) are the distances to each
 * point's k nearest neighbours; p (n x k, column-major) receives p_{j|i} from the same
 * bisection as the CPU (core/tsne_shared.h); entropy (n, may be NULL) the entropies. */
gpuml_status gpuml_cuda_tsne_conditional(const double *dist, int64_t n, int64_t k,
                                         double perplexity, double *p, double *entropy,
                                         const gpuml_options *opt);
/* The first ncomp principal component scores (n x ncomp) of x (n x d), before the sign
 * fix of gm_tsne_sign_fix(), which this applies on the host. */
gpuml_status gpuml_cuda_tsne_pca(const double *x, int64_t n, int64_t d, int64_t ncomp,
                                 double *scores, const gpuml_options *opt);
/* The optimiser: P in CSR (row: n + 1, col, val: nnz); run is a gm_tsne_run
 * (core/tsne.h); y (n x dims) holds the initial embedding and receives the result. */
gpuml_status gpuml_cuda_tsne_optimize(const int64_t *row, const int64_t *col, const double *val,
                                      int64_t nnz, const void *run, double *y,
                                      double *itercosts, gpuml_tsne_result *result,
                                      const gpuml_options *opt);
/* One gradient evaluation as the optimiser does it (the GPU counterpart of
 * gm_tsne_gradient_cpu(), for the tests). */
gpuml_status gpuml_cuda_tsne_gradient(const int64_t *row, const int64_t *col, const double *val,
                                      int64_t n, int dims, int method, int boxes,
                                      double exaggeration, const double *y, double *grad,
                                      double *z, const gpuml_options *opt);

/* ---- Gaussian mixtures (kernels/gmm.cu) ---- */

/* The CUDA engine of the mixtures: the steps of core/gmm.h's gm_gmm_ops on the device
 * (data, responsibilities and parameters stay there between steps). open() takes a
 * struct gm_gmm_data (core/gmm.h); close() frees everything. */
struct gm_gmm_data;
gpuml_status gpuml_cuda_gmm_open(const struct gm_gmm_data *data, void **engine);
gpuml_status gpuml_cuda_gmm_set_params(void *engine, int64_t K, const double *weights,
                                       const double *means, const double *covariances);
gpuml_status gpuml_cuda_gmm_set_component(void *engine, int64_t K, const double *weights,
                                          int64_t k, const double *mean,
                                          const double *covariance);
gpuml_status gpuml_cuda_gmm_factor(void *engine, int64_t K, int *info);
gpuml_status gpuml_cuda_gmm_estep(void *engine, int64_t K, double *loglik);
gpuml_status gpuml_cuda_gmm_log_density(void *engine, double *out);
gpuml_status gpuml_cuda_gmm_mstep(void *engine, int64_t K, double *nk);
gpuml_status gpuml_cuda_gmm_get_params(void *engine, int64_t K, double *weights,
                                       double *means, double *covariances);
gpuml_status gpuml_cuda_gmm_get_z(void *engine, int64_t K, double *z);
void gpuml_cuda_gmm_close(void *engine);

#ifdef __cplusplus
}
#endif

#endif
