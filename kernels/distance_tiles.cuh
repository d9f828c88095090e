// Squared distance tiles on the device, shared by dist.cu and knn.cu:
//  - the direct form for d < 16 (a 32 x 32 tile per block, both point blocks in shared
//    memory), exact in fp64 (same sums as the CPU);
//  - the GEMM form: cuBLAS gives -2 a.b for a block of points A (rows) against a block B
//    (columns); gemm_value() adds the norms, applies the cancellation guard and clamps.
// Tiles are column-major: S[a + b * lds] is the pair (A[a], B[b]).
#ifndef GPUML_DISTANCE_TILES_CUH
#define GPUML_DISTANCE_TILES_CUH

#include <cublasLt.h>
#include "points.cuh"

namespace gm {
namespace {

constexpr int kDirectMaxDim = 16;  // the direct tile keeps d < 16 values per point

// Direct tile for d < 16. Differences are taken in the input precision and then rounded
// to T, so that fp32 keeps the relative accuracy of close pairs of double inputs. When
// `exclude` is set, the pair with a_first + a == b_first + b
// (a point and itself, in a self-search) gets +infinity.
template <typename T, typename In>
__global__ void direct_tile_kernel(const In *__restrict__ xa, int64_t an,
                                   const In *__restrict__ xb, int64_t bn, int d,
                                   T *__restrict__ S, int64_t lds, int exclude,
                                   int64_t a_first, int64_t b_first) {
  __shared__ In sa[kDirectMaxDim][32];
  __shared__ In sb[kDirectMaxDim][32];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
  const int64_t a0 = (int64_t)blockIdx.x * 32;
  for (int64_t b0 = (int64_t)blockIdx.y * 32; b0 < bn; b0 += (int64_t)gridDim.y * 32) {
    for (int e = tid; e < 32 * d; e += 256) {
      int i = e / d, t = e - i * d;
      sa[t][i] = a0 + i < an ? xa[(a0 + i) * d + t] : (In)0;
      sb[t][i] = b0 + i < bn ? xb[(b0 + i) * d + t] : (In)0;
    }
    __syncthreads();
    const int64_t a = a0 + tx;
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int bl = ty + 8 * u;
      const int64_t b = b0 + bl;
      if (a < an && b < bn) {
        T s = 0;
        for (int t = 0; t < d; t++) s = add_square(s, (T)(sa[t][tx] - sb[t][bl]));
        if (exclude && a_first + a == b_first + b) s = infinity_of<T>();
        S[a + b * lds] = s;
      }
    }
    __syncthreads();
  }
}

template <typename T, typename In>
gpuml_status direct_tile(Context &ctx, const In *xa, int64_t an, const In *xb, int64_t bn,
                         int64_t d, T *S, int64_t lds, int exclude, int64_t a_first,
                         int64_t b_first) {
  if (d >= kDirectMaxDim)
    return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: direct tile with d = %lld",
                   (long long)d);
  int64_t gy = (bn + 31) / 32;
  dim3 grid(grid_1d(an, 32), (unsigned)(gy < 65535 ? gy : 65535)), block(32, 8);
  direct_tile_kernel<T, In><<<grid, block, 0, ctx.stream()>>>(xa, an, xb, bn, (int)d, S, lds,
                                                               exclude, a_first, b_first);
  return ctx.launched("direct distance tile");
}

// A GEMM tile: G[a + b * ldg] = -2 * pa[a] . pb[b] for a < an, b < bn.
template <typename T>
gpuml_status gemm_tile(Context &ctx, const T *pa, int64_t an, const T *pb, int64_t bn,
                       int64_t d, T *G, int64_t ldg);

template <>
gpuml_status gemm_tile<float>(Context &ctx, const float *pa, int64_t an, const float *pb,
                              int64_t bn, int64_t d, float *G, int64_t ldg) {
  const float alpha = -2.0f, beta = 0.0f;
  return ctx.check_blas(cublasSgemm(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, (int)an, (int)bn,
                                    (int)d, &alpha, pa, (int)d, pb, (int)d, &beta, G,
                                    (int)ldg),
                        "cublasSgemm");
}

template <>
gpuml_status gemm_tile<double>(Context &ctx, const double *pa, int64_t an, const double *pb,
                               int64_t bn, int64_t d, double *G, int64_t ldg) {
  const double alpha = -2.0, beta = 0.0;
  return ctx.check_blas(cublasDgemm(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, (int)an, (int)bn,
                                    (int)d, &alpha, pa, (int)d, pb, (int)d, &beta, G,
                                    (int)ldg),
                        "cublasDgemm");
}

