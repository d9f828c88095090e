// Probe of the cutoff count's pair test in 3-d on its own (issue 16): how many pairs a
// second the fp32 lanes test (the form the count uses now) against a tile of the fp16
// tensor cores that makes each pair's d^2 - cut and then sums the pairs inside by a
// second product. Not part of the library or of tools/gpu-run.sh. From the repository
// root:
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 bench/pair_probe.cu \
//        -o /tmp/pair_probe
//   /tmp/pair_probe            both kernels checked, then timed (best of 5, alternating)
//
// The work is a count's crossed pairs in cell units: an item of 16 query points in the
// unit cell at the origin, and cells of 16 tested points each at integer offsets whose
// length lies between r - 2 and r + 1 (r = 20 cells, the cut r^2), so that d^2 - cut
// spreads over about +-100 around the cut. Every warp counts its item against every
// tested cell (from its own starting cell), symmetrically: each query's count of
// tested points inside the cut and each tested point's count of queries inside.
//
// lanes: the count's form, the tested points across the lanes and the item's queries in
// every lane; a pair is d = (c + w) + m.t (c = |q|^2, m = -2q, w = |t|^2 - cut: fp32, one
// add and three fmas), inside when d < 0, and a band test |d| < margin (the count's fp64
// check) as the count has it; one atomic a lane and 32 tested points.
//
// tiles: a warp's mma.m16n8k16 (fp16 in, fp32 sums) makes d^2 - cut of 16 tested points
// (rows) and 8 queries (columns) from 13 products: t_hi.(-2q_hi), t_hi.(-2q_lo),
// t_lo.(-2q_hi) (t = t_hi + t_lo and q = q_hi + q_lo in fp16), w_hi + w_lo and
// c_hi + c_lo (the same fp32 w and c as lanes, split in two halves each). Two products
// make a 16 x 16 tile; its signs, packed as fp16 ones and zeros, are the A operand of a
// third product with ones, which sums each tested point's row (one atomic a row); the
// queries' columns are added up in fp16 pairs (flushed to fp32 every 512 tiles). A tile
// with a pair within the margin of the cut takes those pairs' d from lanes' formula:
// the counts must equal lanes' exactly (the host's reference, lanes' arithmetic).
//
// The tiles here are the best case: full (16 points a cell, 16 queries an item) and
// their operands made once, before the timing, relative to the item's cell. A count
// built on them would also make the tested points' operands relative to each item (or
// each cell's offset into the queries' operand), classify rows and cells as now, and
// handle partial tiles.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <random>
#include <vector>
#include "probe_check.h"

