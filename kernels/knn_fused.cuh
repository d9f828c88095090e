// Fused kNN kernels for small K (K = k + extra candidates <= 32): the distances of a
// block of queries to the reference points are computed and screened in one kernel, so
// no distance tile ever reaches device memory, and each query's running list is held
// one entry per lane of a warp (inserting a candidate is one ballot and one shuffle).
//
//  - fused_gemm_kernel (fp32, d >= 16): a 128 x 128 tile of dot products per step from
//    the tensor cores. Each fp32 operand is split into a TF32 "high" part and a TF32
//    "low" part (the rounding residue), and a.b is taken as hi.hi + hi.lo + lo.hi: the
//    dropped lo.lo term and the TF32 rounding of the residue leave a relative error near
//    2^-21 per product, close to fp32's 2^-24 and far from plain TF32's 2^-11. That is
//    the screen only: the candidates' final distances are recomputed exactly in fp64
//    (knn.cu), and the extra candidates absorb the screen's last-bit differences.
//  - direct_list_kernel (d < 16, fp32 or fp64): the direct form, several queries per
//    warp so that each reference point read from shared memory serves all of them.
//
// Both can split the reference points over several blocks (grid.y) when there are too
// few query blocks to fill the GPU; merge_lists_kernel then combines the partial lists.
#ifndef GPUML_KNN_FUSED_CUH
#define GPUML_KNN_FUSED_CUH

#include <mma.h>
#include "select.cuh"

namespace gm {
namespace {

constexpr int kFusedMaxK = 32;
constexpr int kFusedBM = 128;  // queries per block
constexpr int kFusedBN = 128;  // reference points per step
constexpr int kFusedBK = 16;   // dimensions per shared-memory stage
constexpr int kFusedThreads = 256;
constexpr int kStageLd = kFusedBK + 4;  // padded rows; wmma needs a multiple of 4 floats
constexpr int kTileLd = kFusedBN + 4;
constexpr int kNoLocal = 0x7fffffff;  // an unused list slot's index

struct FusedShared {
  union {
    struct {
      float a_hi[kFusedBM][kStageLd], a_lo[kFusedBM][kStageLd];
      float b_hi[kFusedBN][kStageLd], b_lo[kFusedBN][kStageLd];
    } stage;
    float tile[kFusedBM][kTileLd];  // dot products of the current step
  } u;
  float list_d[kFusedBM][kFusedMaxK];
  int list_i[kFusedBM][kFusedMaxK];
  float nq[kFusedBM];
  float nr[kFusedBN];
};

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

__device__ __forceinline__ float tf32_of(float v) { return nvcuda::wmma::__float_to_tf32(v); }

// Loads 4 consecutive dimensions [k, k + 4) of point `row` (zero past d or past `rows`).
__device__ __forceinline__ float4 load4(const float *__restrict__ p, int64_t rows, int64_t d,
                                        int64_t row, int64_t k, bool vec) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (row >= rows) return v;
  const float *src = p + (size_t)row * (size_t)d + k;
  if (vec) {
    if (k < d) v = *reinterpret_cast<const float4 *>(src);
  } else {
    if (k < d) v.x = src[0];
    if (k + 1 < d) v.y = src[1];
    if (k + 2 < d) v.z = src[2];
    if (k + 3 < d) v.w = src[3];
  }
  return v;
}

__device__ __forceinline__ void store_split(float *hi, float *lo, float4 v) {
  float4 h = make_float4(tf32_of(v.x), tf32_of(v.y), tf32_of(v.z), tf32_of(v.w));
  float4 l = make_float4(tf32_of(v.x - h.x), tf32_of(v.y - h.y), tf32_of(v.z - h.z),
                         tf32_of(v.w - h.w));
  *reinterpret_cast<float4 *>(hi) = h;
  *reinterpret_cast<float4 *>(lo) = l;
}

// Block (bx, split): queries [bx * 128, +128) of this query tile against reference
// points [split * per, min(rn, (split + 1) * per)). pq, nq: the tile's centred queries
// and norms (qn rows); pr, nr: the references (rn rows, first one global index r0);
// xq, xr: the points as given, for the cancellation guard. Writes K entries per query
// to Pd/Pi at [(split * qn + q) * K], sorted, indices global.
// MINB: blocks per multiprocessor the registers must allow (2: up to 128 registers a
// thread, so that one block's selection overlaps the other's products).
template <typename In, int MINB>
__global__ void __launch_bounds__(kFusedThreads, MINB)
    fused_gemm_kernel(const float *__restrict__ pq, const float *__restrict__ nq_g,
                      const In *__restrict__ xq, int qn, const float *__restrict__ pr,
                      const float *__restrict__ nr_g, const In *__restrict__ xr, int rn,
                      int64_t d, int64_t r0, int64_t q0, int self, int K, int per,
                      float *__restrict__ Pd, int64_t *__restrict__ Pi) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char fused_smem[];
  FusedShared &sh = *reinterpret_cast<FusedShared *>(fused_smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 1, wn = warp & 1;  // 4 x 2 warps, each 32 queries x 64 references
  const int qb = blockIdx.x * kFusedBM;
  const int split = blockIdx.y;
  const int rbeg = split * per, rend = min(rn, rbeg + per);
  const bool vec = (d % 4) == 0;
  const float guard = (float)kCancellationGuard;

  for (int e = tid; e < kFusedBM * kFusedMaxK; e += kFusedThreads) {
    sh.list_d[e / kFusedMaxK][e % kFusedMaxK] = infinity_of<float>();
    sh.list_i[e / kFusedMaxK][e % kFusedMaxK] = kNoLocal;
  }
  for (int e = tid; e < kFusedBM; e += kFusedThreads)
    sh.nq[e] = qb + e < qn ? nq_g[qb + e] : 0.f;

  const int nstages = (int)((d + kFusedBK - 1) / kFusedBK);
  for (int c0 = rbeg; c0 < rend; c0 += kFusedBN) {
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    // Each thread moves 2 groups of 4 dimensions of the query block and 2 of the
    // reference block per stage: group g is row g / 4, dimensions 4 * (g % 4) ...
    float4 ra[2], rb[2];
    auto fetch = [&](int s) {
      const int64_t k0 = (int64_t)s * kFusedBK;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int g = tid + h * kFusedThreads, row = g >> 2, kc = (g & 3) * 4;
        ra[h] = load4(pq, qn, d, (int64_t)qb + row, k0 + kc, vec);
        rb[h] = load4(pr, rend, d, (int64_t)c0 + row, k0 + kc, vec);
      }
    };
    fetch(0);
    for (int s = 0; s < nstages; s++) {
      __syncthreads();  // the previous stage (or step's selection) is done with shared memory
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int g = tid + h * kFusedThreads, row = g >> 2, kc = (g & 3) * 4;
        store_split(&sh.u.stage.a_hi[row][kc], &sh.u.stage.a_lo[row][kc], ra[h]);
        store_split(&sh.u.stage.b_hi[row][kc], &sh.u.stage.b_lo[row][kc], rb[h]);
      }
      __syncthreads();
      if (s + 1 < nstages) fetch(s + 1);  // in flight during the products below
#pragma unroll
      for (int kk = 0; kk < kFusedBK; kk += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ah[2], al[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> bh[4], bl[4];
#pragma unroll
        for (int i = 0; i < 2; i++) {
          wmma::load_matrix_sync(ah[i], &sh.u.stage.a_hi[wm * 32 + i * 16][kk], kStageLd);
          wmma::load_matrix_sync(al[i], &sh.u.stage.a_lo[wm * 32 + i * 16][kk], kStageLd);
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
          wmma::load_matrix_sync(bh[j], &sh.u.stage.b_hi[wn * 64 + j * 16][kk], kStageLd);
          wmma::load_matrix_sync(bl[j], &sh.u.stage.b_lo[wn * 64 + j * 16][kk], kStageLd);
        }
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
          for (int j = 0; j < 4; j++) {
            wmma::mma_sync(acc[i][j], al[i], bh[j], acc[i][j]);
            wmma::mma_sync(acc[i][j], ah[i], bl[j], acc[i][j]);
            wmma::mma_sync(acc[i][j], ah[i], bh[j], acc[i][j]);
          }
      }
    }
    __syncthreads();  // the tile overwrites the stages
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int j = 0; j < 4; j++)
        wmma::store_matrix_sync(&sh.u.tile[wm * 32 + i * 16][wn * 64 + j * 16], acc[i][j],
                                kTileLd, wmma::mem_row_major);
    for (int e = tid; e < kFusedBN; e += kFusedThreads)
      sh.nr[e] = c0 + e < rend ? nr_g[c0 + e] : 0.f;
    __syncthreads();

