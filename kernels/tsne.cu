// t-SNE on the GPU: the perplexity bisection, the PCA (cuBLAS + cuSOLVER) and the
// optimiser, whose every iteration stays on the device: the attraction from the sparse
// P (one warp per row), the repulsion exact (tiles of all pairs) or interpolated on a
// grid and convolved by cuFFT, the update with momentum and gains, the re-centring.
// The host only reads the spread every GM_TSNE_GRID_EVERY iterations (to size the FFT
// grid, as the CPU does) and the KL every GM_TSNE_COST_EVERY. Every sum has a fixed
// order (per-thread loops, fixed shuffle trees, two-stage reductions over a constant
// number of blocks; points sorted by box with a stable radix sort): no atomics, so a
// run repeats bit for bit. The formulas are those of core/tsne_cpu.c (shared pieces in
// core/tsne_shared.h), including the single-precision convolution grids.
#include <cub/cub.cuh>
#include <cufft.h>
#include <cusolverDn.h>
#include "cuda_common.cuh"
#include "points.cuh"
#include "gpuml_cuda.h"
#include "tsne.h"

namespace gm {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 256;  // fixed, so that sums do not depend on the device
constexpr int kExactRows = 256;     // rows per block of the exact repulsion
constexpr int kExactTargetBlocks = 1024;
constexpr int kMaxFftSizes = 12;

// ---------------------------------------------------------------------------------------
// Library handles owned next to the Context (declared after it, so destroyed before it).

struct FftPlans {
  int size[kMaxFftSizes] = {};
  cufftHandle grids[kMaxFftSizes] = {}, kernel[kMaxFftSizes] = {};
  int count = 0;
  void clear() {
    for (int i = 0; i < count; i++) {
      cufftDestroy(grids[i]);
      cufftDestroy(kernel[i]);
    }
    count = 0;
  }
  ~FftPlans() { clear(); }
};

gpuml_status check_fft(Context &ctx, cufftResult r, const char *what) {
  if (r == CUFFT_SUCCESS) return GPUML_OK;
  cudaGetLastError();
  if (r == CUFFT_ALLOC_FAILED)
    return gm_fail(GPUML_ERR_NOMEM, ctx.id(), "cuFFT error in %s: out of GPU memory", what);
  return gm_fail(GPUML_ERR_CUDA, ctx.id(), "cuFFT error %d in %s", (int)r, what);
}

gpuml_status check_solver(Context &ctx, cusolverStatus_t s, const char *what) {
  if (s == CUSOLVER_STATUS_SUCCESS) return GPUML_OK;
  cudaGetLastError();
  if (s == CUSOLVER_STATUS_ALLOC_FAILED)
    return gm_fail(GPUML_ERR_NOMEM, ctx.id(), "cuSOLVER error in %s: out of GPU memory", what);
  return gm_fail(GPUML_ERR_CUDA, ctx.id(), "cuSOLVER error %d in %s", (int)s, what);
}

// ---------------------------------------------------------------------------------------
// Reductions in a fixed order: each of kReduceBlocks blocks sums a fixed strided subset,
// then one block sums the partials with the same tree.

enum ReduceOp { kSum, kMin, kMax };

template <int OP>
__device__ __forceinline__ double combine(double a, double b) {
  return OP == kSum ? a + b : (OP == kMin ? fmin(a, b) : fmax(a, b));
}

template <int OP>
__device__ double block_tree(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) sh[threadIdx.x] = combine<OP>(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  return sh[0];
}

// Set s (blockIdx.y) is src[s * stride .. s * stride + count).
template <int OP>
__global__ void reduce_partial_kernel(const double *__restrict__ src, int64_t count,
                                      int64_t stride, double init, double *__restrict__ partial) {
  __shared__ double sh[kThreads];
  const double *v = src + (int64_t)blockIdx.y * stride;
  double acc = init;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < count;
       i += (int64_t)kReduceBlocks * kThreads)
    acc = combine<OP>(acc, v[i]);
  double r = block_tree<OP>(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.y * kReduceBlocks + blockIdx.x] = r;
}

template <int OP>
__global__ void reduce_final_kernel(const double *__restrict__ partial, double subtract,
                                    double *__restrict__ out) {
  __shared__ double sh[kThreads];
  double r = block_tree<OP>(partial[blockIdx.x * kReduceBlocks + threadIdx.x], sh);
  if (threadIdx.x == 0) out[blockIdx.x] = r - subtract;
}

static_assert(kReduceBlocks == kThreads, "the final reduction takes one partial per thread");

// ---------------------------------------------------------------------------------------
// Affinities

__global__ void bisect_kernel(double *__restrict__ dist, int64_t rows, int64_t k,
                              double log_perp, double *__restrict__ p,
                              double *__restrict__ entropy) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  for (int64_t t = 0; t < k; t++) dist[i + t * rows] *= dist[i + t * rows];
  const double h = gm_tsne_bisect_point(dist + i, rows, k, log_perp, p + i);
  if (entropy) entropy[i] = h;
}

// ---------------------------------------------------------------------------------------
// PCA

__global__ void centre_columns_kernel(double *__restrict__ x, int64_t rows, int64_t ld,
                                      int64_t d, const double *__restrict__ sums, double n) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < rows * d;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e % rows, t = e / rows;
    x[i + t * ld] -= sums[t] / n;
  }
}

// Column sums of a rows x d block, added to acc[] (one block per column, fixed order).
__global__ void column_sums_kernel(const double *__restrict__ x, int64_t rows, int64_t d,
                                   double *__restrict__ acc) {
  __shared__ double sh[kThreads];
  for (int64_t t = blockIdx.x; t < d; t += gridDim.x) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < rows; i += kThreads) s += x[i + t * rows];
    double r = block_tree<kSum>(s, sh);
    if (threadIdx.x == 0) acc[t] += r;
    __syncthreads();
  }
}

// v[:, c] = a[:, m - 1 - c] (the eigenvectors by decreasing eigenvalue), times
// sqrt(w[m - 1 - c]) when `scale`.
__global__ void pick_components_kernel(const double *__restrict__ a, int64_t m, int64_t rows,
                                       int64_t ncomp, const double *__restrict__ w, int scale,
                                       double *__restrict__ v) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < rows * ncomp;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e % rows, c = e / rows, src = m - 1 - c;
    double f = 1;
    if (scale) f = sqrt(w[src] > 0 ? w[src] : 0);
    v[e] = a[i + src * m] * f;
  }
}

// ---------------------------------------------------------------------------------------
// Optimiser kernels

__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

