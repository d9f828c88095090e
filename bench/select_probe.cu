// Speed probe of one query tile's step of the kNN search's plain half pass, kernel by
// kernel: the fp16 GEMM of a reference tile (fp32 or fp16 output) and the warp
// selection that reads it (kernels/select.cuh), alone and as the search pipelines them.
// Not part of the library or of tools/gpu-run.sh. From the repository root:
//
//   nvcc -O3 -std=c++17 -Icore/include -Icore -Icore/cpu -Ikernels -DGPUML_HAVE_CUDA \
//        -gencode=arch=compute_90,code=sm_90 -Xcompiler -ffunction-sections \
//        -Xlinker --gc-sections bench/select_probe.cu -lcublasLt -lcublas -o /tmp/select_probe
//   /tmp/select_probe [rn qn d K]      (default 16384 5000 768 200)
//
// Random fp16 operands (|h| < 2^14), fp32 norms from them; the lists first filled from
// one tile (fresh), then timed on the same tile (nothing new passes: the steady state of
// a search's later tiles) and on a second tile of other points (some insertions).
// Times: best of 10 (cudaEvent), and the pipelines over 8 tiles: GEMM then selection on
// one stream, and the search's overlap (selection on a second stream, two buffers).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <random>
#include <vector>
#include "gpuml_cuda.h"
#include "select.cuh"

#include "probe_check.h"

using namespace gm;

__global__ void norms_kernel(const __half *h, int64_t n, int64_t w, float scale, float *norm) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0;
  for (int64_t t = 0; t < w; t++) {
    const float v = __half2float(h[i * w + t]) * scale;
    s += v * v;
  }
  norm[i] = s;
}

__global__ void read_kernel(const float4 *p, size_t nv, float *out) {
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nv;
       i += (size_t)gridDim.x * blockDim.x)
    s += p[i].x + p[i].w;
  if (s == 1234.5f) out[0] = s;
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  template <typename F>
  float best(int reps, F f) {
    float best = 1e30f;
    for (int r = 0; r < reps; r++) {
      CK(cudaEventRecord(a));
      f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (ms < best) best = ms;
    }
    return best * 1000.0f;  // us
  }
};