// The TF32 GEMM tiles of the split layout (points.cuh, `split`): reference pa[a] and
// query pb[b] in the [hi | hi | lo | hi] layout of blocks of w = split_block(d) values.
// The operands are TF32 values already, so the tensor cores' conversion is exact and the
// accumulation is in fp32.
//  - split: G[a + b * ldg] = -2 (hi.hi + hi.lo + lo.hi), one GEMM of depth 3w: queries
//    use their first 3w values, references their last 3w (the padding adds exact zeros);
//  - plain: G[a + b * ldg] = -2 hi.hi, depth w over the first block of each point, a
//    third of the split GEMM's work. Its values are only TF32-accurate (10-bit
//    significands): the certified candidate pass of knn.cu uses it, with the bound
//    widened by the inputs' rounding (certify_kernel).
inline gpuml_status gemm_tile_tf32(Context &ctx, bool plain, const float *pa, int64_t an,
                                   const float *pb, int64_t bn, int64_t d, float *G,
                                   int64_t ldg) {
  const float alpha = -2.0f, beta = 0.0f;
  const int64_t w = split_block(d);
  const int ld = (int)(4 * w);
  const int64_t depth = plain ? w : 3 * w;
  const float *ref = plain ? pa : pa + w;
  return ctx.check_blas(
      cublasGemmEx(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, (int)an, (int)bn, (int)depth, &alpha,
                   ref, CUDA_R_32F, ld, pb, CUDA_R_32F, ld, &beta, G, CUDA_R_32F, (int)ldg,
                   CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
      plain ? "cublasGemmEx (plain TF32)" : "cublasGemmEx (split TF32)");
}

// The half tile: G[a + b * ldg] = -2 hi.hi from the fp16 operands (points.cuh,
// half_operands), an fp16 GEMM accumulating in fp32 (cuBLAS's fp16 tensor-core rate is
// about 1.5x its TF32 rate on an H100). scale (device, 2 floats): alpha = -2 2^-(s_a + s_b),
// which undoes the operands' power-of-2 scales exactly, and beta = 0; device pointers,
// because the scales are found on the device.
inline gpuml_status gemm_tile_half(Context &ctx, const __half *pa, int64_t an, const __half *pb,
                                   int64_t bn, int64_t d, const float *scale, float *G,
                                   int64_t ldg) {
  const int ld = (int)half_width(d);
  cublasHandle_t h = ctx.blas();
  GM_TRY(ctx.check_blas(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE),
                        "cublasSetPointerMode"));
  const cublasStatus_t st =
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)an, (int)bn, ld, scale, pa, CUDA_R_16F, ld,
                   pb, CUDA_R_16F, ld, scale + 1, G, CUDA_R_32F, (int)ldg, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  const cublasStatus_t back = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
  GM_TRY(ctx.check_blas(st, "cublasGemmEx (fp16)"));
  return ctx.check_blas(back, "cublasSetPointerMode");
}

// The half tiles in fp16 (knn.cu): G[a + b * ldg] = fl16(scale[0] h_a . h_b), the same
// fp16 GEMM accumulating in fp32, its result rounded once to fp16 (half the tile's
// bytes to write and to read). Through cuBLASLt, so that the algorithm can be held to
// one rounding: a split of the sum may only be reduced in fp32 (reduction scheme NONE
// or COMPUTE_TYPE; INPLACE and OUTPUT_TYPE would add its parts in fp16). scale (device):
// alpha, beta (half_scale_kernel). The algorithm is chosen for the operands' actual
// alignments (cuBLASLt assumes 256 bytes unless told); the descriptors and the algorithm
// of each tile shape and alignment are kept for the search's later tiles.
class HalfTileGemm {
 public:
  HalfTileGemm() = default;
  HalfTileGemm(const HalfTileGemm &) = delete;
  HalfTileGemm &operator=(const HalfTileGemm &) = delete;
  ~HalfTileGemm() {
    forget_shapes();
    if (op_) cublasLtMatmulDescDestroy(op_);
  }

