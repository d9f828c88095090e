// Point sets on the device: the caller's column-major n x d matrix (double or float)
// uploaded in row blocks through one staging buffer and prepared for the distance
// kernels:
//   x     the points as given (type In), points-major (d x rows: one point's d values
//         contiguous), for the direct form, the cancellation guard and the exact re-ranking;
//   p     GEMM form only: the centred points in the compute type T, points-major;
//   norm  GEMM form only: |p_i|^2 (summed in fp64 from the T values, stored as T).
// With `split` (fp32 only), p holds each centred point as four blocks of b values,
// [hi | hi | lo | hi], hi the TF32 rounding of the fp32 value and lo the TF32 rounding of
// the rest: the first 3b values (query view) against the last 3b (reference view) give
// hi.hi + hi.lo + lo.hi in one TF32 GEMM of depth 3b (gemm_tile_tf32), the fp32-level
// dot product at tensor-core speed. b = split_block(d) is d rounded up to a multiple of 4,
// the padding zeros: the reference view then starts 16-byte aligned, and cuBLAS takes its
// aligned tensor-core kernels (at d = 50 the unaligned one was 2.5x slower per flop).
// A set is either resident (all n points on the device at once) or holds one row block
// at a time. The common centre is computed on the device (column means of the data,
// rounded to integers when all values are integers, as gm_gemm_centre() does on the CPU).
#ifndef GPUML_POINTS_CUH
#define GPUML_POINTS_CUH

#include <cuda_fp16.h>
#include <mma.h>
#include "cuda_common.cuh"

namespace gm {
namespace {

// Bytes of one slot of the context's page-locked ring (DeviceContext::pinned): uploads
// go through a staging buffer's two slots in turn, one packed by the host's threads while
// the copy out of the other runs. Fixed, so that a slot is never reallocated under a copy.
// 16 MB: a staged download of 192 MB ran at 43.5-44 GB/s against 31-35 with 8 MB
// (bench/RESULTS.md round 22, run EX).
constexpr size_t kPinnedChunk = (size_t)16 << 20;

// A device array to host memory, waited for: through two slots of the page-locked ring
// in turn (the copy into one while the host's threads move the other out), so that a
// large result lands at the link's speed and its fresh pages fault in on all threads
// (a plain copy to pageable memory reached 1.5 GB/s for 80 MB on an H100 host, and
// 16 MB of kNN lists into R's fresh vectors took 9-10 ms against 1.3 ms into reused
// ones). Below 1 MB a plain copy.
gpuml_status download(Context &ctx, void *host, const void *dev, size_t bytes,
                      const char *what) {
  if (bytes < ((size_t)1 << 20)) {
    GM_TRY(ctx.check(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, ctx.stream()),
                     what));
    return ctx.sync(what);
  }
  void *slot[2];
  cudaEvent_t landed[2];
  for (int s = 0; s < 2; s++) {
    GM_TRY(ctx.pinned(s, kPinnedChunk, &slot[s]));
    GM_TRY(ctx.new_event(&landed[s]));
  }
  const size_t chunks = (bytes + kPinnedChunk - 1) / kPinnedChunk;
  auto start = [&](size_t c) -> gpuml_status {
    const size_t at = c * kPinnedChunk, len = bytes - at < kPinnedChunk ? bytes - at : kPinnedChunk;
    GM_TRY(ctx.check(cudaMemcpyAsync(slot[c % 2], (const char *)dev + at, len,
                                     cudaMemcpyDeviceToHost, ctx.stream()),
                     what));
    return ctx.check(cudaEventRecord(landed[c % 2], ctx.stream()), what);
  };
  GM_TRY(start(0));
  for (size_t c = 0; c < chunks; c++) {
    if (c + 1 < chunks) GM_TRY(start(c + 1));  // its slot was emptied below, a round ago
    GM_TRY(ctx.check(cudaEventSynchronize(landed[c % 2]), what));
    const size_t at = c * kPinnedChunk, len = bytes - at < kPinnedChunk ? bytes - at : kPinnedChunk;
    gm_copy_parallel((char *)host + at, slot[c % 2], len, ctx.threads());
  }
  return GPUML_OK;
}

// Pages of host results faulted in while the device works (core's gm_pages_start: a
// thread of its own), waited for when this goes: an early return leaves no thread
// writing them.
struct PagesTouched {
  gm_pages_touched pages;
  PagesTouched() { gm_pages_init(&pages); }
  PagesTouched(const PagesTouched &) = delete;
  PagesTouched &operator=(const PagesTouched &) = delete;
  ~PagesTouched() { gm_pages_wait(&pages); }
};

// Host memory to a device array, through two slots of the page-locked ring in turn (the
// host's threads fill one while the copy out of the other runs): a pageable upload of
// large arrays reaches a fraction of the link's speed. Below 1 MB a plain copy (queued
// on the call's stream); above, waited for, so that the slots are free for the next use.
gpuml_status upload(Context &ctx, void *dev, const void *host, size_t bytes,
                    const char *what) {
  if (bytes < ((size_t)1 << 20))
    return ctx.check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, ctx.stream()),
                     what);
  void *slot[2];
  cudaEvent_t copied[2];
  for (int s = 0; s < 2; s++) {
    GM_TRY(ctx.pinned(s, kPinnedChunk, &slot[s]));
    GM_TRY(ctx.new_event(&copied[s]));
  }
  const size_t chunks = (bytes + kPinnedChunk - 1) / kPinnedChunk;
  for (size_t c = 0; c < chunks; c++) {
    const size_t at = c * kPinnedChunk, len = bytes - at < kPinnedChunk ? bytes - at : kPinnedChunk;
    // the slot's copy of two chunks ago is done before the host writes it again
    if (c >= 2) GM_TRY(ctx.check(cudaEventSynchronize(copied[c % 2]), what));
    gm_copy_parallel(slot[c % 2], (const char *)host + at, len, ctx.threads());
    GM_TRY(ctx.check(cudaMemcpyAsync((char *)dev + at, slot[c % 2], len, cudaMemcpyHostToDevice,
                                     ctx.stream()),
                     what));
    GM_TRY(ctx.check(cudaEventRecord(copied[c % 2], ctx.stream()), what));
  }
  return ctx.check(cudaEventSynchronize(copied[(chunks - 1) % 2]), what);
}

