// The CUDA engine of the Gaussian mixtures (core/gmm.h): the data, the
// responsibilities and the parameters stay on the device between the steps of EM, so
// that an iteration returns to the host only the component sizes, the Cholesky status
// of each component and the log-likelihood. Everything is fp64.
//
//  - The data are centred on their column means once (in place on the device), which
//    keeps the products below free of the offset's cancellation.
//  - Full covariances with d <= GM_DMMA_MAX_D (GPUML_GMM_DMMA, on by default; =0 off), on
//    sm_80 code: the same single read of the rows per pass, with the products on the
//    fp64 tensor cores (estep_dmma_kernel, scatter_dmma_kernel: mma m8n8k4, or m16n8k8
//    where the code is sm_90's; the layouts in core/gmm_dmma_shared.h). Else:
//  - Full covariances with d <= kFusedMaxD and GPUML_GMM_FUSED=1 (a knob, off by default):
//    fused kernels, E-step and scatter, that read the rows once per pass and write no
//    n x dK array (estep_fused_kernel, scatter_fused_kernel). They lose to the GEMM path
//    below on an H100 for every d from 10 to 64 (200,000 x d, G = 16: 1.53 against 1.25
//    ms per iteration at d = 10, 5.88 against 2.92 at d = 50; bench/RESULTS.md): their
//    FMA pipes do the work the fp64 tensor cores do in the GEMMs. Otherwise, the default:
//  - E-step, full covariances: Y = X [U_1 ... U_K] for a tile of rows in one cuBLAS
//    GEMM (U_k the inverse upper Cholesky factor), then one kernel forms
//    |y_k - mu_k U_k|^2 (a thread per row and component), the log-sum-exp and the
//    responsibilities (a thread per row). Diagonal and
//    spherical covariances: one kernel, no GEMM.
//  - M-step: component sizes and sums X'Z by fixed row chunks (batched GEMM) reduced in
//    chunk order; the scatter of each component about its new mean from
//    W = sqrt(z) (x - mu), in chunks of rows (one batched GEMM over components and
//    chunks, so that a d x d product still spreads over the SMs), reduced in order.
//  - Cholesky: one batched cuSOLVER potrf over the components (its info, one per
//    component, is the collapse test), then U = R^-1 by one batched triangular solve
//    against the identity.
// Every sum has a fixed order (no atomics), so a fit is reproducible bit for bit on
// one device. The data stay resident when they fit the memory budget; otherwise each
// pass uploads them tile by tile. Internal knobs: GPUML_CUDA_TILE=N forces tiles of at
// most N rows and the data not resident; GPUML_GMM_FUSED=1 the fused kernels;
// GPUML_GMM_DMMA=1 the tensor-core kernels (=0 never).
#include <cusolverDn.h>
#include <string.h>
#include <new>
#include "cuda_common.cuh"
#include "gmm.h"
#include "gmm_dmma_shared.h"
#include "gpuml_cuda.h"

namespace gm {
namespace {

constexpr int kThreads = 256;
constexpr int kParts = 128;  // first-stage blocks of a column sum (fixed, for determinism)
constexpr double kLog2Pi = 1.8378770664093454836;
constexpr size_t kTileBytes = (size_t)256 << 20;  // the E-step's Y tile, the M-step's W
constexpr int64_t kMinTile = 256;
// Batched-GEMM blocks wanted in the M-step's scatter: at most two per SM of an H100 or
// H200 (132 SMs), since a few blocks past a whole wave would double the GEMM's time.
constexpr int64_t kScatterBlocks = 264;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Deterministic sum of a block's values (blockDim.x == kThreads, or kParts for the
// second stage; both powers of two).
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  double r = s[0];
  __syncthreads();
  return r;
}

// part[b + c kParts] = the sum of rows [b per, (b + 1) per) of column c of A.
__global__ void column_partial_kernel(const double *__restrict__ A, int64_t lda, int64_t rows,
                                      double *__restrict__ part) {
  const int64_t c = blockIdx.y, per = (rows + kParts - 1) / kParts;
  const int64_t start = (int64_t)blockIdx.x * per;
  const int64_t end = start + per < rows ? start + per : rows;
  double s = 0;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) s += A[i + c * lda];
  s = block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x + c * kParts] = s;
}

__global__ void column_final_kernel(const double *__restrict__ part, double *__restrict__ out) {
  const double s = block_sum(part[threadIdx.x + (int64_t)blockIdx.x * kParts]);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// x[i + j ld] -= centre[j] for rows < rows.
__global__ void centre_kernel(double *__restrict__ x, int64_t ld, int64_t rows, int64_t d,
                              const double *__restrict__ centre) {
  const int64_t count = rows * d;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e % rows, j = e / rows;
    x[i + j * ld] -= centre[j];
  }
}

// means[j + k d] -= centre[j]: the device holds the means in centred coordinates.
__global__ void centre_means_kernel(double *__restrict__ means, int64_t d, int64_t count,
                                    const double *__restrict__ centre) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < d * count;
       e += (int64_t)gridDim.x * blockDim.x)
    means[e] -= centre[e % d];
}

// c[k] = log w_k + log det U_k - d/2 log(2 pi); full: m[:, k] = mu_k' U_k.
__global__ void prepare_estep_kernel(const double *__restrict__ w, const double *__restrict__ mu,
                                     const double *__restrict__ U,
                                     const double *__restrict__ logdet_u, int64_t d, int64_t K,
                                     int full, double *__restrict__ m, double *__restrict__ c) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < d * K;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = e % d, k = e / d;
    if (j == 0) c[k] = log(w[k]) + logdet_u[k] - 0.5 * (double)d * kLog2Pi;
    if (full) {
      const double *Uk = U + k * d * d, *muk = mu + k * d;
      double s = 0;
      for (int64_t a = 0; a <= j; a++) s += muk[a] * Uk[a + j * d];
      m[e] = s;
    }
  }
}

// Turns the log-probabilities z[i + k ldz] of one row into responsibilities, as the
// CPU does: the largest first, terms below exp(GM_GMM_LOG_FLUSH) of it set to 0.
__device__ __forceinline__ void normalise_row(double *z, int64_t ldz, int64_t K, double top,
                                              double *logdens) {
  double sum = 0;
  for (int64_t k = 0; k < K; k++) {
    const double t = z[k * ldz] - top;
    const double v = t < GM_GMM_LOG_FLUSH ? 0.0 : exp(t);
    z[k * ldz] = v;
    sum += v;
  }
  const double inv = 1 / sum;
  for (int64_t k = 0; k < K; k++) z[k * ldz] *= inv;
  *logdens = top + log(sum);
}

// Full covariances: Y (rn x dK, ld rn) = X U for the tile. A block takes kEstepRows
// rows; its warps share out the components (lane = row, so that the loads of Y are
// coalesced), which keeps enough loads in flight to stream Y at the memory's rate (one
// thread per row left most of the GPU idle). The log-probabilities go to z; after the
// barrier the first warp turns its rows into responsibilities.
constexpr int kEstepRows = 32;
__global__ void estep_full_kernel(const double *__restrict__ Y, int64_t rn, int64_t d, int64_t K,
                                  const double *__restrict__ m, const double *__restrict__ c,
                                  double *__restrict__ z, int64_t ldz,
                                  double *__restrict__ logdens) {
  const int64_t i = (int64_t)blockIdx.x * kEstepRows + threadIdx.x;
  const int64_t warps = blockDim.y;
  if (i < rn)
    for (int64_t k = threadIdx.y; k < K; k += warps) {
      const double *y = Y + i + k * d * rn, *mk = m + k * d;
      double s = 0;
      for (int64_t j = 0; j < d; j++) {
        const double t = y[j * rn] - mk[j];
        s += t * t;
      }
      z[i + k * ldz] = c[k] - 0.5 * s;
    }
  __syncthreads();  // z of the block's rows, written by all its warps, is visible now
  if (threadIdx.y == 0 && i < rn) {
    double top = -HUGE_VAL;
    for (int64_t k = 0; k < K; k++) {
      const double lp = z[i + k * ldz];
      top = lp > top ? lp : top;
    }
    normalise_row(z + i, ldz, K, top, logdens + i);
  }
}

// The fused full-covariance pass (GPUML_GMM_FUSED=1; off by default) for d <= kFusedMaxD and
// K <= 65535: the E-step applies each triangular U_k to rows staged in shared memory and
// the M-step's scatter accumulates sqrt(z)(x - mu) outer products in registers, so that
// neither writes the n x dK array of the GEMM path (Y = X U, W). Larger d take the GEMM
// path, whose shared-memory tile would not fit. A development knob, to compare the two.
constexpr int64_t kFusedMaxD = 64;
constexpr int kFusedRows = 64;     // E-step rows per block
constexpr int kFusedThreads = 256; // E-step threads: 16 row tiles x 16 column tiles of 4 x 4
constexpr int64_t kFusedChunk = 2048;  // M-step rows per partial scatter
constexpr int kScatterStage = 32;  // M-step rows staged in shared memory at a time
constexpr int kScatterThreads = 192;  // at least the 136 tiles of d = kFusedMaxD
static_assert((kFusedMaxD / 4) * (kFusedMaxD / 4 + 1) / 2 <= kScatterThreads &&
                  kScatterStage <= kScatterThreads,
              "a scatter block has a thread per tile and per staged row");
static_assert(kFusedRows == 4 * 16 && kFusedMaxD == 4 * 16 && kFusedThreads == 256,
              "an E-step thread forms one 4 x 4 tile of Y = X U_k");

