// The fused screen of the kNN search for small d: a tile of approximate squared distances
// between a chunk of reference points and a tile of queries, computed on the TF32 tensor
// cores (mma.sync m16n8k8, inline PTX) and screened in registers against each query's
// threshold; only the few survivors leave the kernel, queued per query. It replaces
// "cuBLAS writes a 4-byte distance tile, a selection kernel reads it back", whose memory
// traffic dominates when d is small (100,000 x 500,000 points at d = 64: two 4-byte
// passes over every pair against 128 flops per pair).
//
// Operands: both sets in the split layout of points.cuh (each point 4 blocks of
// w = split_block(d) floats, [hi | hi | lo | hi]); only the first block, hi, is read.
// hi holds TF32 values already, so the tensor cores take their fp32 bits exactly and
// acc = hi_r . hi_q is accumulated in fp32. This is the hi.hi part of the split GEMM:
// an approximation that the caller's later stages must allow for.
//
// The rule, per pair (r, q), identical to select_small_gemm_kernel's (select.cuh) so that
// the lists built from the queues obey the same rules:
//   g = -2 acc, norms = nr[r] + nq[q], s = norms + g,
//   screen = s < kCancellationGuard * norms ? 0 : s;
//   if screen <= thr[q] (and the pair is not a point with itself in a self-search):
//     val = gemm_value(g, nr[r], nq[q], xr_r, xq_q, d); if val <= thr[q], queue (val, r)
// in query q's ColumnFeed (select.cuh) with the roles of its column side swapped: the
// queue's owner is the query, the entry the reference's row in the chunk. A queue
// offered more than `slots` values keeps counting, and the kernel then sets *overflow.
//
// The epilogue is the cost to keep down (at d = 64, 2 tensor-core instructions per
// thread and pair against the rule's 5 or 6 plain ones), so every pair first takes a
// cheaper test, fma(acc, -2, nr[r]) <= c[q], with c[q] computed once per block:
//   c[q] = max(thr - nq, G maxnr - (1 - G) nq) + 2^-18 (maxnr + nq + |thr|)
// (maxnr the largest norm of the block's references, G = kCancellationGuard), rounded
// up to fp32. It passes every pair the rule passes: the first term covers s <= thr, the
// second the guard's case (s < G norms gives nr - 2 acc < G nr - (1 - G) nq), and the
// slack exceeds the few fp32 roundings in which the two forms differ (|g| <= 1.01 (nr +
// nq), so they differ by at most about 5 2^-24 (maxnr + nq)). Only pairs that pass it
// take the exact rule, out of shared memory, in a loop that is rare and may be slow.
//
// Tiles: a block takes 128 references x 128 queries with 8 warps (2 x 4, each 64 x 32:
// 4 x 4 mma tiles, 64 fp32 accumulators per thread); the depth goes in steps of 32
// floats through shared memory, staged with 16-byte cp.async (double-buffered), the
// rows padded to 36 floats so that ldmatrix (which moves 8 x 4 fp32 blocks as its 8 x 8
// b16 matrices: exactly the TF32 fragments) reads without bank conflicts. Two blocks
// fit on a multiprocessor, so one block's loads overlap the other's products at small w.
// The grid's x runs over query tiles, so that the blocks in flight share a reference
// tile (read from memory once) while the query tile set stays in L2.
//
// TF32 mma exists on sm_80 and later; the kernel is compiled for every architecture of
// the build with an empty body below sm_80, and screen_available() tells whether the
// device runs code built for sm_80 or later (a build with PTX only for compute_75 does
// not, on any device).
#ifndef GPUML_KNN_SCREEN_CUH
#define GPUML_KNN_SCREEN_CUH

#include "select.cuh"