// What the staging buffer holds, so that a block uploaded once (for the centre) is not
// uploaded again for the preparation.
template <typename In>
struct Staging {
  In *raw = nullptr;
  int64_t rows = 0;  // capacity in rows of d values
  // Every value staged is checked for Inf and NaN on the host before it goes to the
  // device (stage_rows): the kNN searches, whose driver leaves that check to them
  // (gm_neighbour_ops.checks_staged_values).
  bool check = false;
  const In *tag_host = nullptr;
  int64_t tag_r0 = -1, tag_rn = 0;
  int pinned_base = 0;  // its two slots of the ring (a second buffer of a call takes 2, 3)
  int turn = 0;
  cudaEvent_t copied[2] = {nullptr, nullptr};  // the last copy out of each slot
};

// The block width of the split layout: d rounded up to a multiple of 4 (zeros after d).
inline __host__ __device__ int64_t split_block(int64_t d) { return (d + 3) & ~(int64_t)3; }

// The fp16 copy of a set's hi block (the half pass of knn.cu): half_width(d) values a
// point, d rounded up to a multiple of 8 (16-byte rows for the tensor-core kernels; the
// padding zeros).
inline __host__ __device__ int64_t half_width(int64_t d) { return (d + 7) & ~(int64_t)7; }

template <typename In, typename T>
struct PointSet {
  const In *host = nullptr;  // the caller's matrix, ld rows
  int64_t ld = 0, d = 0;
  bool gemm = false;
  bool split = false;              // p in the [hi | hi | lo | hi] layout (fp32 only)
  const double *centre = nullptr;  // device, d values (GEMM form)
  In *x = nullptr;
  T *p = nullptr;
  T *norm = nullptr;
  // The half pass's operands (fp32 split layout only, `half`): h holds each point's hi
  // block times 2^s as fp16; h_exp[0] is s (kHalfUnusable: no such s), h_exp[1] the
  // bits of the set's largest |hi| while s is found (half_operands).
  bool half = false;
  __half *h = nullptr;
  int *h_exp = nullptr;
  int64_t cap = 0;
  int64_t first = -1, count = 0;  // rows loaded: [first, first + count)

