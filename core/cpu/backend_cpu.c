/* The CPU backend's table: OpenMP + BLAS/LAPACK, always built. */
#include "cpu_backend.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int cpu_probe(gpuml_info *info) {
#ifdef _OPENMP
  info->openmp = 1;
  info->max_threads = omp_get_max_threads();
#else
  info->max_threads = 1;
#endif
  return 1;
}

static const gm_neighbour_ops cpu_neighbours = {gm_cpu_dist, gm_cpu_knn, NULL, NULL, NULL, 0};
static const gm_dpc_ops cpu_dpc = {gm_cpu_dpc_density,    NULL,
                                    gm_cpu_dpc_part_open,
                                    NULL,                  gm_cpu_dpc_part_rho,
                                    NULL,                  NULL,
                                    gm_cpu_dpc_part_delta, NULL,
                                    gm_cpu_dpc_part_close, gm_cpu_dpc_border,
                                    0,                     2,
                                    NULL,                  NULL};
static const gm_tsne_ops cpu_tsne = {gm_cpu_tsne_conditional, gm_tsne_affinities_host,
                                     gm_tsne_pca_cpu,
                                     gm_tsne_optimize_cpu, gm_tsne_gradient_cpu,
                                     gm_tsne_exact_max_n_cpu, gm_tsne_place_cpu,
                                     NULL, NULL};
static const gm_gmm_backend cpu_gmm = {gm_gmm_cpu_open, &gm_gmm_cpu_ops};

const gm_backend gm_cpu_backend = {
    GPUML_BACKEND_CPU, "cpu", NULL, 0, cpu_probe, NULL, &cpu_neighbours, &cpu_dpc, &cpu_tsne, &cpu_gmm};
