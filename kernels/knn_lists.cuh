// The kNN search of the data against itself with its lists left on the device, for a
// later stage on the same device (t-SNE's P in kernels/tsne_pca.cu): the lists of
// gm_cuda_knn (kernels/knn.cu), the same answer, in blocks the caller holds.
#ifndef GPUML_KNN_LISTS_CUH
#define GPUML_KNN_LISTS_CUH

#include <stdint.h>
#include "context.cuh"

namespace gm {

// index (int64_t) and dist (double) receive the n x k lists, column-major, as
// gm_cuda_knn gives them for double data, on the first device of opt's shard plan
// (gm_shard_plan_make). With several shards (devices, or GPUML_SHARDS) each searches a
// block of the queries against all the points on its device, and the blocks are
// gathered on the first device by peer copies: the same lists. *fits = false, with
// nothing held, when the whole lists do not fit beside a search in the memory budget
// (the caller then searches with the lists copied out tile by tile).
gpuml_status knn_self_lists(const double *data, int64_t n, int64_t d, int64_t k,
                            const gpuml_options *opt, HeldBlock &index, HeldBlock &dist,
                            bool *fits);

}  // namespace gm

#endif
