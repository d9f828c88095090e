// Correctness and speed probe of the fused kNN screen (kernels/knn_screen.cuh), on its
// own: not part of the library or of tools/gpu-run.sh. From the repository root:
//
//   nvcc -O3 -std=c++17 -Icore/include -Icore -Icore/cpu -Ikernels -DGPUML_HAVE_CUDA \
//        -gencode=arch=compute_90,code=sm_90 -Xcompiler -ffunction-sections \
//        -Xlinker --gc-sections bench/screen_probe.cu -o /tmp/screen_probe
//   /tmp/screen_probe            correctness cases, then the timings
//   /tmp/screen_probe --check    correctness cases only
//   /tmp/screen_probe --waves    d = 64 and 768 timed with several grid sizes
//
// (The headers' host helpers that the probe does not call reach the library and cuBLAS;
// --gc-sections drops them, so nothing else is linked.)
//
// Correctness: random points in the split layout's hi block (TF32 rounding by cvt.rna),
// norms summed in fp64 from the fp32 values; each query's threshold the 1% quantile of
// its values. A plain fp32 FMA kernel computes every pair's value from the same hi
// values with the same rule (norms, cancellation guard, clamp); every queued entry must
// be within a tolerance of it (the two sums differ in order only), every pair clearly
// below the threshold must be queued exactly once, none clearly above, the self pair
// never; the queue counts and the overflow flag must agree. Cases cover partial tiles
// and steps, d = 18 to 768, exact duplicates (the guard), double input, a self-search,
// overflowing queues, both forms (query tile resident or streaming) and blocks that
// take one or many reference tiles.
//
// Speed: best of several runs (cudaEvent) for rn = 500,000, qn = 8192 at d = 64 (both
// forms), 96 and 128, and rn = 65536, qn = 4096 at d = 768, in TFLOP/s of the TF32
// products (2 rn qn w / time), with thresholds that pass some tens of references per
// query (a kNN search's K-th value after a few chunks), none, and 1% of them.
#include <cuda_runtime.h>
#include <mma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <random>
#include <vector>
#include "gpuml_cuda.h"
#include "select.cuh"
#include "knn_screen.cuh"

#include "probe_check.h"

// Point i's hi block (w floats, zeros past d) in the split layout (4w floats a point;
// the other blocks are filled as points.cuh does, though the screen reads only hi),
// and its squared norm from the fp32 values in fp64.
template <typename In>
__global__ void layout_kernel(const In *x, int64_t n, int64_t d, int64_t w, float *p,
                              float *norm) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double s = 0;
  float *row = p + i * 4 * w;
  for (int64_t t = 0; t < w; t++) {
    const float f = t < d ? (float)x[i * d + t] : 0.0f;
    const float hi = nvcuda::wmma::__float_to_tf32(f);
    const float lo = nvcuda::wmma::__float_to_tf32(f - hi);
    row[t] = hi;
    row[w + t] = hi;
    row[2 * w + t] = lo;
    row[3 * w + t] = hi;
    s += (double)f * (double)f;
  }
  norm[i] = (float)s;
}

// Every pair's value by the rule, the dot product in plain fp32 FMA in index order:
// V[q * rn + r].
template <typename In>
__global__ void reference_kernel(const float *pr, int64_t rn, const float *pq, int64_t qn,
                                 int64_t d, int64_t w, const float *nr, const float *nq,
                                 const In *xr, const In *xq, float *V) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= rn * qn) return;
  const int64_t q = e / rn, r = e % rn;
  const float *a = pr + r * 4 * w, *b = pq + q * 4 * w;
  float acc = 0;
  for (int64_t t = 0; t < w; t++) acc = fmaf(a[t], b[t], acc);
  V[e] = gm::gemm_value<float, In>(-2.0f * acc, nr[r], nq[q], xr + r * d, xq + q * d, d);
}

struct Case {
  const char *name;
  int64_t rn, qn, d;
  bool dbl;         // double input
  bool self;        // queries are rows self_at.. of the references (r0 = 0, q0 = self_at)
  int64_t self_at;
  int dup_every;    // every dup_every-th query is an exact copy of a reference (0: none)
  int slots;
  bool overflow;    // slots too few: expect the flag, check the counts only
  unsigned max_grid_y;  // 0: the launcher's default
};

