// gm_cuda_dist(): Euclidean distance matrices on the GPU, one square tile at a time.
// Each tile is computed on the device (cuBLAS GEMM of the centred points plus norms, with
// the cancellation guard, for d >= 16; the direct form below), turned into the output
// type (and sqrt) there, and copied into the caller's n x m array. For x against itself
// only tiles on or above the diagonal are computed and each is also written transposed,
// so the result is exactly symmetric with a zero diagonal.
#include "distance_tiles.cuh"
#include "gpuml_cuda.h"

namespace gm {
namespace {

constexpr int64_t kDistTileMax = 8192;
constexpr int64_t kDistTileMin = 1024;  // shrink below this only after giving up residency

template <typename T, typename In, typename O>
__global__ void dist_store_kernel(const T *__restrict__ G, int64_t an, int64_t bn,
                                  const T *__restrict__ na, const T *__restrict__ nb,
                                  const In *__restrict__ xa, const In *__restrict__ xb,
                                  int64_t d, int gemm, int diag, int squared,
                                  O *__restrict__ out, O *__restrict__ outT) {
  __shared__ O tr[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t a0 = (int64_t)blockIdx.x * 32;
  for (int64_t b0 = (int64_t)blockIdx.y * 32; b0 < bn; b0 += (int64_t)gridDim.y * 32) {
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int bl = ty + 8 * u;
      const int64_t a = a0 + tx, b = b0 + bl;
      O o = 0;
      if (a < an && b < bn) {
        int64_t lo = a, hi = b;
        if (diag && a > b) {
          lo = b;
          hi = a;
        }
        T v;
        if (diag && a == b)
          v = 0;
        else if (gemm)
          v = gemm_value<T, In>(G[lo + hi * an], na[lo], nb[hi], xa + lo * d, xb + hi * d, d);
        else
          v = G[lo + hi * an];
        o = (O)(squared ? v : sqrt(v));
        out[a + b * an] = o;
      }
      tr[bl][tx] = o;
    }
    __syncthreads();
    if (outT) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int al = ty + 8 * u;
        const int64_t a = a0 + al, b = b0 + tx;
        if (a < an && b < bn) outT[b + a * bn] = tr[tx][al];
      }
    }
    __syncthreads();
  }
}

