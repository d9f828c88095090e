// Top-k selection on the device for knn.cu. Every query keeps a running list of its K
// best candidates (distance, index), sorted by (distance, index), between reference
// tiles; unused slots hold (+inf, INT64_MAX).
//  - Small K (<= kSmallMaxK): one warp per query merges each distance row into its list in
//    shared memory. A candidate is inserted only when it beats the current K-th (the
//    threshold filter); a few at a time go in one by one, ballot-ranked, many at once by
//    their ranks (WarpList::merge), so the list stays sorted. The distances come from a
//    GEMM tile (fp32, fp64, or the half pass's fp16: TileRead) or are computed in the
//    kernel (d < 16).
//  - Any K: per query (one block), a radix select over the list and the tile row finds the
//    K-th smallest key; the keys below it and the first ties (in index order) are
//    compacted, then sorted by (distance, index) again: a bitonic sort in shared memory
//    for K <= 8192, a stable CUB segmented sort beyond.
//  - Final order: the candidates' distances are recomputed exactly (fp64, from the points
//    as given; their rows staged through shared memory) and sorted by (distance, index):
//    a bitonic sort in shared memory for K <= 8192, two stable CUB segmented sorts beyond.
#ifndef GPUML_SELECT_CUH
#define GPUML_SELECT_CUH

#include <cub/cub.cuh>
#include <type_traits>
#include "distance_tiles.cuh"

namespace gm {
namespace {

constexpr int kSmallMaxK = 256;
constexpr int kBitonicMaxK = 8192;  // 8192 x 16 bytes of shared memory per block
constexpr int64_t kNoIndex = INT64_MAX;

template <int KMAX>
struct SmallConfig {
  static constexpr int warps = KMAX <= 128 ? 8 : 4;
};

// One warp's sorted list of K <= KMAX candidates in shared memory, and its worst entry.
template <typename T, int KMAX>
struct WarpList {
  T *d;
  int64_t *i;
  int K;
  T wd;
  int64_t wi;

  __device__ void load(const T *gd, const int64_t *gi, int fresh, int lane) {
    for (int t = lane; t < K; t += 32) {
      d[t] = fresh ? infinity_of<T>() : gd[t];
      i[t] = fresh ? kNoIndex : gi[t];
    }
    __syncwarp();
    wd = d[K - 1];
    wi = i[K - 1];
  }

  __device__ void store(T *gd, int64_t *gi, int lane) {
    __syncwarp();
    for (int t = lane; t < K; t += 32) {
      gd[t] = d[t];
      gi[t] = i[t];
    }
  }

  // Every lane with `pass` set offers (v, j): one by one (insert), or, when many do, all
  // at once by their ranks (merge); the list is the same either way. Both kept out of
  // line: the scan loops offer from many unrolled places, and inlining them there
  // overflows the instruction cache.
  __device__ __forceinline__ void offer(bool pass, T v, int64_t j, int lane) {
    const unsigned mask = __ballot_sync(kFullMask, pass);
    if (__popc(mask) >= kMergeAtLeast) merge(pass, v, j, lane);
    else insert(mask, v, j, lane);
  }

  // A candidate inserted by itself costs a few hundred instructions of the warp (find its
  // place, shift the list); from this many candidates at once merge() costs less (a
  // search's first reference tile offers most of a row, bench/RESULTS.md round 13).
  static constexpr int kMergeAtLeast = 6;

  // The candidates that still beat the K-th, placed by their ranks: candidate c goes to
  // r_c + (the candidates before it), where r_c counts the entries before it; entry t
  // moves up by the candidates with r_c <= t (those before it: a candidate and an entry
  // are never equal, each pair being offered once); what lands at K or beyond drops out.
  __device__ __noinline__ void merge(bool pass, T v, int64_t j, int lane) {
    constexpr int C = KMAX / 32;
    pass = pass && before(v, j, wd, wi);
    const unsigned pm = __ballot_sync(kFullMask, pass);
    int rank = 0;
    for (int s = 0; s < 32; s++) {
      const T vs = __shfl_sync(kFullMask, v, s);
      const int64_t js = __shfl_sync(kFullMask, j, s);
      rank += ((pm >> s) & 1u) && before(vs, js, v, j);
    }
    int lo = 0;
    if (pass) {
      int hi = K;  // the first entry not before (v, j)
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (before(d[mid], i[mid], v, j)) lo = mid + 1;
        else hi = mid;
      }
    }
    int up[C];
#pragma unroll
    for (int m = 0; m < C; m++) up[m] = 0;
    for (unsigned rest = pm; rest; rest &= rest - 1) {
      const int rs = __shfl_sync(kFullMask, lo, __ffs(rest) - 1);
#pragma unroll
      for (int m = 0; m < C; m++) up[m] += rs <= m * 32 + lane;
    }
    // Entries only move up: chunk by chunk from the top, each read before it is written.
#pragma unroll
    for (int m = C - 1; m >= 0; m--) {
      const int t = m * 32 + lane;
      const bool mv = up[m] > 0 && t + up[m] < K;
      T ev = 0;
      int64_t iv = 0;
      if (mv) {
        ev = d[t];
        iv = i[t];
      }
      __syncwarp();
      if (mv) {
        d[t + up[m]] = ev;
        i[t + up[m]] = iv;
      }
      __syncwarp();
    }
    if (pass && lo + rank < K) {
      d[lo + rank] = v;
      i[lo + rank] = j;
    }
    __syncwarp();
    wd = d[K - 1];
    wi = i[K - 1];
  }