  const In *x_at(int64_t row) const { return x + (size_t)(row - first) * (size_t)d; }
  int64_t width() const { return split ? 4 * split_block(d) : d; }  // values per point in p
  const T *p_at(int64_t row) const { return p + (size_t)(row - first) * (size_t)width(); }
  const T *norm_at(int64_t row) const { return norm + (row - first); }
  const __half *h_at(int64_t row) const { return h + (size_t)(row - first) * (size_t)half_width(d); }
};

// The TF32 rounding of an fp32 value (round to nearest, 10 mantissa bits), as the tensor
// cores take it: the hardware conversion where TF32 exists (sm_80 and later), the same
// rounding by bits before (finite values; the data are checked finite).
__device__ __forceinline__ float to_tf32(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return nvcuda::wmma::__float_to_tf32(f);
#else
  unsigned u = __float_as_uint(f);
  u += 0x00000fffu + ((u >> 13) & 1u);  // round to nearest, ties to even, at bit 13
  return __uint_as_float(u & 0xffffe000u);
#endif
}

// Bytes of device memory one point takes in a set.
template <typename In, typename T>
inline size_t point_bytes(int64_t d, bool gemm, bool split = false) {
  return (size_t)d * sizeof(In) +
         (gemm ? (size_t)(split ? 4 * split_block(d) : d) * sizeof(T) + sizeof(T) : 0);
}

// Stores the centred value v of point i, dimension t, in p (plain or split layout; the
// split layout's padding is zeroed once, when p is allocated).
template <typename T>
__device__ __forceinline__ void store_centred(T *p, int64_t i, int64_t t, int64_t d, bool split,
                                              double v) {
  if constexpr (sizeof(T) == 4) {
    if (split) {
      const float f = (float)v;
      const float hi = to_tf32(f);
      const float lo = to_tf32(f - hi);
      const int64_t b = split_block(d);
      T *row = p + (size_t)i * (size_t)(4 * b);
      row[t] = hi;
      row[b + t] = hi;
      row[2 * b + t] = lo;
      row[3 * b + t] = hi;
      return;
    }
  }
  p[(size_t)i * (size_t)d + t] = (T)v;
}

// raw: rows x d column-major (ld = rows) -> x (points-major, In) and p = (T)(x - centre).
template <typename In, typename T>
__global__ void prepare_kernel(const In *__restrict__ raw, int64_t rows, int64_t d,
                               const double *__restrict__ centre, In *__restrict__ x,
                               T *__restrict__ p, bool split) {
  __shared__ double tile[32][33];
  const int64_t i0 = (int64_t)blockIdx.x * 32;
  for (int64_t t0 = (int64_t)blockIdx.y * 32; t0 < d; t0 += (int64_t)gridDim.y * 32) {
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
      int64_t t = t0 + r, i = i0 + threadIdx.x;
      if (i < rows && t < d) tile[r][threadIdx.x] = (double)raw[i + t * rows];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
      int64_t i = i0 + r, t = t0 + threadIdx.x;
      if (i < rows && t < d) {
        double v = tile[threadIdx.x][r];
        x[i * d + t] = (In)v;
        if (p) store_centred(p, i, t, d, split, v - centre[t]);
      }
    }
    __syncthreads();
  }
}

// norm[i] = sum_t p[i, t]^2, one warp per point, fixed reduction order. In the split
// layout the point is hi + lo, the vector whose products the split GEMM forms.
template <typename T>
__global__ void norm_kernel(const T *__restrict__ p, int64_t rows, int64_t d,
                            T *__restrict__ norm, bool split) {
  const int lane = threadIdx.x & 31;
  const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (i >= rows) return;
  const int64_t b = split ? split_block(d) : d;
  const T *pi = p + i * (split ? 4 * b : d);
  double s = 0;
  for (int64_t t = lane; t < d; t += 32) {
    double v = split ? (double)pi[t] + (double)pi[2 * b + t] : (double)pi[t];
    s += v * v;
  }
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(kFullMask, s, off);
  if (lane == 0) norm[i] = (T)s;
}

