// The pieces the t-SNE drivers on the GPU share (kernels/tsne.cu, kernels/tsne_pca.cu):
// block sizes, cuFFT/cuSOLVER status checks, and reductions in a fixed order.
#ifndef GPUML_TSNE_COMMON_CUH
#define GPUML_TSNE_COMMON_CUH
#include <cub/cub.cuh>
#include <cufft.h>
#include <cusolverDn.h>
#include "cuda_common.cuh"
#include "points.cuh"
#include "gpuml_cuda.h"
#include "tsne.h"

namespace gm {

// P built on the device to stay there (gm_csr.resident): the optimiser's layout, rows by
// 64-bit offsets, 32-bit columns (n < 2^31), values in fp64; in held blocks of the pool.
struct DeviceCsr {
  int device = 0;  // where it lives
  int64_t n = 0, nnz = 0;
  int64_t *row = nullptr;  // n + 1
  int32_t *col = nullptr;  // nnz
  double *val = nullptr;   // nnz
  HeldBlock row_block, col_block, val_block;
};

namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 256;  // fixed, so that sums do not depend on the device
constexpr int kExactRows = 256;     // rows per block of the exact repulsion
constexpr int kExactTargetBlocks = 1024;
constexpr int kMaxFftSizes = 12;
constexpr int64_t kSpreadBlocks = 1024;  // the spreading's blocks at least (boxes in parts)
// The largest FFT size per dims (1, 2, 3) on the GPU: the CPU's caps but for 3-D, where
// 512 keeps boxes of width <= 1 up to a spread of 85 (the CPU stops at 128, 21 boxes).
constexpr int kFftMaxSize[3] = {1 << 16, 1 << 11, 1 << 9};
constexpr int64_t kColumnChunk = 1 << 24;  // P's columns per upload (of 64-bit indices)

// ---------------------------------------------------------------------------------------
// Library handles owned next to the Context (declared after it, so destroyed before it).

struct FftPlans {
  int size[kMaxFftSizes] = {};
  cufftHandle grids[kMaxFftSizes] = {}, kernel[kMaxFftSizes] = {};
  int count = 0;
  void clear() {
    for (int i = 0; i < count; i++) {
      cufftDestroy(grids[i]);
      cufftDestroy(kernel[i]);
    }
    count = 0;
  }
  ~FftPlans() { clear(); }
};

gpuml_status check_fft(Context &ctx, cufftResult r, const char *what) {
  if (r == CUFFT_SUCCESS) return GPUML_OK;
  cudaGetLastError();
  if (r == CUFFT_ALLOC_FAILED)
    return gm_fail(GPUML_ERR_NOMEM, ctx.id(), "cuFFT error in %s: out of GPU memory", what);
  return gm_fail(GPUML_ERR_CUDA, ctx.id(), "cuFFT error %d in %s", (int)r, what);
}

gpuml_status check_solver(Context &ctx, cusolverStatus_t s, const char *what) {
  if (s == CUSOLVER_STATUS_SUCCESS) return GPUML_OK;
  cudaGetLastError();
  if (s == CUSOLVER_STATUS_ALLOC_FAILED)
    return gm_fail(GPUML_ERR_NOMEM, ctx.id(), "cuSOLVER error in %s: out of GPU memory", what);
  return gm_fail(GPUML_ERR_CUDA, ctx.id(), "cuSOLVER error %d in %s", (int)s, what);
}

// ---------------------------------------------------------------------------------------
// Reductions in a fixed order: each of kReduceBlocks blocks sums a fixed strided subset,
// then one block sums the partials with the same tree.

enum ReduceOp { kSum, kMin, kMax };

template <int OP>
__device__ __forceinline__ double combine(double a, double b) {
  return OP == kSum ? a + b : (OP == kMin ? fmin(a, b) : fmax(a, b));
}

template <int OP>
__device__ double block_tree(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) sh[threadIdx.x] = combine<OP>(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  return sh[0];
}

// Set s (blockIdx.y) is src[s * stride .. s * stride + count).
template <int OP>
__global__ void reduce_partial_kernel(const double *__restrict__ src, int64_t count,
                                      int64_t stride, double init, double *__restrict__ partial) {
  __shared__ double sh[kThreads];
  const double *v = src + (int64_t)blockIdx.y * stride;
  double acc = init;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < count;
       i += (int64_t)kReduceBlocks * kThreads)
    acc = combine<OP>(acc, v[i]);
  double r = block_tree<OP>(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.y * kReduceBlocks + blockIdx.x] = r;
}

template <int OP>
__global__ void reduce_final_kernel(const double *__restrict__ partial, double subtract,
                                    double *__restrict__ out) {
  __shared__ double sh[kThreads];
  double r = block_tree<OP>(partial[blockIdx.x * kReduceBlocks + threadIdx.x], sh);
  if (threadIdx.x == 0) out[blockIdx.x] = r - subtract;
}

static_assert(kReduceBlocks == kThreads, "the final reduction takes one partial per thread");


}  // namespace
}  // namespace gm

#endif