  // The lanes of `mask` one at a time.
  __device__ __noinline__ void insert(unsigned mask, T v, int64_t j, int lane) {
    while (mask) {
      const int src = __ffs(mask) - 1;
      mask &= mask - 1;
      const T cv = __shfl_sync(kFullMask, v, src);
      const int64_t ci = __shfl_sync(kFullMask, j, src);
      if (!before(cv, ci, wd, wi)) continue;  // the list moved on since the ballot
      int pos = 0;
      for (int c = 0; c < K; c += 32) {
        const int t = c + lane;
        const bool b = t < K && before(d[t], i[t], cv, ci);
        const unsigned bm = __ballot_sync(kFullMask, b);
        pos += __popc(bm);
        if (bm != kFullMask) break;  // the list is sorted: nothing further comes before
      }
      // Shift [pos, K - 1) up by one, top chunk first; the last entry drops out.
      for (int c = ((K - 1) >> 5) << 5; c >= 0 && c + 31 >= pos; c -= 32) {
        const int t = c + lane;
        const bool mv = t > pos && t < K;
        T td = 0;
        int64_t ti = 0;
        if (mv) {
          td = d[t - 1];
          ti = i[t - 1];
        }
        __syncwarp();
        if (mv) {
          d[t] = td;
          i[t] = ti;
        }
        __syncwarp();
      }
      if (lane == 0) {
        d[pos] = cv;
        i[pos] = ci;
      }
      __syncwarp();
      wd = d[K - 1];
      wi = i[K - 1];
    }
  }
};

template <typename T>
struct Vec16;
template <>
struct Vec16<float> {
  typedef float4 V;
  static constexpr int n = 4;
  static __device__ __forceinline__ float get(const float4 &v, int e) {
    return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
  }
};
template <>
struct Vec16<double> {
  typedef double2 V;
  static constexpr int n = 2;
  static __device__ __forceinline__ double get(const double2 &v, int e) {
    return e == 0 ? v.x : v.y;
  }
};

// N consecutive values of T at p + j0 (16-byte aligned; N a multiple of Vec16<T>::n).
template <typename T, int N>
__device__ __forceinline__ void load_run(const T *__restrict__ p, int64_t j0, T *out) {
  typedef Vec16<T> VT;
#pragma unroll
  for (int c = 0; c < N / VT::n; c++) {
    const typename VT::V v = *reinterpret_cast<const typename VT::V *>(p + j0 + c * VT::n);
#pragma unroll
    for (int e = 0; e < VT::n; e++) out[c * VT::n + e] = VT::get(v, e);
  }
}

// Reading a distance tile of GT values as T. A tile holds the GEMM's -2 r.q in T, or
// (the half pass's fp16 tiles, knn.cu) fp16 values that the power of 2 `scale` turns
// back into them: the GEMM stored fl16(2^-u (-2 r.q)), and the value read is that times
// 2^u, exactly (u keeps every product a normal fp32: half_scale_kernel). `n` values a
// 16-byte vector.
template <typename T, typename GT>
struct TileRead {
  static constexpr int n = Vec16<T>::n;
  static __device__ __forceinline__ void vec(const T *g, int64_t j0, T, T *out) {
    load_run<T, n>(g, j0, out);
  }
  static __device__ __forceinline__ T one(const T *g, int64_t j, T) { return g[j]; }
};
template <>
struct TileRead<float, __half> {
  static constexpr int n = 8;
  static __device__ __forceinline__ void vec(const __half *g, int64_t j0, float scale,
                                             float *out) {
    const uint4 v = *reinterpret_cast<const uint4 *>(g + j0);
    const __half2 *h = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const float2 f = __half22float2(h[e]);
      out[2 * e] = f.x * scale;
      out[2 * e + 1] = f.y * scale;
    }
  }
  static __device__ __forceinline__ float one(const __half *g, int64_t j, float scale) {
    return __half2float(g[j]) * scale;
  }
};

// The scale of a tile of GT values (TileRead): 1 for T values, *gscale for fp16.
template <typename T, typename GT>
__device__ __forceinline__ T tile_scale(const T *gscale) {
  if constexpr (std::is_same<T, GT>::value) return (T)1;
  else return *gscale;
}

// The largest |value| of N values read from an fp16 tile, kept in vmax for note_tile_max; nothing
// for T tiles.
template <typename T, typename GT, int N>
__device__ __forceinline__ void track_tile_max(T &vmax, const T *v) {
  if constexpr (!std::is_same<T, GT>::value) {
#pragma unroll
    for (int e = 0; e < N; e++) vmax = fmaxf(vmax, fabsf(v[e]));
  }
}

// The largest |value| a warp read from an fp16 tile, into *gmax (float bits; values
// >= 0 order as their bits do) for the certificate's rounding bound (knn.cu,
// certify_kernel). Nothing for T tiles, whose bound needs no such maximum.
template <typename T, typename GT>
__device__ __forceinline__ void note_tile_max(unsigned *gmax, T m, int lane) {
  if constexpr (!std::is_same<T, GT>::value) {
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
    if (lane == 0) atomicMax(gmax, __float_as_uint(m));
  }
}

// The column side of a tile of the symmetric self-search (knn.cu, GPUML_CUDA_KNN_SYMMETRIC):
// the tile's references are points whose own lists are kept too. While the row kernel
// reads the tile for its queries, every value at most a reference's threshold (the K-th
// value of its list before this tile, thr[j]) is queued for that reference: `slots`
// entries per reference (value, the query's row in the tile), count[j] of them offered.
// column_merge_kernel then merges each queue into its reference's list (the exact tie
// rule applied there); a reference whose queue overflowed takes its whole row of the
// tile instead. Every pair is offered once, so the lists are the same K smallest by
// (value, index) whatever the order of the queue.
template <typename T>
struct ColumnFeed {
  T *thr;          // the tile's references' thresholds (reference j at thr[j])
  int *count;      // values offered to reference j (may exceed slots: overflow)
  T *slot_d;       // slot_d[j * slots + s]
  int *slot_q;     // the query's row in the tile
  int slots;
};

// Queues (val, query row q) for reference j of the tile (ColumnFeed).
template <typename T>
__device__ __forceinline__ void column_push(const ColumnFeed<T> &feed, int64_t j, int q, T val) {
  const int s = atomicAdd(feed.count + j, 1);
  if (s < feed.slots) {
    feed.slot_d[j * feed.slots + s] = val;
    feed.slot_q[j * feed.slots + s] = q;
  }
}