// A block takes kFusedRows rows of X (ld ldx) into shared memory and, component by
// component, forms Y = X U_k in 4 x 4 register tiles: thread t takes rows 4 (t % 16) + p
// and columns 4 (t / 16) + r, so that a warp holds two neighbouring column tiles and the
// triangle of U_k (a <= j only; its lower part is never read) costs a warp about what it
// costs each of its threads. Each thread adds up its rows' |y_j - m_kj|^2 over its
// columns; the 16 column tiles' sums are then added in order for each row. After the
// last component the first kFusedRows threads normalise their rows.
__global__ void __launch_bounds__(kFusedThreads)
    estep_fused_kernel(const double *__restrict__ X, int64_t ldx, int64_t rn, int64_t d,
                       int64_t K, const double *__restrict__ U, const double *__restrict__ m,
                       const double *__restrict__ c, double *__restrict__ z, int64_t ldz,
                       double *__restrict__ logdens) {
  __shared__ __align__(16) double xs[kFusedMaxD * kFusedRows];  // xs[a kFusedRows + l]
  __shared__ double part[16 * kFusedRows];  // part[tc kFusedRows + l]: a column tile's sum
  const int tr = (int)threadIdx.x % 16, tc = (int)threadIdx.x / 16;
  const int64_t r0 = (int64_t)blockIdx.x * kFusedRows;
  for (int64_t e = threadIdx.x; e < d * kFusedRows; e += kFusedThreads) {
    const int64_t a = e / kFusedRows, i = r0 + e % kFusedRows;
    xs[e] = i < rn ? X[i + a * ldx] : 0.0;
  }
  const int64_t j0 = 4 * (int64_t)tc;
  const int64_t jn = j0 >= d ? 0 : (d - j0 < 4 ? d - j0 : 4);  // this thread's columns
  const int64_t tiles = (d + 3) / 4;
  for (int64_t k = 0; k < K; k++) {
    __syncthreads();  // xs is loaded; the previous component's part has been read
    const double *Uk = U + k * d * d, *mk = m + k * d;
    double sums[4] = {};
    if (jn > 0) {
      // Columns past d read column d - 1 (in bounds) and are dropped below.
      const double *u[4];
#pragma unroll
      for (int r = 0; r < 4; r++) u[r] = Uk + (r < jn ? j0 + r : d - 1) * d;
      double y[4][4] = {};
      for (int64_t a = 0; a < j0 + jn; a++) {
        const double2 x01 = *reinterpret_cast<const double2 *>(xs + a * kFusedRows + 4 * tr);
        const double2 x23 = *reinterpret_cast<const double2 *>(xs + a * kFusedRows + 4 * tr + 2);
        const double xv[4] = {x01.x, x01.y, x23.x, x23.y};
#pragma unroll
        for (int r = 0; r < 4; r++) {
          if (a > j0 + r) continue;  // the triangle of the diagonal tile
          const double uv = __ldg(u[r] + a);
#pragma unroll
          for (int p = 0; p < 4; p++) y[p][r] += xv[p] * uv;
        }
      }
#pragma unroll
      for (int r = 0; r < 4; r++)
        if (r < jn) {
          const double mv = mk[j0 + r];
#pragma unroll
          for (int p = 0; p < 4; p++) {
            const double v = y[p][r] - mv;
            sums[p] += v * v;
          }
        }
    }
#pragma unroll
    for (int p = 0; p < 4; p++) part[tc * kFusedRows + 4 * tr + p] = sums[p];
    __syncthreads();
    if (threadIdx.x < kFusedRows) {
      const int64_t i = r0 + threadIdx.x;
      double s = 0;
      for (int64_t t = 0; t < tiles; t++) s += part[t * kFusedRows + threadIdx.x];
      if (i < rn) z[i + k * ldz] = c[k] - 0.5 * s;
    }
  }
  // Each row's z was written by the thread that normalises it: no barrier needed.
  const int64_t i = r0 + threadIdx.x;
  if (threadIdx.x < kFusedRows && i < rn) {
    double top = -HUGE_VAL;
    for (int64_t k = 0; k < K; k++) {
      const double lp = z[i + k * ldz];
      top = lp > top ? lp : top;
    }
    normalise_row(z + i, ldz, K, top, logdens + i);
  }
}

// Maps thread t to the (ta, tb), ta <= tb, 4 x 4 tile of the upper triangle of a
// scatter: t = tb (tb + 1) / 2 + ta.
__host__ __device__ inline void scatter_tile_of(int t, int *ta, int *tb) {
  int b = 0;
  while ((b + 1) * (b + 2) / 2 <= t) b++;
  *tb = b;
  *ta = t - b * (b + 1) / 2;
}

// The fused scatter: block (q, k) adds up w w' over rows [q chunk, (q + 1) chunk) of the
// tile, w = sqrt(z_ik) (x_i - mu_k), staged kScatterStage rows at a time in shared
// memory; a thread keeps one 4 x 4 tile of the upper triangle in registers and writes it
// and its mirror to P[(k parts + q) d d + ...], which sum_chunks_kernel then adds up in
// chunk order (P as the GEMM path leaves it).
__global__ void scatter_fused_kernel(const double *__restrict__ X, int64_t ldx, int64_t rn,
                                     const double *__restrict__ z, int64_t ldz,
                                     const double *__restrict__ mu, int64_t d, int64_t chunk,
                                     int64_t parts, double *__restrict__ P) {
  __shared__ __align__(16) double ws[kScatterStage * kFusedMaxD];  // ws[l kFusedMaxD + a]
  __shared__ double sz[kScatterStage];
  const int64_t q = blockIdx.x, k = blockIdx.y;
  const int tiles = (int)((d + 3) / 4), width = 4 * tiles;
  int ta, tb;
  scatter_tile_of((int)threadIdx.x, &ta, &tb);
  const bool active = tb < tiles;
  double acc[4][4] = {};
  const double *muk = mu + k * d;
  const int64_t i0 = q * chunk, i1 = rn < i0 + chunk ? rn : i0 + chunk;
  for (int64_t s0 = i0; s0 < i1; s0 += kScatterStage) {
    __syncthreads();  // the previous stage has been used
    if (threadIdx.x < kScatterStage) {
      const int64_t i = s0 + threadIdx.x;
      sz[threadIdx.x] = i < i1 ? sqrt(z[i + k * ldz]) : 0.0;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kScatterStage * width; e += blockDim.x) {
      const int l = e % kScatterStage, a = e / kScatterStage;
      const int64_t i = s0 + l;
      ws[l * kFusedMaxD + a] = (i < i1 && a < d) ? sz[l] * (X[i + a * ldx] - muk[a]) : 0.0;
    }
    __syncthreads();
    if (active)
      for (int l = 0; l < kScatterStage; l++) {
        const double2 *w = reinterpret_cast<const double2 *>(ws + l * kFusedMaxD);
        const double2 a01 = w[2 * ta], a23 = w[2 * ta + 1], b01 = w[2 * tb], b23 = w[2 * tb + 1];
        const double wa[4] = {a01.x, a01.y, a23.x, a23.y}, wb[4] = {b01.x, b01.y, b23.x, b23.y};
#pragma unroll
        for (int p = 0; p < 4; p++)
#pragma unroll
          for (int r = 0; r < 4; r++) acc[p][r] += wa[p] * wb[r];
      }
  }
  if (!active) return;
  double *out = P + (k * parts + q) * d * d;
  for (int p = 0; p < 4; p++)
    for (int r = 0; r < 4; r++) {
      const int64_t a = 4 * ta + p, b = 4 * tb + r;
      if (a < d && b < d) {
        out[a + b * d] = acc[p][r];
        out[b + a * d] = acc[p][r];
      }
    }
}

// ---------------------------------------------------------------------------------------
// The tensor-core full-covariance pass (GPUML_GMM_DMMA; core/gmm_dmma_shared.h has the
// layout): the fused kernels' single read of the data per step, with the products on
// the fp64 tensor cores (mma.sync m8n8k4 on sm_80 and later; m16n8k8, four times the work
// an instruction, where the code is built for sm_90 or later) instead of the FMA pipes that
// lost the fused kernels above their race against the GEMM path. Compiled for every
// architecture of the build; below sm_80 the bodies are empty and the host never
// launches them (dmma_supported()).

constexpr int kDmmaThreads = GM_DMMA_WARPS * 32;

// D += A B for one warp's m8n8k4 fp64 fragments (layout: core/gmm_dmma_shared.h).
__device__ __forceinline__ void dmma_m8n8k4(double &d0, double &d1, double a, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d0), "+d"(d1)
               : "d"(a), "d"(b));
#endif
}

// D += A B for one warp's m16n8k8 fp64 fragments (sm_90; layout: core/gmm_dmma_shared.h,
// "wide").
__device__ __forceinline__ void dmma_m16n8k8(double (&d)[4], double a0, double a1, double a2,
                                             double a3, double b0, double b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a0), "d"(a1), "d"(a2), "d"(a3), "d"(b0), "d"(b1));
#endif
}

// The layout the kernels of this device's code use: wide (m16n8k8) where it was built from
// compute_90 or later. The host reads the same from cudaFuncAttributes::ptxVersion.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GM_DMMA_DEVICE_WIDE 1
#define GM_DMMA_ESTEP_THREADS (GM_DMMA_WIDE_ESTEP_WARPS * 32)
#else
#define GM_DMMA_DEVICE_WIDE 0
#define GM_DMMA_ESTEP_THREADS (GM_DMMA_WARPS * 32)
#endif
constexpr int kDmmaWidePtx = 90;
constexpr int kEstepWideThreads = GM_DMMA_WIDE_ESTEP_WARPS * 32;

// Asynchronous copies global -> shared (sm_80) of 8 or 16 bytes: the next component's
// factor, or the next stage of rows, arrives while the current one is multiplied.
template <int kBytes>
__device__ __forceinline__ void copy_async(double *smem, const double *gmem) {
  static_assert(kBytes == 8 || kBytes == 16, "cp.async copies 8 bytes (.ca) or 16 (.cg)");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
  if (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(gmem) : "memory");
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void copy_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(pending) : "memory");
#endif
}

