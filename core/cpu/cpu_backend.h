/* The operations of the CPU backend that core/cpu/backend_cpu.c puts in its table and
 * that are not declared with their algorithm's internals (tsne.h, gmm.h, dpc.h); their
 * contracts are those of core/backend.h. */
#ifndef GPUML_CPU_BACKEND_H
#define GPUML_CPU_BACKEND_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

gpuml_status gm_cpu_dist(const gm_matrix *x, const gm_matrix *y, int squared, void *out,
                         const gpuml_options *opt);
gpuml_status gm_cpu_knn(const gm_matrix *data, const gm_matrix *query, int64_t k,
                        int64_t *index, void *dist, const gpuml_options *opt,
                        int64_t *rechecked);
gpuml_status gm_cpu_dpc_density(const double *x, int64_t n, int64_t d,
                                const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                int gaussian, double dc, double cut, double *rho,
                                double *delta_sq, int64_t *nearest, int64_t *order,
                                void **kept, const gpuml_options *opt);
gpuml_status gm_cpu_dpc_rho(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                            int gaussian, double dc, double cut, int64_t first, int64_t last,
                            double *rho, const gpuml_options *opt);
gpuml_status gm_cpu_dpc_delta(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                              const double *rho, int64_t top, int64_t first, int64_t last,
                              double *delta_sq, int64_t *nearest, const gpuml_options *opt);
gpuml_status gm_cpu_dpc_part_open(const double *x, int64_t n, int64_t d,
                                  const gm_dpc_grid *rho_grid, const gm_dpc_grid *delta_grid,
                                  int gaussian, double dc, double cut, const gpuml_options *opt,
                                  void **session);
gpuml_status gm_cpu_dpc_part_rho(void *session, int64_t first, int64_t last, double *rho,
                                 const gpuml_options *opt);
gpuml_status gm_cpu_dpc_part_delta(void *session, const double *rho, int64_t top, int64_t first,
                                   int64_t last, double *delta_sq, int64_t *nearest,
                                   const gpuml_options *opt);
void gm_cpu_dpc_part_close(void *session);
gpuml_status gm_cpu_dpc_border(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                               double cut, const double *rho, const int64_t *cluster,
                               int64_t ncentres, void *kept, double *cluster_border,
                               const gpuml_options *opt);
gpuml_status gm_cpu_tsne_conditional(const double *dist, int64_t n, int64_t k,
                                     double perplexity, double *p, double *entropy,
                                     const gpuml_options *opt);

#ifdef __cplusplus
}
#endif

#endif