// What a warp's scan of query q's row of a GEMM tile (rn x qn) needs of the query: the
// row (GT values, read through TileRead with the scale gs), the query's norm and point,
// and its own index in a self-search (-1 otherwise).
template <typename T, typename In, typename GT>
struct QueryRow {
  const GT *g;
  T gs, nq;
  const In *xq;
  int64_t self_index;
  __device__ QueryRow(const GT *G, const T *gscale, int64_t rn, int q, const T *nq_all,
                      const In *xq_all, int64_t d, int self, int64_t q0)
      : g(G + (size_t)q * (size_t)rn), gs(tile_scale<T, GT>(gscale)), nq(nq_all[q]),
        xq(xq_all + (size_t)q * (size_t)d), self_index(self ? q0 + q : -1) {}
};

// Eight values a lane a step (two 16-byte vectors of an fp32 tile, one of an fp16 tile):
// the scans' U; two fp16 vectors spill (bench/RESULTS.md round 13).
template <typename T, typename GT>
__host__ __device__ constexpr int scan_vectors() {
  return TileRead<T, GT>::n >= 8 ? 1 : 2;
}

// Small K, GEMM tile G (rn x qn, column q is query q's row of -2 r.q; GT values read
// through TileRead, gscale: the fp16 tiles' scale). Each lane reads 16-byte vectors
// (when rn allows), several in flight; a cheap filter (distance <= the current K-th)
// decides whether the warp enters the insertion path at all.
// COL: also the column side of the symmetric search (feed, above). row_thr (may be
// NULL): each query's K-th value after the tile, stored at row_thr[q] (the thresholds
// the symmetric search starts its column side from).
template <typename T, typename In, int KMAX, bool COL, typename GT>
__global__ void __launch_bounds__(SmallConfig<KMAX>::warps * 32, 32 / SmallConfig<KMAX>::warps)
    select_small_gemm_kernel(const GT *__restrict__ G, const T *__restrict__ gscale,
                             unsigned *gmax, int64_t rn, int qn, const T *__restrict__ nr,
                             const T *__restrict__ nq,
                             const In *__restrict__ xr, const In *__restrict__ xq, int64_t d,
                             int64_t r0, int64_t q0, int self, T *Ld, int64_t *Li, int K,
                             int fresh, ColumnFeed<T> feed, T *row_thr) {
  constexpr int W = SmallConfig<KMAX>::warps;
  typedef TileRead<T, GT> TR;
  constexpr int NV = TR::n;
  constexpr int U = scan_vectors<T, GT>();
  __shared__ T sd[W][KMAX];
  __shared__ int64_t si[W][KMAX];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int q = blockIdx.x * W + warp;
  if (q >= qn) return;  // whole warps only; no block-wide barrier below
  WarpList<T, KMAX> L{sd[warp], si[warp], K, 0, 0};
  L.load(Ld + (size_t)q * K, Li + (size_t)q * K, fresh, lane);
  const QueryRow<T, In, GT> row(G, gscale, rn, q, nq, xq, d, self, q0);
  T vmax = 0;  // (fp16 tiles: note_tile_max)
  const T guard = (T)kCancellationGuard;
  int64_t base = 0;
  if (rn % NV == 0 && reinterpret_cast<uintptr_t>(nr) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(G) % 16 == 0 &&
      (!COL || reinterpret_cast<uintptr_t>(feed.thr) % 16 == 0)) {
    for (; base < rn; base += 32 * NV * U) {
      T v[U][NV], nv[U][NV], tv[U][NV];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int64_t j0 = base + (int64_t)(u * 32 + lane) * NV;
        if (j0 < rn) {
          TR::vec(row.g, j0, row.gs, v[u]);
          load_run<T, NV>(nr, j0, nv[u]);
          if constexpr (COL) load_run<T, NV>(feed.thr, j0, tv[u]);
          track_tile_max<T, GT, NV>(vmax, v[u]);
        }
      }
      // Cheap screen: can any of this warp's values beat the current K-th (or, COL, its
      // reference's threshold)? A value that the guard would recompute is screened as 0,
      // so it always takes the exact path.
      bool any = false;
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int64_t j0 = base + (int64_t)(u * 32 + lane) * NV;
#pragma unroll
        for (int e = 0; e < NV; e++) {
          const T norms = nv[u][e] + row.nq;
          const T val = norms + v[u][e];
          const T screen = val < guard * norms ? (T)0 : val;
          any |= j0 < rn && screen <= L.wd;
          if constexpr (COL) any |= j0 < rn && screen <= tv[u][e];
        }
      }
      if (__any_sync(kFullMask, any)) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int64_t j0 = base + (int64_t)(u * 32 + lane) * NV;
#pragma unroll
          for (int e = 0; e < NV; e++) {
            const int64_t gj = r0 + j0 + e;
            bool pass = false;
            T val = 0;
            if (j0 < rn && gj != row.self_index) {
              val = gemm_value<T, In>(v[u][e], nv[u][e], row.nq,
                                      xr + (size_t)(j0 + e) * (size_t)d, row.xq, d);
              pass = val <= L.wd && before(val, gj, L.wd, L.wi);
              if constexpr (COL) {
                if (val <= tv[u][e]) column_push(feed, j0 + e, q, val);
              }
            }
            L.offer(pass, val, gj, lane);
          }
        }
      }
    }
  } else {
    for (; base < rn; base += 32) {
      const int64_t j = base + lane;
      const int64_t gj = r0 + j;
      bool pass = false;
      T val = 0;
      if (j < rn && gj != row.self_index) {
        const T gv = TR::one(row.g, j, row.gs);
        track_tile_max<T, GT, 1>(vmax, &gv);
        val = gemm_value<T, In>(gv, nr[j], row.nq, xr + (size_t)j * (size_t)d, row.xq, d);
        pass = before(val, gj, L.wd, L.wi);
        if constexpr (COL) {
          if (val <= feed.thr[j]) column_push(feed, j, q, val);
        }
      }
      L.offer(pass, val, gj, lane);
    }
  }
  note_tile_max<T, GT>(gmax, vmax, lane);
  L.store(Ld + (size_t)q * K, Li + (size_t)q * K, lane);
  if (row_thr != nullptr && lane == 0) row_thr[q] = L.wd;
}

