// The CUDA backend's table (core/backend.h); core/backend.c registers it when configure
// found CUDA.
#include <cuda_runtime.h>
#include "gpuml_cuda.h"

// The device code of this build, as configure chose it (nvcc -gencode list).
#ifndef GPUML_CUDA_ARCHS
#define GPUML_CUDA_ARCHS "unknown"
#endif

static const gm_neighbour_ops cuda_neighbours = {gm_cuda_dist, gm_cuda_knn,
                                                  gm_cuda_knn_resident_build,
                                                  gm_cuda_knn_resident_search,
                                                  gm_cuda_knn_resident_free, 1};
// The cutoff density's own cells aim at 20 points in 3-d on the GPU: its count's rows got
// cheaper (the rows' table) and its pairs dearer by comparison, and at 2.4 x 10^7 x 3 rho
// took 1,572 ms at 20 and 24 against 1,620-1,624 at 16 and 1,697 at 12 (bench/RESULTS.md
// round 21); elsewhere gm_dpc_grid_per_cell's.
static double cuda_rho_per_cell(int64_t d) { return d == 3 ? 20 : 0; }

static const gm_dpc_ops cuda_dpc = {gm_cuda_dpc_density,    gm_cuda_dpc_release_kept,
                                     gm_cuda_dpc_part_open,
                                     gm_cuda_dpc_part_bounds, gm_cuda_dpc_part_rho,
                                     gm_cuda_dpc_part_counts_on, gm_cuda_dpc_part_counts,
                                     gm_cuda_dpc_part_delta, gm_cuda_dpc_part_order,
                                     gm_cuda_dpc_part_close,
                                     gm_cuda_dpc_border,     1,
                                     4,                      gm_cuda_dpc_assign,
                                     cuda_rho_per_cell};
static const gm_tsne_ops cuda_tsne = {gm_cuda_tsne_conditional, gm_cuda_tsne_affinities,
                                      gm_cuda_tsne_pca,
                                      gm_cuda_tsne_optimize, gm_cuda_tsne_gradient,
                                      gm_cuda_tsne_exact_max_n, gm_cuda_tsne_place,
                                      gm_cuda_tsne_fit_affinities, gm_cuda_tsne_resident_to_host};

extern "C" const gm_backend gm_cuda_backend = {GPUML_BACKEND_CUDA, "cuda", GPUML_CUDA_ARCHS,
                                               CUDART_VERSION, gm_cuda_probe, gm_cuda_release,
                                               &cuda_neighbours, &cuda_dpc, &cuda_tsne,
                                               &gm_cuda_gmm};