namespace {

constexpr int kQueries = 16;    // an item's queries (a warp's)
constexpr int kCellPoints = 16; // a tested cell's points: one tile's rows
constexpr float kRadius = 20.f; // the cut's radius in cells
constexpr float kMargin = 2e-3f; // |d^2 - cut| within which tiles take lanes' d
constexpr int kFlushTiles = 512; // fp16 column sums stay exact integers (<= 2048)

struct Query {
  float mx, my, mz, c;  // -2q, |q|^2
};
struct Tested {
  float x, y, z, w;  // t, |t|^2 - cut
};

// lanes' d, shared by the kernels and the host's reference (explicit fmas: one rounding
// sequence everywhere)
__host__ __device__ inline float pair_d(const Query &q, const Tested &t) {
  return fmaf(q.mz, t.z, fmaf(q.my, t.y, fmaf(q.mx, t.x, q.c + t.w)));
}

// The 16 halves of a record in the order a lane reads them: lane t of a quad takes
// halves 4t .. 4t + 3, the operands' k = 2t, 2t + 1 (first register) and 2t + 8, 2t + 9
// (second), for A's rows and B's columns alike.
__host__ __device__ inline int slot_of(int k) {
  const int t = (k & 7) >> 1;
  return 4 * t + (k & 1) + (k >= 8 ? 2 : 0);
}

// v as two halves, hi + lo.
__device__ inline void split_half(float v, __half *hi, __half *lo) {
  *hi = __float2half_rn(v);
  *lo = __float2half_rn(v - __half2float(*hi));
}

// A point's 16 halves in slot order: a query's (-2q against t_hi twice, split, and against
// t_lo; ones against w; its c split) or a tested point's (t_hi twice and t_lo; its w
// split; ones against c), so that their products sum to w + c - 2 t.q.
__device__ inline void write_record(const float v[3], float own, bool query, __half *out) {
  const __half one = __float2half_rn(1.f), minus_two = __float2half_rn(-2.f);
  __half rec[16];
  for (int k = 0; k < 16; k++) rec[k] = __float2half_rn(0.f);
  for (int a = 0; a < 3; a++) {
    __half hi, lo;
    split_half(v[a], &hi, &lo);
    rec[a] = query ? __hmul(hi, minus_two) : hi;
    rec[3 + a] = query ? __hmul(lo, minus_two) : hi;
    rec[6 + a] = query ? __hmul(hi, minus_two) : lo;
  }
  __half own_hi, own_lo;
  split_half(own, &own_hi, &own_lo);
  rec[9] = query ? one : own_hi;
  rec[10] = query ? one : own_lo;
  rec[11] = query ? own_hi : one;
  rec[12] = query ? own_lo : one;
  for (int k = 0; k < 16; k++) out[slot_of(k)] = rec[k];
}

// c = |q|^2 and w = |t|^2 - cut in fp32 on the device (the host's reference reads them
// back), and the tiles' fp16 records of both.
__global__ void prep_kernel(const float *q3, int nq, const float *t3, int nt, float cut,
                            Query *q, Tested *t, __half *qrec, __half *trec) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nq) {
    const float v[3] = {q3[3 * i], q3[3 * i + 1], q3[3 * i + 2]};
    Query r;
    r.mx = -2 * v[0];
    r.my = -2 * v[1];
    r.mz = -2 * v[2];
    r.c = fmaf(v[2], v[2], fmaf(v[1], v[1], v[0] * v[0]));
    q[i] = r;
    write_record(v, r.c, true, qrec + 16 * i);
  }
  if (i < nt) {
    const float v[3] = {t3[3 * i], t3[3 * i + 1], t3[3 * i + 2]};
    Tested r;
    r.x = v[0];
    r.y = v[1];
    r.z = v[2];
    r.w = fmaf(v[2], v[2], fmaf(v[1], v[1], v[0] * v[0])) - cut;
    t[i] = r;
    write_record(v, r.w, false, trec + 16 * i);
  }
}

__device__ inline int warp_id() { return (blockIdx.x * blockDim.x + threadIdx.x) >> 5; }

// lanes: tested points across the lanes, the 16 queries in every lane.
__global__ void __launch_bounds__(256, 2)
    lanes_kernel(const Query *__restrict__ q, const Tested *__restrict__ t, int ncells,
                 unsigned *__restrict__ qcount, unsigned *__restrict__ tcount,
                 unsigned *__restrict__ banded) {
  const int lane = threadIdx.x & 31;
  Query mine[kQueries];
#pragma unroll
  for (int j = 0; j < kQueries; j++) mine[j] = q[j];
  unsigned qc[kQueries];
#pragma unroll
  for (int j = 0; j < kQueries; j++) qc[j] = 0;
  const int chunks = ncells / 2;  // 32 tested points a chunk
  int chunk = (int)(((long long)warp_id() * 977) % chunks);
  float nearest = 1e30f;
  for (int i = 0; i < chunks; i++) {
    const int at = chunk * 32 + lane;
    const Tested p = t[at];
    unsigned tc = 0;
#pragma unroll
    for (int j = 0; j < kQueries; j++) {
      const float d = pair_d(mine[j], p);
      const unsigned in = d < 0.f;
      qc[j] += in;
      tc += in;
      nearest = fminf(nearest, fabsf(d));
    }
    atomicAdd(&tcount[at], tc);
    chunk = chunk + 1 == chunks ? 0 : chunk + 1;
  }
#pragma unroll
  for (int j = 0; j < kQueries; j++) {
    unsigned v = qc[j];
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) atomicAdd(&qcount[j], v);
  }
  if (__any_sync(0xffffffffu, nearest < kMargin) && lane == 0) atomicAdd(banded, 1u);
}

