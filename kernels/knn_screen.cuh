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
// The epilogue is the cost to keep down (at d = 64 a thread issues 2 tensor-core
// instructions per pair it holds, against the rule's 5 or 6 plain ones), so every pair
// first takes a cheaper test, fma(acc, -2, nr[r]) <= c[q], with
//   c[q] = max(thr - nq, G m - (1 - G) nq) + 2^-18 (m + nq + |thr|),
// m the largest norm of the thread's own 8 references in the tile, G = kCancellationGuard
// (8 such bounds a thread and tile, from per-query parts computed once per block). It
// passes every pair the rule passes: the first term covers s <= thr, the second the
// guard's case (s < G norms gives nr - 2 acc < G nr - (1 - G) nq), and the slack is far
// above the few fp32 roundings in which the two forms and the bound differ (|g| <=
// 1.01 (nr + nq), so they differ by about 5 2^-24 (m + nq) at most). The pairs that
// pass go to the block's survivor list in shared memory; once it is half full (checked
// at a barrier) and at the end, all threads take one entry each through the exact rule,
// so the atomics of many survivors overlap; a thread that finds the list full takes its
// pair through the rule at once.
//
// Tiles: a block takes 128 queries (blockIdx.x) and reference tiles of 128 (blockIdx.y,
// + gridDim.y, ...: about 16 times as many blocks as fit at once), with 8 warps (2 x 4,
// each 64 references x 32 queries: 4 x 4 mma tiles, 64 fp32 accumulators a thread,
// 128 registers, two blocks a multiprocessor). The depth goes in steps of 32 floats
// through shared memory with 16-byte cp.async, the stages running on from one reference
// tile into the next; rows are padded to 4 floats past a multiple of 32, so that
// ldmatrix (which moves 8 x 4 fp32 blocks as its 8 x 8 b16 matrices: exactly the TF32
// fragments) reads without bank conflicts. For w <= 96 the block's query tile stays in
// shared memory (loaded once) and only references stream (3 stages): half the operand
// traffic; beyond, both stream (2 stages). Blocks of consecutive x share their
// reference tiles, read from memory once while the queries stay in L2.
//
// Measured on an H100 (bench/screen_probe.cu, rn = 500,000 x qn = 8192, thresholds that
// pass about 30 references a query): 4.7 ms at d = 64 (0.52 TFLOP of TF32 products:
// 112 TFLOP/s; 127 with no survivors; 102 streaming), 131 TFLOP/s at d = 96, 125 at
// d = 128; 148 at d = 768 (rn = 65,536, qn = 4096).
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

constexpr int kScreenRefs = 128;     // references per tile (the mma's M side)
constexpr int kScreenQueries = 128;  // queries per block (the mma's N side)
constexpr int kScreenStep = 32;      // depth (floats) per shared-memory stage
constexpr int kScreenRow = kScreenStep + 4;  // padded row: 144 bytes, 8 rows hit 32 banks
constexpr int kScreenWarpsM = 2, kScreenWarpsN = 4;
constexpr int kScreenThreads = kScreenWarpsM * kScreenWarpsN * 32;
constexpr int kScreenWarpRefs = kScreenRefs / kScreenWarpsM;         // 64
constexpr int kScreenWarpQueries = kScreenQueries / kScreenWarpsN;  // 32
constexpr int kScreenMT = kScreenWarpRefs / 16;                     // mma tiles, M side
constexpr int kScreenNT = kScreenWarpQueries / 8;                   // mma tiles, N side
constexpr int kScreenAcc = kScreenMT * kScreenNT * 4;               // accumulators a thread
// Survivors wait in a block's list of this many and are offered together (one round
// trip to memory for all of them) once it is half full, and at the end.
constexpr int kScreenList = 256;
// Blocks launched: about this many times as many as fit at once, each taking its share
// of the reference tiles in turn (H100, d = 64: 1, 2, 4, 16 times and one tile a block
// measured 4.43, 4.34, 4.29, 4.13 and 5.24 ms; d = 768 alike, flatter).
constexpr int kScreenWaves = 16;
// The query tile stays in shared memory up to this w (its rows padded to a multiple of
// the step plus 4 floats); beyond, both tiles go through the stages.
constexpr int64_t kScreenResidentMaxW = 96;

static_assert(kScreenRefs == kScreenThreads / 2 && kScreenQueries == kScreenThreads / 2,
              "the prologue gives one reference and one query to each thread");
static_assert(kScreenNT % 2 == 0, "ldmatrix.x4 loads the B fragments of two mma tiles");
static_assert(kScreenAcc == 64, "the survivors' mask has 64 bits");