// Per column of raw (rows x d): the sum, whether every value is an integer, and the
// largest magnitude. One block per column, fixed reduction order.
template <typename In>
__global__ void column_stats_kernel(const In *__restrict__ raw, int64_t rows, int64_t d,
                                    double *__restrict__ sum, int *__restrict__ integer,
                                    double *__restrict__ max_abs) {
  __shared__ double s_sum[256], s_max[256];
  __shared__ int s_int[256];
  for (int64_t t = blockIdx.x; t < d; t += gridDim.x) {
    double s = 0, mx = 0;
    int ok = 1;
    for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
      double v = (double)raw[i + t * rows];
      s += v;
      if (v != rint(v)) ok = 0;
      mx = fmax(mx, fabs(v));
    }
    s_sum[threadIdx.x] = s;
    s_max[threadIdx.x] = mx;
    s_int[threadIdx.x] = ok;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
      if ((int)threadIdx.x < w) {
        s_sum[threadIdx.x] += s_sum[threadIdx.x + w];
        s_max[threadIdx.x] = fmax(s_max[threadIdx.x], s_max[threadIdx.x + w]);
        s_int[threadIdx.x] &= s_int[threadIdx.x + w];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      sum[t] = s_sum[0];
      integer[t] = s_int[0];
      max_abs[t] = s_max[0];
    }
    __syncthreads();
  }
}

// The report of a staged block holding Inf or NaN (Staging::check): the driver that
// called the backend names the first such value (gm_check_values).
inline gpuml_status staged_non_finite(Context &ctx) {
  return gm_fail(GM_STATUS_NON_FINITE, ctx.id(),
                 "a value staged for the GPU is not finite (NA, NaN or Inf)");
}

// Copies rows [r0, r0 + rn) of the caller's matrix into the staging buffer (rn <= its
// capacity), unless it holds them already. With sg.check, no value reaches the device
// unchecked: the slots of the page-locked ring are filled by gm_pack_rows, which tests
// every value it copies, and a block copied straight from the caller's memory is read by
// gm_rows_non_finite first; a non-finite value stops the staging (GM_STATUS_NON_FINITE)
// before its chunk is copied, so the device holds only the finite blocks before it and
// nothing that ran on them can meet a NaN. (The tag is set only once a block is staged
// whole: a block skipped as already held was checked when it was staged.)
template <typename In>
gpuml_status stage_rows(Context &ctx, Staging<In> &sg, const In *host, int64_t ld, int64_t d,
                        int64_t r0, int64_t rn, cudaStream_t stream) {
  if (sg.tag_host == host && sg.tag_r0 == r0 && sg.tag_rn == rn) return GPUML_OK;
  sg.tag_host = nullptr;
  // Small blocks go straight from the caller's (pageable) memory: the ring's first use
  // pins its slots (tens of ms), which only large uploads repay. GPUML_CUDA_PAGEABLE=1
  // copies every block so, for comparisons.
  static const bool pageable = env_int("GPUML_CUDA_PAGEABLE") != 0;
  const int64_t chunk = (int64_t)(kPinnedChunk / ((size_t)d * sizeof(In)));
  if (pageable || chunk < 1 || (size_t)rn * (size_t)d * sizeof(In) < kPinnedChunk / 2) {
    if (sg.check && gm_rows_non_finite(host, ld, r0, rn, d, sizeof(In)))
      return staged_non_finite(ctx);
    GM_TRY(ctx.check(cudaMemcpy2DAsync(sg.raw, (size_t)rn * sizeof(In), host + r0,
                                       (size_t)ld * sizeof(In), (size_t)rn * sizeof(In),
                                       (size_t)d, cudaMemcpyHostToDevice, stream),
                     "copying points to the GPU"));
  } else {
    for (int64_t c0 = 0; c0 < rn; c0 += chunk) {
      const int64_t cn = rn - c0 < chunk ? rn - c0 : chunk;
      const int s = sg.turn;
      sg.turn ^= 1;
      void *pin = nullptr;
      GM_TRY(ctx.pinned(sg.pinned_base + s, kPinnedChunk, &pin));
      if (!sg.copied[s])
        GM_TRY(ctx.new_event(&sg.copied[s]));
      else  // the slot's previous copy must be done before it is packed again
        GM_TRY(ctx.check(cudaEventSynchronize(sg.copied[s]), "waiting for a staging slot"));
      // (the slot, left half packed, is free: its last copy is done and none is queued)
      if (gm_pack_rows(host, ld, r0 + c0, cn, d, sizeof(In), pin) && sg.check)
        return staged_non_finite(ctx);
      GM_TRY(ctx.check(cudaMemcpy2DAsync(sg.raw + c0, (size_t)rn * sizeof(In), pin,
                                         (size_t)cn * sizeof(In), (size_t)cn * sizeof(In),
                                         (size_t)d, cudaMemcpyHostToDevice, stream),
                       "copying points to the GPU"));
      GM_TRY(ctx.check(cudaEventRecord(sg.copied[s], stream), "cudaEventRecord"));
    }
  }
  sg.tag_host = host;
  sg.tag_r0 = r0;
  sg.tag_rn = rn;
  return GPUML_OK;
}