// The E-step's factors for nb column blocks, one component after another
// (gm_dmma_component_doubles(nb) each): U_k's fragments (zero below the diagonal and
// past d), m_k and c_k, as prepare_estep_kernel left them in m and c.
__global__ void pack_dmma_kernel(const double *__restrict__ U, const double *__restrict__ m,
                                 const double *__restrict__ c, int64_t d, int64_t K, int nb,
                                 int wide, double *__restrict__ packed) {
  const int per = gm_dmma_component_doubles(nb);
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < per * K;
       e += (int64_t)gridDim.x * blockDim.x) {
    packed[e] = gm_dmma_packed_value((int)(e % per), e / per, U, m, c, d, nb, wide);
  }
}

// Copies component k's packed factor into shared memory (16-byte pieces: the count of
// doubles is even and every component starts on 16 bytes).
template <int NB>
__device__ __forceinline__ void stage_factor(double *dst, const double *__restrict__ packed,
                                             int64_t k) {
  constexpr int per = gm_dmma_component_doubles(NB);
  const double *src = packed + k * per;
  for (int e = 2 * (int)threadIdx.x; e < per; e += 2 * (int)blockDim.x)
    copy_async<16>(dst + e, src + e);
  copy_async_commit();
}

// Component k's factor ready in factor[k & 1] for every thread, with component k + 1's
// copy started into the other buffer (the double buffering of both E-step variants).
template <int NB>
__device__ __forceinline__ const double *next_factor(double (*factor)[gm_dmma_component_doubles(NB)],
                                                     const double *__restrict__ packed,
                                                     int64_t k, int64_t K) {
  if (k + 1 < K) {
    stage_factor<NB>(factor[(k + 1) & 1], packed, k + 1);
    copy_async_wait<1>();
  } else {
    copy_async_wait<0>();
  }
  __syncthreads();
  return factor[k & 1];
}

// E-step, full covariances, for d <= 8 NB: a block takes GM_DMMA_ESTEP_ROWS rows; each
// warp holds GM_DMMA_ESTEP_TILES tiles of 8 of them as A fragments in registers (read
// once from the data), and for every component multiplies them by the upper triangle of
// 8 x 8 blocks of U_k, staged in shared memory (the next component's copy in flight),
// then forms |y - m_k|^2 per row and z = c_k - |y - m_k|^2 / 2. After the last component
// each warp turns its rows into responsibilities as estep_full_kernel does.
//
// On sm_90 (wide): tiles of 16 rows (GM_DMMA_WIDE_ESTEP_ROWS a block) and m16n8k8, whose
// k-steps of 8 input columns match the 8 x 8 blocks of U_k; the accumulator starts at
// -m_k. Blocks of GM_DMMA_WIDE_ESTEP_WARPS warps (GM_DMMA_WIDE_ESTEP_ROWS rows), two an
// SM: the A fragments alone take 8 GM_DMMA_WIDE_ESTEP_TILES NB registers.
template <int NB>
__global__ void __launch_bounds__(GM_DMMA_ESTEP_THREADS, 2)
    estep_dmma_kernel(const double *__restrict__ X, int64_t ldx, int64_t rn, int64_t d,
                      int64_t K, const double *__restrict__ packed, double *__restrict__ z,
                      int64_t ldz, double *__restrict__ logdens) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kTiles = GM_DMMA_WIDE_ESTEP_TILES;
  constexpr int per = gm_dmma_component_doubles(NB);
  __shared__ __align__(16) double factor[2][per];
  const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
  const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
  const int64_t w0 = (int64_t)blockIdx.x * GM_DMMA_WIDE_ESTEP_ROWS + (int64_t)warp * kTiles * 16;
  stage_factor<NB>(factor[0], packed, 0);
  // The A fragments of k-step s: rows w0 + 16 tile + g (+ 8), columns 8 s + t (+ 4); 0
  // past the rows and columns.
  double xa[kTiles][NB][4];
#pragma unroll
  for (int tile = 0; tile < kTiles; tile++) {
    const int64_t i = w0 + 16 * tile + g;
#pragma unroll
    for (int s = 0; s < NB; s++) {
      const int64_t a = 8 * s + t;
      xa[tile][s][0] = i < rn && a < d ? X[i + a * ldx] : 0.0;
      xa[tile][s][1] = i + 8 < rn && a < d ? X[i + 8 + a * ldx] : 0.0;
      xa[tile][s][2] = i < rn && a + 4 < d ? X[i + (a + 4) * ldx] : 0.0;
      xa[tile][s][3] = i + 8 < rn && a + 4 < d ? X[i + 8 + (a + 4) * ldx] : 0.0;
    }
  }
  for (int64_t k = 0; k < K; k++) {
    const double *f = next_factor<NB>(factor, packed, k, K);
    const double2 *frag = reinterpret_cast<const double2 *>(f);
    double lo[kTiles] = {}, hi[kTiles] = {};  // |y - m_k|^2 over this lane's columns
#pragma unroll
    for (int cb = 0; cb < NB; cb++) {
      // Columns 8 cb + 2 t and + 1; past d both y and m are 0.
      const double m0 = f[gm_dmma_means_at(NB) + 8 * cb + 2 * t];
      const double m1 = f[gm_dmma_means_at(NB) + 8 * cb + 2 * t + 1];
      double y[kTiles][4];
#pragma unroll
      for (int tile = 0; tile < kTiles; tile++) {
        y[tile][0] = -m0;
        y[tile][1] = -m1;
        y[tile][2] = -m0;
        y[tile][3] = -m1;
      }
      // Inputs 0 .. 8 cb + 7 (U_k is upper triangular).
#pragma unroll
      for (int s = 0; s <= cb; s++) {
        const double2 b = frag[32 * gm_dmma_wide_fragment(cb, s) + lane];
#pragma unroll
        for (int tile = 0; tile < kTiles; tile++)
          dmma_m16n8k8(y[tile], xa[tile][s][0], xa[tile][s][1], xa[tile][s][2], xa[tile][s][3],
                       b.x, b.y);
      }
#pragma unroll
      for (int tile = 0; tile < kTiles; tile++) {
        lo[tile] += y[tile][0] * y[tile][0] + y[tile][1] * y[tile][1];
        hi[tile] += y[tile][2] * y[tile][2] + y[tile][3] * y[tile][3];
      }
    }
    const double ck = f[gm_dmma_constant_at(NB)];
#pragma unroll
    for (int tile = 0; tile < kTiles; tile++) {
      // The row's four lanes (t = 0..3) in a fixed order: (0+1)+(2+3) on every lane.
      double sl = lo[tile], sh = hi[tile];
      sl += __shfl_xor_sync(kFullMask, sl, 1);
      sh += __shfl_xor_sync(kFullMask, sh, 1);
      sl += __shfl_xor_sync(kFullMask, sl, 2);
      sh += __shfl_xor_sync(kFullMask, sh, 2);
      const int64_t i = w0 + 16 * tile + g + (t == 1 ? 8 : 0);
      if (t < 2 && i < rn) z[i + k * ldz] = ck - 0.5 * (t == 0 ? sl : sh);
    }
    __syncthreads();  // every thread is done with factor[k & 1]: component k + 2 may come
  }
  __syncwarp();  // the warp's z writes are visible to its lanes
#pragma unroll
  for (int h = 0; h < kTiles * 16; h += 32) {
    const int64_t i = w0 + h + lane;
    if (h + lane < kTiles * 16 && i < rn) {
      double top = -HUGE_VAL;
      for (int64_t k = 0; k < K; k++) {
        const double lp = z[i + k * ldz];
        top = lp > top ? lp : top;
      }
      normalise_row(z + i, ldz, K, top, logdens + i);
    }
  }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kTiles = GM_DMMA_ESTEP_TILES, kSteps = 2 * NB;
  constexpr int per = gm_dmma_component_doubles(NB);
  __shared__ __align__(16) double factor[2][per];
  const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
  const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
  const int64_t w0 = (int64_t)blockIdx.x * GM_DMMA_ESTEP_ROWS + (int64_t)warp * kTiles * 8;
  stage_factor<NB>(factor[0], packed, 0);
  // The A fragments: row w0 + 8 tile + g, columns 4 s + t (0 past the rows and columns).
  double xa[kTiles][kSteps];
#pragma unroll
  for (int tile = 0; tile < kTiles; tile++) {
    const int64_t i = w0 + 8 * tile + g;
#pragma unroll
    for (int s = 0; s < kSteps; s++) {
      const int64_t a = 4 * s + t;
      xa[tile][s] = i < rn && a < d ? X[i + a * ldx] : 0.0;
    }
  }
  for (int64_t k = 0; k < K; k++) {
    const double *f = next_factor<NB>(factor, packed, k, K);
    double sum[kTiles] = {};
#pragma unroll
    for (int cb = 0; cb < NB; cb++) {
      double y[kTiles][2] = {};
      // Inputs 0 .. 8 cb + 7 (U_k is upper triangular). Past d both fragments are 0: at
      // most the last block's last k-step is wasted, not worth a branch.
#pragma unroll
      for (int s = 0; s < 2 * cb + 2; s++) {
        const double b = f[32 * gm_dmma_fragment(cb, s) + lane];
#pragma unroll
        for (int tile = 0; tile < kTiles; tile++) dmma_m8n8k4(y[tile][0], y[tile][1], xa[tile][s], b);
      }
      // Columns 8 cb + 2 t and + 1 of rows g; past d both y and m are 0.
      const double m0 = f[gm_dmma_means_at(NB) + 8 * cb + 2 * t];
      const double m1 = f[gm_dmma_means_at(NB) + 8 * cb + 2 * t + 1];
#pragma unroll
      for (int tile = 0; tile < kTiles; tile++) {
        const double v0 = y[tile][0] - m0, v1 = y[tile][1] - m1;
        sum[tile] += v0 * v0 + v1 * v1;
      }
    }
    const double ck = f[gm_dmma_constant_at(NB)];
#pragma unroll
    for (int tile = 0; tile < kTiles; tile++) {
      // The row's four lanes (t = 0..3) in a fixed order: lane t = 0 has (0+1)+(2+3).
      double s = sum[tile];
      s += __shfl_xor_sync(kFullMask, s, 1);
      s += __shfl_xor_sync(kFullMask, s, 2);
      const int64_t i = w0 + 8 * tile + g;
      if (t == 0 && i < rn) z[i + k * ldz] = ck - 0.5 * s;
    }
    __syncthreads();  // every thread is done with factor[k & 1]: component k + 2 may come
  }
  __syncwarp();  // the warp's z writes are visible to its lanes
  const int64_t i = w0 + lane;
  if (lane < kTiles * 8 && i < rn) {
    double top = -HUGE_VAL;
    for (int64_t k = 0; k < K; k++) {
      const double lp = z[i + k * ldz];
      top = lp > top ? lp : top;
    }
    normalise_row(z + i, ldz, K, top, logdens + i);
  }