int main(int argc, char **argv) {
  const int rn = argc > 1 ? atoi(argv[1]) : 16384, qn = argc > 2 ? atoi(argv[2]) : 5000;
  const int d = argc > 3 ? atoi(argv[3]) : 768, K = argc > 4 ? atoi(argv[4]) : 200;
  const int w = (d + 7) / 8 * 8;
  // two reference tiles (A, B) and the queries, fp16 with |h| < 2^14 (scale 2^-14)
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 4096.0f);
  auto fill = [&](std::vector<__half> &v, int64_t rows) {
    v.assign((size_t)rows * w, __float2half(0.0f));
    for (int64_t i = 0; i < rows; i++)
      for (int t = 0; t < d; t++) {
        float x = nd(rng);
        x = x > 16000.f ? 16000.f : x < -16000.f ? -16000.f : x;
        v[(size_t)i * w + t] = __float2half(x);
      }
  };
  std::vector<__half> hr, hr2, hq;
  fill(hr, rn);
  fill(hr2, rn);
  fill(hq, qn);
  __half *dr, *dr2, *dq;
  float *nr, *nr2, *nq;
  CK(cudaMalloc(&dr, hr.size() * 2));
  CK(cudaMalloc(&dr2, hr2.size() * 2));
  CK(cudaMalloc(&dq, hq.size() * 2));
  CK(cudaMemcpy(dr, hr.data(), hr.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dr2, hr2.data(), hr2.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&nr, rn * 4));
  CK(cudaMalloc(&nr2, rn * 4));
  CK(cudaMalloc(&nq, qn * 4));
  const float unscale = 1.0f / 16384.0f;  // values in natural units: h 2^-14
  norms_kernel<<<(rn + 255) / 256, 256>>>(dr, rn, w, unscale, nr);
  norms_kernel<<<(rn + 255) / 256, 256>>>(dr2, rn, w, unscale, nr2);
  norms_kernel<<<(qn + 255) / 256, 256>>>(dq, qn, w, unscale, nq);
  // fp64 points for the selection's guard path (never taken on these data)
  double *xr, *xq;
  CK(cudaMalloc(&xr, (size_t)rn * d * 8));
  CK(cudaMalloc(&xq, (size_t)qn * d * 8));
  CK(cudaMemset(xr, 0, (size_t)rn * d * 8));
  CK(cudaMemset(xq, 0, (size_t)qn * d * 8));
  // tiles: two buffers, each holding an fp32 tile (or an fp16 one in its first half)
  float *G[2];
  CK(cudaMalloc(&G[0], (size_t)rn * qn * 4));
  CK(cudaMalloc(&G[1], (size_t)rn * qn * 4));
  float *Ld, *thr, *out;
  unsigned *gmax;
  CK(cudaMalloc(&gmax, 4));
  CK(cudaMemset(gmax, 0, 4));
  int64_t *Li;
  CK(cudaMalloc(&Ld, (size_t)qn * K * 4));
  CK(cudaMalloc(&Li, (size_t)qn * K * 8));
  CK(cudaMalloc(&thr, qn * 4));
  CK(cudaMalloc(&out, 4));
  // the scalars: alpha = -2 2^-28 (fp32 tiles); fp16 tiles: alpha 2^-u as well, 2^u back
  const int ld2d = 10;
  const float alpha32 = -2.0f / (16384.0f * 16384.0f);
  const float alpha16 = -2.0f * ldexpf(1.0f, -(ld2d + 16));
  const float scale16 = ldexpf(1.0f, ld2d + 16 - 28);
  float *scal;
  CK(cudaMalloc(&scal, 4 * sizeof(float)));
  const float hs[4] = {alpha16, 0.0f, scale16, alpha32};
  CK(cudaMemcpy(scal, hs, sizeof hs, cudaMemcpyHostToDevice));

  cublasHandle_t h;
  CB(cublasCreate(&h));
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  void *ws;
  const size_t ws_bytes = (size_t)8 << 20;
  CK(cudaMalloc(&ws, ws_bytes));
  // cuBLASLt fp16-output GEMM as HalfTileGemm sets it up
  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
  CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
  cublasLtMatrixLayout_t la, lb, lc;
  CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, w, rn, w));
  CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, w, qn, w));
  CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, rn, qn, rn));
  cublasLtMatmulPreference_t pref;
  CB(cublasLtMatmulPreferenceCreate(&pref));
  const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                          &ws_bytes, sizeof ws_bytes));
  CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                          &mask, sizeof mask));
  cublasLtMatmulHeuristicResult_t res[8];
  int found = 0;
  CB(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, res, &found));
  printf("rn %d qn %d d %d K %d; cuBLASLt fp16-output algorithms: %d\n", rn, qn, d, K, found);

  Timer tm;
  const double flop = 2.0 * rn * (double)qn * w;
  auto gemm32 = [&](const __half *r, float *g, cudaStream_t s) {
    CB(cublasSetStream(h, s));
    CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rn, qn, w, &alpha32, r, CUDA_R_16F, w, dq,
                    CUDA_R_16F, w, &hs[1], g, CUDA_R_32F, rn, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
  };
  auto gemm16ex = [&](const __half *r, float *g) {
    CB(cublasSetStream(h, 0));
    CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rn, qn, w, &alpha16, r, CUDA_R_16F, w, dq,
                    CUDA_R_16F, w, &hs[1], g, CUDA_R_16F, rn, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
  };
  auto gemm16lt = [&](int a, const __half *r, float *g, cudaStream_t s) {
    CB(cublasLtMatmul(lt, op, scal, r, la, dq, lb, scal + 1, g, lc, g, lc, &res[a].algo, ws,
                      ws_bytes, s));
  };
  float t;
  t = tm.best(10, [&] { gemm32(dr, G[0], 0); });
  printf("GEMM fp32 tile (cublasGemmEx)        %7.1f us  %5.0f TFLOP/s\n", t, flop / t / 1e6);
  t = tm.best(10, [&] { gemm16ex(dr, G[0]); });
  printf("GEMM fp16 tile (cublasGemmEx)        %7.1f us  %5.0f TFLOP/s\n", t, flop / t / 1e6);
  for (int a = 0; a < found; a++) {
    t = tm.best(10, [&] { gemm16lt(a, dr, G[0], 0); });
    printf("GEMM fp16 tile (cuBLASLt algo %d)     %7.1f us  %5.0f TFLOP/s\n", a, t, flop / t / 1e6);
  }
  const size_t nv32 = (size_t)rn * qn / 4;
  t = tm.best(10, [&] { read_kernel<<<132 * 8, 512>>>((const float4 *)G[0], nv32, out); });
  printf("read an fp32 tile                    %7.1f us  %5.2f TB/s\n", t, nv32 * 16 / t / 1e6);
  t = tm.best(10, [&] { read_kernel<<<132 * 8, 512>>>((const float4 *)G[0], nv32 / 2, out); });
  printf("read an fp16 tile                    %7.1f us  %5.2f TB/s\n", t, nv32 * 8 / t / 1e6);

  constexpr int W = SmallConfig<256>::warps;
  const unsigned blocks = (qn + W - 1) / W;
  // (r0: the tile's first reference; a tile selected again as other references offers
  // values equal to the listed ones, which never beat them: the steady state)
  int64_t r0 = 0;
  auto sel32 = [&](const float *g, const float *nrr, int fresh, cudaStream_t s) {
    select_queued_gemm_kernel<float, double, 256, float><<<blocks, W * 32, 0, s>>>(
        g, nullptr, nullptr, rn, qn, nrr, nq, xr, xq, d, r0, 0, 0, Ld, Li, K, fresh, nullptr);
  };
  auto sel16 = [&](const float *g, const float *nrr, int fresh, cudaStream_t s) {
    select_queued_gemm_kernel<float, double, 256, __half><<<blocks, W * 32, 0, s>>>(
        (const __half *)g, scal + 2, gmax, rn, qn, nrr, nq, xr, xq, d, r0, 0, 0, Ld, Li, K,
        fresh, nullptr);
  };
  // Each tile kind: A's tile in G[0], B's in G[1]; the lists filled from A, then A again
  // as other references (steady), B (new points), and A with empty lists (fresh).
  for (int half = 0; half < 2; half++) {
    const char *kind = half ? "fp16" : "fp32";
    auto sel = [&](const float *g, const float *nrr, int fresh) {
      if (half) sel16(g, nrr, fresh, 0);
      else sel32(g, nrr, fresh, 0);
    };
    if (half) {
      gemm16lt(0, dr, G[0], 0);
      gemm16lt(0, dr2, G[1], 0);
    } else {
      gemm32(dr, G[0], 0);
      gemm32(dr2, G[1], 0);
    }
    r0 = 0;
    sel(G[0], nr, 1);
    CK(cudaDeviceSynchronize());
    r0 = 2 * (int64_t)rn;
    t = tm.best(10, [&] { sel(G[0], nr, 0); });
    printf("selection, %s tile, steady         %7.1f us  %5.2f TB/s of tile\n", kind, t,
           nv32 * (half ? 8 : 16) / t / 1e6);
    r0 = rn;
    t = tm.best(1, [&] { sel(G[1], nr2, 0); });
    printf("selection, %s tile, new points     %7.1f us\n", kind, t);
    r0 = 0;
    t = tm.best(10, [&] { sel(G[0], nr, 1); });
    printf("selection, %s tile, fresh lists    %7.1f us\n", kind, t);
  }
  r0 = 2 * (int64_t)rn;

  // pipelines over 8 tiles (alternating A and B, steady lists)
  cudaStream_t s2;
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t gd[2], sd[2];
  for (int b = 0; b < 2; b++) {
    CK(cudaEventCreateWithFlags(&gd[b], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&sd[b], cudaEventDisableTiming));
  }
  for (int half = 0; half < 2; half++) {
    auto gemm = [&](int i, float *g, cudaStream_t s) {
      if (half) gemm16lt(0, i % 2 ? dr2 : dr, g, s);
      else gemm32(i % 2 ? dr2 : dr, g, s);
    };
    auto sel = [&](int i, const float *g, cudaStream_t s) {
      r0 = (3 + i) * (int64_t)rn;  // new indices: equal values never beat listed ones
      if (half) sel16(g, i % 2 ? nr2 : nr, 0, s);
      else sel32(g, i % 2 ? nr2 : nr, 0, s);
    };
    t = tm.best(3, [&] {
      for (int i = 0; i < 8; i++) {
        gemm(i, G[0], 0);
        sel(i, G[0], 0);
      }
    });
    printf("%s tiles: GEMM then selection, one stream  %7.1f us a tile\n", half ? "fp16" : "fp32", t / 8);
    t = tm.best(3, [&] {
      CK(cudaEventRecord(sd[0], s2));
      CK(cudaEventRecord(sd[1], s2));
      for (int i = 0; i < 8; i++) {
        const int b = i % 2;
        CK(cudaStreamWaitEvent(0, sd[b], 0));
        gemm(i, G[b], 0);
        CK(cudaEventRecord(gd[b], 0));
        CK(cudaStreamWaitEvent(s2, gd[b], 0));
        sel(i, G[b], s2);
        CK(cudaEventRecord(sd[b], s2));
      }
      CK(cudaStreamWaitEvent(0, sd[0], 0));
      CK(cudaStreamWaitEvent(0, sd[1], 0));
    });
    printf("%s tiles: overlapped (the search's schedule) %7.1f us a tile\n", half ? "fp16" : "fp32", t / 8);
  }
  CK(cudaDeviceSynchronize());
  printf("done\n");
  return 0;
}