// Zeros the padding of the split layout (all of p: it is written only below d). Waits for
// it: the points may be written next on another stream (the query tiles loaded ahead).
template <typename T>
gpuml_status zero_split_padding(Context &ctx, T *p, int64_t rows, int64_t d, bool split) {
  if (!split || split_block(d) == d) return GPUML_OK;
  GM_TRY(ctx.check(cudaMemsetAsync(p, 0, (size_t)rows * 4 * (size_t)split_block(d) * sizeof(T),
                                   ctx.stream()),
                   "zeroing the padding of the centred points"));
  return ctx.sync("zeroing the padding of the centred points");
}

// ---- The half pass's operands ---------------------------------------------------------
// A set's hi values (TF32: 11-bit significands) times 2^s, stored as fp16 (also 11 bits):
// exact wherever the scaled value is a normal fp16. s puts the set's largest |hi| in
// [2^14, 2^15), so nothing overflows, and only a value below 2^-28 of the largest rounds,
// to the fp16 subnormals' grid: |h 2^-s - hi| <= 2^-25 2^-s (certify_kernel's alpha).
// s is kept in [-60, 60] so that the GEMM's scale 2^-(s_r + s_q) is a normal fp32; a set
// whose largest |hi| is 2^75 or more has no such s (kHalfUnusable): its lists all fail
// the certificate and take the split pass.
constexpr int kHalfUnusable = -1000;
constexpr int kHalfExponentMax = 60;

// Both kernels give a point to a warp (threadIdx.y; blocks of kHalfRows warps, grid-stride
// over the points) and its values to the lanes: no 64-bit division or modulo an element.
constexpr int kHalfLanes = 32, kHalfRows = 8;

__global__ void half_max_kernel(const float *__restrict__ p, int64_t rows, int64_t d,
                                int64_t ld, int *__restrict__ h_exp) {
  float m = 0;
  for (int64_t i = (int64_t)blockIdx.x * kHalfRows + threadIdx.y; i < rows;
       i += (int64_t)gridDim.x * kHalfRows) {
    const float *row = p + (size_t)i * (size_t)ld;
    for (int64_t t = threadIdx.x; t < d; t += kHalfLanes) m = fmaxf(m, fabsf(row[t]));
  }
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
  if (threadIdx.x == 0) atomicMax((unsigned *)(h_exp + 1), __float_as_uint(m));
}

__global__ void half_exponent_kernel(int *h_exp) {
  const float m = __uint_as_float((unsigned)h_exp[1]);
  int s = m > 0 ? 14 - ilogbf(m) : 0;
  if (s > kHalfExponentMax) s = kHalfExponentMax;  // tiny values: only more subnormals
  if (s < -kHalfExponentMax) s = kHalfUnusable;
  h_exp[0] = s;
}

__global__ void to_half_kernel(const float *__restrict__ p, int64_t rows, int64_t d, int64_t ld,
                               const int *__restrict__ h_exp, __half *__restrict__ h) {
  const int s = h_exp[0];
  const float scale = s == kHalfUnusable ? 0.0f : __int_as_float((127 + s) << 23);  // 2^s
  const int64_t hw = half_width(d);
  for (int64_t i = (int64_t)blockIdx.x * kHalfRows + threadIdx.y; i < rows;
       i += (int64_t)gridDim.x * kHalfRows) {
    const float *row = p + (size_t)i * (size_t)ld;
    __half *out = h + (size_t)i * (size_t)hw;
    for (int64_t t = threadIdx.x; t < hw; t += kHalfLanes)
      out[t] = __float2half_rn(t < d ? row[t] * scale : 0.0f);
  }
}