#endif
}

// The scatter about the new means, full covariances, d <= 8 NB: block q groups + group
// adds up W' W over rows [q chunk, (q + 1) chunk) of the tile for the components
// group GM_DMMA_WARPS + warp, W = sqrt(z_k) (x - mu_k) (the GEMM path's form); the
// groups of a chunk are neighbours in the grid, so that they run together and the
// second reads the rows from L2. The rows come through a ring of GM_DMMA_STAGES buffers
// of GM_DMMA_STAGE_ROWS rows in dynamic shared memory (scatter_dmma_smem(NB) bytes;
// GM_DMMA_STAGES - 1 copies in flight while one stage is multiplied), shared by the
// block's warps, one component each; a warp keeps the upper triangle of blocks of its
// S_k in registers for the whole chunk (8 x 8 blocks and m8n8k4, or on sm_90 16 x 8
// blocks and m16n8k8) and writes it and its mirror to P[(k parts + q) d d + ...], which
// sum_chunks_kernel adds up in chunk order: no atomics, the same sums every run.
constexpr size_t scatter_dmma_smem(int nb) {
  return (size_t)GM_DMMA_STAGES *
         ((size_t)8 * nb * GM_DMMA_STAGE_LD + (size_t)GM_DMMA_WARPS * GM_DMMA_STAGE_ROWS) * 8;
}

template <int NB>
__global__ void __launch_bounds__(kDmmaThreads, 1)
    scatter_dmma_kernel(const double *__restrict__ X, int64_t ldx, int64_t rn,
                        const double *__restrict__ z, int64_t ldz,
                        const double *__restrict__ mu, int64_t d, int64_t K, int64_t chunk,
                        int64_t parts, double *__restrict__ P) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kRows = GM_DMMA_STAGE_ROWS, kLd = GM_DMMA_STAGE_LD, kCols = 8 * NB;
  constexpr int kStages = GM_DMMA_STAGES;
  constexpr int kXs = kCols * kLd, kZs = GM_DMMA_WARPS * kRows;
  extern __shared__ __align__(16) double dmma_smem[];
  double *const xs = dmma_smem;                   // stage b: xs[b kXs + a kLd + l]
  double *const zs = dmma_smem + kStages * kXs;   // stage b: zs[b kZs + w kRows + l]
  const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
  const int g = gm_dmma_group_of(lane), t = gm_dmma_thread_of(lane);
  const int64_t groups = (K + GM_DMMA_WARPS - 1) / GM_DMMA_WARPS;
  const int64_t q = blockIdx.x / groups, k0 = blockIdx.x % groups * GM_DMMA_WARPS, k = k0 + warp;
  const int64_t i0 = q * chunk, i1 = rn < i0 + chunk ? rn : i0 + chunk;
  const int64_t stages = (i1 - i0 + kRows - 1) / kRows;
  // Stage st into buffer st % kStages: the rows' columns (0 past d) and each warp's
  // responsibilities (0 past the chunk's rows and past K, which zeroes those rows of W
  // whatever x holds); past the last stage an empty group, so that every thread commits
  // one group per stage and the waits below count alike.
  auto stage = [&](int64_t st) {
    if (st < stages) {
      const int64_t s0 = i0 + st * kRows;
      const int buf = (int)(st % kStages);
      for (int e = (int)threadIdx.x; e < kCols * kRows; e += kDmmaThreads) {
        const int l = e % kRows, a = e / kRows;
        const int64_t i = s0 + l;
        double *dst = &xs[buf * kXs + a * kLd + l];
        if (i < i1 && a < d) copy_async<8>(dst, X + i + a * ldx);
        else *dst = 0.0;
      }
      for (int e = (int)threadIdx.x; e < kZs; e += kDmmaThreads) {
        const int l = e % kRows, w = e / kRows;
        const int64_t i = s0 + l;
        double *dst = &zs[buf * kZs + e];
        if (i < i1 && k0 + w < K) copy_async<8>(dst, z + i + (k0 + w) * ldz);
        else *dst = 0.0;
      }
    }
    copy_async_commit();
  };
  double mv[NB];  // mu_k at columns 8 b + g (0 past d)
#pragma unroll
  for (int b = 0; b < NB; b++) mv[b] = k < K && 8 * b + g < d ? mu[8 * b + g + k * d] : 0.0;
#if GM_DMMA_DEVICE_WIDE
  constexpr int kBlocks = gm_dmma_wide_blocks(NB);
  double acc[kBlocks][4] = {};
#else
  constexpr int kBlocks = gm_dmma_triangle_blocks(NB);
  double acc[kBlocks][2] = {};
#endif
#pragma unroll
  for (int st = 0; st < kStages - 1; st++) stage(st);
  for (int64_t st = 0; st < stages; st++) {
    copy_async_wait<kStages - 2>();  // this thread's copies of stage st have landed
    __syncthreads();  // stage st is in shared memory for every thread, and every warp is
                      // done with stage st - 1, whose buffer the next copy takes
    stage(st + kStages - 1);
    const int buf = (int)(st % kStages);
    if (k < K) {  // uniform across the warp
      const double *x = xs + buf * kXs, *zw = zs + buf * kZs + warp * kRows;
#if GM_DMMA_DEVICE_WIDE
#pragma unroll 1
      for (int r = 0; r < kRows; r += 8) {
        const double root0 = sqrt(zw[r + t]), root1 = sqrt(zw[r + t + 4]);
        double w[NB + 1][2];  // rows r + t and r + t + 4 of column 8 b + g; block NB is 0
#pragma unroll
        for (int b = 0; b < NB; b++) {
          w[b][0] = root0 * (x[(8 * b + g) * kLd + r + t] - mv[b]);
          w[b][1] = root1 * (x[(8 * b + g) * kLd + r + t + 4] - mv[b]);
        }
        w[NB][0] = 0.0;
        w[NB][1] = 0.0;
#pragma unroll
        for (int cb = 0; cb < NB; cb++)
#pragma unroll
          for (int p = 0; 2 * p <= cb; p++)
            dmma_m16n8k8(acc[gm_dmma_wide_block(p, cb)], w[2 * p][0], w[2 * p + 1][0],
                         w[2 * p][1], w[2 * p + 1][1], w[cb][0], w[cb][1]);
      }
#else
#pragma unroll 2
      for (int r = 0; r < kRows; r += 4) {
        const double root = sqrt(zw[r + t]);
        double w[NB];
#pragma unroll
        for (int b = 0; b < NB; b++) w[b] = root * (x[(8 * b + g) * kLd + r + t] - mv[b]);
#pragma unroll
        for (int cb = 0; cb < NB; cb++)
#pragma unroll
          for (int rb = 0; rb <= cb; rb++) {
            double *c = acc[gm_dmma_triangle_block(rb, cb)];
            dmma_m8n8k4(c[0], c[1], w[rb], w[cb]);
          }
      }
#endif
    }
  }
  copy_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)
  if (k >= K) return;
  double *out = P + (k * parts + q) * d * d;
#if GM_DMMA_DEVICE_WIDE
#pragma unroll
  for (int cb = 0; cb < NB; cb++)
#pragma unroll
    for (int p = 0; 2 * p <= cb; p++)
#pragma unroll
      for (int h = 0; h < 4; h++) {
        const int64_t a = 16 * p + 8 * (h >> 1) + g, b = 8 * cb + 2 * t + (h & 1);
        if (a <= b && b < d) {  // the upper triangle and its mirror: all of S_k
          const double v = acc[gm_dmma_wide_block(p, cb)][h];
          out[a + b * d] = v;
          out[b + a * d] = v;
        }
      }
#else
#pragma unroll
  for (int cb = 0; cb < NB; cb++)
#pragma unroll
    for (int rb = 0; rb <= cb; rb++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int64_t a = 8 * rb + g, b = 8 * cb + 2 * t + h;
        if (a <= b && b < d) {  // the upper triangle and its mirror: all of S_k
          const double v = acc[gm_dmma_triangle_block(rb, cb)][h];
          out[a + b * d] = v;
          out[b + a * d] = v;
        }
      }
#endif
#endif
}

// The kernels by column blocks (index nb - 1).
using EstepDmmaKernel = void (*)(const double *, int64_t, int64_t, int64_t, int64_t,
                                 const double *, double *, int64_t, double *);
using ScatterDmmaKernel = void (*)(const double *, int64_t, int64_t, const double *, int64_t,
                                   const double *, int64_t, int64_t, int64_t, int64_t, double *);
const EstepDmmaKernel kEstepDmma[GM_DMMA_MAX_BLOCKS] = {
    estep_dmma_kernel<1>, estep_dmma_kernel<2>, estep_dmma_kernel<3>, estep_dmma_kernel<4>,
    estep_dmma_kernel<5>, estep_dmma_kernel<6>, estep_dmma_kernel<7>, estep_dmma_kernel<8>};