__device__ inline void mma16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                const float c[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

__device__ inline uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t *>(&h);
}
// 1.0 where the value is below zero, else 0, for both halves
__device__ inline uint32_t below_zero(uint32_t h) {
  const __half2 v = __hlt2(*reinterpret_cast<const __half2 *>(&h), __float2half2_rn(0.f));
  return *reinterpret_cast<const uint32_t *>(&v);
}

// tiles: 16 tested points (one cell) x 16 queries per step, two products for the values
// and one for the rows' sums.
__global__ void __launch_bounds__(256, 2)
    tiles_kernel(const Query *__restrict__ q, const Tested *__restrict__ t,
                 const uint2 *__restrict__ qrec, const uint2 *__restrict__ trec, int ncells,
                 unsigned *__restrict__ qcount, unsigned *__restrict__ tcount,
                 unsigned *__restrict__ banded) {
  const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  // B operands: queries g (columns 0-7) and 8 + g (8-15); a record is 4 uint2, lane tq's
  // the tq-th
  const uint2 b_lo = qrec[4 * g + tq], b_hi = qrec[4 * (8 + g) + tq];
  const uint32_t ones = 0x3c003c00u;  // two fp16 ones
  const float zero4[4] = {0.f, 0.f, 0.f, 0.f};
  __half2 col_lo = __float2half2_rn(0.f), col_hi = col_lo;  // queries 2tq, 2tq+1; 8+..
  float qsum[4] = {0.f, 0.f, 0.f, 0.f};
  int cell = (int)(((long long)warp_id() * 977) % ncells);
  unsigned tiles_banded = 0;
  for (int i = 0; i < ncells; i++) {
    const int base = cell * kCellPoints;
    const uint2 ra = trec[4 * (base + g) + tq], rb = trec[4 * (base + g + 8) + tq];
    const uint32_t a[4] = {ra.x, rb.x, ra.y, rb.y};
    float d0[4], d1[4];
    mma16816(d0, a, b_lo.x, b_lo.y, zero4);  // queries 0-7
    mma16816(d1, a, b_hi.x, b_hi.y, zero4);  // queries 8-15
    float nearest = fabsf(d0[0]);
#pragma unroll
    for (int e = 1; e < 4; e++) nearest = fminf(nearest, fabsf(d0[e]));
#pragma unroll
    for (int e = 0; e < 4; e++) nearest = fminf(nearest, fabsf(d1[e]));
    if (__any_sync(0xffffffffu, nearest < kMargin)) {
      // the pairs near the cut take lanes' d (rows g, g + 8; columns 2tq, 2tq + 1)
      tiles_banded++;
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = base + g + (e >= 2 ? 8 : 0), col = 2 * tq + (e & 1);
        if (fabsf(d0[e]) < kMargin) d0[e] = pair_d(q[col], t[row]) < 0.f ? -1.f : 1.f;
        if (fabsf(d1[e]) < kMargin) d1[e] = pair_d(q[8 + col], t[row]) < 0.f ? -1.f : 1.f;
      }
    }
    // the signs as the A operand of a 16 x 16 tile: rows g, g + 8; k = queries
    uint32_t s[4];
    s[0] = below_zero(pack_half2(d0[0], d0[1]));
    s[1] = below_zero(pack_half2(d0[2], d0[3]));
    s[2] = below_zero(pack_half2(d1[0], d1[1]));
    s[3] = below_zero(pack_half2(d1[2], d1[3]));
    float rows[4];
    mma16816(rows, s, ones, ones, zero4);
    if (tq == 0) {
      atomicAdd(&tcount[base + g], (unsigned)rows[0]);
      atomicAdd(&tcount[base + g + 8], (unsigned)rows[2]);
    }
    col_lo = __hadd2(col_lo, __hadd2(*reinterpret_cast<__half2 *>(&s[0]),
                                     *reinterpret_cast<__half2 *>(&s[1])));
    col_hi = __hadd2(col_hi, __hadd2(*reinterpret_cast<__half2 *>(&s[2]),
                                     *reinterpret_cast<__half2 *>(&s[3])));
    if ((i + 1) % kFlushTiles == 0 || i + 1 == ncells) {
      const float2 lo = __half22float2(col_lo), hi = __half22float2(col_hi);
      qsum[0] += lo.x;
      qsum[1] += lo.y;
      qsum[2] += hi.x;
      qsum[3] += hi.y;
      col_lo = col_hi = __float2half2_rn(0.f);
    }
    cell = cell + 1 == ncells ? 0 : cell + 1;
  }