template <typename T, typename In>
gpuml_status dist_run(const In *x, int64_t n, int64_t d, const In *y, int64_t m, int squared,
                      In *out, const gpuml_options *opt) {
  typedef In O;
  const bool self = (y == NULL);
  if (self) {
    y = x;
    m = n;
  }
  const bool gemm = d >= kGemmMinDim;
  if (d > 2147483647LL)
    return gm_fail(GPUML_ERR_ARG, "dist:badData", "%lld columns is more than supported",
                   (long long)d);
  Context ctx("dist:cuda");
  GM_TRY(ctx.init(opt, gemm));
  const size_t budget = ctx.budget();

  // Plan: tile size B, whether x (and y) stay on the device whole.
  const size_t pb = point_bytes<In, T>(d, gemm);
  size_t raw_bytes = budget / 8 < ((size_t)64 << 20) ? budget / 8 : ((size_t)64 << 20);
  if (raw_bytes < (size_t)d * sizeof(In)) raw_bytes = (size_t)d * sizeof(In);
  const int64_t raw_rows = staging_rows<In>(raw_bytes, d, n > m ? n : m);
  const size_t fixed = (size_t)raw_rows * (size_t)d * sizeof(In) + (size_t)d * 4 * 8 + 4096;
  int64_t B = (n > m ? n : m);
  if (B > kDistTileMax) B = kDistTileMax;
  bool rx = true, ry = !self;
  const int64_t knob = env_int("GPUML_CUDA_TILE");
  if (knob) {
    rx = ry = false;
    if (B > knob) B = knob;
  }
  auto total = [&](int64_t b) {
    size_t s = fixed;
    s += (rx ? (size_t)n : (size_t)b) * pb;
    if (!self) s += (ry ? (size_t)m : (size_t)b) * pb;
    else if (!rx) s += (size_t)b * pb;  // a second block of x for the columns
    s += (size_t)b * (size_t)b * (sizeof(T) + 2 * sizeof(O));
    return s;
  };
  while (total(B) > budget) {
    if (B > kDistTileMin) B /= 2;
    else if (ry) ry = false;
    else if (rx) rx = false;
    else if (B > 1) B /= 2;
    else
      return gm_fail(GPUML_ERR_NOMEM, "dist:cuda",
                     "the GPU memory budget of %.1f MB is too small for %lld-dimensional "
                     "points; raise gpu_memory_limit or use backend \"cpu\"",
                     (double)budget / 1e6, (long long)d);
  }

  Staging<In> sg;
  sg.rows = raw_rows;
  GM_TRY(ctx.alloc(&sg.raw, (size_t)raw_rows * (size_t)d, "the staging buffer"));
  double *centre = nullptr;
  if (gemm) GM_TRY(ctx.alloc(&centre, (size_t)d, "the centre"));
  PointSet<In, T> X, Y;
  X.host = x; X.ld = n; X.d = d; X.gemm = gemm; X.centre = centre;
  Y.host = y; Y.ld = m; Y.d = d; Y.gemm = gemm; Y.centre = centre;
  GM_TRY(alloc_points(ctx, X, rx ? n : B));
  const bool y_is_x = self && rx;
  if (!y_is_x) GM_TRY(alloc_points(ctx, Y, (!self && ry) ? m : B));
  PointSet<In, T> &Yr = y_is_x ? X : Y;
  if (gemm && rx)
    GM_TRY(load_resident_with_centre(ctx, sg, X, self ? nullptr : y, m, centre));
  else if (gemm)
    GM_TRY(compute_centre<In>(ctx, sg, x, n, self ? nullptr : y, m, d, centre));
  else if (rx)
    GM_TRY(load_points(ctx, sg, X, 0, n));
  if (!self && ry) GM_TRY(load_points(ctx, sg, Y, 0, m));
  T *G = nullptr;
  O *tile = nullptr, *tileT = nullptr;
  GM_TRY(ctx.alloc(&G, (size_t)B * (size_t)B, "the distance tile"));
  GM_TRY(ctx.alloc(&tile, (size_t)B * (size_t)B, "the output tile"));
  if (self) GM_TRY(ctx.alloc(&tileT, (size_t)B * (size_t)B, "the mirrored output tile"));

  for (int64_t b0 = 0; b0 < m; b0 += B) {
    const int64_t bn = m - b0 < B ? m - b0 : B;
    GM_TRY(load_points(ctx, sg, Yr, b0, bn));
    for (int64_t a0 = 0; a0 < (self ? b0 + bn : n); a0 += B) {
      int64_t an = n - a0 < B ? n - a0 : B;
      if (self && a0 + an > b0 + bn) an = b0 + bn - a0;
      GM_TRY(load_points(ctx, sg, X, a0, an));
      if (gemm)
        GM_TRY(gemm_tile<T>(ctx, X.p_at(a0), an, Yr.p_at(b0), bn, d, G, an));
      else
        GM_TRY(direct_tile<T, In>(ctx, X.x_at(a0), an, Yr.x_at(b0), bn, d, G, an, 0, 0, 0));
      const bool diag = self && a0 == b0, mirror = self && a0 != b0;
      int64_t gy = (bn + 31) / 32;
      dim3 grid(grid_1d(an, 32), (unsigned)(gy < 65535 ? gy : 65535)), block(32, 8);
      dist_store_kernel<T, In, O><<<grid, block, 0, ctx.stream()>>>(
          G, an, bn, gemm ? X.norm_at(a0) : nullptr, gemm ? Yr.norm_at(b0) : nullptr,
          X.x_at(a0), Yr.x_at(b0), d, gemm, diag, squared, tile, mirror ? tileT : nullptr);
      GM_TRY(ctx.launched("storing a distance tile"));
      GM_TRY(ctx.check(cudaMemcpy2DAsync(out + a0 + b0 * n, (size_t)n * sizeof(O), tile,
                                         (size_t)an * sizeof(O), (size_t)an * sizeof(O),
                                         (size_t)bn, cudaMemcpyDeviceToHost, ctx.stream()),
                       "copying distances to the host"));
      if (mirror)
        GM_TRY(ctx.check(cudaMemcpy2DAsync(out + b0 + a0 * n, (size_t)n * sizeof(O), tileT,
                                           (size_t)bn * sizeof(O), (size_t)bn * sizeof(O),
                                           (size_t)an, cudaMemcpyDeviceToHost, ctx.stream()),
                         "copying distances to the host"));
      if (gm_interrupted(opt))
        return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "distance computation interrupted");
    }
    GM_TRY(ctx.sync("computing distances"));
    gm_progress(opt, "dist", b0 + bn, m);
  }
  return GPUML_OK;
}

}  // namespace
}  // namespace gm

extern "C" gpuml_status gm_cuda_dist(const gm_matrix *xm, const gm_matrix *ym, int squared,
                                     void *out, const gpuml_options *opt) {
  const void *x = xm->values, *y = ym ? ym->values : nullptr;
  const int64_t n = xm->rows, d = xm->cols, m = ym ? ym->rows : 0;
  if (xm->dtype == GM_F32)
    return gm::dist_run<float, float>((const float *)x, n, d, (const float *)y, m, squared,
                                      (float *)out, opt);
  if (opt->precision == GPUML_PRECISION_SINGLE)
    return gm::dist_run<float, double>((const double *)x, n, d, (const double *)y, m, squared,
                                       (double *)out, opt);
  return gm::dist_run<double, double>((const double *)x, n, d, (const double *)y, m, squared,
                                      (double *)out, opt);
}