const ScatterDmmaKernel kScatterDmma[GM_DMMA_MAX_BLOCKS] = {
    scatter_dmma_kernel<1>, scatter_dmma_kernel<2>, scatter_dmma_kernel<3>,
    scatter_dmma_kernel<4>, scatter_dmma_kernel<5>, scatter_dmma_kernel<6>,
    scatter_dmma_kernel<7>, scatter_dmma_kernel<8>};

// Diagonal and spherical covariances: u[:, k] holds 1 / the standard deviations.
__global__ void estep_diag_kernel(const double *__restrict__ X, int64_t ldx, int64_t rn,
                                  int64_t d, int64_t K, const double *__restrict__ mu,
                                  const double *__restrict__ u, const double *__restrict__ c,
                                  double *__restrict__ z, int64_t ldz,
                                  double *__restrict__ logdens) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rn;
       i += (int64_t)gridDim.x * blockDim.x) {
    double top = -HUGE_VAL;
    for (int64_t k = 0; k < K; k++) {
      const double *muk = mu + k * d, *uk = u + k * d;
      double s = 0;
      for (int64_t j = 0; j < d; j++) {
        const double t = (X[i + j * ldx] - muk[j]) * uk[j];
        s += t * t;
      }
      const double lp = c[k] - 0.5 * s;
      z[i + k * ldz] = lp;
      top = lp > top ? lp : top;
    }
    normalise_row(z + i, ldz, K, top, logdens + i);
  }
}

// For each of `batches` groups: out[b len + e] (+)= sum_q part[(b parts + q) len + e],
// in chunk order.
__global__ void sum_chunks_kernel(const double *__restrict__ part, int64_t parts, int64_t len,
                                  int64_t batches, int accumulate, double *__restrict__ out) {
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < len * batches;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t b = t / len, e = t % len;
    const double *p = part + b * parts * len + e;
    double s = accumulate ? out[t] : 0.0;
    for (int64_t q = 0; q < parts; q++) s += p[q * len];
    out[t] = s;
  }
}

// Components with any weight take their new weight and mean (centred coordinates); those
// with none keep theirs (the driver re-seeds those below GM_GMM_MIN_POINTS).
__global__ void means_kernel(const double *__restrict__ sums, const double *__restrict__ nk,
                             int64_t d, int64_t K, double n, double *__restrict__ w,
                             double *__restrict__ mu) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < d * K;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = e % d, k = e / d;
    if (!(nk[k] > 0)) continue;
    mu[e] = sums[e] / nk[k];
    if (j == 0) w[k] = nk[k] / n;
  }
}

// W in chunks: W[((k nq + q) d + j) chunk + l] = sqrt(z_ik) (x_ij - mu_jk) for the row
// i = q chunk + l of the tile, 0 past its rn rows. A thread per (l, k nq + q) walks the
// d columns: the square root once per row and component, no index division per value.
__global__ void scatter_rows_kernel(const double *__restrict__ X, int64_t ldx, int64_t rn,
                                    const double *__restrict__ z, int64_t ldz,
                                    const double *__restrict__ mu, int64_t d, int64_t K,
                                    int64_t nq, int64_t chunk, double *__restrict__ W) {
  const int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= chunk) return;
  for (int64_t b = blockIdx.y; b < K * nq; b += gridDim.y) {
    const int64_t k = b / nq, i = (b % nq) * chunk + l;
    double *w = W + b * d * chunk + l;
    if (i < rn) {
      const double s = sqrt(z[i + k * ldz]);
      const double *x = X + i, *muk = mu + k * d;
      for (int64_t j = 0; j < d; j++) w[j * chunk] = s * (x[j * ldx] - muk[j]);
    } else {
      for (int64_t j = 0; j < d; j++) w[j * chunk] = 0.0;
    }
  }
}

// Diagonal scatter of one tile: S[j + k d] (+)= sum_i z_ik (x_ij - mu_jk)^2, one block
// per (j, k).
__global__ void scatter_diag_kernel(const double *__restrict__ X, int64_t ldx, int64_t rn,
                                    const double *__restrict__ z, int64_t ldz,
                                    const double *__restrict__ mu, int64_t d, int accumulate,
                                    double *__restrict__ S) {
  const int64_t j = blockIdx.x, k = blockIdx.y;
  const double m = mu[j + k * d];
  double s = 0;
  for (int64_t i = threadIdx.x; i < rn; i += blockDim.x) {
    const double t = X[i + j * ldx] - m;
    s += z[i + k * ldz] * t * t;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) S[j + k * d] = (accumulate ? S[j + k * d] : 0.0) + s;
}

// The unconstrained covariances (without reg) of the components with any weight: full: the upper triangle of the scatter (so that the result is
// exactly symmetric) / nk; diagonal: the per-column scatter / nk, zeros elsewhere.
__global__ void covariances_kernel(const double *__restrict__ S, const double *__restrict__ nk,
                                   int64_t d, int64_t K, bool full, double *__restrict__ cov) {
  const int64_t dd = d * d;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < dd * K;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t k = e / dd, r = e % dd, a = r % d, b = r / d;
    if (!(nk[k] > 0)) continue;
    double v;
    if (full) {
      const int64_t lo = a < b ? a : b, hi = a < b ? b : a;
      v = S[k * dd + lo + hi * d] / nk[k];
    } else {
      v = a == b ? S[a + k * d] / nk[k] : 0.0;
    }
    cov[e] = v;
  }
}

__global__ void identity_kernel(double *__restrict__ U, int64_t d, int64_t K) {
  const int64_t dd = d * d;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < dd * K;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = e % dd;
    U[e] = (r % d == r / d) ? 1.0 : 0.0;
  }
}

// The device pointer arrays of the batched Cholesky calls: the matrices of component k
// at a + k d^2 and b + k d^2.
__global__ void batch_pointers_kernel(double *a, double *b, int64_t dd, int64_t K,
                                      double **pa, double **pb) {
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < K;
       k += (int64_t)gridDim.x * blockDim.x) {
    pa[k] = a + k * dd;
    pb[k] = b + k * dd;
  }
}

// log det U_k from the diagonal of the inverse factors; a factor that is not finite
// marks its component as failed (as on the CPU).
__global__ void logdet_full_kernel(const double *__restrict__ U, int64_t d, int64_t K,
                                   double *__restrict__ logdet, int *__restrict__ info) {
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < K;
       k += (int64_t)gridDim.x * blockDim.x) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) s += log(U[k * d * d + j + j * d]);
    logdet[k] = s;
    if (info[k] == 0 && !isfinite(s)) info[k] = 1;
  }
}

__global__ void factor_diag_kernel(const double *__restrict__ cov, int64_t d, int64_t K,
                                   double *__restrict__ u, double *__restrict__ logdet,
                                   int *__restrict__ info) {
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < K;
       k += (int64_t)gridDim.x * blockDim.x) {
    int status = 0;
    double s = 0;
    for (int64_t j = 0; j < d && !status; j++) {
      const double v = cov[k * d * d + j + j * d];
      if (!(v > 0) || !isfinite(v)) {
        status = (int)j + 1;
      } else {
        u[j + k * d] = 1 / sqrt(v);
        s += log(u[j + k * d]);
      }
    }
    if (!status && !isfinite(s)) status = 1;
    logdet[k] = s;
    info[k] = status;
  }
}

inline unsigned blocks_for(int64_t count) {
  const unsigned g = grid_1d(count, kThreads);
  return g < 65536u * 4 ? g : 65536u * 4;
}

// GPUML_GMM_DMMA: "1" the tensor-core kernels wherever they apply, "0" never; unset:
// kDmmaDefault, unless GPUML_GMM_FUSED=1 asks for the fused FMA kernels. A development
// knob, so that one run can time the three paths side by side (10^6 x 50, G = 16 on an
// H200: 12.2 ms per iteration GEMM, 24.1 fused, 5.4 tensor cores).
constexpr bool kDmmaDefault = true;
inline bool dmma_wanted(bool fused_knob) {
  const char *s = getenv("GPUML_GMM_DMMA");
  if (s && strcmp(s, "1") == 0) return true;
  if (s && strcmp(s, "0") == 0) return false;
  return kDmmaDefault && !fused_knob;
}

// Whether this device runs the tensor-core kernels of nb column blocks: the code the
// driver chose for it must come from sm_80 or later (a portable build's compute_70 PTX,
// compiled for an H100 when loaded, holds their empty bodies), and a block must fit.
// *wide: the code comes from compute_90 or later (__CUDA_ARCH__ >= 900 in the kernels),
// whose kernels take the m16n8k8 layout (core/gmm_dmma_shared.h); both kernels must
// agree, as they do when they come from one image.
inline bool dmma_supported(int nb, int *scatter_blocks_per_sm, bool *wide) {
  *scatter_blocks_per_sm = 0;
  *wide = false;
  cudaFuncAttributes a;
  const void *kernels[2] = {(const void *)kEstepDmma[nb - 1], (const void *)kScatterDmma[nb - 1]};
  int ptx[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    if (cudaFuncGetAttributes(&a, kernels[i]) != cudaSuccess) {
      cudaGetLastError();  // no image for this device: not an error of the fit
      return false;
    }
    if (a.ptxVersion < 80) return false;
    ptx[i] = a.ptxVersion;
  }
  if ((ptx[0] >= kDmmaWidePtx) != (ptx[1] >= kDmmaWidePtx)) return false;
  *wide = ptx[0] >= kDmmaWidePtx;
  // The scatter's ring of stages is dynamic shared memory, past the 48 KB default for
  // the larger nb.
  const size_t smem = scatter_dmma_smem(nb);
  if (cudaFuncSetAttribute(kScatterDmma[nb - 1], cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)smem) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kScatterDmma[nb - 1], kDmmaThreads,
                                                    smem) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  *scatter_blocks_per_sm = per_sm;
  return per_sm > 0;
}