namespace gm {
namespace {

constexpr int kScreenRefs = 128;     // references per block (the mma's M side)
constexpr int kScreenQueries = 128;  // queries per block (the mma's N side)
constexpr int kScreenStep = 32;      // depth (floats) per shared-memory stage
constexpr int kScreenStages = 2;
constexpr int kScreenRow = kScreenStep + 4;  // padded row: 144 bytes, 8 rows hit 32 banks
constexpr int kScreenWarpsM = 2, kScreenWarpsN = 4;
constexpr int kScreenThreads = kScreenWarpsM * kScreenWarpsN * 32;
constexpr int kScreenWarpRefs = kScreenRefs / kScreenWarpsM;         // 64
constexpr int kScreenWarpQueries = kScreenQueries / kScreenWarpsN;  // 32
constexpr int kScreenMT = kScreenWarpRefs / 16;                     // mma tiles, M side
constexpr int kScreenNT = kScreenWarpQueries / 8;                   // mma tiles, N side
constexpr int kScreenAcc = kScreenMT * kScreenNT * 4;               // accumulators a thread
constexpr int kScreenStageFloats = (kScreenRefs + kScreenQueries) * kScreenRow;
constexpr size_t kScreenSharedBytes = (size_t)kScreenStages * kScreenStageFloats * sizeof(float);

static_assert(kScreenRefs == kScreenThreads / 2 && kScreenQueries == kScreenThreads / 2,
              "the prologue gives one reference and one query to each thread");
static_assert((size_t)kScreenAcc * kScreenThreads * sizeof(float) <= kScreenSharedBytes,
              "the survivors' pass keeps every accumulator of the block in the stages");
static_assert(kScreenNT % 2 == 0, "ldmatrix.x4 loads the B fragments of two mma tiles");

template <typename In>
struct ScreenArgs {
  const float *pr, *pq;  // split layout, 4w floats per point (hi first)
  const float *nr, *nq;  // squared norms
  const In *xr, *xq;     // the points as given (the cancellation guard)
  int64_t rn, qn, d, w, r0, q0;
  int self;
  ColumnFeed<float> feed;  // owner: the query; entry: the reference's row in the chunk
  int *overflow;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// 16 bytes global -> shared, asynchronously; src_bytes = 0 writes zeros and reads nothing
// (rows past the end, depth past w).
__device__ __forceinline__ void screen_copy16(float *dst, const float *src, int src_bytes) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void screen_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int pending>
__device__ __forceinline__ void screen_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(pending) : "memory");
}
// Four 8 x 4 fp32 blocks (ldmatrix's 8 x 8 b16 matrices) from shared memory: lanes 8i to
// 8i + 7 give the row addresses of block i, and each thread receives, of every block,
// the element (lane / 4, lane % 4): the TF32 fragment layout of mma.m16n8k8.
__device__ __forceinline__ void screen_ldmatrix4(unsigned (&r)[4], const float *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// c += a b, m16n8k8, TF32 operands (exact TF32 values: their fp32 bits), fp32 accumulators.
__device__ __forceinline__ void screen_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                           unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The exact rule for one pair that passed the cheap test (r, q within the chunk and tile).
template <typename In>
__device__ __noinline__ void screen_offer(const ScreenArgs<In> &a, int64_t r, int64_t q,
                                          float acc) {
  if (r >= a.rn || q >= a.qn) return;
  if (a.self && a.r0 + r == a.q0 + q) return;
  const float nrr = a.nr[r], nqq = a.nq[q], thr = a.feed.thr[q];
  const float g = -2.0f * acc;
  const float norms = nrr + nqq;
  const float s = norms + g;
  const float screen = s < (float)kCancellationGuard * norms ? 0.0f : s;
  if (!(screen <= thr)) return;
  const float val = gemm_value<float, In>(g, nrr, nqq, a.xr + (size_t)r * (size_t)a.d,
                                          a.xq + (size_t)q * (size_t)a.d, a.d);
  if (!(val <= thr)) return;
  // column_push's queue, and the overflow reported: the queue then holds only some of the
  // values, and the caller must know it.
  const ColumnFeed<float> &f = a.feed;
  const int slot = atomicAdd(f.count + q, 1);
  if (slot < f.slots) {
    f.slot_d[q * f.slots + slot] = val;
    f.slot_q[q * f.slots + slot] = (int)r;
  } else {
    *a.overflow = 1;
  }
}
#endif

template <typename In>
__global__ void __launch_bounds__(kScreenThreads, 2)
    screen_kernel(const __grid_constant__ ScreenArgs<In> a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) float smem[];
  __shared__ float s_nr[kScreenRefs];     // the tile's reference norms (NaN past rn)
  __shared__ float s_c[kScreenQueries];   // the cheap test's bound per query (NaN past qn)
  __shared__ float s_wmax[kScreenRefs / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kScreenWarpsN, wn = warp % kScreenWarpsN;
  const int g = lane >> 2, t4 = lane & 3;
  const int64_t w = a.w, ld = 4 * w;
  const int nk = (int)((w + kScreenStep - 1) / kScreenStep);
  const int64_t q_tile = (int64_t)blockIdx.x * kScreenQueries;

  // This thread's share of a stage: rows tid / 8 + 32 i of both tiles, 16 bytes at
  // column 4 (tid % 8) of the step.
  const int crow = tid >> 3, ccol = (tid & 7) * 4;
  auto load_stage = [&](int stage, int kt, int64_t r_tile) {
    float *sa = smem + stage * kScreenStageFloats;
    float *sb = sa + kScreenRefs * kScreenRow;
    const int64_t k = (int64_t)kt * kScreenStep + ccol;
    const bool kin = k < w;
#pragma unroll
    for (int i = 0; i < kScreenRefs / 32; i++) {
      const int row = crow + 32 * i;
      const bool ok = kin && r_tile + row < a.rn;
      screen_copy16(sa + row * kScreenRow + ccol, ok ? a.pr + (r_tile + row) * ld + k : a.pr,
                    ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < kScreenQueries / 32; i++) {
      const int row = crow + 32 * i;
      const bool ok = kin && q_tile + row < a.qn;
      screen_copy16(sb + row * kScreenRow + ccol, ok ? a.pq + (q_tile + row) * ld + k : a.pq,
                    ok ? 16 : 0);
    }
  };

  for (int64_t rt = blockIdx.y; rt * kScreenRefs < a.rn; rt += gridDim.y) {
    const int64_t r_tile = rt * kScreenRefs;
    __syncthreads();  // the previous tile's survivors' pass is done with the stages
#pragma unroll
    for (int s = 0; s < kScreenStages - 1; s++) {
      if (s < nk) load_stage(s, s, r_tile);
      screen_commit();
    }

    // While the first stage arrives: the references' norms and the queries' bounds of
    // the cheap test (the header's c[q]), which needs the largest norm of the tile.
    float nqq = 0, thr = 0;
    bool qin = false;
    if (tid < kScreenRefs) {
      const int64_t r = r_tile + tid;
      const bool in = r < a.rn;
      const float v = in ? a.nr[r] : 0.0f;
      s_nr[tid] = in ? v : __int_as_float(0x7fffffff);
      float m = v;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
      if (lane == 0) s_wmax[warp] = m;
    } else {
      const int64_t q = q_tile + (tid - kScreenRefs);
      qin = q < a.qn;
      if (qin) {
        nqq = a.nq[q];
        thr = a.feed.thr[q];
      }
    }
    __syncthreads();
    if (tid >= kScreenRefs) {
      float c = __int_as_float(0x7fffffff);
      if (qin) {
        float mf = s_wmax[0];
#pragma unroll
        for (int i = 1; i < kScreenRefs / 32; i++) mf = fmaxf(mf, s_wmax[i]);
        const double m = mf, n = nqq, th = thr, G = kCancellationGuard;
        const double bound =
            fmax(th - n, G * m - (1.0 - G) * n) + 0x1p-18 * (m + n + fabs(th));
        c = __double2float_ru(bound);
      }
      s_c[tid - kScreenRefs] = c;  // read after the main loop's first barrier
    }

    float acc[kScreenMT][kScreenNT][4];
#pragma unroll
    for (int i = 0; i < kScreenMT; i++)
#pragma unroll
      for (int j = 0; j < kScreenNT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    // ldmatrix row addresses: A (references, row-major [m][k]) blocks 0..3 are rows
    // 0-7 / 8-15 at depth 0-3, then the same at depth 4-7 (a0..a3); B (queries, [n][k],
    // the mma's column-major k x n) blocks 0..3 are b0, b1 of one n8 tile, then of the next.
    const int a_off = (wm * kScreenWarpRefs + (lane & 7) + ((lane >> 3) & 1) * 8) * kScreenRow +
                      (lane >> 4) * 4;
    const int b_off = kScreenRefs * kScreenRow +
                      (wn * kScreenWarpQueries + (lane & 7) + (lane >> 4) * 8) * kScreenRow +
                      ((lane >> 3) & 1) * 4;
    for (int kt = 0; kt < nk; kt++) {
      screen_wait<kScreenStages - 2>();
      __syncthreads();  // the stage is complete for all; the one refilled below is free
      const int nx = kt + kScreenStages - 1;
      if (nx < nk) load_stage(nx % kScreenStages, nx, r_tile);
      screen_commit();
      const float *st = smem + (kt % kScreenStages) * kScreenStageFloats;
#pragma unroll
      for (int kk = 0; kk < kScreenStep; kk += 8) {
        unsigned af[kScreenMT][4], bf[kScreenNT / 2][4];
#pragma unroll
        for (int i = 0; i < kScreenMT; i++)
          screen_ldmatrix4(af[i], st + a_off + i * 16 * kScreenRow + kk);
#pragma unroll
        for (int j = 0; j < kScreenNT / 2; j++)
          screen_ldmatrix4(bf[j], st + b_off + j * 16 * kScreenRow + kk);
#pragma unroll
        for (int i = 0; i < kScreenMT; i++)
#pragma unroll
          for (int j = 0; j < kScreenNT; j++)
            screen_mma(acc[i][j], af[i], bf[j / 2][(j & 1) * 2], bf[j / 2][(j & 1) * 2 + 1]);
      }
    }

    // The cheap test on every accumulator: thread (g, t4) holds, of mma tile (i, j),
    // rows 16 i + g (+ 8) and columns 8 j + 2 t4 (+ 1) of its warp's 64 x 32.
    float rv[kScreenMT][2], cv[kScreenNT][2];
#pragma unroll
    for (int i = 0; i < kScreenMT; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) rv[i][h] = s_nr[wm * kScreenWarpRefs + 16 * i + g + 8 * h];
#pragma unroll
    for (int j = 0; j < kScreenNT; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) cv[j][e] = s_c[wn * kScreenWarpQueries + 8 * j + 2 * t4 + e];
    bool any = false;
#pragma unroll
    for (int i = 0; i < kScreenMT; i++)
#pragma unroll
      for (int j = 0; j < kScreenNT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          any |= fmaf(acc[i][j][e], -2.0f, rv[i][e >> 1]) <= cv[j][e & 1];

    // Survivors (rare): every thread is past the main loop, so the stages take the
    // accumulators of the threads that have any, and those go through their pairs again
    // by a runtime index (a loop over the registers would be unrolled 64 times).
    if (__syncthreads_or(any) && any) {
      float *mine = smem + tid;  // element e at mine[e * threads]: conflict-free
#pragma unroll
      for (int i = 0; i < kScreenMT; i++)
#pragma unroll
        for (int j = 0; j < kScreenNT; j++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            mine[((i * kScreenNT + j) * 4 + e) * kScreenThreads] = acc[i][j][e];
#pragma unroll 1
      for (int x = 0; x < kScreenAcc; x++) {
        const int i = x / (kScreenNT * 4), j = (x / 4) % kScreenNT, e = x & 3;
        const int rl = wm * kScreenWarpRefs + 16 * i + g + 8 * (e >> 1);
        const int ql = wn * kScreenWarpQueries + 8 * j + 2 * t4 + (e & 1);
        const float v = mine[x * kScreenThreads];
        if (fmaf(v, -2.0f, s_nr[rl]) <= s_c[ql]) screen_offer(a, r_tile + rl, q_tile + ql, v);
      }
    }
  }
#endif
}

// Whether the screen runs on a device of compute capability cc_major (current device):
// TF32 mma needs sm_80, and the code the device runs must have been built for compute_80
// or later (a portable build carries compute_75 PTX only, whose body here is empty).
template <typename In>
inline bool screen_available(int cc_major) {
  if (cc_major < 8) return false;
  cudaFuncAttributes fa;
  if (cudaFuncGetAttributes(&fa, screen_kernel<In>) != cudaSuccess) {
    cudaGetLastError();  // no image for this device: not an error of the search
    return false;
  }
  return fa.ptxVersion >= 80;
}

// The launch without a Context (the bench probe calls it directly). max_grid_y: the
// grid's reference tiles, the rest taken in turn by the same blocks (65535 at most;
// smaller only to test that loop).
template <typename In>
cudaError_t screen_launch(cudaStream_t stream, const ScreenArgs<In> &a,
                          unsigned max_grid_y = 65535) {
  if (a.rn <= 0 || a.qn <= 0) return cudaSuccess;
  cudaError_t e = cudaFuncSetAttribute(screen_kernel<In>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)kScreenSharedBytes);
  if (e != cudaSuccess) return e;
  // A hint that two blocks' stages should fit beside L1.
  e = cudaFuncSetAttribute(screen_kernel<In>, cudaFuncAttributePreferredSharedMemoryCarveout,
                           cudaSharedmemCarveoutMaxShared);
  if (e != cudaSuccess) return e;
  const int64_t rtiles = (a.rn + kScreenRefs - 1) / kScreenRefs;
  const int64_t qtiles = (a.qn + kScreenQueries - 1) / kScreenQueries;
  dim3 grid((unsigned)qtiles, (unsigned)(rtiles < (int64_t)max_grid_y ? rtiles : max_grid_y));
  screen_kernel<In><<<grid, kScreenThreads, kScreenSharedBytes, stream>>>(a);
  return cudaGetLastError();
}

// Screens the chunk's rn references (pr, nr, xr; rows r0 on) against the query tile's qn
// queries (pq, nq, xq; rows q0 on) and queues the survivors in feed (its owner the query:
// thr[q], count[q], entries (value, reference row r)); *overflow = 1 when a queue was
// offered more than feed.slots values (counts are left for the merge to reset). pr and
// pq in the split layout of points.cuh, 16-byte aligned; the device must pass
// screen_available().
template <typename In>
gpuml_status screen_chunk(Context &ctx, cudaStream_t stream, const float *pr, int64_t rn,
                          const float *pq, int64_t qn, int64_t d, const float *nr,
                          const float *nq, const In *xr, const In *xq, int64_t r0, int64_t q0,
                          int self, const ColumnFeed<float> &feed, int *overflow) {
  if ((reinterpret_cast<uintptr_t>(pr) | reinterpret_cast<uintptr_t>(pq)) % 16 != 0)
    return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: kNN screen operands not 16-byte aligned");
  if (qn > (int64_t)kScreenQueries * 2147483647)
    return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: kNN screen query tile too large");
  ScreenArgs<In> a;
  a.pr = pr;
  a.pq = pq;
  a.nr = nr;
  a.nq = nq;
  a.xr = xr;
  a.xq = xq;
  a.rn = rn;
  a.qn = qn;
  a.d = d;
  a.w = split_block(d);
  a.r0 = r0;
  a.q0 = q0;
  a.self = self;
  a.feed = feed;
  a.overflow = overflow;
  return ctx.check(screen_launch<In>(stream, a), "kNN screen");
}

}  // namespace
}  // namespace gm

#endif