// attr[i] = sum_j p_ij (y_i - y_j) / (1 + |y_i - y_j|^2), one warp per row.
template <int D>
__global__ void attraction_kernel(const int64_t *__restrict__ row, const int32_t *__restrict__ col,
                                  const double *__restrict__ val, const double *__restrict__ y,
                                  int64_t n, double *__restrict__ attr) {
  const int lane = threadIdx.x & 31;
  const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (i >= n) return;
  double yi[D], a[D];
  for (int d = 0; d < D; d++) yi[d] = y[i + d * n], a[d] = 0;
  for (int64_t e = row[i] + lane; e < row[i + 1]; e += 32) {
    const int64_t j = col[e];
    double diff[D], r2 = 0;
    for (int d = 0; d < D; d++) {
      diff[d] = yi[d] - y[j + d * n];
      r2 += diff[d] * diff[d];
    }
    const double pw = val[e] / (1.0 + r2);
    for (int d = 0; d < D; d++) a[d] += pw * diff[d];
  }
  for (int d = 0; d < D; d++) a[d] = warp_sum(a[d]);
  if (lane == 0)
    for (int d = 0; d < D; d++) attr[i + d * n] = a[d];
}

// Per row: sum_j p_ij log(1 + |y_i - y_j|^2) (for the KL), one warp per row.
template <int D>
__global__ void kl_rows_kernel(const int64_t *__restrict__ row, const int32_t *__restrict__ col,
                               const double *__restrict__ val, const double *__restrict__ y,
                               int64_t n, double *__restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (i >= n) return;
  double s = 0;
  for (int64_t e = row[i] + lane; e < row[i + 1]; e += 32) {
    const int64_t j = col[e];
    double r2 = 0;
    for (int d = 0; d < D; d++) {
      const double diff = y[i + d * n] - y[j + d * n];
      r2 += diff * diff;
    }
    s += val[e] * log1p(r2);
  }
  s = warp_sum(s);
  if (lane == 0) out[i] = s;
}

// The exact repulsion of rows (blockIdx.x) against the columns of chunk blockIdx.y:
// zpart[s][i] = sum_{j in chunk, j != i} w_ij, rpart[s][d][i] = sum w_ij^2 (y_i - y_j)_d.
template <int D>
__global__ void exact_kernel(const double *__restrict__ y, int64_t n, int64_t chunk,
                             double *__restrict__ zpart, double *__restrict__ rpart) {
  __shared__ double sy[D][kExactRows];
  const int64_t i = (int64_t)blockIdx.x * kExactRows + threadIdx.x;
  const int64_t s = blockIdx.y, j0 = s * chunk, j1 = j0 + chunk < n ? j0 + chunk : n;
  double yi[D], r[D], z = 0;
  for (int d = 0; d < D; d++) yi[d] = i < n ? y[i + d * n] : 0, r[d] = 0;
  for (int64_t jt = j0; jt < j1; jt += kExactRows) {
    const int64_t len = j1 - jt < kExactRows ? j1 - jt : kExactRows;
    __syncthreads();
    if ((int64_t)threadIdx.x < len)
      for (int d = 0; d < D; d++) sy[d][threadIdx.x] = y[jt + threadIdx.x + d * n];
    __syncthreads();
    for (int64_t jj = 0; jj < len; jj++) {
      if (jt + jj == i) continue;
      double diff[D], r2 = 0;
      for (int d = 0; d < D; d++) {
        diff[d] = yi[d] - sy[d][jj];
        r2 += diff[d] * diff[d];
      }
      const double w = 1.0 / (1.0 + r2), w2 = w * w;
      z += w;
      for (int d = 0; d < D; d++) r[d] += w2 * diff[d];
    }
  }
  if (i < n) {
    zpart[s * n + i] = z;
    for (int d = 0; d < D; d++) rpart[(s * D + d) * n + i] = r[d];
  }
}

template <int D>
__global__ void exact_combine_kernel(const double *__restrict__ zpart,
                                     const double *__restrict__ rpart, int64_t n, int64_t chunks,
                                     double *__restrict__ zrow, double *__restrict__ rep) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double z = 0, r[D];
  for (int d = 0; d < D; d++) r[d] = 0;
  for (int64_t s = 0; s < chunks; s++) {
    z += zpart[s * n + i];
    for (int d = 0; d < D; d++) r[d] += rpart[(s * D + d) * n + i];
  }
  zrow[i] = z;
  for (int d = 0; d < D; d++) rep[i + d * n] = r[d];
}

// --- FFT method -------------------------------------------------------------------------

// scal[1], scal[2]: lo and hi over all coordinates; the box width goes to scal[3].
__device__ __forceinline__ double box_width(const double *scal, int boxes) {
  double w = (scal[2] - scal[1]) / boxes;
  return w > 0 ? w : 1.0;
}

template <int D>
__global__ void assign_boxes_kernel(const double *__restrict__ y, int64_t n, int boxes,
                                    const double *__restrict__ scal, int32_t *__restrict__ key,
                                    int32_t *__restrict__ index, double *__restrict__ weight) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double lo = scal[1], width = box_width(scal, boxes);
  int64_t lin = 0, mul = 1;
  for (int d = 0; d < D; d++) {
    double t;
    const int b = gm_tsne_box_of(y[i + d * n], lo, width, boxes, &t);
    gm_tsne_lagrange(t, weight + (i * D + d) * GM_TSNE_NODES);
    lin += b * mul;
    mul *= boxes;
  }
  key[i] = (int32_t)lin;
  index[i] = (int32_t)i;
}

__global__ void box_ranges_kernel(const int32_t *__restrict__ key, int64_t n,
                                  int32_t *__restrict__ start, int32_t *__restrict__ end) {
  const int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  const int32_t k = key[s];
  if (s == 0 || key[s - 1] != k) start[k] = (int32_t)s;
  if (s == n - 1 || key[s + 1] != k) end[k] = (int32_t)(s + 1);
}