#pragma unroll
  for (int e = 0; e < 4; e++) {
    float v = qsum[e];
    for (int o = 4; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    qsum[e] = v;
  }
  if (g == 0) {
    atomicAdd(&qcount[2 * tq], (unsigned)qsum[0]);
    atomicAdd(&qcount[2 * tq + 1], (unsigned)qsum[1]);
    atomicAdd(&qcount[8 + 2 * tq], (unsigned)qsum[2]);
    atomicAdd(&qcount[9 + 2 * tq], (unsigned)qsum[3]);
  }
  if (tq == 0 && g == 0 && tiles_banded) atomicAdd(banded, tiles_banded);
}

}  // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int ncells = 32768, nt = ncells * kCellPoints, nq = kQueries;
  const int blocks = sms * 2 * 4, warps = blocks * 8;
  const float cut = kRadius * kRadius;
  std::mt19937_64 rng(20261128);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::vector<float> q3(3 * nq), t3(3 * (size_t)nt);
  for (auto &v : q3) v = unit(rng);
  std::uniform_int_distribution<int> off(-(int)kRadius - 2, (int)kRadius + 2);
  for (int c = 0; c < ncells; c++) {
    int u[3];
    for (;;) {  // a crossed cell's offset: its length within r - 2 .. r + 1
      for (int a = 0; a < 3; a++) u[a] = off(rng);
      const double len = sqrt((double)u[0] * u[0] + (double)u[1] * u[1] + (double)u[2] * u[2]);
      if (len >= kRadius - 2 && len <= kRadius + 1) break;
    }
    for (int p = 0; p < kCellPoints; p++)
      for (int a = 0; a < 3; a++) t3[3 * ((size_t)c * kCellPoints + p) + a] = (float)u[a] + unit(rng);
  }
  float *q3_d, *t3_d;
  Query *q_d;
  Tested *t_d;
  __half *qrec_d, *trec_d;
  unsigned *qcount_d, *tcount_d, *banded_d;
  CK(cudaMalloc(&q3_d, q3.size() * 4));
  CK(cudaMalloc(&t3_d, t3.size() * 4));
  CK(cudaMalloc(&q_d, nq * sizeof(Query)));
  CK(cudaMalloc(&t_d, (size_t)nt * sizeof(Tested)));
  CK(cudaMalloc(&qrec_d, (size_t)nq * 16 * 2));
  CK(cudaMalloc(&trec_d, (size_t)nt * 16 * 2));
  CK(cudaMalloc(&qcount_d, nq * 4));
  CK(cudaMalloc(&tcount_d, (size_t)nt * 4));
  CK(cudaMalloc(&banded_d, 4));
  CK(cudaMemcpy(q3_d, q3.data(), q3.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(t3_d, t3.data(), t3.size() * 4, cudaMemcpyHostToDevice));
  prep_kernel<<<(nt + 255) / 256, 256>>>(q3_d, nq, t3_d, nt, cut, q_d, t_d, qrec_d, trec_d);
  CK(cudaGetLastError());
  std::vector<Query> q(nq);
  std::vector<Tested> t(nt);
  CK(cudaMemcpy(q.data(), q_d, nq * sizeof(Query), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(t.data(), t_d, (size_t)nt * sizeof(Tested), cudaMemcpyDeviceToHost));
  // the reference: lanes' arithmetic on the host, every warp counting every pair once
  std::vector<unsigned long long> ref_q(nq, 0);
  std::vector<unsigned> ref_t(nt, 0);
  double inside = 0, near_cut = 0;
  for (int i = 0; i < nt; i++)
    for (int j = 0; j < nq; j++) {
      const float d = pair_d(q[j], t[i]);
      if (d < 0.f) {
        ref_q[j]++;
        ref_t[i]++;
        inside++;
      }
      near_cut += fabsf(d) < kMargin;
    }
  printf("pair_probe: %d SMs, %d warps, %d tested points, %d queries: %.3e pairs a call, "
         "%.1f%% inside, %.2e of the pairs within %g of the cut\n",
         sms, warps, nt, nq, (double)warps * nt * nq, 100 * inside / ((double)nt * nq),
         near_cut / ((double)nt * nq), kMargin);
  const char *names[2] = {"lanes", "tiles"};
  double best[2] = {1e30, 1e30};
  int failures = 0;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int rep = 0; rep < 6; rep++)
    for (int k = 0; k < 2; k++) {
      CK(cudaMemset(qcount_d, 0, nq * 4));
      CK(cudaMemset(tcount_d, 0, (size_t)nt * 4));
      CK(cudaMemset(banded_d, 0, 4));
      CK(cudaEventRecord(e0));
      if (k == 0)
        lanes_kernel<<<blocks, 256>>>(q_d, t_d, ncells, qcount_d, tcount_d, banded_d);
      else
        tiles_kernel<<<blocks, 256>>>(q_d, t_d, reinterpret_cast<const uint2 *>(qrec_d),
                                      reinterpret_cast<const uint2 *>(trec_d), ncells,
                                      qcount_d, tcount_d, banded_d);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep > 0 && ms < best[k]) best[k] = ms;  // the first round warms up
      if (rep == 0) {
        std::vector<unsigned> qc(nq), tc(nt);
        unsigned banded = 0;
        CK(cudaMemcpy(qc.data(), qcount_d, nq * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(tc.data(), tcount_d, (size_t)nt * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&banded, banded_d, 4, cudaMemcpyDeviceToHost));
        long long bad_q = 0, bad_t = 0;
        for (int j = 0; j < nq; j++) bad_q += qc[j] != (unsigned)(ref_q[j] * warps);
        for (int i = 0; i < nt; i++) bad_t += tc[i] != ref_t[i] * (unsigned)warps;
        printf("%s: %lld of %d query counts and %lld of %d tested counts differ from the "
               "reference; %u %s with a pair near the cut\n",
               names[k], bad_q, nq, bad_t, nt, banded, k == 0 ? "warps" : "tiles");
        failures += bad_q != 0 || bad_t != 0;
      }
    }
  const double pairs = (double)warps * nt * nq;
  for (int k = 0; k < 2; k++)
    printf("%s: best %.3f ms, %.3f x 10^12 pairs/s\n", names[k], best[k], pairs / best[k] / 1e9);
  printf("tiles against lanes: %.2fx\n", best[0] / best[1]);
  printf("%s\n", failures ? "FAILED" : "checked: both kernels equal the reference");
  return failures != 0;
}