// The half operands of the rows a set holds, on `stream` (the split layout's hi block).
template <typename In, typename T>
gpuml_status half_operands(Context &ctx, PointSet<In, T> &ps, cudaStream_t stream) {
  if constexpr (sizeof(T) != 4) {
    return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: half operands of fp64 points");
  } else {
    if (!ps.split) return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: half operands need the split layout");
    const int64_t rows = ps.count, ld = ps.width();
    GM_TRY(ctx.check(cudaMemsetAsync(ps.h_exp + 1, 0, sizeof(int), stream),
                     "clearing the largest value"));
    const unsigned blocks = grid_1d(rows, kHalfRows) < 2048u ? grid_1d(rows, kHalfRows) : 2048u;
    const dim3 block(kHalfLanes, kHalfRows);
    half_max_kernel<<<blocks, block, 0, stream>>>(ps.p, rows, ps.d, ld, ps.h_exp);
    GM_TRY(ctx.launched("the largest value"));
    half_exponent_kernel<<<1, 1, 0, stream>>>(ps.h_exp);
    GM_TRY(ctx.launched("the fp16 scale"));
    to_half_kernel<<<blocks, block, 0, stream>>>(ps.p, rows, ps.d, ld, ps.h_exp, ps.h);
    return ctx.launched("the fp16 operands");
  }
}

template <typename In, typename T>
gpuml_status alloc_points(Context &ctx, PointSet<In, T> &ps, int64_t cap) {
  ps.cap = cap;
  ps.first = -1;
  ps.count = 0;
  GM_TRY(ctx.alloc(&ps.x, (size_t)cap * (size_t)ps.d, "points"));
  if (ps.gemm) {
    GM_TRY(ctx.alloc(&ps.p, (size_t)cap * (size_t)ps.width(), "centred points"));
    GM_TRY(zero_split_padding(ctx, ps.p, cap, ps.d, ps.split));
    GM_TRY(ctx.alloc(&ps.norm, (size_t)cap, "squared norms"));
  }
  if (ps.half) {
    GM_TRY(ctx.alloc(&ps.h, (size_t)cap * (size_t)half_width(ps.d), "fp16 points"));
    GM_TRY(ctx.alloc(&ps.h_exp, 2, "the fp16 scale"));
  }
  return GPUML_OK;
}

// Makes rows [r0, r0 + rn) of the set available (rn <= cap), on `stream`. A no-op when
// they are.
template <typename In, typename T>
gpuml_status load_points(Context &ctx, Staging<In> &sg, PointSet<In, T> &ps, int64_t r0,
                         int64_t rn, cudaStream_t stream) {
  if (ps.first >= 0 && r0 >= ps.first && r0 + rn <= ps.first + ps.count) return GPUML_OK;
  if (rn > ps.cap) return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: point block too large");
  ps.first = -1;
  for (int64_t c0 = 0; c0 < rn; c0 += sg.rows) {
    const int64_t cn = rn - c0 < sg.rows ? rn - c0 : sg.rows;
    GM_TRY(stage_rows(ctx, sg, ps.host, ps.ld, ps.d, r0 + c0, cn, stream));
    dim3 block(32, 8);
    int64_t gy = (ps.d + 31) / 32;
    dim3 grid(grid_1d(cn, 32), (unsigned)(gy < 65535 ? gy : 65535));
    prepare_kernel<In, T><<<grid, block, 0, stream>>>(
        sg.raw, cn, ps.d, ps.centre, ps.x + (size_t)c0 * (size_t)ps.d,
        ps.gemm ? ps.p + (size_t)c0 * (size_t)ps.width() : (T *)nullptr, ps.split);
    GM_TRY(ctx.launched("preparing points"));
    if (ps.gemm) {
      norm_kernel<T><<<grid_1d(cn * 32, 256), 256, 0, stream>>>(
          ps.p + (size_t)c0 * (size_t)ps.width(), cn, ps.d, ps.norm + c0, ps.split);
      GM_TRY(ctx.launched("squared norms"));
    }
  }
  ps.first = r0;
  ps.count = rn;
  if (ps.half) GM_TRY(half_operands(ctx, ps, stream));
  return GPUML_OK;
}