struct Gmm {
  Context ctx{"gmm:cuda"};
  cusolverDnHandle_t solver = nullptr;
  gm_gmm_data data{};
  int64_t n = 0, d = 0, kmax = 0;
  bool full = false, full_capable = false, resident = false;
  bool fused_capable = false;  // the fused full-covariance pass applies (see kFusedMaxD)
  // The tensor-core full-covariance pass applies (GPUML_GMM_DMMA, d <= GM_DMMA_MAX_D,
  // sm_80 code): its kernels for dmma_nb column blocks of 8, and the scatter blocks the
  // device runs at once.
  bool dmma = false, dmma_wide = false;  // wide: the sm_90 kernels (m16n8k8)
  int dmma_nb = 0;
  int64_t dmma_slots = 0;
  double *packed = nullptr;  // the E-step's factors in fragment order (pack_dmma_kernel)
  int64_t tile = 0, chunk = 0, nq = 0;
  double *x = nullptr;  // resident: n x d (ld n), centred; else one tile (ld its rows)
  double *centre = nullptr, *z = nullptr, *logdens = nullptr;
  double *w = nullptr, *mu = nullptr, *cov = nullptr, *chol = nullptr, *U = nullptr;
  double *logdet_u = nullptr, *m = nullptr, *c = nullptr, *nk = nullptr, *sums = nullptr;
  double *S = nullptr, *Y = nullptr, *P = nullptr, *part = nullptr, *scalar = nullptr;
  double **chol_ptr = nullptr, **U_ptr = nullptr;  // chol + k d^2, U + k d^2 (k < kmax)
  int *info = nullptr;

  explicit Gmm(const gm_gmm_data *dt) : data(*dt) {}

  gpuml_status check_solver(cusolverStatus_t s, const char *what) {
    if (s == CUSOLVER_STATUS_SUCCESS) return GPUML_OK;
    cudaGetLastError();
    if (s == CUSOLVER_STATUS_ALLOC_FAILED)
      return gm_fail(GPUML_ERR_NOMEM, ctx.id(), "cuSOLVER error in %s: out of GPU memory", what);
    return gm_fail(GPUML_ERR_CUDA, ctx.id(), "cuSOLVER error in %s (status %d)", what, (int)s);
  }

  // Device bytes for a tile of `rows` rows (beyond the fixed arrays).
  size_t tile_bytes(int64_t rows, int64_t parts) const {
    size_t b = dmma ? (size_t)gm_dmma_parts_max(rows) * (size_t)d * (size_t)d * (size_t)kmax * 8
                    : (size_t)rows * (size_t)d * (size_t)kmax * 8;  // scatter partials / Y, W
    b += (size_t)parts * (size_t)d * (size_t)(full && !dmma ? d : 1) * (size_t)kmax * 8;  // P
    b += (size_t)parts * (size_t)d * (size_t)kmax * 8;
    if (!resident) b += (size_t)rows * (size_t)d * 8;                    // the tile of X
    return b;
  }

  gpuml_status plan() {
    const size_t dd = (size_t)d * (size_t)d, K = (size_t)kmax;
    size_t fixed = (size_t)n * (K + 1) * 8;                        // z, logdens
    fixed += (4 * dd * K + 8 * (size_t)d * K + 8 * K + (size_t)d + kParts * K + 64) * 8;
    fixed += (full ? 2 * K * sizeof(double *) : 0) + K * 4 + 4096;
    if (dmma) fixed += K * (size_t)gm_dmma_component_doubles(dmma_nb) * 8;  // packed
    const size_t budget = ctx.budget();
    const int64_t knob = env_int("GPUML_CUDA_TILE");
    // The tensor-core pass keeps no n x dK array, only the scatter's partial sums (a
    // d x d x K matrix per chunk): the tile is as long as those fit kTileBytes, so that
    // resident data of 10^6 rows go in one launch (no tail of blocks per tile).
    int64_t cap = dmma ? (int64_t)(kTileBytes / (dd * K * 8)) * GM_DMMA_MIN_CHUNK_ROWS
                       : (int64_t)(kTileBytes / ((size_t)d * K * 8));
    if (cap < kMinTile) cap = kMinTile;
    if (knob) cap = knob;
    if (cap > n) cap = n;
    const int64_t per_block = ceil_div(d, 64) * ceil_div(d, 64) * kmax;
    for (int res = knob ? 0 : 1; res >= 0; res--) {
      resident = res != 0;
      const size_t base = fixed + (resident ? (size_t)n * (size_t)d * 8 : 0);
      for (int64_t rows = cap; rows >= 1; rows = rows > 1 ? rows / 2 : 0) {
        int64_t parts = full ? kScatterBlocks / per_block : 1;  // rounded down: see above
        // The tensor-core pass: P only serves the weighted sums' batched GEMM, whose
        // batches (chunks of rows) are best short, whatever the tile.
        if (dmma) parts = ceil_div(rows, GM_DMMA_CHUNK_ROWS);
        if (parts > ceil_div(rows, kMinTile)) parts = ceil_div(rows, kMinTile);
        if (parts < 1) parts = 1;
        const int64_t ch = ceil_div(rows, parts);
        if (base <= budget && tile_bytes(ch * parts, parts) <= budget - base) {
          // Resident data want a tile of a useful size; otherwise tile the data too.
          if (resident && rows < (n < 4096 ? n : 4096) && !knob) break;
          nq = parts;
          chunk = ch;
          tile = ch * parts;
          return GPUML_OK;
        }
        if (rows == 1) break;
      }
    }
    return gm_fail(GPUML_ERR_NOMEM, ctx.id(),
                   "the GPU memory budget of %.1f MB is too small for a mixture of %lld "
                   "components of %lld x %lld data (it needs at least %.1f MB); raise "
                   "gpu_memory_limit or use backend \"cpu\"",
                   (double)budget / 1e6, (long long)kmax, (long long)n, (long long)d,
                   (double)(fixed + tile_bytes(1, 1)) / 1e6);
  }

  gpuml_status open() {
    n = data.n;
    d = data.d;
    kmax = data.kmax;
    full = full_capable = data.structure == GM_GMM_FULL_STRUCTURE;
    const char *knob = getenv("GPUML_GMM_FUSED");
    const bool fused_knob = knob && strcmp(knob, "1") == 0;
    fused_capable = full && d <= kFusedMaxD && kmax <= 65535 && fused_knob;
    if (d * kmax > 2147483647LL)
      return gm_fail(GPUML_ERR_ARG, "gmm:tooLarge", "d x G = %lld is too large for the GPU",
                     (long long)(d * kmax));
    GM_TRY(ctx.init(data.opt, 1));
    // The tensor-core pass where it is asked for and applies (else the paths above):
    // full covariances, d <= GM_DMMA_MAX_D, one-dimensional grids within 2^31 - 1 blocks
    // (E-step: a block per 128 rows; scatter: chunks times groups of 8 components), and
    // sm_80 code for this device.
    const int64_t max_grid = 2147483647LL;
    if (full && d <= GM_DMMA_MAX_D && ceil_div(n, GM_DMMA_ESTEP_ROWS) <= max_grid &&
        gm_dmma_parts_max(n) <= max_grid / ceil_div(kmax, GM_DMMA_WARPS) &&
        dmma_wanted(fused_knob)) {
      int per_sm = 0;
      dmma_nb = gm_dmma_blocks(d);
      dmma = dmma_supported(dmma_nb, &per_sm, &dmma_wide);
      dmma_slots = (int64_t)per_sm * ctx.sm_count();
      if (dmma) fused_capable = false;
    }
    if (full && gm_trace_on())
      gm_trace(dmma ? (dmma_wide ? "gmm: full covariances, tensor-core (DMMA m16n8k8) kernels"
                                 : "gmm: full covariances, tensor-core (DMMA m8n8k4) kernels")
                    : fused_capable ? "gmm: full covariances, fused kernels"
                                    : "gmm: full covariances, GEMM path");
    GM_TRY(ctx.solver(&solver));
    const size_t dd = (size_t)d * (size_t)d, K = (size_t)kmax;
    if (full) GM_TRY(ctx.alloc(&chol, dd * K, "the Cholesky factors"));
    GM_TRY(plan());
    GM_TRY(ctx.alloc(&z, (size_t)n * K, "the responsibilities"));
    GM_TRY(ctx.alloc(&logdens, (size_t)n, "the log-densities"));
    GM_TRY(ctx.alloc(&centre, (size_t)d, "the column means"));
    GM_TRY(ctx.alloc(&w, K, "the weights"));
    GM_TRY(ctx.alloc(&mu, (size_t)d * K, "the means"));
    GM_TRY(ctx.alloc(&cov, dd * K, "the covariances"));
    if (full) {
      GM_TRY(ctx.alloc(&U, dd * K, "the inverse Cholesky factors"));
      GM_TRY(ctx.alloc(&S, dd * K, "the scatter matrices"));
      GM_TRY(ctx.alloc(&m, (size_t)d * K, "the transformed means"));
      GM_TRY(ctx.alloc(&chol_ptr, K, "the Cholesky factors' pointers"));
      GM_TRY(ctx.alloc(&U_ptr, K, "the inverse Cholesky factors' pointers"));
      batch_pointers_kernel<<<grid_1d(kmax, 64), 64, 0, ctx.stream()>>>(chol, U, (int64_t)dd,
                                                                        kmax, chol_ptr, U_ptr);
      GM_TRY(ctx.launched("the Cholesky factors' pointers"));
    } else {
      GM_TRY(ctx.alloc(&U, (size_t)d * K, "the inverse standard deviations"));
      GM_TRY(ctx.alloc(&S, (size_t)d * K, "the scatter"));
    }
    GM_TRY(ctx.alloc(&logdet_u, K, "the log-determinants"));
    GM_TRY(ctx.alloc(&c, K, "the log-weights"));
    GM_TRY(ctx.alloc(&nk, K, "the component sizes"));
    GM_TRY(ctx.alloc(&sums, (size_t)d * K, "the weighted sums"));
    GM_TRY(ctx.alloc(&part, (size_t)kParts * K, "partial sums"));
    GM_TRY(ctx.alloc(&scalar, 1, "the log-likelihood"));
    GM_TRY(ctx.alloc(&info, K, "the Cholesky status"));
    // The fused scatter's partials go to Y (which the fused pass does not need otherwise);
    // the tensor-core pass needs Y for its scatter's partials only.
    size_t y_len = (size_t)tile * (size_t)d * K;
    if (fused_capable) {
      const size_t fused_len = (size_t)ceil_div(tile, kFusedChunk) * dd * K;
      y_len = y_len > fused_len ? y_len : fused_len;
    }
    if (dmma) {
      y_len = (size_t)gm_dmma_parts_max(tile) * dd * K;
      GM_TRY(ctx.alloc(&packed, K * (size_t)gm_dmma_component_doubles(dmma_nb),
                       "the packed inverse Cholesky factors"));
    }
    GM_TRY(ctx.alloc(&Y, y_len, "the tile work space"));
    GM_TRY(ctx.alloc(&P, (size_t)nq * (size_t)d * (full && !dmma ? (size_t)d : 1) * K,
                     "chunk partials"));
    GM_TRY(ctx.alloc(&x, (resident ? (size_t)n : (size_t)tile) * (size_t)d, "the data"));
    GM_TRY(ctx.check(cudaMemcpyAsync(centre, data.centre, (size_t)d * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()),
                     "copying the column means"));
    if (resident) {
      GM_TRY(ctx.check(cudaMemcpyAsync(x, data.x, (size_t)n * (size_t)d * 8,
                                       cudaMemcpyHostToDevice, ctx.stream()),
                       "copying the data to the GPU"));
      centre_kernel<<<blocks_for(n * d), kThreads, 0, ctx.stream()>>>(x, n, n, d, centre);
      GM_TRY(ctx.launched("centring the data"));
    }
    return ctx.sync("loading the data");
  }