  // workspace: ws_bytes of device memory for the algorithms that need it.
  gpuml_status run(Context &ctx, const __half *pa, int64_t an, const __half *pb, int64_t bn,
                   int64_t d, const float *scale, __half *G, int64_t ldg, void *workspace,
                   size_t ws_bytes) {
    cublasLtHandle_t lt = nullptr;
    GM_TRY(ctx.blas_lt(&lt));
    const int64_t hw = half_width(d);
    if (!op_) {
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
      GM_TRY(check(ctx, cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                   "cublasLtMatmulDescCreate"));
      GM_TRY(check(ctx, cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                   "cublasLtMatmulDescSetAttribute"));
      GM_TRY(check(ctx, cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                   "cublasLtMatmulDescSetAttribute"));
      GM_TRY(check(ctx, cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm),
                   "cublasLtMatmulDescSetAttribute"));
    }
    const uint32_t align = alignment(pa) | (alignment(pb) << 9) | (alignment(G) << 18);
    Shape *sh = nullptr;
    for (int i = 0; i < used_ && !sh; i++)
      if (shapes_[i].an == an && shapes_[i].bn == bn && shapes_[i].hw == hw &&
          shapes_[i].ldg == ldg && shapes_[i].align == align)
        sh = &shapes_[i];
    if (!sh) {
      if (used_ == kShapes) forget_shapes();  // (a search has a few shapes)
      sh = &shapes_[used_];
      *sh = Shape{an, bn, hw, ldg, align, nullptr, nullptr, nullptr, {}};
      GM_TRY(check(ctx, cublasLtMatrixLayoutCreate(&sh->a, CUDA_R_16F, hw, an, hw),
                   "cublasLtMatrixLayoutCreate"));
      used_++;  // (destroyed from here on)
      GM_TRY(check(ctx, cublasLtMatrixLayoutCreate(&sh->b, CUDA_R_16F, hw, bn, hw),
                   "cublasLtMatrixLayoutCreate"));
      GM_TRY(check(ctx, cublasLtMatrixLayoutCreate(&sh->c, CUDA_R_16F, an, bn, ldg),
                   "cublasLtMatrixLayoutCreate"));
      GM_TRY(choose(ctx, lt, sh, ws_bytes));
    }
    return check(ctx,
                 cublasLtMatmul(lt, op_, scale, pa, sh->a, pb, sh->b, scale + 1, G, sh->c, G,
                                sh->c, &sh->algo, workspace, ws_bytes, ctx.stream()),
                 "cublasLtMatmul (fp16 tile)");
  }

 private:
  struct Shape {
    int64_t an, bn, hw, ldg;
    uint32_t align;  // the three alignments, 9 bits each
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
  };
  static constexpr int kShapes = 8;
  cublasLtMatmulDesc_t op_ = nullptr;
  Shape shapes_[kShapes] = {};
  int used_ = 0;

  void forget_shapes() {
    for (int i = 0; i < used_; i++) {
      if (shapes_[i].a) cublasLtMatrixLayoutDestroy(shapes_[i].a);
      if (shapes_[i].b) cublasLtMatrixLayoutDestroy(shapes_[i].b);
      if (shapes_[i].c) cublasLtMatrixLayoutDestroy(shapes_[i].c);
    }
    used_ = 0;
  }

  static gpuml_status check(Context &ctx, cublasStatus_t s, const char *what) {
    return ctx.check_blas(s, what);
  }

  // The largest power of 2 up to 256 that divides the address.
  static uint32_t alignment(const void *p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p) | 256;
    return (uint32_t)(a & (~a + 1));
  }

  // cuBLASLt's first algorithm among those that reduce in fp32, checked again.
  gpuml_status choose(Context &ctx, cublasLtHandle_t lt, Shape *sh, size_t ws_bytes) {
    cublasLtMatmulPreference_t pref = nullptr;
    GM_TRY(check(ctx, cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    const uint32_t al_a = sh->align & 511, al_b = (sh->align >> 9) & 511,
                   al_c = sh->align >> 18;
    const struct {
      cublasLtMatmulPreferenceAttributes_t attr;
      const void *value;
      size_t size;
    } settings[] = {{CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes},
                    {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c}};
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    for (const auto &set : settings)
      if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, set.attr, set.value, set.size);
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulAlgoGetHeuristic(lt, op_, sh->a, sh->b, sh->c, sh->c, pref, 1, &result,
                                         &found);
    cublasLtMatmulPreferenceDestroy(pref);
    GM_TRY(check(ctx, s, "cublasLtMatmulAlgoGetHeuristic (fp16 tile)"));
    if (found < 1)
      return gm_fail(GPUML_ERR_CUDA, ctx.id(), "cuBLASLt has no fp16 GEMM for a %lld x %lld tile",
                     (long long)sh->an, (long long)sh->bn);
    int32_t splits = 1;
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    size_t written = 0;
    GM_TRY(check(ctx, cublasLtMatmulAlgoConfigGetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                           &splits, sizeof splits, &written),
                 "cublasLtMatmulAlgoConfigGetAttribute"));
    GM_TRY(check(ctx, cublasLtMatmulAlgoConfigGetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                           &scheme, sizeof scheme, &written),
                 "cublasLtMatmulAlgoConfigGetAttribute"));
    if (splits > 1 && scheme != CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)
      return gm_fail(GPUML_ERR_CUDA, ctx.id(),
                     "internal: cuBLASLt chose a split fp16 GEMM reduced in fp16 (scheme %u)",
                     (unsigned)scheme);
    sh->algo = result.algo;
    return GPUML_OK;
  }
};

// Dispatches on the layout of the point sets (split exists for fp32 only); plain: the
// split layout's plain TF32 product (gemm_tile_tf32).
template <typename T>
gpuml_status gemm_tile_any(Context &ctx, bool split, bool plain, const T *pa, int64_t an,
                           const T *pb, int64_t bn, int64_t d, T *G, int64_t ldg) {
  if constexpr (sizeof(T) == 4) {
    if (split) return gemm_tile_tf32(ctx, plain, pa, an, pb, bn, d, G, ldg);
  }
  if (split) return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: split layout in fp64");
  return gemm_tile<T>(ctx, pa, an, pb, bn, d, G, ldg);
}

}  // namespace
}  // namespace gm

#endif