// One block per box, one warp per node of the box: the node's C channel sums over the
// box's points (lanes stride over them; a fixed shuffle tree adds the lanes).
template <int D>
__global__ void spread_kernel(const double *__restrict__ y, int64_t n, int boxes, int size,
                              const int32_t *__restrict__ start, const int32_t *__restrict__ end,
                              const int32_t *__restrict__ order, const double *__restrict__ weight,
                              cufftComplex *__restrict__ grid, int64_t cells) {
  constexpr int C = D + 2;
  const int64_t b = blockIdx.x;
  const int32_t s0 = start[b], s1 = end[b];
  if (s1 <= s0) return;
  const int node = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int k[D];
  int64_t cell = 0, scale = 1, rest = b;
  {
    int nd = node;
    for (int d = 0; d < D; d++) {
      k[d] = nd % GM_TSNE_NODES;
      nd /= GM_TSNE_NODES;
      cell += ((rest % boxes) * GM_TSNE_NODES + k[d]) * scale;
      rest /= boxes;
      scale *= size;
    }
  }
  double acc[C];
  for (int c = 0; c < C; c++) acc[c] = 0;
  for (int32_t at = s0 + lane; at < s1; at += 32) {
    const int64_t i = order[at];
    double v = 1, sq = 0;
    for (int d = 0; d < D; d++) v *= weight[(i * D + d) * GM_TSNE_NODES + k[d]];
    acc[0] += v;
    for (int d = 0; d < D; d++) {
      const double yd = y[i + d * n];
      acc[1 + d] += v * yd;
      sq += yd * yd;
    }
    acc[D + 1] += v * sq;
  }
  for (int c = 0; c < C; c++) acc[c] = warp_sum(acc[c]);
  if (lane == 0)
    for (int c = 0; c < C; c++) {
      float *g = reinterpret_cast<float *>(grid + (size_t)(c / 2) * cells + cell);
      g[c & 1] = (float)acc[c];
    }
}

template <int D>
__global__ void kernel_grid_kernel(int size, int nodes_per_dim, int boxes,
                                   const double *__restrict__ scal, cufftComplex *__restrict__ kernel,
                                   int64_t cells) {
  const int64_t cell = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (cell >= cells) return;
  const double spacing = box_width(scal, boxes) / GM_TSNE_NODES;
  int64_t rest = cell;
  double r2 = 0;
  bool inside = true;
  for (int d = 0; d < D; d++) {
    const int64_t g = rest % size;
    rest /= size;
    const int64_t off = g < nodes_per_dim ? g : (g > size - nodes_per_dim ? size - g : -1);
    if (off < 0) inside = false;
    r2 += (off * spacing) * (off * spacing);
  }
  kernel[cell].x = inside ? (float)gm_tsne_kernel2(r2) : 0.0f;
  kernel[cell].y = 0.0f;
}

__global__ void multiply_kernel(cufftComplex *__restrict__ grid, int grids,
                                const cufftComplex *__restrict__ kernel, int64_t cells, float norm) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < cells * grids;
       e += (int64_t)gridDim.x * blockDim.x) {
    const float kr = kernel[e % cells].x * norm;
    grid[e].x *= kr;
    grid[e].y *= kr;
  }
}

// Potentials at each point from its box's nodes, then Z's term and the repulsion.
template <int D>
__global__ void gather_kernel(const double *__restrict__ y, int64_t n, int boxes, int size,
                              const int32_t *__restrict__ key, const double *__restrict__ weight,
                              const cufftComplex *__restrict__ grid, int64_t cells,
                              double *__restrict__ zrow, double *__restrict__ rep) {
  constexpr int C = D + 2;
  constexpr int kNodes = D == 1 ? 3 : (D == 2 ? 9 : 27);
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t base[D], rest = key[i];
  for (int d = 0; d < D; d++) {
    base[d] = (rest % boxes) * GM_TSNE_NODES;
    rest /= boxes;
  }
  const double *w = weight + i * D * GM_TSNE_NODES;
  double phi[C];
  for (int c = 0; c < C; c++) phi[c] = 0;
  for (int node = 0; node < kNodes; node++) {
    int nd = node;
    double v = 1;
    int64_t cell = 0, scale = 1;
    for (int d = 0; d < D; d++) {
      const int kd = nd % GM_TSNE_NODES;
      nd /= GM_TSNE_NODES;
      v *= w[d * GM_TSNE_NODES + kd];
      cell += (base[d] + kd) * scale;
      scale *= size;
    }
    for (int c = 0; c < C; c++) {
      const float *g = reinterpret_cast<const float *>(grid + (size_t)(c / 2) * cells + cell);
      phi[c] += v * (double)g[c & 1];
    }
  }
  double sq = 0, dot = 0;
  for (int d = 0; d < D; d++) {
    const double yd = y[i + d * n];
    sq += yd * yd;
    dot += yd * phi[1 + d];
    rep[i + d * n] = yd * phi[0] - phi[1 + d];
  }
  zrow[i] = (1 + sq) * phi[0] - 2 * dot + phi[D + 1];
}

// --- gradient and update -----------------------------------------------------------------

__global__ void gradient_kernel(const double *__restrict__ attr, const double *__restrict__ rep,
                                int64_t count, double exaggeration, const double *__restrict__ scal,
                                double *__restrict__ grad) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= count) return;
  const double inv_z = 1.0 / scal[0];
  grad[e] = exaggeration * attr[e] - rep[e] * inv_z;
}

__device__ __forceinline__ int sign_of(double v) { return (v > 0) - (v < 0); }

template <int D>
__global__ void update_kernel(const double *__restrict__ attr, const double *__restrict__ rep,
                              int64_t n, double exaggeration, const double *__restrict__ scal,
                              double momentum, double learning_rate, double max_step_norm,
                              double *__restrict__ uy, double *__restrict__ gains,
                              double *__restrict__ y) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double inv_z = 1.0 / scal[0];
  double u[D], step2 = 0;
  for (int d = 0; d < D; d++) {
    const int64_t e = i + d * n;
    const double g = exaggeration * attr[e] - rep[e] * inv_z;
    double gain = sign_of(g) != sign_of(uy[e]) ? gains[e] + 0.2 : gains[e] * 0.8;
    if (gain < 0.01) gain = 0.01;
    gains[e] = gain;
    u[d] = momentum * uy[e] - learning_rate * gain * g;
    step2 += u[d] * u[d];
  }
  if (max_step_norm > 0 && step2 > max_step_norm * max_step_norm) {
    const double scale = max_step_norm / sqrt(step2);
    for (int d = 0; d < D; d++) u[d] *= scale;
  }
  for (int d = 0; d < D; d++) {
    uy[i + d * n] = u[d];
    y[i + d * n] += u[d];
  }
}

__global__ void subtract_mean_kernel(double *__restrict__ y, int64_t n, int dims,
                                     const double *__restrict__ sums) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n * dims) return;
  y[e] -= sums[e / n] / (double)n;
}

// ---------------------------------------------------------------------------------------
// The optimiser's device state.

inline int64_t ipow64(int64_t b, int e) {
  int64_t r = 1;
  while (e-- > 0) r *= b;
  return r;
}

// Slots of the device scalars.
enum { kZ = 0, kLo = 1, kHi = 2, kMean = 4, kKl = 8, kScalars = 16 };

