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

#ifdef __cplusplus
}
#endif

#endif
