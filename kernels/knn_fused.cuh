// The fused kNN kernel for small K (K = k + extra candidates <= 32) and d < 16: the
// distances of the queries to the reference points are computed and screened in one
// kernel, so no distance tile reaches device memory. Each query's running list is held
// one entry per lane of a warp (inserting a candidate is one ballot and one shuffle),
// and each warp serves several queries so that every reference point read from shared
// memory is used several times. Distances are the direct form's (differences in the
// input precision, then T), so fp64 gives the CPU's exact values.
//
// The reference points can be split over several blocks (grid.y) when there are too few
// query blocks to fill the GPU; merge_lists_kernel then combines the partial lists.
//
// (A tensor-core version for d >= 16, distances and selection in one kernel through
// WMMA, measured slower than cuBLAS plus the separate selection: bench/RESULTS.md.)
#ifndef GPUML_KNN_FUSED_CUH
#define GPUML_KNN_FUSED_CUH

#include "select.cuh"

namespace gm {
namespace {

constexpr int kFusedMaxK = 32;
constexpr int kFusedAlign = 128;      // reference splits are multiples of this
constexpr int kNoLocal = 0x7fffffff;  // an unused list slot's index

// One query's sorted list of K <= 32 candidates, lane l holding entry l (lanes >= K hold
// (+inf, kNoLocal) and never move into the first K). `td`, `ti` are the K-th entry.
template <typename T>
struct LaneList {
  T d;
  int i;
  T td;
  int ti;