struct TsneGpu {
  Context &ctx;
  int64_t n = 0, nnz = 0;
  int D = 2;
  gpuml_tsne_method method = GPUML_TSNE_EXACT;
  int64_t *row = nullptr;
  int32_t *col = nullptr;
  double *val = nullptr;
  double *y = nullptr, *uy = nullptr, *gains = nullptr, *attr = nullptr, *rep = nullptr,
         *zrow = nullptr, *partial = nullptr, *scal = nullptr;
  // exact
  double *zpart = nullptr, *rpart = nullptr;
  int64_t chunks = 1, chunk = 0;
  // FFT
  int boxes = 0, size = 0, max_boxes = 0;
  size_t used = 0, grid_cells = 0;  // bytes taken so far; cells the grids hold
  int32_t *key = nullptr, *key_sorted = nullptr, *index = nullptr, *order = nullptr;
  int32_t *start = nullptr, *end = nullptr;
  double *weight = nullptr;
  cufftComplex *grid = nullptr, *kernel = nullptr;
  void *sort_tmp = nullptr;
  size_t sort_bytes = 0;
  FftPlans plans;
  cufftHandle plan_grids = 0, plan_kernel = 0;

  explicit TsneGpu(Context &c) : ctx(c) {}
  // The FFT plans (members) are destroyed after this: no kernel of theirs may still run.
  ~TsneGpu() {
    if (ctx.stream()) cudaStreamSynchronize(ctx.stream());
  }
  TsneGpu(const TsneGpu &) = delete;
  TsneGpu &operator=(const TsneGpu &) = delete;

  int grids() const { return (D + 3) / 2; }

  size_t bytes_needed() const {
    size_t b = (size_t)(n + 1) * 8 + (size_t)nnz * 12;
    b += (size_t)n * D * 8 * 5 + (size_t)n * 8 + (size_t)kReduceBlocks * 8 * 4 + 1024;
    if (method == GPUML_TSNE_EXACT) {
      b += (size_t)chunks * n * 8 * (1 + D);
    } else {
      // (the FFT grids are added as they grow: use_grid())
      const size_t nbox = (size_t)ipow64(max_boxes, D);
      b += nbox * 8 + (size_t)n * (16 + D * GM_TSNE_NODES * 8);
      b += sort_bytes;
    }
    return b;
  }