template <typename In, typename T>
gpuml_status load_points(Context &ctx, Staging<In> &sg, PointSet<In, T> &ps, int64_t r0,
                         int64_t rn) {
  return load_points(ctx, sg, ps, r0, rn, ctx.stream());
}

// A small malloc'd host array freed on scope exit.
template <typename P>
struct HostArray {
  P *p = nullptr;
  ~HostArray() { free(p); }
  bool alloc(size_t count) {
    p = (P *)gm_alloc(count, sizeof(P));
    return p != nullptr;
  }
};

// Column statistics gathered block by block for the common centre.
struct CentreStats {
  int64_t d = 0;
  double *sum_d = nullptr, *max_d = nullptr;
  int *int_d = nullptr;
  HostArray<double> sum, mx, part_sum, part_max;
  HostArray<int> part_int;
  int all_int = 1;

  gpuml_status init(Context &ctx, int64_t dim) {
    d = dim;
    GM_TRY(ctx.alloc(&sum_d, (size_t)d, "column sums"));
    GM_TRY(ctx.alloc(&max_d, (size_t)d, "column maxima"));
    GM_TRY(ctx.alloc(&int_d, (size_t)d, "column flags"));
    if (!sum.alloc(d) || !mx.alloc(d) || !part_sum.alloc(d) || !part_max.alloc(d) ||
        !part_int.alloc(d))
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate column statistics");
    for (int64_t t = 0; t < d; t++) sum.p[t] = mx.p[t] = 0;
    return GPUML_OK;
  }

