/* The operations of the CUDA backend (kernels/*.cu) that kernels/backend_cuda.cu puts
 * in its table; their contracts are those of core/backend.h. Every function checks
 * each CUDA call and reports failures through gm_fail(); none aborts. */
#ifndef GPUML_CUDA_H
#define GPUML_CUDA_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills the cuda_* and device fields of *info. Returns the number of devices; 0 with
 * info->cuda_message saying why when there are none. (kernels/device.cu) */
int gm_cuda_probe(gpuml_info *info);

/* Releases the persistent context of one device (device >= 0) or of all devices
 * (device < 0): streams, handles, the memory pool, page-locked buffers.
 * (kernels/context.cu) */
void gm_cuda_release(int device);

/* kernels/dist.cu, kernels/knn.cu: opt->precision picks fp32 or fp64 accumulation for
 * double input (auto: fp64 for distances; for kNN the certified fp32 search of knn.cu). */
gpuml_status gm_cuda_dist(const gm_matrix *x, const gm_matrix *y, int squared, void *out,
                          const gpuml_options *opt);
gpuml_status gm_cuda_knn(const gm_matrix *data, const gm_matrix *query, int64_t k,
                         int64_t *index, void *dist, const gpuml_options *opt,
                         int64_t *rechecked);
/* The kNN index's resident points (kernels/knn.cu), as core/backend.h describes them. */
gpuml_status gm_cuda_knn_resident_build(const gm_matrix *data, const gpuml_options *opt,
                                        void **state, size_t *bytes);
gpuml_status gm_cuda_knn_resident_search(const void *state, const gm_matrix *data,
                                         const gm_matrix *query, int64_t k, int64_t *index,
                                         void *dist, const gpuml_options *opt,
                                         int64_t *rechecked);
void gm_cuda_knn_resident_free(void *state);

/* kernels/dpc.cu: exact fp64 decisions, as on the CPU. */
gpuml_status gm_cuda_dpc_density(const double *x, int64_t n, int64_t d,
                                 const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                 int gaussian, double dc, double cut, double *rho,
                                 double *delta_sq, int64_t *nearest, int64_t *order,
                                 void **kept, const gpuml_options *opt);
void gm_cuda_dpc_release_kept(void *kept);
gpuml_status gm_cuda_dpc_part_open(const double *x, int64_t n, int64_t d,
                                   const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                   int gaussian, double dc, double cut, const gpuml_options *opt,
                                   void **session);
gpuml_status gm_cuda_dpc_part_bounds(void *session, int parts, int64_t *bounds,
                                      const gpuml_options *opt);
gpuml_status gm_cuda_dpc_part_rho(void *session, int64_t first, int64_t last, double *rho,
                                  const gpuml_options *opt);
int gm_cuda_dpc_part_counts_on(void *session, const gpuml_options *opt);
gpuml_status gm_cuda_dpc_part_counts(void *session, int64_t first, int64_t last,
                                     uint32_t *counts, const gpuml_options *opt);
gpuml_status gm_cuda_dpc_part_delta(void *session, const double *rho, int64_t top,
                                    int64_t first, int64_t last, double *delta_sq,
                                    int64_t *nearest, const gpuml_options *opt);
gpuml_status gm_cuda_dpc_part_order(void *session, int64_t *order, const gpuml_options *opt);
void gm_cuda_dpc_part_close(void *session);
gpuml_status gm_cuda_dpc_assign(const int64_t *order, const int64_t *nearest, int64_t n,
                                const int64_t *centres, int64_t k, int64_t *cluster, int *done,
                                int64_t *bad, void *kept, const gpuml_options *opt);
gpuml_status gm_cuda_dpc_border(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                                double cut, const double *rho, const int64_t *cluster,
                                int64_t ncentres, void *kept, double *cluster_border,
                                const gpuml_options *opt);

/* kernels/tsne.cu, kernels/tsne_pca.cu */
gpuml_status gm_cuda_tsne_conditional(const double *dist, int64_t n, int64_t k,
                                      double perplexity, double *p, double *entropy,
                                      const gpuml_options *opt);
gpuml_status gm_cuda_tsne_affinities(const int64_t *idx, const double *dist, int64_t n, int64_t k,
                                     const double *perplexities, int64_t scales, gm_csr *P,
                                     double *entropy, const gpuml_options *opt);
gpuml_status gm_cuda_tsne_pca(const double *x, int64_t n, int64_t d, int64_t ncomp,
                              double *scores, const gpuml_options *opt);
gpuml_status gm_cuda_tsne_optimize(const gm_csr *P, const gm_tsne_run *run, double *y,
                                   double *itercosts, gpuml_tsne_result *result,
                                   const gpuml_options *opt);
gpuml_status gm_cuda_tsne_gradient(const gm_csr *P, const double *y, int64_t n, int dims,
                                   gpuml_tsne_method method, int boxes, double exaggeration,
                                   double df, double *grad, double *z, const gpuml_options *opt);
int64_t gm_cuda_tsne_exact_max_n(int dims, double df);
gpuml_status gm_cuda_tsne_place(const gm_csr *P, const gm_tsne_place_run *run, double *y,
                                const gpuml_options *opt);
gpuml_status gm_cuda_tsne_fit_affinities(const double *x, int64_t n, int64_t d, int64_t k,
                                         const double *perplexities, int64_t scales, gm_csr *P,
                                         const gpuml_options *opt);
gpuml_status gm_cuda_tsne_resident_to_host(gm_csr *P, const gpuml_options *opt);
/* Gives a resident P's device memory back (gm_csr.resident_free). */
void gm_cuda_tsne_resident_free(void *resident);

/* kernels/gmm.cu: the mixtures' engine on the device (data, responsibilities and
 * parameters stay there between the steps of EM). */
extern const gm_gmm_backend gm_cuda_gmm;

#ifdef __cplusplus
}
#endif

#endif