  __device__ __forceinline__ void refresh(int K) {
    td = __shfl_sync(kFullMask, d, K - 1);
    ti = __shfl_sync(kFullMask, i, K - 1);
  }
  // Would (v, j) enter the list?
  __device__ __forceinline__ bool wants(T v, int j) const { return before(v, (int64_t)j, td, (int64_t)ti); }
  // Inserts every lane's (v, j) with `pass` set, one at a time (warp-uniform loop).
  __device__ __forceinline__ void insert(bool pass, T v, int j, int lane, int K) {
    unsigned mask = __ballot_sync(kFullMask, pass);
    while (mask) {
      const int src = __ffs(mask) - 1;
      mask &= mask - 1;
      const T cv = __shfl_sync(kFullMask, v, src);
      const int cj = __shfl_sync(kFullMask, j, src);
      if (!wants(cv, cj)) continue;  // an earlier insertion raised the bar
      const unsigned ahead = __ballot_sync(kFullMask, before(d, (int64_t)i, cv, (int64_t)cj));
      const int pos = __popc(ahead);  // the list is sorted: these are lanes 0 .. pos - 1
      const T up_d = __shfl_up_sync(kFullMask, d, 1);
      const int up_i = __shfl_up_sync(kFullMask, i, 1);
      if (lane == pos) {
        d = cv;
        i = cj;
      } else if (lane > pos) {
        d = up_d;
        i = up_i;
      }
      if (lane >= K) {
        d = infinity_of<T>();
        i = kNoLocal;
      }
      refresh(K);
    }
  }
};

// Queries per warp and warps per block of the direct kernel.
constexpr int kDirectQpw = 4;
constexpr int kDirectWarps = 8;
// Reference points staged in shared memory per step (within the 48 KB of static shared
// memory for 15 dimensions of doubles).
template <int DIM>
struct DirectChunk {
  static constexpr int value = DIM > 0 ? 1024 : 256;
};

// Each warp keeps the lists of kDirectQpw queries; the reference points of a split pass
// through shared memory in chunks.
template <typename T, typename In, int DIM>
__global__ void __launch_bounds__(kDirectWarps * 32)
    direct_list_kernel(const In *__restrict__ xq, int qn, const In *__restrict__ xr, int rn,
                       int dd, int64_t r0, int64_t q0, int self, int K, int per,
                       T *__restrict__ Pd, int64_t *__restrict__ Pi) {
  constexpr int ROWS = DIM > 0 ? DIM : kDirectMaxDim;
  constexpr int kChunk = DirectChunk<DIM>::value;
  __shared__ In sr[ROWS][kChunk];
  const int d = DIM > 0 ? DIM : dd;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int qbase = (blockIdx.x * kDirectWarps + warp) * kDirectQpw;
  const int split = blockIdx.y;
  const int rbeg = split * per, rend = min(rn, rbeg + per);
  In qc[kDirectQpw][ROWS];
  LaneList<T> L[kDirectQpw];
  int64_t self_local[kDirectQpw];
#pragma unroll
  for (int a = 0; a < kDirectQpw; a++) {
    const int q = qbase + a;
#pragma unroll
    for (int t = 0; t < ROWS; t++) qc[a][t] = (q < qn && t < d) ? xq[(size_t)q * d + t] : (In)0;
    L[a].d = infinity_of<T>();
    L[a].i = kNoLocal;
    L[a].refresh(K);
    self_local[a] = (self && q < qn) ? q0 + q - r0 : -1;
  }
  for (int c0 = rbeg; c0 < rend; c0 += kChunk) {
    const int cn = min(kChunk, rend - c0);
    __syncthreads();
    for (int e = threadIdx.x; e < cn * d; e += blockDim.x) {
      const int i = e / d, t = e - i * d;
      sr[t][i] = xr[(size_t)(c0 + i) * d + t];
    }
    __syncthreads();
    if (qbase >= qn) continue;  // no queries here: still takes part in the barriers
    for (int jj = 0; jj < cn; jj += 32) {
      const int jl = jj + lane, j = c0 + jl;
      In r[ROWS];
#pragma unroll
      for (int t = 0; t < ROWS; t++) r[t] = (t < d && jl < cn) ? sr[t][jl] : (In)0;
#pragma unroll
      for (int a = 0; a < kDirectQpw; a++) {
        T v = 0;
#pragma unroll
        for (int t = 0; t < ROWS; t++)
          if (t < d) v = add_square(v, (T)(r[t] - qc[a][t]));
        const bool pass = jl < cn && j != self_local[a] && L[a].wants(v, j);
        if (__any_sync(kFullMask, pass)) L[a].insert(pass, v, j, lane, K);
      }
    }
  }
#pragma unroll
  for (int a = 0; a < kDirectQpw; a++) {
    const int q = qbase + a;
    if (q < qn && lane < K) {
      const size_t o = ((size_t)split * (size_t)qn + (size_t)q) * (size_t)K + lane;
      Pd[o] = L[a].d;
      Pi[o] = L[a].i == kNoLocal ? kNoIndex : r0 + L[a].i;
    }
  }
}

// Merges `splits` partial lists per query (P[(s * qn + q) * K ...]) into one sorted list
// of K at Ld/Li[q * K ...]. One warp per query; indices are global here.
template <typename T>
__global__ void merge_lists_kernel(const T *__restrict__ Pd, const int64_t *__restrict__ Pi,
                                   int qn, int K, int splits, T *__restrict__ Ld,
                                   int64_t *__restrict__ Li) {
  const int lane = threadIdx.x & 31;
  const int q = (int)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  if (q >= qn) return;  // whole warps
  T d = lane < K ? Pd[(size_t)q * K + lane] : infinity_of<T>();
  int64_t i = lane < K ? Pi[(size_t)q * K + lane] : kNoIndex;
  T td = __shfl_sync(kFullMask, d, K - 1);
  int64_t ti = __shfl_sync(kFullMask, i, K - 1);
  for (int s = 1; s < splits; s++) {
    const size_t o = ((size_t)s * (size_t)qn + (size_t)q) * (size_t)K;
    const T v = lane < K ? Pd[o + lane] : infinity_of<T>();
    const int64_t j = lane < K ? Pi[o + lane] : kNoIndex;
    unsigned mask = __ballot_sync(kFullMask, lane < K && before(v, j, td, ti));
    while (mask) {
      const int src = __ffs(mask) - 1;
      mask &= mask - 1;
      const T cv = __shfl_sync(kFullMask, v, src);
      const int64_t cj = __shfl_sync(kFullMask, j, src);
      if (!before(cv, cj, td, ti)) continue;
      const int pos = __popc(__ballot_sync(kFullMask, before(d, i, cv, cj)));
      const T up_d = __shfl_up_sync(kFullMask, d, 1);
      const int64_t up_i = __shfl_up_sync(kFullMask, i, 1);
      if (lane == pos) {
        d = cv;
        i = cj;
      } else if (lane > pos) {
        d = up_d;
        i = up_i;
      }
      td = __shfl_sync(kFullMask, d, K - 1);
      ti = __shfl_sync(kFullMask, i, K - 1);
    }
  }
  if (lane < K) {
    Ld[(size_t)q * K + lane] = d;
    Li[(size_t)q * K + lane] = i;
  }
}

}  // namespace
}  // namespace gm

#endif