// Stages, and floats a stage, of the two forms (RESIDENT: the query tile stays in shared
// memory and only reference tiles stream through the stages).
template <bool RESIDENT>
struct ScreenStages {
  static constexpr int count = RESIDENT ? 3 : 2;
  static constexpr int floats = (kScreenRefs + (RESIDENT ? 0 : kScreenQueries)) * kScreenRow;
};

inline __host__ __device__ int screen_depth(int64_t w) {  // w rounded up to whole steps
  return (int)((w + kScreenStep - 1) / kScreenStep) * kScreenStep;
}

inline size_t screen_shared_bytes(bool resident, int64_t w) {
  if (resident)
    return sizeof(float) * ((size_t)ScreenStages<true>::count * ScreenStages<true>::floats +
                            (size_t)kScreenQueries * (screen_depth(w) + 4));
  return sizeof(float) * (size_t)ScreenStages<false>::count * ScreenStages<false>::floats;
}

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
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The exact rule for one pair that passed the cheap test (r, q within the chunk and tile;
// nrr, nqq, thr: their norms and the query's threshold, as in memory).
template <typename In>
__device__ __noinline__ void screen_offer(const ScreenArgs<In> &a, int64_t r, int64_t q,
                                             float acc, float nrr, float nqq, float thr) {
  if (r >= a.rn || q >= a.qn) return;
  if (a.self && a.r0 + r == a.q0 + q) return;
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

// One block: the query tile blockIdx.x against the reference tiles blockIdx.y,
// blockIdx.y + gridDim.y, ... (a persistent block: the stages run on from one tile into
// the next, so the loads of the next tile overlap the products and the screen of this one).
// DEPTH > 0: the query tile resident, w rounded up to whole steps = DEPTH (a constant, which
// keeps the addressing within the registers of two blocks a multiprocessor); 0: streaming.
template <typename In, int DEPTH>
__global__ void __launch_bounds__(kScreenThreads, 2)
    screen_kernel(const __grid_constant__ ScreenArgs<In> a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr bool RESIDENT = DEPTH > 0;
  constexpr int S = ScreenStages<RESIDENT>::count;
  constexpr int SF = ScreenStages<RESIDENT>::floats;
  // (one name and type for the dynamic shared memory in every kernel of the unit)
  extern __shared__ __align__(16) unsigned char smem[];
  float *const smemf = reinterpret_cast<float *>(smem);
  __shared__ float s_nr[2][kScreenRefs];  // the references' norms (NaN past rn), by tile parity
  // Per query (NaN past qn): its norm and threshold, and the parts of the cheap test's
  // bound c = max(ca, G m + cb) + 2^-18 m + cs, m the largest norm of the rows at hand.
  __shared__ float s_nq[kScreenQueries], s_thr[kScreenQueries];
  __shared__ float s_ca[kScreenQueries], s_cb[kScreenQueries], s_cs[kScreenQueries];
  // The survivors waiting: reference row in the chunk, query row in the tile, -2 acc's acc.
  __shared__ int s_lr[kScreenList], s_lq[kScreenList];
  __shared__ float s_lv[kScreenList];
  __shared__ int s_lcount;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kScreenWarpsN, wn = warp % kScreenWarpsN;
  const int g = lane >> 2, t4 = lane & 3;
  const int w = (int)a.w;
  const int64_t ld = 4 * a.w;
  const int depth = RESIDENT ? DEPTH : screen_depth(w), nk = depth / kScreenStep;
  constexpr int qrow = RESIDENT ? DEPTH + 4 : kScreenRow;  // 4 mod 32: no bank conflicts
  float *s_q = smemf + S * SF;                        // RESIDENT: the query tile
  const int64_t q_tile = (int64_t)blockIdx.x * kScreenQueries;
  const int64_t rtiles = (a.rn + kScreenRefs - 1) / kScreenRefs;
  const int tiles = (int)((rtiles - blockIdx.y + gridDim.y - 1) / gridDim.y);
  const int steps = tiles * nk;  // < 2^31: screen_launch checks

  // The loads of a step: rows tid / 8 + 32 i of the reference tile (and, streaming, of
  // the query tile), 16 bytes at column 4 (tid % 8) of the step.
  const int crow = tid >> 3, ccol = (tid & 7) * 4;
  int l_step = 0, l_tile = 0, l_kt = 0, l_stage = 0;
  auto load_next = [&]() {
    if (l_step < steps) {
      float *sa = smemf + l_stage * SF;
      const int64_t r_tile = ((int64_t)blockIdx.y + (int64_t)l_tile * gridDim.y) * kScreenRefs;
      const int k = l_kt * kScreenStep + ccol;
      const bool kin = k < w;
#pragma unroll
      for (int i = 0; i < kScreenRefs / 32; i++) {
        const int row = crow + 32 * i;
        const bool ok = kin && r_tile + row < a.rn;
        screen_copy16(sa + row * kScreenRow + ccol, ok ? a.pr + (r_tile + row) * ld + k : a.pr,
                      ok ? 16 : 0);
      }
      if (!RESIDENT) {
        float *sb = sa + kScreenRefs * kScreenRow;
#pragma unroll
        for (int i = 0; i < kScreenQueries / 32; i++) {
          const int row = crow + 32 * i;
          const bool ok = kin && q_tile + row < a.qn;
          screen_copy16(sb + row * kScreenRow + ccol,
                        ok ? a.pq + (q_tile + row) * ld + k : a.pq, ok ? 16 : 0);
        }
      }
      l_step++;
      l_stage = l_stage + 1 == S ? 0 : l_stage + 1;
      if (++l_kt == nk) {
        l_kt = 0;
        l_tile++;
      }
    }
    screen_commit();  // empty groups too: the wait below counts groups
  };

  if (RESIDENT) {  // the whole query tile, zeros past w and qn, with the first stage
    const int chunks = depth / 4;
    for (int c = tid; c < kScreenQueries * chunks; c += kScreenThreads) {
      const int row = c / chunks, col = (c - row * chunks) * 4;
      const bool ok = col < w && q_tile + row < a.qn;
      screen_copy16(s_q + row * qrow + col, ok ? a.pq + (q_tile + row) * ld + col : a.pq,
                    ok ? 16 : 0);
    }
  }
#pragma unroll
  for (int s = 0; s < S - 1; s++) load_next();

  // While they arrive: the first tile's norms, the queries' constants.
  const float nan = __int_as_float(0x7fffffff);
  const float guard = (float)kCancellationGuard;
  const float slack = 0x1p-18f;
  if (tid < kScreenRefs) {
    const int64_t r = (int64_t)blockIdx.y * kScreenRefs + tid;
    s_nr[0][tid] = r < a.rn ? a.nr[r] : nan;
    if (tid == 0) s_lcount = 0;
  } else {
    const int ql = tid - kScreenRefs;
    const int64_t q = q_tile + ql;
    float nqq = nan, thr = nan, ca = nan, cb = nan, cs = nan;
    if (q < a.qn) {
      nqq = a.nq[q];
      thr = a.feed.thr[q];
      ca = thr - nqq;
      cb = -(1.0f - guard) * nqq;
      cs = slack * (nqq + fabsf(thr));
    }
    s_nq[ql] = nqq;
    s_thr[ql] = thr;
    s_ca[ql] = ca;
    s_cb[ql] = cb;
    s_cs[ql] = cs;
  }

  // ldmatrix row addresses: A (references, row-major [m][k]) blocks 0..3 are rows
  // 0-7 / 8-15 at depth 0-3, then the same at depth 4-7 (a0..a3); B (queries, [n][k],
  // the mma's column-major k x n) blocks 0..3 are b0, b1 of one n8 tile, then of the next.
  const int a_off = (wm * kScreenWarpRefs + (lane & 7) + ((lane >> 3) & 1) * 8) * kScreenRow +
                    (lane >> 4) * 4;
  const int b_off =
      (wn * kScreenWarpQueries + (lane & 7) + (lane >> 4) * 8) * qrow + ((lane >> 3) & 1) * 4;

  // Offers the listed survivors, all threads at once (between barriers).
  auto flush = [&]() {
    const int n = s_lcount < kScreenList ? s_lcount : kScreenList;
    for (int e = tid; e < n; e += kScreenThreads) {
      const int r = s_lr[e], ql = s_lq[e];
      screen_offer(a, r, q_tile + ql, s_lv[e], a.nr[r], s_nq[ql], s_thr[ql]);
    }
    __syncthreads();
    if (tid == 0) s_lcount = 0;
    __syncthreads();
  };

  float acc[kScreenMT][kScreenNT][4];
  float nr_next = 0;
  int kt = 0, stage = 0, tile = 0;
  for (int step = 0; step < steps; step++) {
    screen_wait<S - 2>();
    __syncthreads();  // the stage is complete for all; the one refilled below is free
    load_next();
    if (s_lcount >= kScreenList / 2) flush();  // the same value for all: past the barrier
    if (kt == 0) {
#pragma unroll
      for (int i = 0; i < kScreenMT; i++)
#pragma unroll
        for (int j = 0; j < kScreenNT; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
      // The next tile's norms, stored at this tile's end (s_nr by tile parity).
      if (tid < kScreenRefs && tile + 1 < tiles) {
        const int64_t r =
            ((int64_t)blockIdx.y + (int64_t)(tile + 1) * gridDim.y) * kScreenRefs + tid;
        nr_next = r < a.rn ? a.nr[r] : nan;
      }
    }
    const float *sa = smemf + stage * SF + a_off;
    const float *sb =
        (RESIDENT ? s_q + kt * kScreenStep : smemf + stage * SF + kScreenRefs * kScreenRow) +
        b_off;
#pragma unroll
    for (int kk = 0; kk < kScreenStep; kk += 8) {
      unsigned af[kScreenMT][4], bf[kScreenNT / 2][4];
#pragma unroll
      for (int i = 0; i < kScreenMT; i++) screen_ldmatrix4(af[i], sa + i * 16 * kScreenRow + kk);
#pragma unroll
      for (int j = 0; j < kScreenNT / 2; j++) screen_ldmatrix4(bf[j], sb + j * 16 * qrow + kk);
#pragma unroll
      for (int i = 0; i < kScreenMT; i++)
#pragma unroll
        for (int j = 0; j < kScreenNT; j++)
          screen_mma(acc[i][j], af[i], bf[j / 2][(j & 1) * 2], bf[j / 2][(j & 1) * 2 + 1]);
    }
    stage = stage + 1 == S ? 0 : stage + 1;
    if (++kt < nk) continue;

    // The tile's screen. Thread (g, t4) holds, of mma tile (i, j), rows 16 i + g (+ 8)
    // and columns 8 j + 2 t4 (+ 1) of its warp's 64 x 32. The cheap test's bound uses m,
    // the largest norm of this thread's rows.
    kt = 0;
    const int64_t r_tile = ((int64_t)blockIdx.y + (int64_t)tile * gridDim.y) * kScreenRefs;
    const float *nrt = s_nr[tile & 1];
    float rv[kScreenMT][2], cv[kScreenNT][2], m = 0.0f;
#pragma unroll
    for (int i = 0; i < kScreenMT; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        rv[i][h] = nrt[wm * kScreenWarpRefs + 16 * i + g + 8 * h];
        m = fmaxf(m, rv[i][h]);  // NaN rows (past rn) drop out
      }
#pragma unroll
    for (int j = 0; j < kScreenNT; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int ql = wn * kScreenWarpQueries + 8 * j + 2 * t4 + e;
        cv[j][e] = fmaxf(s_ca[ql], fmaf(guard, m, s_cb[ql])) + fmaf(slack, m, s_cs[ql]);
      }
    bool any = false;
#pragma unroll
    for (int i = 0; i < kScreenMT; i++)
#pragma unroll
      for (int j = 0; j < kScreenNT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          any |= fmaf(acc[i][j][e], -2.0f, rv[i][e >> 1]) <= cv[j][e & 1];
    if (any) {  // rare: which ones, then each by the exact rule
      unsigned long long pass = 0;
#pragma unroll
      for (int i = 0; i < kScreenMT; i++)
#pragma unroll
        for (int j = 0; j < kScreenNT; j++)
#pragma unroll
          for (int e = 0; e < 4; e++)
            if (fmaf(acc[i][j][e], -2.0f, rv[i][e >> 1]) <= cv[j][e & 1])
              pass |= 1ull << ((i * kScreenNT + j) * 4 + e);
      while (pass) {
        const int x = __ffsll((long long)pass) - 1;
        pass &= pass - 1;
        float v = 0.0f;  // acc by a runtime index, kept in registers
#pragma unroll
        for (int i = 0; i < kScreenMT; i++)
#pragma unroll
          for (int j = 0; j < kScreenNT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              if (x == (i * kScreenNT + j) * 4 + e) v = acc[i][j][e];
        const int i = x / (kScreenNT * 4), j = (x / 4) % kScreenNT, e = x & 3;
        const int rl = wm * kScreenWarpRefs + 16 * i + g + 8 * (e >> 1);
        const int ql = wn * kScreenWarpQueries + 8 * j + 2 * t4 + (e & 1);
        const int at = atomicAdd(&s_lcount, 1);
        if (at < kScreenList) {
          s_lr[at] = (int)(r_tile + rl);
          s_lq[at] = ql;
          s_lv[at] = v;
        } else {  // the list is full (a tile of many survivors): offered at once
          screen_offer(a, r_tile + rl, q_tile + ql, v, nrt[rl], s_nq[ql], s_thr[ql]);
        }
      }
    }
    // The next tile's norms into the other parity: its readers are past the next barrier.
    if (tid < kScreenRefs && tile + 1 < tiles) s_nr[(tile + 1) & 1][tid] = nr_next;
    tile++;
  }
  screen_wait<0>();  // no copy in flight at exit
  __syncthreads();
  flush();
#endif
}

// Whether the screen runs on a device of compute capability cc_major (current device):
// TF32 mma needs sm_80, and the code the device runs must have been built for compute_80
// or later (a portable build carries compute_75 PTX only, whose body here is empty).
template <typename In>
inline bool screen_available(int cc_major) {
  if (cc_major < 8) return false;
  const void *kernels[4] = {
      (const void *)screen_kernel<In, 0>, (const void *)screen_kernel<In, 32>,
      (const void *)screen_kernel<In, 64>, (const void *)screen_kernel<In, 96>};
  for (const void *k : kernels) {
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, k) != cudaSuccess) {
      cudaGetLastError();  // no image for this device: not an error of the search
      return false;
    }
    if (fa.ptxVersion < 80) return false;
  }
  return true;
}

// Whether the form's shared memory (static and dynamic) fits a block of the current device.
template <typename In, int DEPTH>
bool screen_fits(int64_t w) {
  int dev = 0, optin = 0;
  cudaFuncAttributes fa;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
      cudaFuncGetAttributes(&fa, screen_kernel<In, DEPTH>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return fa.sharedSizeBytes + screen_shared_bytes(DEPTH > 0, w) <= (size_t)optin;
}

template <typename In, int DEPTH>
cudaError_t screen_launch_form(cudaStream_t stream, const ScreenArgs<In> &a,
                               unsigned max_grid_y, int waves) {
  const size_t bytes = screen_shared_bytes(DEPTH > 0, a.w);
  auto kernel = screen_kernel<In, DEPTH>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)bytes);
  if (e != cudaSuccess) return e;
  // A hint that two blocks' shared memory should fit beside L1.
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                           cudaSharedmemCarveoutMaxShared);
  if (e != cudaSuccess) return e;
  int dev = 0, sms = 1, per_sm = 1;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
    return e;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kScreenThreads,
                                                         bytes)) != cudaSuccess)
    return e;
  // About `waves` times as many blocks as fit at once (each then runs through its share
  // of the reference tiles), at least one per query tile.
  const int64_t rtiles = (a.rn + kScreenRefs - 1) / kScreenRefs;
  const int64_t qtiles = (a.qn + kScreenQueries - 1) / kScreenQueries;
  const int64_t slots = (int64_t)(per_sm > 0 ? per_sm : 1) * sms;
  int64_t gy = slots * (waves > 0 ? waves : 1) / qtiles;
  if (gy < 1) gy = 1;
  if (gy > rtiles) gy = rtiles;
  if (gy > (int64_t)max_grid_y) gy = max_grid_y;
  kernel<<<dim3((unsigned)qtiles, (unsigned)gy), kScreenThreads, bytes, stream>>>(a);
  return cudaGetLastError();
}