  // The centred rows [r0, r0 + rn) and their leading dimension.
  gpuml_status rows(int64_t r0, int64_t rn, const double **p, int64_t *ld) {
    if (resident) {
      *p = x + r0;
      *ld = n;
      return GPUML_OK;
    }
    GM_TRY(ctx.check(cudaMemcpy2DAsync(x, (size_t)rn * 8, data.x + r0, (size_t)n * 8,
                                       (size_t)rn * 8, (size_t)d, cudaMemcpyHostToDevice,
                                       ctx.stream()),
                     "copying a tile of the data to the GPU"));
    centre_kernel<<<blocks_for(rn * d), kThreads, 0, ctx.stream()>>>(x, rn, rn, d, centre);
    GM_TRY(ctx.launched("centring a tile"));
    *p = x;
    *ld = rn;
    return GPUML_OK;
  }

  gpuml_status column_sums(const double *A, int64_t lda, int64_t nrows, int64_t cols,
                           double *out) {
    column_partial_kernel<<<dim3(kParts, (unsigned)cols), kThreads, 0, ctx.stream()>>>(
        A, lda, nrows, part);
    GM_TRY(ctx.launched("column sums"));
    column_final_kernel<<<(unsigned)cols, kParts, 0, ctx.stream()>>>(part, out);
    return ctx.launched("column sums");
  }