  gpuml_status init(const int64_t *h_row, const int64_t *h_col, const double *h_val, int64_t n_,
                    int dims, gpuml_tsne_method m) {
    n = n_;
    D = dims;
    method = m;
    nnz = h_row[n];
    if (method == GPUML_TSNE_EXACT) {
      const int64_t row_blocks = (n + kExactRows - 1) / kExactRows;
      chunks = (kExactTargetBlocks + row_blocks - 1) / row_blocks;
      if (chunks > 64) chunks = 64;
      if (chunks > (n + kExactRows - 1) / kExactRows) chunks = (n + kExactRows - 1) / kExactRows;
      if (chunks < 1) chunks = 1;
      chunk = (n + chunks - 1) / chunks;
    } else {
      max_boxes = gm_tsne_grid_boxes(INFINITY, D);
      int bits = 1;
      while ((1LL << bits) < ipow64(max_boxes, D)) bits++;
      GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (int32_t *)nullptr,
                                                        (int32_t *)nullptr, (int32_t *)nullptr,
                                                        (int32_t *)nullptr, (int)n, 0, bits,
                                                        ctx.stream()),
                       "sizing the radix sort"));
    }
    const size_t need = used = bytes_needed();
    if (need > ctx.budget())
      return gm_fail(GPUML_ERR_NOMEM, "tsne:cuda",
                     "t-SNE of %lld points needs %.1f MB of GPU memory but the budget is %.1f MB: "
                     "free GPU memory, raise gpu_memory_limit or use backend \"cpu\"",
                     (long long)n, (double)need / 1e6, (double)ctx.budget() / 1e6);
    GM_TRY(ctx.alloc(&row, (size_t)n + 1, "P (rows)"));
    GM_TRY(ctx.alloc(&col, (size_t)nnz, "P (columns)"));
    GM_TRY(ctx.alloc(&val, (size_t)nnz, "P (values)"));
    HostArray<int32_t> c32;
    if (!c32.alloc((size_t)nnz))
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for P's columns",
                     (double)nnz * 4 / 1e6);
    for (int64_t e = 0; e < nnz; e++) c32.p[e] = (int32_t)h_col[e];
    GM_TRY(ctx.check(cudaMemcpyAsync(row, h_row, ((size_t)n + 1) * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()), "copying P"));
    GM_TRY(ctx.check(cudaMemcpyAsync(col, c32.p, (size_t)nnz * 4, cudaMemcpyHostToDevice,
                                     ctx.stream()), "copying P"));
    GM_TRY(ctx.check(cudaMemcpyAsync(val, h_val, (size_t)nnz * 8, cudaMemcpyHostToDevice,
                                     ctx.stream()), "copying P"));
    const size_t nd = (size_t)n * D;
    GM_TRY(ctx.alloc(&y, nd, "the embedding"));
    GM_TRY(ctx.alloc(&uy, nd, "the momentum"));
    GM_TRY(ctx.alloc(&gains, nd, "the gains"));
    GM_TRY(ctx.alloc(&attr, nd, "the attraction"));
    GM_TRY(ctx.alloc(&rep, nd, "the repulsion"));
    GM_TRY(ctx.alloc(&zrow, (size_t)n, "the normaliser terms"));
    GM_TRY(ctx.alloc(&partial, (size_t)kReduceBlocks * 4, "reduction space"));
    GM_TRY(ctx.alloc(&scal, (size_t)kScalars, "scalars"));
    if (method == GPUML_TSNE_EXACT) {
      GM_TRY(ctx.alloc(&zpart, (size_t)chunks * n, "the repulsion tiles"));
      GM_TRY(ctx.alloc(&rpart, (size_t)chunks * n * D, "the repulsion tiles"));
    } else {
      const size_t nbox = (size_t)ipow64(max_boxes, D);
      GM_TRY(ctx.alloc(&key, (size_t)n, "box keys"));
      GM_TRY(ctx.alloc(&key_sorted, (size_t)n, "box keys"));
      GM_TRY(ctx.alloc(&index, (size_t)n, "point order"));
      GM_TRY(ctx.alloc(&order, (size_t)n, "point order"));
      GM_TRY(ctx.alloc(&start, nbox, "box ranges"));
      GM_TRY(ctx.alloc(&end, nbox, "box ranges"));
      GM_TRY(ctx.alloc(&weight, (size_t)n * D * GM_TSNE_NODES, "interpolation weights"));
      char *tmp = nullptr;
      GM_TRY(ctx.alloc(&tmp, sort_bytes, "sorting space"));
      sort_tmp = tmp;
    }
    return GPUML_OK;
  }

  gpuml_status reduce(int op, const double *src, int64_t count, int64_t stride, int sets,
                      double subtract, double *out) {
    dim3 g(kReduceBlocks, sets);
    if (op == kSum) {
      reduce_partial_kernel<kSum><<<g, kThreads, 0, ctx.stream()>>>(src, count, stride, 0.0, partial);
      GM_TRY(ctx.launched("a reduction"));
      reduce_final_kernel<kSum><<<sets, kThreads, 0, ctx.stream()>>>(partial, subtract, out);
    } else if (op == kMin) {
      reduce_partial_kernel<kMin><<<g, kThreads, 0, ctx.stream()>>>(src, count, stride, INFINITY, partial);
      GM_TRY(ctx.launched("a reduction"));
      reduce_final_kernel<kMin><<<sets, kThreads, 0, ctx.stream()>>>(partial, 0.0, out);
    } else {
      reduce_partial_kernel<kMax><<<g, kThreads, 0, ctx.stream()>>>(src, count, stride, -INFINITY, partial);
      GM_TRY(ctx.launched("a reduction"));
      reduce_final_kernel<kMax><<<sets, kThreads, 0, ctx.stream()>>>(partial, 0.0, out);
    }
    return ctx.launched("a reduction");
  }

  // lo and hi of all coordinates into scal[kLo], scal[kHi].
  gpuml_status extent() {
    GM_TRY(reduce(kMin, y, n * D, 0, 1, 0.0, scal + kLo));
    return reduce(kMax, y, n * D, 0, 1, 0.0, scal + kHi);
  }

  // Sizes the FFT grid for the current spread (read back: the one sync of a grid choice).
  gpuml_status choose_grid(int fixed_boxes) {
    int b = fixed_boxes;
    if (b <= 0) {
      double lohi[2];
      GM_TRY(extent());
      GM_TRY(ctx.check(cudaMemcpyAsync(lohi, scal + kLo, 2 * sizeof(double), cudaMemcpyDeviceToHost,
                                       ctx.stream()), "reading the spread"));
      GM_TRY(ctx.sync("reading the spread"));
      b = gm_tsne_grid_boxes(lohi[1] - lohi[0], D);
    }
    if (b > max_boxes) b = max_boxes;
    return use_grid(b);
  }

  gpuml_status use_grid(int b) {
    boxes = b;
    size = gm_tsne_fft_size(b);
    const size_t cells = (size_t)ipow64(size, D);
    if (cells > grid_cells) {  // larger grids as the embedding spreads; the old ones stay
      const size_t bytes = cells * sizeof(cufftComplex) * (grids() + 1);
      if (used + bytes > ctx.budget())
        return gm_fail(GPUML_ERR_NOMEM, "tsne:cuda",
                       "the FFT grid of %d^%d points needs %.1f MB more GPU memory than the budget "
                       "of %.1f MB: free GPU memory, raise gpu_memory_limit or use backend \"cpu\"",
                       size, D, (double)(used + bytes - ctx.budget()) / 1e6, (double)ctx.budget() / 1e6);
      GM_TRY(ctx.alloc(&grid, cells * grids(), "the FFT grids"));
      GM_TRY(ctx.alloc(&kernel, cells, "the FFT kernel"));
      used += bytes;
      grid_cells = cells;
    }
    for (int p = 0; p < plans.count; p++)
      if (plans.size[p] == size) {
        plan_grids = plans.grids[p];
        plan_kernel = plans.kernel[p];
        return GPUML_OK;
      }
    if (plans.count == kMaxFftSizes) {
      // A run passes through up to about 20 sizes (2^a 3^b), mostly growing: once the
      // cache is full, the plans made so far are retired (after their work is done).
      GM_TRY(ctx.sync("retiring FFT plans"));
      plans.clear();
    }
    int dims[3] = {size, size, size};
    cufftHandle pg = 0, pk = 0;
    GM_TRY(check_fft(ctx, cufftPlanMany(&pg, D, dims, nullptr, 1, (int)cells, nullptr, 1, (int)cells,
                                        CUFFT_C2C, grids()),
                     "planning the grid FFT"));
    cufftResult r = cufftPlanMany(&pk, D, dims, nullptr, 1, (int)cells, nullptr, 1, (int)cells,
                                  CUFFT_C2C, 1);
    if (r != CUFFT_SUCCESS) {
      cufftDestroy(pg);
      return check_fft(ctx, r, "planning the kernel FFT");
    }
    const int p = plans.count++;
    plans.size[p] = size;
    plans.grids[p] = pg;
    plans.kernel[p] = pk;
    GM_TRY(check_fft(ctx, cufftSetStream(plans.grids[p], ctx.stream()), "cufftSetStream"));
    GM_TRY(check_fft(ctx, cufftSetStream(plans.kernel[p], ctx.stream()), "cufftSetStream"));
    plan_grids = plans.grids[p];
    plan_kernel = plans.kernel[p];
    return GPUML_OK;
  }

  template <int DD>
  gpuml_status fft_repulsion() {
    const int64_t cells = ipow64(size, DD), nbox = ipow64(boxes, DD);
    GM_TRY(extent());
    assign_boxes_kernel<DD><<<grid_1d(n, kThreads), kThreads, 0, ctx.stream()>>>(
        y, n, boxes, scal, key, index, weight);
    GM_TRY(ctx.launched("assigning boxes"));
    int bits = 1;
    while ((1LL << bits) < nbox) bits++;
    size_t tb = sort_bytes;
    GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(sort_tmp, tb, key, key_sorted, index, order,
                                                      (int)n, 0, bits, ctx.stream()),
                     "sorting points by box"));
    GM_TRY(ctx.check(cudaMemsetAsync(start, 0, (size_t)nbox * 4, ctx.stream()), "clearing boxes"));
    GM_TRY(ctx.check(cudaMemsetAsync(end, 0, (size_t)nbox * 4, ctx.stream()), "clearing boxes"));
    box_ranges_kernel<<<grid_1d(n, kThreads), kThreads, 0, ctx.stream()>>>(key_sorted, n, start, end);
    GM_TRY(ctx.launched("box ranges"));
    GM_TRY(ctx.check(cudaMemsetAsync(grid, 0, (size_t)cells * grids() * sizeof(cufftComplex),
                                     ctx.stream()), "clearing the grids"));
    constexpr int kNodes = DD == 1 ? 3 : (DD == 2 ? 9 : 27);
    spread_kernel<DD><<<(unsigned)nbox, 32 * kNodes, 0, ctx.stream()>>>(
        y, n, boxes, size, start, end, order, weight, grid, cells);
    GM_TRY(ctx.launched("spreading charges on the grid"));
    kernel_grid_kernel<DD><<<grid_1d(cells, kThreads), kThreads, 0, ctx.stream()>>>(
        size, boxes * GM_TSNE_NODES, boxes, scal, kernel, cells);
    GM_TRY(ctx.launched("the kernel grid"));
    GM_TRY(check_fft(ctx, cufftExecC2C(plan_kernel, kernel, kernel, CUFFT_FORWARD), "the kernel FFT"));
    GM_TRY(check_fft(ctx, cufftExecC2C(plan_grids, grid, grid, CUFFT_FORWARD), "the grid FFT"));
    const float norm = (float)(1.0 / (double)cells);
    multiply_kernel<<<grid_1d(cells * grids(), kThreads) < 65536u ? grid_1d(cells * grids(), kThreads) : 65536u,
                      kThreads, 0, ctx.stream()>>>(grid, grids(), kernel, cells, norm);
    GM_TRY(ctx.launched("the convolution"));
    GM_TRY(check_fft(ctx, cufftExecC2C(plan_grids, grid, grid, CUFFT_INVERSE), "the inverse grid FFT"));
    gather_kernel<DD><<<grid_1d(n, kThreads), kThreads, 0, ctx.stream()>>>(
        y, n, boxes, size, key, weight, grid, cells, zrow, rep);
    return ctx.launched("interpolating the potentials");
  }

  template <int DD>
  gpuml_status exact_repulsion() {
    dim3 g((unsigned)((n + kExactRows - 1) / kExactRows), (unsigned)chunks);
    exact_kernel<DD><<<g, kExactRows, 0, ctx.stream()>>>(y, n, chunk, zpart, rpart);
    GM_TRY(ctx.launched("the exact repulsion"));
    exact_combine_kernel<DD><<<grid_1d(n, kThreads), kThreads, 0, ctx.stream()>>>(
        zpart, rpart, n, chunks, zrow, rep);
    return ctx.launched("the exact repulsion");
  }

  // zrow, rep and Z (scal[kZ]).
  template <int DD>
  gpuml_status normaliser() {
    if (method == GPUML_TSNE_FFT) GM_TRY(fft_repulsion<DD>());
    else GM_TRY(exact_repulsion<DD>());
    return reduce(kSum, zrow, n, 0, 1, method == GPUML_TSNE_FFT ? (double)n : 0.0, scal + kZ);
  }

  template <int DD>
  gpuml_status attraction() {
    attraction_kernel<DD><<<grid_1d(n * 32, kThreads), kThreads, 0, ctx.stream()>>>(row, col, val, y, n, attr);
    return ctx.launched("the attraction");
  }

  // The KL terms: scal[kKl] = sum p log(1 + d^2); Z in scal[kZ]. Read back with a sync.
  template <int DD>
  gpuml_status kl(double plogp, double psum, double *out) {
    GM_TRY(normaliser<DD>());
    kl_rows_kernel<DD><<<grid_1d(n * 32, kThreads), kThreads, 0, ctx.stream()>>>(row, col, val, y, n, zrow);
    GM_TRY(ctx.launched("the KL divergence"));
    GM_TRY(reduce(kSum, zrow, n, 0, 1, 0.0, scal + kKl));
    double h[kScalars];
    GM_TRY(ctx.check(cudaMemcpyAsync(h, scal, sizeof h, cudaMemcpyDeviceToHost, ctx.stream()),
                     "reading the KL divergence"));
    GM_TRY(ctx.sync("the KL divergence"));
    if (!(h[kZ] > 0) || !isfinite(h[kZ]))
      return gm_fail(GPUML_ERR_NUMERIC, "tsne:numeric",
                     "the t-SNE normaliser Z became %g: the embedding diverged; try a smaller learning_rate",
                     h[kZ]);
    *out = plogp + h[kKl] + psum * log(h[kZ]);
    return GPUML_OK;
  }

  template <int DD>
  gpuml_status iterate(double exaggeration, double momentum, double learning_rate,
                       double max_step_norm) {
    GM_TRY(normaliser<DD>());
    GM_TRY(attraction<DD>());
    update_kernel<DD><<<grid_1d(n, kThreads), kThreads, 0, ctx.stream()>>>(
        attr, rep, n, exaggeration, scal + kZ, momentum, learning_rate, max_step_norm, uy, gains, y);
    GM_TRY(ctx.launched("the update"));
    GM_TRY(reduce(kSum, y, n, n, DD, 0.0, scal + kMean));
    subtract_mean_kernel<<<grid_1d(n * DD, kThreads), kThreads, 0, ctx.stream()>>>(y, n, DD, scal + kMean);
    return ctx.launched("re-centring");
  }

  template <int DD>
  gpuml_status optimise(const gm_tsne_run *run, double *itercosts, gpuml_tsne_result *result,
                        const gpuml_options *opt, double plogp, double psum) {
    int cost_at = 0;
    for (int it = 0; it < run->max_iter; it++) {
      if (it % GM_TSNE_GRID_EVERY == 0) {
        if (method == GPUML_TSNE_FFT) GM_TRY(choose_grid(0));
        if (gm_interrupted(opt))
          return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted at iteration %d", it);
      }
      const double exaggeration = it < run->stop_lying_iter ? run->exaggeration : 1.0;
      const double momentum = it < run->mom_switch_iter ? run->momentum : run->final_momentum;
      GM_TRY(iterate<DD>(exaggeration, momentum, run->learning_rate, run->max_step_norm));
      if ((it + 1) % GM_TSNE_COST_EVERY == 0 || it + 1 == run->max_iter) {
        double value;
        GM_TRY(kl<DD>(plogp, psum, &value));
        if (itercosts) itercosts[cost_at] = value;
        cost_at++;
        if (result) {
          result->kl = value;
          result->iterations_done = it + 1;
        }
        gm_progress(opt, "tsne", it + 1, run->max_iter);
        if (gm_interrupted(opt))
          return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted at iteration %d", it + 1);
      }
    }
    return GPUML_OK;
  }
};