  // Adds a staged block of cn rows (of x when is_x; of y only the integer test counts).
  template <typename In>
  gpuml_status add(Context &ctx, const In *raw, int64_t cn, bool is_x) {
    unsigned g = (unsigned)(d < 65535 ? d : 65535);
    column_stats_kernel<In><<<g, 256, 0, ctx.stream()>>>(raw, cn, d, sum_d, int_d, max_d);
    GM_TRY(ctx.launched("column statistics"));
    GM_TRY(ctx.check(cudaMemcpyAsync(part_sum.p, sum_d, d * sizeof(double),
                                     cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying column sums"));
    GM_TRY(ctx.check(cudaMemcpyAsync(part_max.p, max_d, d * sizeof(double),
                                     cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying column maxima"));
    GM_TRY(ctx.check(cudaMemcpyAsync(part_int.p, int_d, d * sizeof(int),
                                     cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying column flags"));
    GM_TRY(ctx.sync("column statistics"));
    for (int64_t t = 0; t < d; t++) {
      if (is_x) sum.p[t] += part_sum.p[t];
      if (part_max.p[t] > mx.p[t]) mx.p[t] = part_max.p[t];
      if (!part_int.p[t]) all_int = 0;
    }
    return GPUML_OK;
  }

  // y matters (for the integer test) only when all of x is integer.
  template <typename In>
  gpuml_status add_y(Context &ctx, Staging<In> &sg, const In *y, int64_t m) {
    for (int64_t c0 = 0; y && all_int && c0 < m; c0 += sg.rows) {
      const int64_t cn = m - c0 < sg.rows ? m - c0 : sg.rows;
      GM_TRY(stage_rows(ctx, sg, y, m, d, c0, cn, ctx.stream()));
      GM_TRY(add(ctx, sg.raw, cn, false));
    }
    return GPUML_OK;
  }

  // The column means of x, rounded to integers when all values of x and y are integers
  // (then the GEMM of small integers is exact and ties stay exact ties), to the device.
  gpuml_status finish(Context &ctx, int64_t n, double *centre_dev) {
    HostArray<double> mu;
    if (!mu.alloc(d)) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the centre");
    double max_abs = 0;
    for (int64_t t = 0; t < d; t++) {
      mu.p[t] = sum.p[t] / (double)n;
      if (mx.p[t] > max_abs) max_abs = mx.p[t];
    }
    if (all_int && (double)d * 16 * max_abs * max_abs < 9007199254740992.0)
      for (int64_t t = 0; t < d; t++) mu.p[t] = nearbyint(mu.p[t]);
    GM_TRY(ctx.check(cudaMemcpyAsync(centre_dev, mu.p, d * sizeof(double),
                                     cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the centre"));
    return ctx.sync("copying the centre");  // mu is freed on return
  }
};

// The common centre of x (n x d) and y (m x d, may be NULL) for the GEMM form, computed
// on the device block by block (for point sets that are not resident).
template <typename In>
gpuml_status compute_centre(Context &ctx, Staging<In> &sg, const In *x, int64_t n,
                            const In *y, int64_t m, int64_t d, double *centre_dev) {
  CentreStats cs;
  GM_TRY(cs.init(ctx, d));
  for (int64_t c0 = 0; c0 < n; c0 += sg.rows) {
    const int64_t cn = n - c0 < sg.rows ? n - c0 : sg.rows;
    GM_TRY(stage_rows(ctx, sg, x, n, d, c0, cn, ctx.stream()));
    GM_TRY(cs.add(ctx, sg.raw, cn, true));
  }
  GM_TRY(cs.add_y(ctx, sg, y, m));
  return cs.finish(ctx, n, centre_dev);
}

// p = (T)(x - centre) for rows already on the device.
template <typename In, typename T>
__global__ void centre_points_kernel(const In *__restrict__ x, int64_t count, int64_t d,
                                     const double *__restrict__ centre, T *__restrict__ p,
                                     bool split) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x)
    store_centred(p, e / d, e % d, d, split, (double)x[e] - centre[e % d]);
}

// A resident set in the GEMM form with the centre computed on the way: each block is
// uploaded once, its rows written to x and its columns added to the statistics; then
// the centre, the centred copy and the norms follow on the device.
template <typename In, typename T>
gpuml_status load_resident_with_centre(Context &ctx, Staging<In> &sg, PointSet<In, T> &ps,
                                       const In *y, int64_t m, double *centre_dev) {
  const int64_t n = ps.ld, d = ps.d;
  if (ps.cap < n) return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: set is not resident");
  CentreStats cs;
  GM_TRY(cs.init(ctx, d));
  for (int64_t c0 = 0; c0 < n; c0 += sg.rows) {
    const int64_t cn = n - c0 < sg.rows ? n - c0 : sg.rows;
    GM_TRY(stage_rows(ctx, sg, ps.host, n, d, c0, cn, ctx.stream()));
    dim3 block(32, 8);
    int64_t gy = (d + 31) / 32;
    dim3 grid(grid_1d(cn, 32), (unsigned)(gy < 65535 ? gy : 65535));
    prepare_kernel<In, T><<<grid, block, 0, ctx.stream()>>>(
        sg.raw, cn, d, nullptr, ps.x + (size_t)c0 * (size_t)d, (T *)nullptr, false);
    GM_TRY(ctx.launched("preparing points"));
    GM_TRY(cs.add(ctx, sg.raw, cn, true));
  }
  GM_TRY(cs.add_y(ctx, sg, y, m));
  GM_TRY(cs.finish(ctx, n, centre_dev));
  const int64_t count = n * d;
  centre_points_kernel<In, T><<<grid_1d(count, 256) < 65536u * 8 ? grid_1d(count, 256) : 65536u * 8,
                                256, 0, ctx.stream()>>>(ps.x, count, d, centre_dev, ps.p,
                                                        ps.split);
  GM_TRY(ctx.launched("centring points"));
  norm_kernel<T><<<grid_1d(n * 32, 256), 256, 0, ctx.stream()>>>(ps.p, n, d, ps.norm,
                                                                   ps.split);
  GM_TRY(ctx.launched("squared norms"));
  ps.first = 0;
  ps.count = n;
  if (ps.half) GM_TRY(half_operands(ctx, ps, ctx.stream()));
  return GPUML_OK;
}

// Rows of the staging buffer: as many as fit in `bytes`, at least 1, at most `rows`.
template <typename In>
inline int64_t staging_rows(size_t bytes, int64_t d, int64_t rows) {
  int64_t r = (int64_t)(bytes / ((size_t)d * sizeof(In)));
  if (r < 1) r = 1;
  if (r > rows) r = rows;
  return r;
}

}  // namespace
}  // namespace gm

#endif