  gpuml_status download(void *host, const void *dev, size_t bytes, const char *what) {
    GM_TRY(ctx.check(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, ctx.stream()), what));
    return ctx.sync(what);
  }

  gpuml_status upload_means(int64_t k0, int64_t count, const double *host) {
    GM_TRY(ctx.check(cudaMemcpyAsync(mu + k0 * d, host, (size_t)(count * d) * 8,
                                     cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the means to the GPU"));
    centre_means_kernel<<<blocks_for(count * d), kThreads, 0, ctx.stream()>>>(mu + k0 * d, d,
                                                                              count, centre);
    return ctx.launched("centring the means");
  }

  gpuml_status set_params(int64_t K, const double *hw, const double *hmu, const double *hcov) {
    GM_TRY(ctx.check(cudaMemcpyAsync(w, hw, (size_t)K * 8, cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the weights to the GPU"));
    GM_TRY(upload_means(0, K, hmu));
    GM_TRY(ctx.check(cudaMemcpyAsync(cov, hcov, (size_t)(K * d * d) * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()),
                     "copying the covariances to the GPU"));
    return ctx.sync("setting the parameters");
  }

  gpuml_status set_component(int64_t K, const double *hw, int64_t k, const double *hmu,
                             const double *hcov) {
    GM_TRY(ctx.check(cudaMemcpyAsync(w, hw, (size_t)K * 8, cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the weights to the GPU"));
    GM_TRY(upload_means(k, 1, hmu));
    GM_TRY(ctx.check(cudaMemcpyAsync(cov + k * d * d, hcov, (size_t)(d * d) * 8,
                                     cudaMemcpyHostToDevice, ctx.stream()),
                     "copying a covariance to the GPU"));
    return ctx.sync("setting a component");
  }

  gpuml_status factor(int64_t K, int *host_info) {
    if (full) {
      const size_t dd = (size_t)d * (size_t)d;
      GM_TRY(ctx.check(cudaMemcpyAsync(chol, cov, (size_t)K * dd * 8, cudaMemcpyDeviceToDevice,
                                       ctx.stream()),
                       "copying the covariances"));
      // R_k' R_k = Sigma_k for every component at once, R_k upper triangular in the upper
      // triangle of chol_k (potrfBatched takes either triangle and may use the other as
      // work space; only the upper one is read below). info[k] > 0 where Sigma_k is not
      // positive definite, for that component alone: the factors are independent. The
      // info array is cleared first so that no status of an earlier call can survive.
      GM_TRY(ctx.check(cudaMemsetAsync(info, 0, (size_t)K * sizeof(int), ctx.stream()),
                       "clearing the Cholesky status"));
      GM_TRY(check_solver(cusolverDnDpotrfBatched(solver, CUBLAS_FILL_MODE_UPPER, (int)d,
                                                  chol_ptr, (int)d, info, (int)K),
                          "cusolverDnDpotrfBatched"));
      identity_kernel<<<blocks_for((int64_t)dd * K), kThreads, 0, ctx.stream()>>>(U, d, K);
      GM_TRY(ctx.launched("the identity"));
      const double one = 1;
      // U_k = R_k^-1: R_k U_k = I, upper triangular with exact zeros below the diagonal
      // (a component whose factorisation failed gives garbage in its own U_k only, and
      // is re-seeded by the driver before it is used).
      GM_TRY(ctx.check_blas(cublasDtrsmBatched(ctx.blas(), CUBLAS_SIDE_LEFT,
                                               CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                               CUBLAS_DIAG_NON_UNIT, (int)d, (int)d, &one,
                                               chol_ptr, (int)d, U_ptr, (int)d, (int)K),
                            "cublasDtrsmBatched (inverse Cholesky factors)"));
      logdet_full_kernel<<<grid_1d(K, 64), 64, 0, ctx.stream()>>>(U, d, K, logdet_u, info);
      GM_TRY(ctx.launched("log-determinants"));
    } else {
      factor_diag_kernel<<<grid_1d(K, 64), 64, 0, ctx.stream()>>>(cov, d, K, U, logdet_u, info);
      GM_TRY(ctx.launched("inverse standard deviations"));
    }
    GM_TRY(download(host_info, info, (size_t)K * sizeof(int), "the Cholesky status"));
    for (int64_t k = 0; k < K; k++)
      if (host_info[k] < 0)
        return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: cusolverDnDpotrfBatched argument %d",
                       -host_info[k]);
    return GPUML_OK;
  }

  gpuml_status estep(int64_t K, double *loglik) {
    if (gm_interrupted(data.opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture fit interrupted");
    prepare_estep_kernel<<<blocks_for(d * K), kThreads, 0, ctx.stream()>>>(
        w, mu, U, logdet_u, d, K, full, m, c);
    GM_TRY(ctx.launched("preparing the E-step"));
    if (full && dmma) {
      const int64_t per = gm_dmma_component_doubles(dmma_nb);
      pack_dmma_kernel<<<blocks_for(per * K), kThreads, 0, ctx.stream()>>>(
          U, m, c, d, K, dmma_nb, dmma_wide ? 1 : 0, packed);
      GM_TRY(ctx.launched("packing the factors"));
    }
    const double one = 1, zero = 0;
    for (int64_t r0 = 0; r0 < n; r0 += tile) {
      const int64_t rn = n - r0 < tile ? n - r0 : tile;
      const double *X;
      int64_t ldx;
      GM_TRY(rows(r0, rn, &X, &ldx));
      if (full && dmma) {
        const int64_t rows_per_block = dmma_wide ? GM_DMMA_WIDE_ESTEP_ROWS : GM_DMMA_ESTEP_ROWS;
        kEstepDmma[dmma_nb - 1]<<<(unsigned)ceil_div(rn, rows_per_block),
                                  dmma_wide ? kEstepWideThreads : kDmmaThreads, 0,
                                  ctx.stream()>>>(X, ldx, rn, d, K, packed, z + r0, n,
                                                  logdens + r0);
      } else if (full && fused_capable) {
        estep_fused_kernel<<<(unsigned)ceil_div(rn, kFusedRows), kFusedThreads, 0,
                             ctx.stream()>>>(X, ldx, rn, d, K, U, m, c, z + r0, n,
                                                logdens + r0);
      } else if (full) {
        GM_TRY(ctx.check_blas(cublasDgemm(ctx.blas(), CUBLAS_OP_N, CUBLAS_OP_N, (int)rn,
                                          (int)(d * K), (int)d, &one, X, (int)ldx, U, (int)d,
                                          &zero, Y, (int)rn),
                              "cublasDgemm (E-step)"));
        estep_full_kernel<<<(unsigned)ceil_div(rn, kEstepRows),
                            dim3(kEstepRows, kThreads / kEstepRows), 0, ctx.stream()>>>(
            Y, rn, d, K, m, c, z + r0, n, logdens + r0);
      } else {
        estep_diag_kernel<<<blocks_for(rn), kThreads, 0, ctx.stream()>>>(
            X, ldx, rn, d, K, mu, U, c, z + r0, n, logdens + r0);
      }
      GM_TRY(ctx.launched("E-step"));
    }
    GM_TRY(column_sums(logdens, n, n, 1, scalar));
    return download(loglik, scalar, 8, "the log-likelihood");
  }

  gpuml_status mstep(int64_t K, double *host_nk) {
    if (gm_interrupted(data.opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "Gaussian mixture fit interrupted");
    const double one = 1, zero = 0;
    GM_TRY(column_sums(z, n, n, K, nk));
    // sums = X'Z by chunks of rows, added in order.
    for (int64_t r0 = 0; r0 < n; r0 += tile) {
      const int64_t rn = n - r0 < tile ? n - r0 : tile;
      const double *X;
      int64_t ldx;
      GM_TRY(rows(r0, rn, &X, &ldx));
      const int64_t nfull = rn / chunk, rem = rn - nfull * chunk;
      if (nfull > 0)
        GM_TRY(ctx.check_blas(
            cublasDgemmStridedBatched(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, (int)d, (int)K,
                                      (int)chunk, &one, X, (int)ldx, (long long)chunk, z + r0,
                                      (int)n, (long long)chunk, &zero, P, (int)d,
                                      (long long)(d * K), (int)nfull),
            "cublasDgemmStridedBatched (weighted sums)"));
      if (rem > 0)
        GM_TRY(ctx.check_blas(cublasDgemm(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, (int)d, (int)K,
                                          (int)rem, &one, X + nfull * chunk, (int)ldx,
                                          z + r0 + nfull * chunk, (int)n, &zero,
                                          P + nfull * d * K, (int)d),
                              "cublasDgemm (weighted sums)"));
      sum_chunks_kernel<<<blocks_for(d * K), kThreads, 0, ctx.stream()>>>(
          P, nfull + (rem > 0), d * K, 1, r0 > 0, sums);
      GM_TRY(ctx.launched("weighted sums"));
    }
    means_kernel<<<blocks_for(d * K), kThreads, 0, ctx.stream()>>>(sums, nk, d, K, (double)n, w,
                                                                   mu);
    GM_TRY(ctx.launched("means"));
    // The scatter about the new means.
    for (int64_t r0 = 0; r0 < n; r0 += tile) {
      const int64_t rn = n - r0 < tile ? n - r0 : tile;
      const double *X;
      int64_t ldx;
      GM_TRY(rows(r0, rn, &X, &ldx));
      if (full && dmma) {
        int64_t rows_per_part = 0, parts = 0;
        gm_dmma_scatter_split(rn, K, dmma_slots, &rows_per_part, &parts);
        kScatterDmma[dmma_nb - 1]<<<(unsigned)(parts * ceil_div(K, GM_DMMA_WARPS)),
                                    kDmmaThreads, scatter_dmma_smem(dmma_nb), ctx.stream()>>>(
            X, ldx, rn, z + r0, n, mu, d, K, rows_per_part, parts, Y);
        GM_TRY(ctx.launched("tensor-core scatter"));
        sum_chunks_kernel<<<blocks_for(d * d * K), kThreads, 0, ctx.stream()>>>(
            Y, parts, d * d, K, r0 > 0, S);
        GM_TRY(ctx.launched("scatter"));
      } else if (full && fused_capable) {
        const int64_t parts = ceil_div(rn, kFusedChunk);
        scatter_fused_kernel<<<dim3((unsigned)parts, (unsigned)K), kScatterThreads, 0,
                               ctx.stream()>>>(X, ldx, rn, z + r0, n, mu, d, kFusedChunk, parts,
                                               Y);
        GM_TRY(ctx.launched("fused scatter"));
        sum_chunks_kernel<<<blocks_for(d * d * K), kThreads, 0, ctx.stream()>>>(
            Y, parts, d * d, K, r0 > 0, S);
        GM_TRY(ctx.launched("scatter"));
      } else if (full) {
        const int64_t parts = ceil_div(rn, chunk);
        const int64_t batches = K * parts;
        scatter_rows_kernel<<<dim3(grid_1d(chunk, kThreads),
                                   (unsigned)(batches < 65535 ? batches : 65535)),
                              kThreads, 0, ctx.stream()>>>(X, ldx, rn, z + r0, n, mu, d, K,
                                                           parts, chunk, Y);
        GM_TRY(ctx.launched("weighted centred rows"));
        GM_TRY(ctx.check_blas(
            cublasDgemmStridedBatched(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, (int)d, (int)d,
                                      (int)chunk, &one, Y, (int)chunk, (long long)(chunk * d), Y,
                                      (int)chunk, (long long)(chunk * d), &zero, P, (int)d,
                                      (long long)(d * d), (int)(K * parts)),
            "cublasDgemmStridedBatched (scatter)"));
        // P holds the (k, q) products: sum over q for each k into S.
        sum_chunks_kernel<<<blocks_for(d * d * K), kThreads, 0, ctx.stream()>>>(
            P, parts, d * d, K, r0 > 0, S);
        GM_TRY(ctx.launched("scatter"));
      } else {
        scatter_diag_kernel<<<dim3((unsigned)d, (unsigned)K), kThreads, 0, ctx.stream()>>>(
            X, ldx, rn, z + r0, n, mu, d, r0 > 0, S);
        GM_TRY(ctx.launched("diagonal scatter"));
      }
    }
    covariances_kernel<<<blocks_for(d * d * K), kThreads, 0, ctx.stream()>>>(
        S, nk, d, K, full, cov);
    GM_TRY(ctx.launched("covariances"));
    return download(host_nk, nk, (size_t)K * 8, "the component sizes");
  }

  gpuml_status get_params(int64_t K, double *hw, double *hmu, double *hcov) {
    if (hw) GM_TRY(download(hw, w, (size_t)K * 8, "copying the weights"));
    if (hmu) {
      GM_TRY(download(hmu, mu, (size_t)(K * d) * 8, "copying the means"));
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < d; j++) hmu[j + k * d] += data.centre[j];
    }
    if (hcov) GM_TRY(download(hcov, cov, (size_t)(K * d * d) * 8, "copying the covariances"));
    return GPUML_OK;
  }
};

}  // namespace
}  // namespace gm

using gm::Gmm;

static gpuml_status cuda_gmm_open(const struct gm_gmm_data *data, void **engine) {
  *engine = nullptr;
  Gmm *g = new (std::nothrow) Gmm(data);
  if (!g) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the mixture state");
  gpuml_status st = g->open();
  if (st) {
    delete g;
    return st;
  }
  *engine = g;
  return GPUML_OK;
}

static gpuml_status cuda_gmm_set_params(void *e, int64_t K, const double *weights,
                                                  const double *means,
                                                  const double *covariances) {
  return static_cast<Gmm *>(e)->set_params(K, weights, means, covariances);
}

static gpuml_status cuda_gmm_set_component(void *e, int64_t K, const double *weights,
                                                     int64_t k, const double *mean,
                                                     const double *covariance) {
  return static_cast<Gmm *>(e)->set_component(K, weights, k, mean, covariance);
}

static gpuml_status cuda_gmm_factor(void *e, int64_t K, int *info) {
  return static_cast<Gmm *>(e)->factor(K, info);
}

static gpuml_status cuda_gmm_estep(void *e, int64_t K, double *loglik) {
  return static_cast<Gmm *>(e)->estep(K, loglik);
}

static gpuml_status cuda_gmm_log_density(void *e, double *out) {
  Gmm *g = static_cast<Gmm *>(e);
  return g->download(out, g->logdens, (size_t)g->n * 8, "copying the log-densities");
}

static gpuml_status cuda_gmm_mstep(void *e, int64_t K, double *nk) {
  return static_cast<Gmm *>(e)->mstep(K, nk);
}

static gpuml_status cuda_gmm_get_params(void *e, int64_t K, double *weights,
                                                  double *means, double *covariances) {
  return static_cast<Gmm *>(e)->get_params(K, weights, means, covariances);
}

static gpuml_status cuda_gmm_get_z(void *e, int64_t K, double *z) {
  Gmm *g = static_cast<Gmm *>(e);
  return g->download(z, g->z, (size_t)g->n * (size_t)K * 8, "copying the responsibilities");
}

static gpuml_status cuda_gmm_set_structure(void *e, gm_gmm_structure structure) {
  Gmm *g = static_cast<Gmm *>(e);
  if (structure == GM_GMM_FULL_STRUCTURE && !g->full_capable)
    return gm_fail(GPUML_ERR_ARG, "gmm:internal",
                   "the engine was opened for diagonal covariances only");
  g->full = structure == GM_GMM_FULL_STRUCTURE;
  return GPUML_OK;
}

static void cuda_gmm_close(void *e) { delete static_cast<Gmm *>(e); }

static const gm_gmm_ops cuda_gmm_ops = {
    cuda_gmm_set_params, cuda_gmm_set_component, cuda_gmm_factor,     cuda_gmm_estep,
    cuda_gmm_log_density, cuda_gmm_mstep,        cuda_gmm_get_params, cuda_gmm_get_z,
    cuda_gmm_set_structure, cuda_gmm_close};

extern "C" const gm_gmm_backend gm_cuda_gmm = {cuda_gmm_open, &cuda_gmm_ops};