__global__ void fill_kernel(double *__restrict__ x, int64_t count, double v) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < count) x[e] = v;
}

void p_sums(const double *val, int64_t nnz, double *plogp, double *psum) {
  double a = 0, b = 0;
  for (int64_t e = 0; e < nnz; e++) {
    b += val[e];
    if (val[e] > 0) a += val[e] * log(val[e]);
  }
  *plogp = a;
  *psum = b;
}

template <int DD>
gpuml_status run_optimiser(TsneGpu &t, const gm_tsne_run *run, double *itercosts,
                           gpuml_tsne_result *result, const gpuml_options *opt, double plogp,
                           double psum) {
  return t.optimise<DD>(run, itercosts, result, opt, plogp, psum);
}

template <int DD>
gpuml_status one_gradient(TsneGpu &t, double exaggeration, double *grad) {
  GM_TRY(t.normaliser<DD>());
  GM_TRY(t.attraction<DD>());
  gradient_kernel<<<grid_1d(t.n * DD, kThreads), kThreads, 0, t.ctx.stream()>>>(
      t.attr, t.rep, t.n * DD, exaggeration, t.scal + kZ, grad);
  return t.ctx.launched("the gradient");
}

}  // namespace
}  // namespace gm

using namespace gm;

extern "C" gpuml_status gm_cuda_tsne_conditional(const double *dist, int64_t n, int64_t k,
                                                    double perplexity, double *p, double *entropy,
                                                    const gpuml_options *opt) {
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  // Rows in blocks that fit the budget: distances, P and the entropy of each row.
  const size_t per_row = (size_t)k * 16 + 8;
  int64_t rows = (int64_t)(ctx.budget() / per_row);
  if (rows > n) rows = n;
  if (rows < 1)
    return gm_fail(GPUML_ERR_NOMEM, "tsne:cuda", "the GPU memory budget is too small for the affinities");
  double *dd = nullptr, *pd = nullptr, *hd = nullptr;
  GM_TRY(ctx.alloc(&dd, (size_t)rows * k, "the neighbour distances"));
  GM_TRY(ctx.alloc(&pd, (size_t)rows * k, "the affinities"));
  GM_TRY(ctx.alloc(&hd, (size_t)rows, "the entropies"));
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = n - r0 < rows ? n - r0 : rows;
    GM_TRY(ctx.check(cudaMemcpy2DAsync(dd, (size_t)rn * 8, dist + r0, (size_t)n * 8, (size_t)rn * 8,
                                       (size_t)k, cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the neighbour distances"));
    bisect_kernel<<<grid_1d(rn, 128), 128, 0, ctx.stream()>>>(dd, rn, k, log(perplexity), pd, hd);
    GM_TRY(ctx.launched("the perplexity bisection"));
    GM_TRY(ctx.check(cudaMemcpy2DAsync(p + r0, (size_t)n * 8, pd, (size_t)rn * 8, (size_t)rn * 8,
                                       (size_t)k, cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying the affinities"));
    if (entropy)
      GM_TRY(ctx.check(cudaMemcpyAsync(entropy + r0, hd, (size_t)rn * 8, cudaMemcpyDeviceToHost,
                                       ctx.stream()), "copying the entropies"));
    GM_TRY(ctx.sync("the perplexity bisection"));
    if (gm_interrupted(opt))
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted");
  }
  return GPUML_OK;
}

extern "C" gpuml_status gm_cuda_tsne_pca(const double *x, int64_t n, int64_t d, int64_t ncomp,
                                            double *scores, const gpuml_options *opt) {
  const int64_t m = n < d ? n : d;
  if (n > INT32_MAX || d > INT32_MAX || (d > n && n > 46000))
    return gm_tsne_pca_cpu(x, n, d, ncomp, scores, opt);
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 1));
  cusolverDnHandle_t solver = nullptr;
  GM_TRY(ctx.solver(&solver));
  gm_progress(opt, "pca", 0, 1);
  // Rows in blocks (all at once when they fit); the Gram form (d > n) needs all rows.
  // covariance, eigenvalues, sums, rotation and syevd's work space (1 + 6m + 2m^2)
  const size_t fixed = (size_t)m * m * 8 * 3 + (size_t)m * 56 + (size_t)d * 16 +
                       (size_t)ncomp * d * 8 + 4096;
  int64_t rows = n;
  if (fixed + (size_t)n * d * 8 + (size_t)n * ncomp * 8 > ctx.budget()) {
    if (d > n) return gm_tsne_pca_cpu(x, n, d, ncomp, scores, opt);
    const size_t per_row = (size_t)(d + ncomp) * 8;
    rows = ctx.budget() > fixed ? (int64_t)((ctx.budget() - fixed) / per_row) : 0;
    if (rows < 1)
      return gm_fail(GPUML_ERR_NOMEM, "tsne:cuda", "the GPU memory budget is too small for the PCA");
  }
  const bool resident = rows == n;
  double *xb = nullptr, *a = nullptr, *w = nullptr, *sums = nullptr, *v = nullptr, *sb = nullptr;
  int *info = nullptr;
  GM_TRY(ctx.alloc(&xb, (size_t)rows * d, "the data"));
  GM_TRY(ctx.alloc(&a, (size_t)m * m, "the covariance"));
  GM_TRY(ctx.alloc(&w, (size_t)m, "the eigenvalues"));
  GM_TRY(ctx.alloc(&sums, (size_t)d, "the column sums"));
  GM_TRY(ctx.alloc(&info, 1, "the solver status"));
  GM_TRY(ctx.check(cudaMemsetAsync(sums, 0, (size_t)d * 8, ctx.stream()), "clearing sums"));
  auto upload = [&](int64_t r0, int64_t rn) -> gpuml_status {
    return ctx.check(cudaMemcpy2DAsync(xb, (size_t)rn * 8, x + r0, (size_t)n * 8, (size_t)rn * 8,
                                       (size_t)d, cudaMemcpyHostToDevice, ctx.stream()),
                     "copying the data to the GPU");
  };
  const unsigned col_blocks = (unsigned)(d < 65535 ? d : 65535);
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = n - r0 < rows ? n - r0 : rows;
    GM_TRY(upload(r0, rn));
    column_sums_kernel<<<col_blocks, kThreads, 0, ctx.stream()>>>(xb, rn, d, sums);
    GM_TRY(ctx.launched("column sums"));
  }
  const double one = 1, zero = 0;
  const int M = (int)m;
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t rn = n - r0 < rows ? n - r0 : rows;
    if (!resident) GM_TRY(upload(r0, rn));
    centre_columns_kernel<<<grid_1d(rn * d, kThreads) < 65536u ? grid_1d(rn * d, kThreads) : 65536u,
                            kThreads, 0, ctx.stream()>>>(xb, rn, rn, d, sums, (double)n);
    GM_TRY(ctx.launched("centring"));
    const double beta = r0 == 0 ? 0.0 : 1.0;
    if (d <= n)
      GM_TRY(ctx.check_blas(cublasDsyrk(ctx.blas(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, (int)d, (int)rn,
                                        &one, xb, (int)rn, &beta, a, M), "cublasDsyrk"));
    else
      GM_TRY(ctx.check_blas(cublasDsyrk(ctx.blas(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, (int)n, (int)d,
                                        &one, xb, (int)n, &zero, a, M), "cublasDsyrk"));
  }
  int lwork = 0;
  GM_TRY(check_solver(ctx, cusolverDnDsyevd_bufferSize(solver, CUSOLVER_EIG_MODE_VECTOR,
                                                       CUBLAS_FILL_MODE_LOWER, M, a, M, w, &lwork),
                      "sizing the eigensolver"));
  double *work = nullptr;
  GM_TRY(ctx.alloc(&work, (size_t)lwork, "the eigensolver's work space"));
  GM_TRY(check_solver(ctx, cusolverDnDsyevd(solver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
                                            M, a, M, w, work, lwork, info), "the eigensolver"));
  int h_info = 0;
  GM_TRY(ctx.check(cudaMemcpyAsync(&h_info, info, sizeof h_info, cudaMemcpyDeviceToHost, ctx.stream()),
                   "reading the solver status"));
  GM_TRY(ctx.sync("the eigensolver"));
  if (h_info != 0)
    return gm_fail(GPUML_ERR_NUMERIC, "tsne:pca", "the PCA eigensolver failed (cuSOLVER info %d); try pca = FALSE",
                   h_info);
  if (d > n) {
    GM_TRY(ctx.alloc(&sb, (size_t)n * ncomp, "the scores"));
    pick_components_kernel<<<grid_1d(n * ncomp, kThreads) < 65536u ? grid_1d(n * ncomp, kThreads) : 65536u,
                             kThreads, 0, ctx.stream()>>>(a, m, n, ncomp, w, 1, sb);
    GM_TRY(ctx.launched("picking the components"));
    GM_TRY(ctx.check(cudaMemcpyAsync(scores, sb, (size_t)n * ncomp * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                     "copying the scores"));
  } else {
    GM_TRY(ctx.alloc(&v, (size_t)d * ncomp, "the rotation"));
    GM_TRY(ctx.alloc(&sb, (size_t)rows * ncomp, "the scores"));
    pick_components_kernel<<<grid_1d(d * ncomp, kThreads) < 65536u ? grid_1d(d * ncomp, kThreads) : 65536u,
                             kThreads, 0, ctx.stream()>>>(a, m, d, ncomp, w, 0, v);
    GM_TRY(ctx.launched("picking the components"));
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t rn = n - r0 < rows ? n - r0 : rows;
      if (!resident) {
        GM_TRY(upload(r0, rn));
        centre_columns_kernel<<<grid_1d(rn * d, kThreads) < 65536u ? grid_1d(rn * d, kThreads) : 65536u,
                                kThreads, 0, ctx.stream()>>>(xb, rn, rn, d, sums, (double)n);
        GM_TRY(ctx.launched("centring"));
      }
      GM_TRY(ctx.check_blas(cublasDgemm(ctx.blas(), CUBLAS_OP_N, CUBLAS_OP_N, (int)rn, (int)ncomp, (int)d,
                                        &one, xb, (int)rn, v, (int)d, &zero, sb, (int)rn), "cublasDgemm"));
      GM_TRY(ctx.check(cudaMemcpy2DAsync(scores + r0, (size_t)n * 8, sb, (size_t)rn * 8, (size_t)rn * 8,
                                         (size_t)ncomp, cudaMemcpyDeviceToHost, ctx.stream()),
                       "copying the scores"));
      GM_TRY(ctx.sync("the projection"));
    }
  }
  GM_TRY(ctx.sync("the PCA"));
  gm_tsne_sign_fix(scores, n, ncomp);
  gm_progress(opt, "pca", 1, 1);
  return GPUML_OK;
}

extern "C" gpuml_status gm_cuda_tsne_optimize(const gm_csr *P, const gm_tsne_run *run,
                                              double *y, double *itercosts,
                                              gpuml_tsne_result *result,
                                              const gpuml_options *opt) {
  const int64_t *row = P->row, *col = P->col;
  const double *val = P->val;
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  TsneGpu t(ctx);
  GM_TRY(t.init(row, col, val, run->n, run->dims, run->method));
  const size_t nd = (size_t)run->n * run->dims;
  GM_TRY(ctx.check(cudaMemcpyAsync(t.y, y, nd * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the initial embedding"));
  GM_TRY(ctx.check(cudaMemsetAsync(t.uy, 0, nd * 8, ctx.stream()), "clearing the momentum"));
  fill_kernel<<<grid_1d((int64_t)nd, kThreads), kThreads, 0, ctx.stream()>>>(t.gains, (int64_t)nd, 1.0);
  GM_TRY(ctx.launched("initialising the gains"));
  double plogp, psum;
  p_sums(val, t.nnz, &plogp, &psum);
  switch (run->dims) {
    case 1: GM_TRY(run_optimiser<1>(t, run, itercosts, result, opt, plogp, psum)); break;
    case 2: GM_TRY(run_optimiser<2>(t, run, itercosts, result, opt, plogp, psum)); break;
    default: GM_TRY(run_optimiser<3>(t, run, itercosts, result, opt, plogp, psum)); break;
  }
  GM_TRY(ctx.check(cudaMemcpyAsync(y, t.y, nd * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                   "copying the embedding"));
  return ctx.sync("copying the embedding");
}

extern "C" gpuml_status gm_cuda_tsne_gradient(const gm_csr *P, const double *y, int64_t n,
                                              int dims, gpuml_tsne_method method, int boxes,
                                              double exaggeration, double *grad, double *z,
                                              const gpuml_options *opt) {
  const int64_t *row = P->row, *col = P->col;
  const double *val = P->val;
  if (dims < 1 || dims > 3) return gm_fail(GPUML_ERR_ARG, "tsne:badDims", "dims = %d must be 1, 2 or 3", dims);
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  TsneGpu t(ctx);
  GM_TRY(t.init(row, col, val, n, dims, method));
  const size_t nd = (size_t)n * dims;
  double *g = nullptr;
  GM_TRY(ctx.alloc(&g, nd, "the gradient"));
  GM_TRY(ctx.check(cudaMemcpyAsync(t.y, y, nd * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the embedding"));
  if (t.method == GPUML_TSNE_FFT) GM_TRY(t.choose_grid(boxes));
  switch (dims) {
    case 1: GM_TRY(one_gradient<1>(t, exaggeration, g)); break;
    case 2: GM_TRY(one_gradient<2>(t, exaggeration, g)); break;
    default: GM_TRY(one_gradient<3>(t, exaggeration, g)); break;
  }
  GM_TRY(ctx.check(cudaMemcpyAsync(grad, g, nd * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                   "copying the gradient"));
  GM_TRY(ctx.check(cudaMemcpyAsync(z, t.scal + kZ, 8, cudaMemcpyDeviceToHost, ctx.stream()),
                   "copying Z"));
  return ctx.sync("the gradient");
}