// Small K, GEMM tile G, the row side only (no column feed), 16-byte aligned tile and
// norms: the same lists as select_small_gemm_kernel, with the scan and the insertions
// apart. The scan streams the row, with no insertion inside its loop and 32-bit
// positions, and queues in shared memory the positions whose screened value is at most
// the list's K-th as it stood at the last flush (a stale, larger threshold only queues
// more); a flush recomputes each queued value (gemm_value, as the other kernel does) and
// offers it. Insertions commute (the lists are ordered by (value, index)), so the list
// is the same.
// Eight values a lane a step (two 16-byte vectors of an fp32 tile, one of an fp16 tile)
// and 32 warps an SM (64 registers), as the one-pass kernel: four fp32 vectors
// (spilling), 40 or 48 warps an SM (48 or 40 registers) and 16 to 28 warps were all
// slower (bench/RESULTS.md round 12), and so were two fp16 vectors (spilling, round 13).
template <typename T, typename GT>
struct QueueConfig {
  static constexpr int U = scan_vectors<T, GT>();            // vectors a lane per step
  static constexpr int step = 32 * TileRead<T, GT>::n * U;   // values a warp scans per step
  static constexpr int slots = step + step / 2;              // queued positions a warp holds
};

template <typename T, typename In, int KMAX, typename GT>
__global__ void __launch_bounds__(SmallConfig<KMAX>::warps * 32, 32 / SmallConfig<KMAX>::warps)
    select_queued_gemm_kernel(const GT *__restrict__ G, const T *__restrict__ gscale,
                              unsigned *gmax, int rn, int qn, const T *__restrict__ nr,
                              const T *__restrict__ nq,
                              const In *__restrict__ xr, const In *__restrict__ xq, int64_t d,
                              int64_t r0, int64_t q0, int self, T *Ld, int64_t *Li, int K,
                              int fresh, T *row_thr) {
  constexpr int W = SmallConfig<KMAX>::warps;
  typedef QueueConfig<T, GT> QC;
  typedef TileRead<T, GT> TR;
  constexpr int NV = TR::n, U = QC::U;
  __shared__ T sd[W][KMAX];
  __shared__ int64_t si[W][KMAX];
  __shared__ int queue[W][QC::slots];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int q = blockIdx.x * W + warp;
  if (q >= qn) return;  // whole warps only; no block-wide barrier below
  WarpList<T, KMAX> L{sd[warp], si[warp], K, 0, 0};
  L.load(Ld + (size_t)q * K, Li + (size_t)q * K, fresh, lane);
  const QueryRow<T, In, GT> row(G, gscale, rn, q, nq, xq, d, self, q0);
  T vmax = 0;  // (fp16 tiles: note_tile_max)
  const T guard = (T)kCancellationGuard;
  const unsigned below = (1u << lane) - 1;  // the lanes before this one
  int *mine = queue[warp];
  int queued = 0;  // the same in every lane
  // Offers the queued positions in turn and empties the queue.
  auto flush = [&]() {
    __syncwarp();
    for (int b = 0; b < queued; b += 32) {
      bool pass = false;
      T val = 0;
      int64_t gj = 0;
      if (b + lane < queued) {
        const int j = mine[b + lane];
        gj = r0 + j;
        if (gj != row.self_index) {
          val = gemm_value<T, In>(TR::one(row.g, j, row.gs), nr[j], row.nq,
                                  xr + (size_t)j * (size_t)d, row.xq, d);
          pass = before(val, gj, L.wd, L.wi);
        }
      }
      L.offer(pass, val, gj, lane);
    }
    queued = 0;
    __syncwarp();
  };
  // One step at base: U vectors a lane (j0 = base + (u 32 + lane) NV), the last step's
  // past rn masked. The screen passes what select_small_gemm_kernel's passes (s <= the
  // K-th, or s below the guard, whose value the flush recomputes), and a few more (s at
  // the guard itself), which the flush then drops.
  auto scan = [&](int base, bool last) {
    T v[U][NV], nv[U][NV];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int j0 = base + (u * 32 + lane) * NV;
      if (!last || j0 < rn) {
        TR::vec(row.g, j0, row.gs, v[u]);
        load_run<T, NV>(nr, j0, nv[u]);
        track_tile_max<T, GT, NV>(vmax, v[u]);
      }
    }
    bool pass[U][NV];
    bool any = false;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int j0 = base + (u * 32 + lane) * NV;
#pragma unroll
      for (int e = 0; e < NV; e++) {
        const T norms = nv[u][e] + row.nq;
        const T val = norms + v[u][e];
        pass[u][e] = val <= max(L.wd, guard * norms) && (!last || j0 < rn);
        any |= pass[u][e];
      }
    }
    if (__any_sync(kFullMask, any)) {
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int j0 = base + (u * 32 + lane) * NV;
#pragma unroll
        for (int e = 0; e < NV; e++) {
          const unsigned m = __ballot_sync(kFullMask, pass[u][e]);
          if (pass[u][e]) mine[queued + __popc(m & below)] = j0 + e;
          queued += __popc(m);
        }
      }
      if (queued > QC::slots - QC::step) flush();
    }
  };
  int base = 0;
  for (; base + QC::step <= rn; base += QC::step) scan(base, false);
  if (base < rn) scan(base, true);
  flush();
  note_tile_max<T, GT>(gmax, vmax, lane);
  L.store(Ld + (size_t)q * K, Li + (size_t)q * K, lane);
  if (row_thr != nullptr && lane == 0) row_thr[q] = L.wd;
}