    // Selection: warp w merges the step into the lists of queries w * 16 ... + 15.
    for (int qq = 0; qq < kFusedBM / 8; qq++) {
      const int q = warp * (kFusedBM / 8) + qq;
      if (qb + q >= qn) break;  // warp-uniform
      LaneList<float> L{sh.list_d[q][lane], sh.list_i[q][lane], 0.f, 0};
      L.refresh(K);
      const float nqq = sh.nq[q];
      const int64_t self_local = self ? q0 + qb + q - r0 : -1;
#pragma unroll
      for (int u = 0; u < kFusedBN / 32; u++) {
        const int c = u * 32 + lane, j = c0 + c;
        bool pass = false;
        float v = 0.f;
        if (j < rend && j != self_local) {
          const float norms = nqq + sh.nr[c];
          v = norms - 2.0f * sh.u.tile[q][c];
          if (v < guard * norms)
            v = (float)exact_sqdist(xr + (size_t)j * (size_t)d,
                                    xq + (size_t)(qb + q) * (size_t)d, d);
          v = v > 0.f ? v : 0.f;
          pass = L.wants(v, j);
        }
        if (__any_sync(kFullMask, pass)) L.insert(pass, v, j, lane, K);
      }
      sh.list_d[q][lane] = L.d;
      sh.list_i[q][lane] = L.i;
    }
  }
  __syncwarp();
  __syncthreads();
  for (int e = tid; e < kFusedBM * K; e += kFusedThreads) {
    const int q = e / K, t = e - q * K;
    if (qb + q >= qn) continue;
    const size_t o = ((size_t)split * (size_t)qn + (size_t)(qb + q)) * (size_t)K + t;
    const int li = sh.list_i[q][t];
    Pd[o] = sh.list_d[q][t];
    Pi[o] = li == kNoLocal ? kNoIndex : r0 + li;
  }
}

// Queries per warp and warps per block of the direct kernel.
constexpr int kDirectQpw = 4;
constexpr int kDirectWarps = 8;
// Reference points staged in shared memory per step (within the 48 KB of static shared
// memory for 15 dimensions of doubles).
template <int DIM>
struct DirectChunk {
  static constexpr int value = DIM > 0 ? 1024 : 256;
};

// d < 16: each warp keeps the lists of kDirectQpw queries; the reference points of a
// split pass through shared memory in chunks; distances as in the direct tile
// (differences in the input precision, then T), so fp64 gives the CPU's exact values.
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