// The launch without a Context (the bench probe calls it directly). form: -1 or 1, the
// query tile resident where w <= kScreenResidentMaxW and the device has the shared
// memory, else streaming; 0 streaming. max_grid_y and waves (testing, tuning): at most
// max_grid_y blocks per query tile; about `waves` times as many blocks as fit at once.
template <typename In>
cudaError_t screen_launch(cudaStream_t stream, const ScreenArgs<In> &a,
                          unsigned max_grid_y = 65535, int form = -1,
                          int waves = kScreenWaves) {
  if (a.rn <= 0 || a.qn <= 0) return cudaSuccess;
  // The kernel counts a block's steps (reference tiles x steps of depth) in an int.
  if ((a.rn / kScreenRefs + 1) * (int64_t)(screen_depth(a.w) / kScreenStep) >= INT32_MAX)
    return cudaErrorInvalidValue;
  if (form != 0 && a.w <= kScreenResidentMaxW) {
    // The resident form takes up to 113 KB of shared memory a block; where the device
    // offers less (99 KB on sm_86 and sm_89), streaming.
    switch (screen_depth(a.w)) {
      case 32:
        if (screen_fits<In, 32>(a.w))
          return screen_launch_form<In, 32>(stream, a, max_grid_y, waves);
        break;
      case 64:
        if (screen_fits<In, 64>(a.w))
          return screen_launch_form<In, 64>(stream, a, max_grid_y, waves);
        break;
      default:
        if (screen_fits<In, 96>(a.w))
          return screen_launch_form<In, 96>(stream, a, max_grid_y, waves);
        break;
    }
  }
  return screen_launch_form<In, 0>(stream, a, max_grid_y, waves);
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