// The column side of a tile of the symmetric search (ColumnFeed): one warp per
// reference j of the tile (rows r0 + j of the data, lists at Ld/Li + j * K) merges its
// queued values into its list, or, when they overflowed the slots, its whole row of the
// tile G (rn x qn; queries at q0, the same values as the row kernel computed); then its
// threshold becomes its new K-th value and its queue is emptied.
template <typename T, typename In, int KMAX, typename GT>
__global__ void __launch_bounds__(SmallConfig<KMAX>::warps * 32)
    column_merge_kernel(const GT *__restrict__ G, const T *__restrict__ gscale, int64_t rn,
                        int qn, const T *__restrict__ nr,
                        const T *__restrict__ nq, const In *__restrict__ xr,
                        const In *__restrict__ xq, int64_t d, int64_t q0, ColumnFeed<T> feed,
                        T *Ld, int64_t *Li, int K) {
  constexpr int W = SmallConfig<KMAX>::warps;
  __shared__ T sd[W][KMAX];
  __shared__ int64_t si[W][KMAX];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t j = (int64_t)blockIdx.x * W + warp;
  if (j >= rn) return;  // whole warps only
  const int c = feed.count[j];
  if (c == 0) return;
  WarpList<T, KMAX> L{sd[warp], si[warp], K, 0, 0};
  L.load(Ld + (size_t)j * K, Li + (size_t)j * K, 0, lane);
  if (c <= feed.slots) {
    for (int b = 0; b < c; b += 32) {
      const int s = b + lane;
      bool pass = false;
      T val = 0;
      int64_t gq = 0;
      if (s < c) {
        val = feed.slot_d[j * feed.slots + s];
        gq = q0 + feed.slot_q[j * feed.slots + s];
        pass = before(val, gq, L.wd, L.wi);
      }
      L.offer(pass, val, gq, lane);
    }
  } else {
    const T nrj = nr[j];
    const In *xrj = xr + (size_t)j * (size_t)d;
    for (int b = 0; b < qn; b += 32) {
      const int q = b + lane;
      bool pass = false;
      T val = 0;
      if (q < qn) {
        val = gemm_value<T, In>(TileRead<T, GT>::one(G, (size_t)q * (size_t)rn + j,
                                                     tile_scale<T, GT>(gscale)),
                                nrj, nq[q], xrj, xq + (size_t)q * (size_t)d, d);
        pass = before(val, q0 + q, L.wd, L.wi);
      }
      L.offer(pass, val, q0 + q, lane);
    }
  }
  L.store(Ld + (size_t)j * K, Li + (size_t)j * K, lane);
  if (lane == 0) {
    feed.thr[j] = L.wd;
    feed.count[j] = 0;
  }
}

// Small K, d < 16: distances computed here, reference points staged in shared memory
// (differences in the input precision, as in the direct tile). DIM > 0 fixes d at
// compile time. Each lane takes U candidates per step before the warp checks whether
// any of them beats the current K-th.
template <typename T, typename In, int KMAX, int DIM>
__global__ void __launch_bounds__(SmallConfig<KMAX>::warps * 32)
    select_small_direct_kernel(const In *__restrict__ xr, int64_t rn,
                               const In *__restrict__ xq, int qn, int d, int64_t r0,
                               int64_t q0, int self, T *Ld, int64_t *Li, int K, int fresh) {
  constexpr int W = SmallConfig<KMAX>::warps;
  constexpr int ROWS = DIM > 0 ? DIM : kDirectMaxDim;
  constexpr int CH = DIM > 0 ? 1024 : 128;
  constexpr int U = 4;
  __shared__ T sd[W][KMAX];
  __shared__ int64_t si[W][KMAX];
  __shared__ In sr[ROWS][CH];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int q = blockIdx.x * W + warp;
  const bool active = q < qn;
  const int dd = DIM > 0 ? DIM : d;
  In qc[ROWS];
#pragma unroll
  for (int t = 0; t < ROWS; t++) qc[t] = (active && t < dd) ? xq[(size_t)q * dd + t] : (In)0;
  WarpList<T, KMAX> L{sd[warp], si[warp], K, 0, 0};
  if (active) L.load(Ld + (size_t)q * K, Li + (size_t)q * K, fresh, lane);
  const int64_t self_index = self ? q0 + q : -1;
  for (int64_t c0 = 0; c0 < rn; c0 += CH) {
    const int cn = rn - c0 < CH ? (int)(rn - c0) : CH;
    __syncthreads();
    const In *src = xr + (size_t)c0 * dd;
    for (int e = threadIdx.x; e < cn * dd; e += blockDim.x) {
      const int i = e / dd, t = e - i * dd;
      sr[t][i] = src[e];
    }
    __syncthreads();
    if (active) {
      for (int jj = 0; jj < cn; jj += 32 * U) {
        // Fast screen over U candidates per lane (positions past cn read stale shared
        // values; they are dropped below).
        T s[U];
        bool any = false;
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int jl = jj + u * 32 + lane;
          T val = 0;
#pragma unroll
          for (int t = 0; t < ROWS; t++)
            if (t < dd) val = add_square(val, (T)(sr[t][jl] - qc[t]));
          s[u] = val;
          any |= val <= L.wd;
        }
        if (__any_sync(kFullMask, any)) {
          unsigned pend = 0;
#pragma unroll
          for (int u = 0; u < U; u++) {
            const int jl = jj + u * 32 + lane;
            const int64_t gj = r0 + c0 + jl;
            if (jl < cn && s[u] <= L.wd && gj != self_index && before(s[u], gj, L.wd, L.wi))
              pend |= 1u << u;
          }
          while (__any_sync(kFullMask, pend != 0)) {
            const int b = pend ? __ffs(pend) - 1 : 0;
            T cv = s[0];
#pragma unroll
            for (int c = 1; c < U; c++)
              if (c == b) cv = s[c];
            const int64_t gj = r0 + c0 + jj + b * 32 + lane;
            const bool pass = pend != 0;
            pend &= pend - 1;
            L.offer(pass, cv, gj, lane);
          }
        }
      }
    }
  }
  if (active) L.store(Ld + (size_t)q * K, Li + (size_t)q * K, lane);
}