// form, waves: as screen_launch's (-1 by w, 0 streaming).
template <typename In>
static int run_case(const Case &c, int form, std::mt19937_64 &gen,
                    int waves = gm::kScreenWaves) {
  const int64_t rn = c.rn, qn = c.qn, d = c.d, w = gm::split_block(d);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<In> xr_h((size_t)(rn * d)), xq_h((size_t)(qn * d));
  for (auto &v : xr_h) v = (In)nd(gen);
  if (c.self) {
    for (int64_t q = 0; q < qn; q++)
      memcpy(&xq_h[q * d], &xr_h[(c.self_at + q) * d], sizeof(In) * d);
  } else {
    for (auto &v : xq_h) v = (In)nd(gen);
    if (c.dup_every)
      for (int64_t q = 0; q < qn; q += c.dup_every)
        memcpy(&xq_h[q * d], &xr_h[((q * 7919) % rn) * d], sizeof(In) * d);
  }
  In *xr, *xq;
  float *pr, *pq, *nr, *nq, *V, *thr, *slot_d;
  int *count, *slot_q, *overflow;
  CK(cudaMalloc(&xr, sizeof(In) * rn * d));
  CK(cudaMalloc(&xq, sizeof(In) * qn * d));
  CK(cudaMalloc(&pr, sizeof(float) * rn * 4 * w));
  CK(cudaMalloc(&pq, sizeof(float) * qn * 4 * w));
  CK(cudaMalloc(&nr, sizeof(float) * rn));
  CK(cudaMalloc(&nq, sizeof(float) * qn));
  CK(cudaMalloc(&V, sizeof(float) * rn * qn));
  CK(cudaMalloc(&thr, sizeof(float) * qn));
  CK(cudaMalloc(&count, sizeof(int) * qn));
  CK(cudaMalloc(&slot_d, sizeof(float) * qn * c.slots));
  CK(cudaMalloc(&slot_q, sizeof(int) * qn * c.slots));
  CK(cudaMalloc(&overflow, sizeof(int)));
  CK(cudaMemcpy(xr, xr_h.data(), sizeof(In) * rn * d, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(xq, xq_h.data(), sizeof(In) * qn * d, cudaMemcpyHostToDevice));
  layout_kernel<In><<<(unsigned)((rn + 255) / 256), 256>>>(xr, rn, d, w, pr, nr);
  layout_kernel<In><<<(unsigned)((qn + 255) / 256), 256>>>(xq, qn, d, w, pq, nq);
  reference_kernel<In><<<(unsigned)((rn * qn + 255) / 256), 256>>>(pr, rn, pq, qn, d, w, nr, nq,
                                                                    xr, xq, V);
  CK(cudaGetLastError());
  std::vector<float> V_h((size_t)(rn * qn)), nr_h(rn), nq_h(qn), thr_h(qn);
  CK(cudaMemcpy(V_h.data(), V, sizeof(float) * rn * qn, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(nr_h.data(), nr, sizeof(float) * rn, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(nq_h.data(), nq, sizeof(float) * qn, cudaMemcpyDeviceToHost));
  const int64_t r0 = 0, q0 = c.self ? c.self_at : 0;
  auto is_self = [&](int64_t q, int64_t r) { return c.self && r0 + r == q0 + q; };
  for (int64_t q = 0; q < qn; q++) {
    std::vector<float> row;
    for (int64_t r = 0; r < rn; r++)
      if (!is_self(q, r)) row.push_back(V_h[q * rn + r]);
    const size_t at = row.size() / 100;
    std::nth_element(row.begin(), row.begin() + at, row.end());
    thr_h[q] = row[at];
    if (c.dup_every && q % (3 * c.dup_every) == 0) thr_h[q] = 0.0f;  // the duplicates only
  }
  CK(cudaMemcpy(thr, thr_h.data(), sizeof(float) * qn, cudaMemcpyHostToDevice));
  CK(cudaMemset(count, 0, sizeof(int) * qn));
  CK(cudaMemset(overflow, 0, sizeof(int)));
  gm::ScreenArgs<In> a;
  a.pr = pr;
  a.pq = pq;
  a.nr = nr;
  a.nq = nq;
  a.xr = xr;
  a.xq = xq;
  a.rn = rn;
  a.qn = qn;
  a.d = d;
  a.w = w;
  a.r0 = r0;
  a.q0 = q0;
  a.self = c.self;
  a.feed.thr = thr;
  a.feed.count = count;
  a.feed.slot_d = slot_d;
  a.feed.slot_q = slot_q;
  a.feed.slots = c.slots;
  a.overflow = overflow;
  CK(gm::screen_launch<In>(0, a, c.max_grid_y ? c.max_grid_y : 65535u, form, waves));
  CK(cudaDeviceSynchronize());
  std::vector<int> count_h(qn), sq_h((size_t)(qn * c.slots));
  std::vector<float> sd_h((size_t)(qn * c.slots));
  int of_h = 0;
  CK(cudaMemcpy(count_h.data(), count, sizeof(int) * qn, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(sq_h.data(), slot_q, sizeof(int) * qn * c.slots, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(sd_h.data(), slot_d, sizeof(float) * qn * c.slots, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&of_h, overflow, sizeof(int), cudaMemcpyDeviceToHost));

  // The two sums of exact TF32 products differ by their order only: about 2^-23 of the
  // sum of |products| <= (nr + nq) / 2 a step, twice that in -2 acc, and the rounding of
  // the norms' sums.
  auto tol = [&](int64_t q, int64_t r) {
    return (float)(std::ldexp((double)(w + 8), -22) * ((double)nr_h[r] + nq_h[q]));
  };
  int64_t bad = 0, queued = 0, must = 0, grey = 0, over_q = 0;
  double worst = 0;
  auto report = [&](const char *what, int64_t q, int64_t r, float v) {
    if (bad++ < 10)
      fprintf(stderr, "  %s: q %lld r %lld value %.9g reference %.9g thr %.9g\n", what,
              (long long)q, (long long)r, v, r >= 0 && r < rn ? V_h[q * rn + r] : 0.0f,
              thr_h[q]);
  };
  std::vector<char> seen(rn);
  for (int64_t q = 0; q < qn; q++) {
    int64_t lo_n = 0, hi_n = 0;  // pairs clearly below, at most thr + tol
    for (int64_t r = 0; r < rn; r++) {
      if (is_self(q, r)) continue;
      const float v = V_h[q * rn + r], t = tol(q, r);
      lo_n += v < thr_h[q] - t;
      hi_n += v <= thr_h[q] + t;
    }
    must += lo_n;
    grey += hi_n - lo_n;
    if (c.overflow) {
      if (count_h[q] < lo_n || count_h[q] > hi_n) report("count", q, count_h[q], 0);
      over_q += count_h[q] > c.slots;
      continue;
    }
    if (count_h[q] > c.slots) {
      report("unexpected overflow", q, count_h[q], 0);
      continue;
    }
    std::fill(seen.begin(), seen.end(), 0);
    for (int s = 0; s < count_h[q]; s++) {
      const int64_t r = sq_h[q * c.slots + s];
      const float v = sd_h[q * c.slots + s];
      queued++;
      if (r < 0 || r >= rn) { report("row out of range", q, r, v); continue; }
      if (seen[r]++) report("queued twice", q, r, v);
      if (is_self(q, r)) report("self pair", q, r, v);
      const double err = fabs((double)v - V_h[q * rn + r]);
      worst = std::max(worst, err / ((double)nr_h[r] + nq_h[q]));
      if (err > tol(q, r)) report("value", q, r, v);
      if (!(v <= thr_h[q])) report("above its threshold", q, r, v);
    }
    for (int64_t r = 0; r < rn; r++)
      if (!is_self(q, r) && !seen[r] && V_h[q * rn + r] < thr_h[q] - tol(q, r))
        report("missing", q, r, V_h[q * rn + r]);
  }
  const bool want_of = c.overflow ? over_q > 0 : false;
  if (of_h != (int)want_of) {
    fprintf(stderr, "  overflow flag %d, expected %d\n", of_h, (int)want_of);
    bad++;
  }
  printf("%-28s %-9s waves %2d rn %6lld qn %5lld d %4lld: %s  (queued %lld, must %lld, "
         "grey %lld, worst |value - reference| / norms %.2e%s)\n",
         c.name, form == 0 || w > gm::kScreenResidentMaxW ? "streaming" : "resident", waves,
         (long long)rn, (long long)qn, (long long)d, bad ? "FAIL" : "ok",
         (long long)queued, (long long)must, (long long)grey, worst,
         c.overflow ? ", overflow case" : "");
  cudaFree(xr); cudaFree(xq); cudaFree(pr); cudaFree(pq); cudaFree(nr); cudaFree(nq);
  cudaFree(V); cudaFree(thr); cudaFree(count); cudaFree(slot_d); cudaFree(slot_q);
  cudaFree(overflow);
  return bad ? 1 : 0;
}

// Threshold for timing: each query's m-th smallest value among the first `sample`
// references (plain fp32 FMA), one thread per query.
__global__ void sample_threshold_kernel(const float *pr, const float *pq, int64_t qn, int64_t w,
                                        const float *nr, const float *nq, int sample, int m,
                                        float *thr) {
  const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= qn) return;
  float best[16];
  for (int i = 0; i < 16; i++) best[i] = INFINITY;
  for (int r = 0; r < sample; r++) {
    float acc = 0;
    for (int64_t t = 0; t < w; t++) acc = fmaf(pr[r * 4 * w + t], pq[q * 4 * w + t], acc);
    float v = nr[r] + nq[q] - 2.0f * acc;
    for (int i = 0; i < m; i++)
      if (v < best[i]) {
        const float x = best[i];
        best[i] = v;
        v = x;
      }
  }
  thr[q] = best[m - 1];
}

static void time_case(int64_t rn, int64_t qn, int64_t d, int form, std::mt19937_64 &gen,
                      int waves = gm::kScreenWaves, bool all_modes = true) {
  const int64_t w = gm::split_block(d);
  const int slots = 64;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> h((size_t)(rn > qn ? rn : qn) * d);
  float *xr, *xq, *pr, *pq, *nr, *nq, *thr, *slot_d;
  int *count, *slot_q, *overflow;
  CK(cudaMalloc(&xr, sizeof(float) * rn * d));
  CK(cudaMalloc(&xq, sizeof(float) * qn * d));
  CK(cudaMalloc(&pr, sizeof(float) * rn * 4 * w));
  CK(cudaMalloc(&pq, sizeof(float) * qn * 4 * w));
  CK(cudaMalloc(&nr, sizeof(float) * rn));
  CK(cudaMalloc(&nq, sizeof(float) * qn));
  CK(cudaMalloc(&thr, sizeof(float) * qn));
  CK(cudaMalloc(&count, sizeof(int) * qn));
  CK(cudaMalloc(&slot_d, sizeof(float) * qn * slots));
  CK(cudaMalloc(&slot_q, sizeof(int) * qn * slots));
  CK(cudaMalloc(&overflow, sizeof(int)));
  for (size_t i = 0; i < (size_t)(rn * d); i++) h[i] = nd(gen);
  CK(cudaMemcpy(xr, h.data(), sizeof(float) * rn * d, cudaMemcpyHostToDevice));
  for (size_t i = 0; i < (size_t)(qn * d); i++) h[i] = nd(gen);
  CK(cudaMemcpy(xq, h.data(), sizeof(float) * qn * d, cudaMemcpyHostToDevice));
  layout_kernel<float><<<(unsigned)((rn + 255) / 256), 256>>>(xr, rn, d, w, pr, nr);
  layout_kernel<float><<<(unsigned)((qn + 255) / 256), 256>>>(xq, qn, d, w, pq, nq);
  CK(cudaGetLastError());
  gm::ScreenArgs<float> a;
  a.pr = pr;
  a.pq = pq;
  a.nr = nr;
  a.nq = nq;
  a.xr = xr;
  a.xq = xq;
  a.rn = rn;
  a.qn = qn;
  a.d = d;
  a.w = w;
  a.r0 = 0;
  a.q0 = 0;
  a.self = 0;
  a.feed.thr = thr;
  a.feed.count = count;
  a.feed.slot_d = slot_d;
  a.feed.slot_q = slot_q;
  a.feed.slots = slots;
  a.overflow = overflow;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const double flop = 2.0 * rn * qn * w;
  for (int mode = 0; mode < (all_modes ? 3 : 2); mode++) {
    const char *label;
    if (mode == 0) {
      // tens of survivors per query: the m-th smallest of 16384 is near rank m rn / 16384
      const int sample = 16384;
      const int64_t m = std::min<int64_t>(16, std::max<int64_t>(1, 60 * sample / rn));
      sample_threshold_kernel<<<(unsigned)((qn + 127) / 128), 128>>>(pr, pq, qn, w, nr, nq,
                                                                     sample, (int)m, thr);
      label = "kNN-like threshold";
    } else if (mode == 1) {
      std::vector<float> t(qn, -1.0f);
      CK(cudaMemcpy(thr, t.data(), sizeof(float) * qn, cudaMemcpyHostToDevice));
      label = "no survivors";
    } else {
      sample_threshold_kernel<<<(unsigned)((qn + 127) / 128), 128>>>(pr, pq, qn, w, nr, nq, 800,
                                                                     8, thr);
      label = "1% survivors";
    }
    CK(cudaGetLastError());
    float best = 1e30f;
    long long total = 0;
    for (int rep = 0; rep < 6; rep++) {
      CK(cudaMemset(count, 0, sizeof(int) * qn));
      CK(cudaMemset(overflow, 0, sizeof(int)));
      CK(cudaEventRecord(e0));
      CK(gm::screen_launch<float>(0, a, 65535u, form, waves));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep > 0) best = std::min(best, ms);  // the first run pays the module's loading
    }
    std::vector<int> ch(qn);
    CK(cudaMemcpy(ch.data(), count, sizeof(int) * qn, cudaMemcpyDeviceToHost));
    for (int64_t q = 0; q < qn; q++) total += ch[q];
    printf("TIME rn %7lld qn %5lld d %4lld (w %4lld) %-9s waves %-6d %-20s %8.3f ms %6.1f "
           "TFLOP/s (%.1f survivors a query)\n",
           (long long)rn, (long long)qn, (long long)d, (long long)w,
           form == 0 || w > gm::kScreenResidentMaxW ? "streaming" : "resident", waves, label, best,
           flop / (best * 1e-3) / 1e12, (double)total / qn);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(xr); cudaFree(xq); cudaFree(pr); cudaFree(pq); cudaFree(nr); cudaFree(nq);
  cudaFree(thr); cudaFree(count); cudaFree(slot_d); cudaFree(slot_q); cudaFree(overflow);
}

int main(int argc, char **argv) {
  const bool check_only = argc > 1 && !strcmp(argv[1], "--check");
  // --waves: d = 64 timed with the blocks' count at several multiples of those that fit.
  const bool waves_only = argc > 1 && !strcmp(argv[1], "--waves");
  int dev = 0;
  cudaDeviceProp prop;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s (sm_%d%d, %d SMs); screen available: %d\n", prop.name, prop.major,
         prop.minor, prop.multiProcessorCount, (int)gm::screen_available<float>(prop.major));
  if (!gm::screen_available<float>(prop.major)) return 1;
  std::mt19937_64 gen(12345);
  if (waves_only) {
    for (int form = -1; form <= 0; form++)
      for (int wv : {1, 2, 4, 16, 1000000}) time_case(500000, 8192, 64, form, gen, wv, false);
    for (int wv : {1, 4, 16, 1000000}) time_case(65536, 4096, 768, 0, gen, wv, false);
    return 0;
  }
  int fails = 0;
  const Case cases[] = {
      {"d 18, one partial step", 20000, 1000, 18, false, false, 0, 0, 512, false, 0},
      {"d 64, duplicates (guard)", 20000, 1000, 64, false, false, 0, 5, 512, false, 0},
      {"d 100, partial last step", 20000, 1000, 100, false, false, 0, 0, 512, false, 0},
      {"d 768", 5000, 700, 768, false, false, 0, 0, 256, false, 0},
      {"d 64, tiny tiles", 77, 5, 64, false, false, 0, 0, 16, false, 0},
      {"d 64, grid y capped at 7", 20000, 300, 64, false, false, 0, 0, 512, false, 7},
      {"d 64, overflowing queues", 20000, 1000, 64, false, false, 0, 0, 8, true, 0},
  };
  // Each case in the form screen_launch picks, and streaming where that was resident.
  for (const Case &c : cases) {
    fails += run_case<float>(c, -1, gen);
    if (gm::split_block(c.d) <= gm::kScreenResidentMaxW) fails += run_case<float>(c, 0, gen);
  }
  // One wave of blocks: a block then takes many reference tiles in turn.
  fails += run_case<float>(cases[1], -1, gen, 1);
  fails += run_case<float>(cases[2], -1, gen, 1);
  const Case dcases[] = {
      {"double, d 50, self-search", 20000, 1000, 50, true, true, 256, 0, 512, false, 0},
      {"double, d 64, duplicates", 20000, 1000, 64, true, false, 0, 3, 512, false, 0},
  };
  for (const Case &c : dcases) {
    fails += run_case<double>(c, -1, gen);
    if (gm::split_block(c.d) <= gm::kScreenResidentMaxW) fails += run_case<double>(c, 0, gen);
  }
  printf("correctness: %s\n", fails ? "FAILED" : "all cases ok");
  if (check_only) return fails ? 1 : 0;
  time_case(500000, 8192, 64, -1, gen);
  time_case(500000, 8192, 64, 0, gen);
  time_case(500000, 8192, 96, -1, gen);
  time_case(500000, 8192, 128, -1, gen);
  time_case(65536, 4096, 768, -1, gen);
  return fails ? 1 : 0;
}