template <typename T>
__global__ void fill_list_kernel(T *Ld, int64_t *Li, int64_t count) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x) {
    Ld[e] = infinity_of<T>();
    Li[e] = kNoIndex;
  }
}

template <typename T>
struct KeyBits;
template <>
struct KeyBits<float> {
  typedef unsigned int U;
  static __device__ __forceinline__ U of(float v) { return __float_as_uint(v); }
};
template <>
struct KeyBits<double> {
  typedef unsigned long long U;
  static __device__ __forceinline__ U of(double v) {
    return (unsigned long long)__double_as_longlong(v);
  }
};

constexpr int kSelectThreads = 256;

// Any K: one block per query. The union of its list (K entries, in front) and its tile
// row (rn entries, indices r0 + j) is cut to the K smallest by (key, order in the union);
// since list indices are below r0 and both parts are in index order among equal keys,
// that is the order by (distance, index). Keys are non-negative (or +inf), so their bits
// order like the values. The row is either final distances (direct tile: S) or a GEMM
// tile (-2 r.q), turned into distances on the fly (norms, guard, self excluded) in every
// pass, always the same way.
template <typename T, typename In>
struct TileRow {
  const T *row;  // this query's row of the tile
  bool gemm;
  const T *nr;
  T nq;
  const In *xr, *xq;
  int64_t d, self_j;  // self_j: the tile column of the query itself, or -1

  __device__ __forceinline__ T value(int64_t j) const {
    T s = row[j];
    if (gemm) s = gemm_value<T, In>(s, nr[j], nq, xr + (size_t)j * (size_t)d, xq, d);
    if (j == self_j) s = infinity_of<T>();
    return s;
  }
};

template <typename T, typename In>
__global__ void __launch_bounds__(kSelectThreads)
    select_large_kernel(const T *__restrict__ Ld, const int64_t *__restrict__ Li, int64_t K,
                        const T *__restrict__ S, int64_t rn, int64_t r0, int gemm,
                        const T *__restrict__ nr, const T *__restrict__ nq,
                        const In *__restrict__ xr, const In *__restrict__ xq, int64_t d,
                        int64_t q0, int self, T *__restrict__ Cd, int64_t *__restrict__ Ci) {
  typedef typename KeyBits<T>::U U;
  typedef cub::BlockScan<int, kSelectThreads> Scan;
  __shared__ int hist[256];
  __shared__ U s_prefix;
  __shared__ int64_t s_rank;
  __shared__ typename Scan::TempStorage scan_tmp;
  const int tid = threadIdx.x, lane = tid & 31;
  const int64_t q = blockIdx.x;
  const T *ld = Ld + q * K;
  const int64_t *li = Li + q * K;
  TileRow<T, In> tr;
  tr.row = S + q * rn;
  tr.gemm = gemm != 0;
  tr.nr = nr;
  tr.nq = gemm ? nq[q] : (T)0;
  tr.xr = xr;
  tr.xq = xq + (size_t)q * (size_t)d;
  tr.d = d;
  tr.self_j = self ? q0 + q - r0 : -1;
  const int64_t total = K + rn;

  U prefix = 0, mask = 0;
  int64_t rank = K;  // 1-based rank of the wanted key among those matching the prefix
  for (int shift = (int)sizeof(U) * 8 - 8; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int64_t c = 0; c < total; c += blockDim.x) {
      const int64_t e = c + tid;
      bool take = false;
      unsigned digit = 0;
      if (e < total) {
        const U k = KeyBits<T>::of(e < K ? ld[e] : tr.value(e - K));
        take = (k & mask) == prefix;
        digit = (unsigned)((k >> shift) & 255);
      }
      // Warp-aggregated increments: one atomic per distinct digit and warp.
      const unsigned active = __ballot_sync(kFullMask, take);
      const unsigned peers = __match_any_sync(kFullMask, take ? digit : 256u);
      if (take && (__ffs(peers & active) - 1) == lane)
        atomicAdd(&hist[digit], __popc(peers & active));
    }
    __syncthreads();
    if (tid == 0) {
      int64_t cum = 0;
      int b = 0;
      for (; b < 255; b++) {
        if (cum + hist[b] >= rank) break;
        cum += hist[b];
      }
      s_prefix = prefix | ((U)b << shift);
      s_rank = rank - cum;
    }
    __syncthreads();
    prefix = s_prefix;
    rank = s_rank;
    mask |= (U)255 << shift;
    __syncthreads();
  }
  const U kth = prefix;
  const int64_t need_ties = rank;

  int64_t out_base = 0, ties_seen = 0;
  for (int64_t c = 0; c < total; c += blockDim.x) {
    const int64_t e = c + tid;
    T v = 0;
    int64_t id = 0;
    int less = 0, tie = 0;
    if (e < total) {
      v = e < K ? ld[e] : tr.value(e - K);
      id = e < K ? li[e] : r0 + (e - K);
      const U k = KeyBits<T>::of(v);
      less = k < kth;
      tie = k == kth;
    }
    int tie_rank, tie_total;
    Scan(scan_tmp).ExclusiveSum(tie, tie_rank, tie_total);
    __syncthreads();
    const int sel = less || (tie && ties_seen + tie_rank < need_ties);
    int pos, sel_total;
    Scan(scan_tmp).ExclusiveSum(sel, pos, sel_total);
    __syncthreads();
    if (sel && out_base + pos < K) {
      Cd[q * K + out_base + pos] = v;
      Ci[q * K + out_base + pos] = id;
    }
    out_base += sel_total;
    ties_seen += tie_total;
  }
}

// Exact squared distances of each query's candidates that lie in data rows
// [r0, r0 + rn) (xr holds those rows). One thread per candidate, summing in dimension
// order (exactly the CPU's sum); 16-byte loads when rows are 16-byte aligned (`vec`).
template <typename In>
__global__ void rerank_kernel(const int64_t *__restrict__ Li, int64_t K, int64_t qn,
                              const In *__restrict__ xr, int64_t r0, int64_t rn,
                              const In *__restrict__ xq, int64_t d, int vec,
                              double *__restrict__ Rd) {
  typedef Vec16<In> VI;
  typedef typename VI::V V;
  constexpr int NV = VI::n;
  const int64_t count = qn * K;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t idx = Li[e];
    if (idx >= r0 && idx < r0 + rn) {
      const int64_t q = e / K;
      const In *a = xr + (size_t)(idx - r0) * (size_t)d, *b = xq + (size_t)q * (size_t)d;
      if (vec) {
        double s = 0;
        for (int64_t t = 0; t < d; t += NV) {
          const V va = *reinterpret_cast<const V *>(a + t);
          const V vb = *reinterpret_cast<const V *>(b + t);
#pragma unroll
          for (int c = 0; c < NV; c++) {
            const double diff = __dsub_rn((double)VI::get(va, c), (double)VI::get(vb, c));
            s = __dadd_rn(s, __dmul_rn(diff, diff));
          }
        }
        Rd[e] = s;
      } else {
        Rd[e] = exact_sqdist(a, b, d);
      }
    }
  }
}

// rerank_staged_kernel: the same exact distances with the candidates' rows staged through
// shared memory, so that the loads are coalesced (rerank_kernel's lanes each stream a row
// of their own, every load touching 32 scattered sectors). A block owns kRerankThreads
// consecutive entries (a thread each); for each chunk of kRerankChunkBytes of the
// dimensions its warps copy every entry's row segment, and the segments of the few queries
// the entries belong to, with consecutive lanes on consecutive values; then each thread
// adds its entry's chunk in dimension order (the same sum as rerank_kernel, bit for bit).
constexpr int kRerankThreads = 128;
constexpr int kRerankChunkBytes = 256;  // 8 whole sectors of each row a chunk
constexpr int kRerankBlocksPerSM = 5;
// The fewest candidates per query it takes: a block then spans at most kRerankQueryRows
// queries, whose segments fit beside the rows (smaller K, rare: rerank_kernel).
constexpr int64_t kRerankStagedMinK = 8;
constexpr int kRerankQueryRows = (kRerankThreads - 1) / (int)kRerankStagedMinK + 2;

// What a lane loads: 16 bytes when every row is 16-byte aligned, else one value.
template <typename In, bool Vec>
struct RerankLoad : Vec16<In> {};
template <typename In>
struct RerankLoad<In, false> {
  typedef In V;
  static constexpr int n = 1;
  static __device__ __forceinline__ In get(const In &v, int) { return v; }
};

// Copies values [t0, t0 + cn) of Rows rows (row r at src + at[r]; none when at[r] < 0,
// zeros stored instead) into dst, row r at dst + r * Stride. The loads go in rounds of
// 128 bytes a thread, all of a round issued before its stores: enough in flight with
// several blocks an SM, and few registers.
template <typename In, bool Vec, int Rows, int Chunk, int Stride>
__device__ __forceinline__ void stage_segments(In *dst, const int64_t *at,
                                               const In *__restrict__ src, int64_t t0,
                                               int cn) {
  typedef RerankLoad<In, Vec> L;
  typedef typename L::V V;
  constexpr int units = Chunk / L::n;  // loads per row segment
  constexpr int passes = (Rows * units + kRerankThreads - 1) / kRerankThreads;
  constexpr int per_round = 128 / (int)sizeof(V);
  constexpr bool whole = Rows * units % kRerankThreads == 0;  // no pass runs past the rows
  const int present = cn / L::n;  // (cn is a multiple of L::n when Vec)
#pragma unroll 1
  for (int p0 = 0; p0 < passes; p0 += per_round) {
    V buf[per_round];
#pragma unroll
    for (int i = 0; i < per_round && p0 + i < passes; i++) {
      const int u = (p0 + i) * kRerankThreads + threadIdx.x, r = u / units, k = u % units;
      const int64_t off = (whole || r < Rows) && k < present ? at[r] : -1;
      buf[i] = off >= 0 ? *reinterpret_cast<const V *>(src + off + t0 + k * L::n) : V{};
    }
#pragma unroll
    for (int i = 0; i < per_round && p0 + i < passes; i++) {
      const int u = (p0 + i) * kRerankThreads + threadIdx.x, r = u / units, k = u % units;
      if (whole || r < Rows) {
#pragma unroll
        for (int c = 0; c < L::n; c++) dst[r * Stride + k * L::n + c] = L::get(buf[i], c);
      }
    }
  }
}

// Needs K >= kRerankStagedMinK; blocks of kRerankThreads.
template <typename In, bool Vec>
__global__ void __launch_bounds__(kRerankThreads, kRerankBlocksPerSM)
    rerank_staged_kernel(const int64_t *__restrict__ Li, int64_t K, int64_t qn,
                         const In *__restrict__ xr, int64_t r0, int64_t rn,
                         const In *__restrict__ xq, int64_t d, double *__restrict__ Rd) {
  constexpr int chunk = kRerankChunkBytes / (int)sizeof(In);
  constexpr int stride = chunk + 1;  // odd: a warp reading its 32 rows' value j is spread
                                     // over the banks
  __shared__ In rows[kRerankThreads * stride];
  __shared__ In queries[kRerankQueryRows * stride];
  __shared__ int64_t row_at[kRerankThreads];  // offset of the entry's row in xr, or -1
  __shared__ int64_t query_at[kRerankQueryRows];
  __shared__ int query_used[kRerankQueryRows];
  const int64_t count = qn * K, groups = (count + kRerankThreads - 1) / kRerankThreads;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t first = g * kRerankThreads, e = first + threadIdx.x, q_first = first / K;
    const int64_t idx = e < count ? Li[e] : -1;
    const bool mine = e < count && idx >= r0 && idx < r0 + rn;
    const int my_query = mine ? (int)(e / K - q_first) : 0;
    if (threadIdx.x < kRerankQueryRows) query_used[threadIdx.x] = 0;
    row_at[threadIdx.x] = mine ? (idx - r0) * d : -1;
    __syncthreads();
    if (mine) query_used[my_query] = 1;
    if (!__syncthreads_or(mine)) continue;  // no row of this pass: nothing to load
    if (threadIdx.x < kRerankQueryRows)
      query_at[threadIdx.x] = query_used[threadIdx.x] ? (q_first + threadIdx.x) * d : -1;
    const In *a = rows + threadIdx.x * stride, *b = queries + my_query * stride;
    double s = 0;
    for (int64_t t0 = 0; t0 < d; t0 += chunk) {
      const int cn = d - t0 < chunk ? (int)(d - t0) : chunk;
      __syncthreads();  // the previous chunk is summed, query_at is written
      stage_segments<In, Vec, kRerankThreads, chunk, stride>(rows, row_at, xr, t0, cn);
      stage_segments<In, Vec, kRerankQueryRows, chunk, stride>(queries, query_at, xq, t0, cn);
      __syncthreads();
      if (mine) {
        if (cn == chunk) {
#pragma unroll
          for (int j = 0; j < chunk; j++) s = add_square(s, __dsub_rn((double)a[j], (double)b[j]));
        } else {
          for (int j = 0; j < cn; j++) s = add_square(s, __dsub_rn((double)a[j], (double)b[j]));
        }
      }
    }
    if (mine) Rd[e] = s;
  }
}

__global__ void fill_double_kernel(double *x, int64_t count, double v) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x)
    x[e] = v;
}

// Bitonic sort of one segment of P pairs (P a power of two) in shared memory, by
// (key, index); padding is (+inf, kNoIndex).
template <typename TK>
__device__ void block_bitonic(TK *sd, int64_t *si, int P) {
  for (int size = 2; size <= P; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < P / 2; t += blockDim.x) {
        const int lo = (t / stride) * stride * 2 + (t % stride), hi = lo + stride;
        const bool ascending = (lo & size) == 0;
        const bool swap = ascending ? before(sd[hi], si[hi], sd[lo], si[lo])
                                    : before(sd[lo], si[lo], sd[hi], si[hi]);
        if (swap) {
          TK td = sd[lo];
          sd[lo] = sd[hi];
          sd[hi] = td;
          int64_t ti = si[lo];
          si[lo] = si[hi];
          si[hi] = ti;
        }
      }
      __syncthreads();
    }
  }
}

constexpr int kSortThreads = 512;

// Sorts each segment of K pairs (one block per segment); P (a power of two >= K) pairs
// of dynamic shared memory.
template <typename TK>
__global__ void __launch_bounds__(kSortThreads)
    sort_segments_kernel(const TK *__restrict__ in_d, const int64_t *__restrict__ in_i,
                         int64_t K, int P, TK *__restrict__ out_d, int64_t *__restrict__ out_i) {
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t *si = reinterpret_cast<int64_t *>(smem);
  TK *sd = reinterpret_cast<TK *>(smem + (size_t)P * sizeof(int64_t));
  const int64_t q = blockIdx.x;
  for (int t = threadIdx.x; t < P; t += blockDim.x) {
    sd[t] = t < K ? in_d[q * K + t] : infinity_of<TK>();
    si[t] = t < K ? in_i[q * K + t] : kNoIndex;
  }
  __syncthreads();
  block_bitonic(sd, si, P);
  for (int t = threadIdx.x; t < K; t += blockDim.x) {
    out_d[q * K + t] = sd[t];
    out_i[q * K + t] = si[t];
  }
}

// Sorts each query's K (exact distance, index) pairs and writes the first k, column-major
// (leading dimension ldo), distances as sqrt in the output type.
template <typename O>
__global__ void __launch_bounds__(kSortThreads)
    final_sort_kernel(const double *__restrict__ Rd, const int64_t *__restrict__ Li,
                      int64_t K, int P, int64_t k, int64_t *__restrict__ out_idx,
                      O *__restrict__ out_dist, int64_t ldo) {
  extern __shared__ __align__(16) unsigned char smem[];
  int64_t *si = reinterpret_cast<int64_t *>(smem);
  double *sd = reinterpret_cast<double *>(smem + (size_t)P * sizeof(int64_t));
  const int64_t q = blockIdx.x;
  for (int t = threadIdx.x; t < P; t += blockDim.x) {
    sd[t] = t < K ? Rd[q * K + t] : infinity_of<double>();
    si[t] = t < K ? Li[q * K + t] : kNoIndex;
  }
  __syncthreads();
  block_bitonic(sd, si, P);
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    out_idx[q + j * ldo] = si[j];
    out_dist[q + j * ldo] = (O)sqrt(sd[j]);
  }
}

// After the CUB sorts: the first k of each sorted segment.
template <typename O>
__global__ void write_output_kernel(const double *__restrict__ Rd, const int64_t *__restrict__ Li,
                                    int64_t K, int64_t qn, int64_t k,
                                    int64_t *__restrict__ out_idx, O *__restrict__ out_dist,
                                    int64_t ldo) {
  const int64_t count = qn * k;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t q = e % qn, j = e / qn;
    out_idx[q + j * ldo] = Li[q * K + j];
    out_dist[q + j * ldo] = (O)sqrt(Rd[q * K + j]);
  }
}

}  // namespace
}  // namespace gm

#endif
