// t-SNE on the GPU: the optimiser (the bisection and the PCA are kernels/tsne_pca.cu,
// the FFT method's grid kernels kernels/tsne_fft.cuh), whose every iteration stays on the
// device: the attraction from the sparse
// P (one warp per row), the repulsion exact (tiles of all pairs) or interpolated on a
// grid and convolved by cuFFT, the update with momentum and gains, the re-centring.
// The host only reads the spread every GM_TSNE_GRID_EVERY iterations (to size the FFT
// grid, as the CPU does) and the KL every GM_TSNE_COST_EVERY. Every sum has a fixed
// order (per-thread loops, fixed shuffle trees, two-stage reductions over a constant
// number of blocks; points sorted by box with a stable radix sort): no atomics, so a
// run repeats bit for bit. The formulas are those of core/tsne_cpu.c (shared pieces in
// core/tsne_shared.h), including the single-precision convolution grids.
#include <memory>
#include <vector>
#include "shards.h"
#include "tsne_common.cuh"

namespace gm {
namespace {

// ---------------------------------------------------------------------------------------
// Optimiser kernels

__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

// attr[i] = sum_j p_ij (y_i - y_j) / (1 + |y_i - y_j|^2 / df), one warp per row, for the
// rows first .. last - 1 (row[i - first] .. row[i - first + 1] - 1: their entries of P).
template <int D>
__global__ void attraction_kernel(const int64_t *__restrict__ row, const int32_t *__restrict__ col,
                                  const double *__restrict__ val, const double *__restrict__ y,
                                  int64_t n, int64_t first, int64_t last, bool heavy, double df,
                                  double *__restrict__ attr) {
  const int lane = threadIdx.x & 31;
  const int64_t i = first + (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  if (i >= last) return;
  double yi[D], a[D];
  for (int d = 0; d < D; d++) yi[d] = y[i + d * n], a[d] = 0;
  for (int64_t e = row[i - first] + lane; e < row[i - first + 1]; e += 32) {
    const int64_t j = col[e];
    double diff[D], r2 = 0;
    for (int d = 0; d < D; d++) {
      diff[d] = yi[d] - y[j + d * n];
      r2 += diff[d] * diff[d];
    }
    const double pw = heavy ? val[e] / (1.0 + r2 / df) : val[e] / (1.0 + r2);
    for (int d = 0; d < D; d++) a[d] += pw * diff[d];
  }
  for (int d = 0; d < D; d++) a[d] = warp_sum(a[d]);
  if (lane == 0)
    for (int d = 0; d < D; d++) attr[i + d * n] = a[d];
}

__global__ void rebase_kernel(int64_t *__restrict__ row, int64_t count, int64_t base) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < count) row[e] -= base;
}

__global__ void narrow_kernel(const int64_t *__restrict__ wide, int64_t count,
                              int32_t *__restrict__ narrow) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < count) narrow[e] = (int32_t)wide[e];
}

// Per row: sum_j p_ij log p_ij into plogp[i] and sum_j p_ij into psum[i] (the KL's
// constant terms), one warp per row (rows first .. last - 1, as attraction_kernel).
__global__ void p_sums_kernel(const int64_t *__restrict__ row, const double *__restrict__ val,
                              int64_t first, int64_t last, double *__restrict__ plogp,
                              double *__restrict__ psum) {
  const int lane = threadIdx.x & 31;
  const int64_t i = first + (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  if (i >= last) return;
  double a = 0, b = 0;
  for (int64_t e = row[i - first] + lane; e < row[i - first + 1]; e += 32) {
    const double v = val[e];
    b += v;
    if (v > 0) a += v * log(v);
  }
  a = warp_sum(a);
  b = warp_sum(b);
  if (lane == 0) plogp[i] = a, psum[i] = b;
}

// Per row: sum_j p_ij df log(1 + |y_i - y_j|^2 / df) (for the KL), one warp per row
// (rows first .. last - 1, as attraction_kernel).
template <int D>
__global__ void kl_rows_kernel(const int64_t *__restrict__ row, const int32_t *__restrict__ col,
                               const double *__restrict__ val, const double *__restrict__ y,
                               int64_t n, int64_t first, int64_t last, bool heavy, double df,
                               double *__restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t i = first + (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  if (i >= last) return;
  double s = 0;
  for (int64_t e = row[i - first] + lane; e < row[i - first + 1]; e += 32) {
    const int64_t j = col[e];
    double r2 = 0;
    for (int d = 0; d < D; d++) {
      const double diff = y[i + d * n] - y[j + d * n];
      r2 += diff * diff;
    }
    s += val[e] * (heavy ? df * log1p(r2 / df) : log1p(r2));
  }
  s = warp_sum(s);
  if (lane == 0) out[i] = s;
}

// The exact repulsion of rows (blockIdx.x) against the columns of chunk blockIdx.y:
// zpart[s][i] = sum_{j in chunk, j != i} w_ij, rpart[s][d][i] = sum w_ij u_ij (y_i - y_j)_d
// (u = 1 / (1 + r^2 / df), w = u^df; w = u for df = 1).
// Rows row0 .. row_end - 1, columns below cols (a placement: the new points against the
// fixed ones; a fit: its rows against all).
template <int D>
__global__ void exact_kernel(const double *__restrict__ y, int64_t n, int64_t row0,
                             int64_t row_end, int64_t cols, int64_t chunk, bool heavy, double df,
                             double *__restrict__ zpart, double *__restrict__ rpart) {
  __shared__ double sy[D][kExactRows];
  const int64_t i = row0 + (int64_t)blockIdx.x * kExactRows + threadIdx.x;
  const int64_t s = blockIdx.y, j0 = s * chunk, j1 = j0 + chunk < cols ? j0 + chunk : cols;
  double yi[D], r[D], z = 0;
  for (int d = 0; d < D; d++) yi[d] = i < row_end ? y[i + d * n] : 0, r[d] = 0;
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
      double w, wu;
      if (heavy) {
        const double u = 1.0 / (1.0 + r2 / df);
        w = pow(u, df);
        wu = w * u;
      } else {
        w = 1.0 / (1.0 + r2);
        wu = w * w;
      }
      z += w;
      for (int d = 0; d < D; d++) r[d] += wu * diff[d];
    }
  }
  if (i < row_end) {
    zpart[s * n + i] = z;
    for (int d = 0; d < D; d++) rpart[(s * D + d) * n + i] = r[d];
  }
}

template <int D>
__global__ void exact_combine_kernel(const double *__restrict__ zpart,
                                     const double *__restrict__ rpart, int64_t n, int64_t row0,
                                     int64_t row_end, int64_t chunks, double *__restrict__ zrow,
                                     double *__restrict__ rep) {
  const int64_t i = row0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= row_end) return;
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

#include "tsne_fft.cuh"

__global__ void gradient_kernel(const double *__restrict__ attr, const double *__restrict__ rep,
                                int64_t count, double exaggeration, const double *__restrict__ scal,
                                double *__restrict__ grad) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= count) return;
  const double inv_z = 1.0 / scal[0];
  grad[e] = exaggeration * attr[e] - rep[e] * inv_z;
}

__device__ __forceinline__ int sign_of(double v) { return (v > 0) - (v < 0); }

// The rows first .. last - 1.
template <int D>
__global__ void update_kernel(const double *__restrict__ attr, const double *__restrict__ rep,
                              int64_t n, int64_t first, int64_t last, double exaggeration,
                              const double *__restrict__ scal, double momentum,
                              double learning_rate, double max_step_norm,
                              double *__restrict__ uy, double *__restrict__ gains,
                              double *__restrict__ y) {
  const int64_t i = first + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= last) return;
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

// A placement's step: the new points (n_fixed .. n - 1) only, each with its own Z_i;
// a Z_i that is not positive and finite makes the point NaN (the core reports it).
template <int D>
__global__ void place_update_kernel(const double *__restrict__ attr, const double *__restrict__ rep,
                                    const double *__restrict__ zrow, int64_t n, int64_t n_fixed,
                                    double momentum, double learning_rate, double max_step_norm,
                                    double *__restrict__ uy, double *__restrict__ gains,
                                    double *__restrict__ y) {
  const int64_t i = n_fixed + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double z = zrow[i];
  if (!(z > 0) || !isfinite(z)) {
    for (int d = 0; d < D; d++) y[i + d * n] = NAN;
    return;
  }
  double u[D], step2 = 0;
  for (int d = 0; d < D; d++) {
    const int64_t e = i + d * n;
    const double g = attr[e] - rep[e] / z;
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
enum { kZ = 0, kLo = 1, kHi = 2, kMean = 4, kKl = 8, kPlogp = 9, kPsum = 10, kScalars = 16 };

// The optimiser's schedule, one device's or the shards': the grid chosen again (and an
// interrupt looked for) every GM_TSNE_GRID_EVERY iterations, the early exaggeration and
// the momentum switch, the KL every GM_TSNE_COST_EVERY iterations and after the last
// (into itercosts and the result, with a progress report). regrid(), iterate(exaggeration,
// momentum) and cost(&value) do the work.
template <typename Regrid, typename Iterate, typename Cost>
gpuml_status run_schedule(const gm_tsne_run *run, double *itercosts, gpuml_tsne_result *result,
                          const gpuml_options *opt, Regrid regrid, Iterate iterate, Cost cost) {
  int cost_at = 0;
  for (int it = 0; it < run->max_iter; it++) {
    if (it % GM_TSNE_GRID_EVERY == 0) {
      GM_TRY(regrid());
      if (gm_interrupted(opt))
        return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted at iteration %d", it);
    }
    const double exaggeration = it < run->stop_lying_iter ? run->exaggeration : 1.0;
    const double momentum = it < run->mom_switch_iter ? run->momentum : run->final_momentum;
    GM_TRY(iterate(exaggeration, momentum));
    if ((it + 1) % GM_TSNE_COST_EVERY == 0 || it + 1 == run->max_iter) {
      double value;
      GM_TRY(cost(&value));
      if (itercosts) itercosts[cost_at] = value;
      cost_at++;
      if (result) {
        result->kl = value;
        result->iterations_done = it + 1;
      }
      gm_progress(opt, "tsne", it + 1, run->max_iter);
      if (gm_interrupted(opt))
        return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted at iteration %d",
                       it + 1);
    }
  }
  return GPUML_OK;
}

struct TsneGpu {
  Context &ctx;
  int64_t n = 0, nnz = 0;
  // The rows this optimiser moves (attraction, repulsion, update): all of them, or one
  // device's share of a fit split over devices (TsneShards); P holds these rows only.
  int64_t first = 0, last = -1;
  int D = 2;
  double df = 1;       // degrees of freedom of the kernel
  int64_t charged = 0; // points that repel and count in Z: all (a fit) or the fixed ones
  int64_t fixed = 0;   // set before init() for a placement: the fixed points (0: a fit)
  bool heavy = false;  // df != 1: the kernel's own formulas; a separate kernel for Z (FFT)
  gpuml_tsne_method method = GPUML_TSNE_EXACT;
  int64_t *row = nullptr;
  int32_t *col = nullptr;
  double *val = nullptr;
  bool p_on_device = false;  // row, col, val are a resident P's (not this call's)
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
  double *weight = nullptr, *part_sums = nullptr;
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

  // Complex grids of the FFT channels (see fft_grids() in core/cpu/tsne_cpu.c): heavy
  // tails give Z's channel a grid of its own, and the kernel two spectra.
  int grids() const { return heavy ? (D + 2) / 2 + 1 : (D + 3) / 2; }
  int kernels() const { return heavy ? 2 : 1; }

  // Parts of boxes when they are fewer than kSpreadBlocks: at most 2 kSpreadBlocks,
  // each with its nodes' D + 2 channel sums.
  size_t part_sums_count() const {
    return (size_t)2 * kSpreadBlocks * ipow64(GM_TSNE_NODES, D) * (D + 2);
  }

  // P's 64-bit columns per upload: the buffer grows with P up to kColumnChunk.
  int64_t column_chunk() const { return nnz < kColumnChunk ? nnz : kColumnChunk; }

  size_t grid_bytes(int fft_size) const {
    return (size_t)ipow64(fft_size, D) * sizeof(cufftComplex) * (grids() + kernels());
  }

  size_t bytes_needed() const {
    // P (row pointers, 32-bit columns, values) and the buffer its columns pass through,
    // unless P is on the device already
    size_t b = p_on_device ? 0 : (size_t)(last - first + 1) * 8 + (size_t)nnz * 12 + (size_t)column_chunk() * 8;
    b += (size_t)n * D * 8 * 5 + (size_t)n * 8 + (size_t)kReduceBlocks * 8 * 4 + 1024;
    if (method == GPUML_TSNE_EXACT) {
      b += (size_t)chunks * n * 8 * (1 + D);
    } else {
      // (the FFT grids are added as they grow: use_grid())
      const size_t nbox = (size_t)ipow64(max_boxes, D);
      b += nbox * 8 + (size_t)n * (16 + D * GM_TSNE_NODES * 8) + part_sums_count() * 8;
      b += sort_bytes;
    }
    return b;
  }

  // P's rows first .. last - 1 (all when last < 0): from the host (uploaded here), or
  // from a P kept on a device (P->resident: used in place when this optimiser takes all
  // its rows on its device, else its rows copied from there).
  gpuml_status init(const gm_csr *P, int64_t n_, int dims, gpuml_tsne_method m, double df_) {
    n = n_;
    if (last < 0) first = 0, last = n;
    int device = 0;
    GM_TRY(ctx.check(cudaGetDevice(&device), "cudaGetDevice"));
    D = dims;
    df = df_;
    heavy = df != 1.0;
    charged = fixed > 0 ? fixed : n;
    method = m;
    const DeviceCsr *resident = (const DeviceCsr *)P->resident;
    const bool copy_resident =
        resident && (first != 0 || last != n || resident->device != device);
    p_on_device = resident && !copy_resident;
    int64_t e_first = 0;  // the first entry of P's rows first .. last - 1
    if (copy_resident) {
      int64_t bounds[2];
      GM_TRY(ctx.check(cudaMemcpy(&bounds[0], resident->row + first, 8, cudaMemcpyDefault),
                       "reading P's rows"));
      GM_TRY(ctx.check(cudaMemcpy(&bounds[1], resident->row + last, 8, cudaMemcpyDefault),
                       "reading P's rows"));
      e_first = bounds[0];
      nnz = bounds[1] - bounds[0];
    } else if (!resident) {
      e_first = P->row[first];
      nnz = P->row[last] - e_first;
    } else {
      nnz = resident->nnz;
    }
    if (method == GPUML_TSNE_EXACT && fixed > 0) {
      // a placement: the columns (fixed points) split by their count alone, so that a
      // new point's sums, and its place, do not depend on the other new points
      chunks = (fixed + kExactRows - 1) / kExactRows;
      if (chunks > 64) chunks = 64;
      chunk = (fixed + chunks - 1) / chunks;
    } else if (method == GPUML_TSNE_EXACT) {
      const int64_t row_blocks = (n + kExactRows - 1) / kExactRows;
      chunks = (kExactTargetBlocks + row_blocks - 1) / row_blocks;
      if (chunks > 64) chunks = 64;
      if (chunks > (n + kExactRows - 1) / kExactRows) chunks = (n + kExactRows - 1) / kExactRows;
      if (chunks < 1) chunks = 1;
      chunk = (n + chunks - 1) / chunks;
    } else {
      max_boxes = gm_tsne_grid_boxes_within(INFINITY, kFftMaxSize[D - 1]);
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
    if (p_on_device) {
      row = resident->row;
      col = resident->col;
      val = resident->val;
    } else if (copy_resident) {
      // this shard's rows, from the device that holds P (directly where the two have
      // peer access, else through the host)
      const int64_t rows = last - first;
      GM_TRY(ctx.alloc(&row, (size_t)rows + 1, "P (rows)"));
      GM_TRY(ctx.alloc(&col, (size_t)nnz, "P (columns)"));
      GM_TRY(ctx.alloc(&val, (size_t)nnz, "P (values)"));
      GM_TRY(ctx.check(cudaMemcpyPeerAsync(row, device, resident->row + first, resident->device,
                                           ((size_t)rows + 1) * 8, ctx.stream()), "copying P"));
      rebase_kernel<<<grid_1d(rows + 1, kThreads), kThreads, 0, ctx.stream()>>>(row, rows + 1,
                                                                              e_first);
      GM_TRY(ctx.launched("P's rows"));
      GM_TRY(ctx.check(cudaMemcpyPeerAsync(col, device, resident->col + e_first, resident->device,
                                           (size_t)nnz * 4, ctx.stream()), "copying P"));
      GM_TRY(ctx.check(cudaMemcpyPeerAsync(val, device, resident->val + e_first, resident->device,
                                           (size_t)nnz * 8, ctx.stream()), "copying P"));
    } else {
      // the rows' offsets from their first entry's
      const int64_t rows = last - first;
      const int64_t *h_col = P->col + e_first;
      int64_t *h_row = (int64_t *)gm_alloc((size_t)rows + 1, sizeof(int64_t));
      if (!h_row) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate P's rows");
      for (int64_t i = 0; i <= rows; i++) h_row[i] = P->row[first + i] - e_first;
      gpuml_status st = ctx.alloc(&row, (size_t)rows + 1, "P (rows)");
      if (!st) st = ctx.check(cudaMemcpyAsync(row, h_row, ((size_t)rows + 1) * 8,
                                              cudaMemcpyHostToDevice, ctx.stream()), "copying P");
      if (!st) st = ctx.sync("copying P");  // before h_row goes
      free(h_row);
      GM_TRY(st);
      GM_TRY(ctx.alloc(&col, (size_t)nnz, "P (columns)"));
      GM_TRY(ctx.alloc(&val, (size_t)nnz, "P (values)"));
      // the columns narrowed to 32 bits on the device, through a bounded buffer (a host
      // loop over the 10^8 entries of a million points took a good part of a second)
      const int64_t chunk = column_chunk();
      int64_t *c64 = nullptr;
      GM_TRY(ctx.alloc(&c64, (size_t)chunk, "P's columns"));
      for (int64_t e0 = 0; e0 < nnz; e0 += chunk) {
        const int64_t len = nnz - e0 < chunk ? nnz - e0 : chunk;
        GM_TRY(ctx.check(cudaMemcpyAsync(c64, h_col + e0, (size_t)len * 8, cudaMemcpyHostToDevice,
                                         ctx.stream()), "copying P"));
        narrow_kernel<<<grid_1d(len, kThreads), kThreads, 0, ctx.stream()>>>(c64, len, col + e0);
        GM_TRY(ctx.launched("P's columns"));
      }
      GM_TRY(ctx.check(cudaMemcpyAsync(val, P->val + e_first, (size_t)nnz * 8,
                                       cudaMemcpyHostToDevice, ctx.stream()), "copying P"));
    }
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
      GM_TRY(ctx.alloc(&part_sums, part_sums_count(), "the boxes' parts"));
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
      b = gm_tsne_grid_boxes_within(lohi[1] - lohi[0], kFftMaxSize[D - 1]);
      if (b > max_boxes) b = max_boxes;
      // An automatic grid larger than the ones allocated must fit in what the budget has
      // left, with as much again for cuFFT's work area; otherwise the largest grid that
      // does (wider boxes: a coarser interpolation, as at the size caps), down to a 32-point
      // side, below which use_grid's clear error is better. The smaller grids of the way
      // stay allocated, so growth stops near the budget, not past it. A grid the caller
      // fixes is taken as it is (use_grid fails clearly when it does not fit).
      while (gm_tsne_fft_size(b) > 32 && (size_t)ipow64(gm_tsne_fft_size(b), D) > grid_cells &&
             used + 2 * grid_bytes(gm_tsne_fft_size(b)) > ctx.budget())
        b--;
    }
    if (b > max_boxes) b = max_boxes;
    return use_grid(b);
  }

  gpuml_status use_grid(int b) {
    boxes = b;
    size = gm_tsne_fft_size(b);
    const size_t cells = (size_t)ipow64(size, D);
    if (cells > grid_cells) {  // larger grids as the embedding spreads; the old ones stay
      const size_t bytes = grid_bytes(size);
      if (used + bytes > ctx.budget())
        return gm_fail(GPUML_ERR_NOMEM, "tsne:cuda",
                       "the FFT grid of %d^%d points needs %.1f MB more GPU memory than the budget "
                       "of %.1f MB: free GPU memory, raise gpu_memory_limit or use backend \"cpu\"",
                       size, D, (double)(used + bytes - ctx.budget()) / 1e6, (double)ctx.budget() / 1e6);
      GM_TRY(ctx.alloc(&grid, cells * grids(), "the FFT grids"));
      GM_TRY(ctx.alloc(&kernel, cells * kernels(), "the FFT kernel"));
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
    const int parts = nbox >= kSpreadBlocks ? 1 : (int)((kSpreadBlocks + nbox - 1) / nbox);
    spread_kernel<DD><<<dim3((unsigned)nbox, (unsigned)parts), 32 * kNodes, 0, ctx.stream()>>>(
        y, n, charged, boxes, size, start, end, order, weight, heavy, grid, cells, parts, part_sums);
    GM_TRY(ctx.launched("spreading charges on the grid"));
    if (parts > 1) {
      spread_parts_kernel<DD><<<grid_1d(nbox * kNodes, kThreads), kThreads, 0, ctx.stream()>>>(
          start, end, nbox, parts, part_sums, boxes, size, heavy, grid, cells);
      GM_TRY(ctx.launched("adding the parts of the boxes"));
    }
    kernel_grid_kernel<DD><<<grid_1d(cells, kThreads), kThreads, 0, ctx.stream()>>>(
        size, boxes * GM_TSNE_NODES, boxes, scal, heavy, df, kernel, cells);
    GM_TRY(ctx.launched("the kernel grid"));
    for (int k = 0; k < kernels(); k++)
      GM_TRY(check_fft(ctx, cufftExecC2C(plan_kernel, kernel + k * cells, kernel + k * cells,
                                         CUFFT_FORWARD), "the kernel FFT"));
    GM_TRY(check_fft(ctx, cufftExecC2C(plan_grids, grid, grid, CUFFT_FORWARD), "the grid FFT"));
    const float norm = (float)(1.0 / (double)cells);
    multiply_kernel<<<grid_1d(cells * grids(), kThreads) < 65536u ? grid_1d(cells * grids(), kThreads) : 65536u,
                      kThreads, 0, ctx.stream()>>>(grid, grids(), heavy, kernel, cells, norm);
    GM_TRY(ctx.launched("the convolution"));
    GM_TRY(check_fft(ctx, cufftExecC2C(plan_grids, grid, grid, CUFFT_INVERSE), "the inverse grid FFT"));
    gather_kernel<DD><<<grid_1d(last - first, kThreads), kThreads, 0, ctx.stream()>>>(
        y, n, first, last, boxes, size, key, weight, heavy, grid, cells, zrow, rep);
    return ctx.launched("interpolating the potentials");
  }

  template <int DD>
  gpuml_status exact_repulsion() {
    // a placement's moving points, or the rows of this optimiser
    const int64_t row0 = charged < n ? charged : first, rows = last - row0;
    dim3 g((unsigned)((rows + kExactRows - 1) / kExactRows), (unsigned)chunks);
    exact_kernel<DD><<<g, kExactRows, 0, ctx.stream()>>>(y, n, row0, last, charged, chunk, heavy,
                                                         df, zpart, rpart);
    GM_TRY(ctx.launched("the exact repulsion"));
    exact_combine_kernel<DD><<<grid_1d(rows, kThreads), kThreads, 0, ctx.stream()>>>(
        zpart, rpart, n, row0, last, chunks, zrow, rep);
    return ctx.launched("the exact repulsion");
  }

  // A placement (gm_tsne_place_cpu's steps): repulsion from the fixed points,
  // attraction to the neighbours, the new points' update; no re-centring.
  template <int DD>
  gpuml_status place(const gm_tsne_place_run *run, const gpuml_options *opt) {
    const int64_t moving = n - charged;
    for (int it = 0; it < run->max_iter; it++) {
      if (it % GM_TSNE_GRID_EVERY == 0) {
        if (method == GPUML_TSNE_FFT) GM_TRY(choose_grid(0));
        if (gm_interrupted(opt))
          return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted",
                         "t-SNE transform interrupted at iteration %d", it);
      }
      if (method == GPUML_TSNE_FFT) GM_TRY(fft_repulsion<DD>());
      else GM_TRY(exact_repulsion<DD>());
      GM_TRY(attraction<DD>());
      place_update_kernel<DD><<<grid_1d(moving, kThreads), kThreads, 0, ctx.stream()>>>(
          attr, rep, zrow, n, charged, run->momentum, run->learning_rate, run->max_step_norm,
          uy, gains, y);
      GM_TRY(ctx.launched("the placement's update"));
      if ((it + 1) % GM_TSNE_COST_EVERY == 0 || it + 1 == run->max_iter)
        gm_progress(opt, "transform", it + 1, run->max_iter);
    }
    return GPUML_OK;
  }

  // zrow and rep of the rows first .. last - 1.
  template <int DD>
  gpuml_status repulsion() {
    if (method == GPUML_TSNE_FFT) return fft_repulsion<DD>();
    return exact_repulsion<DD>();
  }

  // Z (scal[kZ]) from zrow of all points.
  gpuml_status z_sum() {
    return reduce(kSum, zrow, n, 0, 1, method == GPUML_TSNE_FFT ? (double)n : 0.0, scal + kZ);
  }

  // zrow, rep and Z (scal[kZ]).
  template <int DD>
  gpuml_status normaliser() {
    GM_TRY(repulsion<DD>());
    return z_sum();
  }

  template <int DD>
  gpuml_status attraction() {
    attraction_kernel<DD><<<grid_1d((last - first) * 32, kThreads), kThreads, 0, ctx.stream()>>>(
        row, col, val, y, n, first, last, heavy, df, attr);
    return ctx.launched("the attraction");
  }

  // sum p log p and sum p over P (on the device: a host loop over 10^8 logarithms took
  // about a second at a million points). zrow and attr serve as space.
  gpuml_status p_rows() {
    p_sums_kernel<<<grid_1d((last - first) * 32, kThreads), kThreads, 0, ctx.stream()>>>(
        row, val, first, last, zrow, attr);
    return ctx.launched("P's sums");
  }

  gpuml_status p_sums_read(double *plogp, double *psum) {
    GM_TRY(reduce(kSum, zrow, n, 0, 1, 0.0, scal + kPlogp));
    GM_TRY(reduce(kSum, attr, n, 0, 1, 0.0, scal + kPsum));
    double h[2];
    GM_TRY(ctx.check(cudaMemcpyAsync(h, scal + kPlogp, sizeof h, cudaMemcpyDeviceToHost, ctx.stream()),
                     "reading P's sums"));
    GM_TRY(ctx.sync("P's sums"));
    *plogp = h[0];
    *psum = h[1];
    return GPUML_OK;
  }

  gpuml_status p_sums(double *plogp, double *psum) {
    GM_TRY(p_rows());
    return p_sums_read(plogp, psum);
  }

  // The KL terms: scal[kKl] = sum p log(1 + d^2); Z in scal[kZ]. Read back with a sync.
  // The KL's terms of the rows first .. last - 1 into `out` (zrow or attr).
  template <int DD>
  gpuml_status kl_rows(double *out) {
    kl_rows_kernel<DD><<<grid_1d((last - first) * 32, kThreads), kThreads, 0, ctx.stream()>>>(
        row, col, val, y, n, first, last, heavy, df, out);
    return ctx.launched("the KL divergence");
  }

  template <int DD>
  gpuml_status kl(double plogp, double psum, double *out) {
    GM_TRY(normaliser<DD>());
    GM_TRY(kl_rows<DD>(zrow));
    return kl_read(zrow, plogp, psum, out);
  }

  // The KL from the terms of all rows in `terms` and Z in scal[kZ] (read back: a sync).
  gpuml_status kl_read(const double *terms, double plogp, double psum, double *out) {
    GM_TRY(reduce(kSum, terms, n, 0, 1, 0.0, scal + kKl));
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

  // The step of the rows first .. last - 1 (Z in scal[kZ]).
  template <int DD>
  gpuml_status step(double exaggeration, double momentum, double learning_rate,
                    double max_step_norm) {
    GM_TRY(attraction<DD>());
    update_kernel<DD><<<grid_1d(last - first, kThreads), kThreads, 0, ctx.stream()>>>(
        attr, rep, n, first, last, exaggeration, scal + kZ, momentum, learning_rate,
        max_step_norm, uy, gains, y);
    return ctx.launched("the update");
  }

  // The embedding's mean subtracted from all points.
  template <int DD>
  gpuml_status recentre() {
    GM_TRY(reduce(kSum, y, n, n, DD, 0.0, scal + kMean));
    subtract_mean_kernel<<<grid_1d(n * DD, kThreads), kThreads, 0, ctx.stream()>>>(y, n, DD, scal + kMean);
    return ctx.launched("re-centring");
  }

  template <int DD>
  gpuml_status iterate(double exaggeration, double momentum, double learning_rate,
                       double max_step_norm) {
    GM_TRY(normaliser<DD>());
    GM_TRY(step<DD>(exaggeration, momentum, learning_rate, max_step_norm));
    return recentre<DD>();
  }

  template <int DD>
  gpuml_status optimise(const gm_tsne_run *run, double *itercosts, gpuml_tsne_result *result,
                        const gpuml_options *opt, double plogp, double psum) {
    return run_schedule(
        run, itercosts, result, opt,
        [&]() { return method == GPUML_TSNE_FFT ? choose_grid(0) : GPUML_OK; },
        [&](double exaggeration, double momentum) {
          return iterate<DD>(exaggeration, momentum, run->learning_rate, run->max_step_norm);
        },
        [&](double *value) { return kl<DD>(plogp, psum, value); });
  }
};

__global__ void fill_kernel(double *__restrict__ x, int64_t count, double v) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < count) x[e] = v;
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

// ---------------------------------------------------------------------------------------
// A fit over several devices (or logical shards on one: GPUML_SHARDS). Shard s moves the
// rows gm_shard_start(n, count, s) .. gm_shard_start(n, count, s + 1) - 1 (its part of P,
// the attraction, the exact repulsion or the FFT's interpolation back to the points, the
// update) on device devices[s % ndevices], and holds every point's place; each spreads
// all points on its own FFT grid (the grid is small; its sum over the points would have
// to be shared otherwise). One host thread queues all shards' work, each on its device's
// stream: after the repulsion every shard sends its rows of zrow to the others, after the
// update its rows of y (peer copies, ordered by events, through the host where the
// devices have no peer access). Each shard then holds the arrays one device holds at the
// same point, and every sum (Z, the mean, the KL) runs over the same array in the same
// order: the fit is the single device's, bit for bit.
//
// An exchange reads each shard's rows on its device while the others copy them: a shard
// writes its rows of an array again only after a later exchange or barrier, at which it
// waits for every other shard's queue up to there (their copies included).
struct TsneShards {
  int count = 0;
  int64_t n = 0;
  std::vector<gpuml_options> opts;
  std::vector<int> device;
  std::vector<std::unique_ptr<Context>> ctx;
  std::vector<std::unique_ptr<TsneGpu>> t;
  std::vector<cudaEvent_t> ready;

  TsneShards() = default;
  TsneShards(const TsneShards &) = delete;
  TsneShards &operator=(const TsneShards &) = delete;
  // Last opened, first closed: each Context makes current again the device it found.
  ~TsneShards() {
    for (int s = (int)ctx.size() - 1; s >= 0; s--) {
      cudaSetDevice(device[s]);
      if (s < (int)t.size()) t[s].reset();
      ctx[s].reset();
    }
  }

  gpuml_status use(int s) { return ctx[s]->check(cudaSetDevice(device[s]), "cudaSetDevice"); }

  gpuml_status open(const gm_shard_plan &plan, const gm_csr *P, const gm_tsne_run *run,
                    const double *y0, const gpuml_options *opt) {
    count = plan.count;
    n = run->n;
    const size_t nd = (size_t)n * run->dims;
    opts.assign(count, *opt);
    device.resize(count);
    ready.assign(count, nullptr);
    for (int s = 0; s < count; s++) {
      device[s] = plan.devices[s % plan.ndevices];
      opts[s].device = device[s];
      ctx.emplace_back(new Context("tsne:cuda"));
      GM_TRY(ctx[s]->init(&opts[s], 0));
      GM_TRY(ctx[s]->new_event(&ready[s]));
      t.emplace_back(new TsneGpu(*ctx[s]));
      TsneGpu &ts = *t[s];
      ts.first = gm_shard_start(n, count, s);
      ts.last = gm_shard_start(n, count, s + 1);
      GM_TRY(ts.init(P, n, run->dims, run->method, run->df));
      cudaStream_t st = ctx[s]->stream();
      GM_TRY(ctx[s]->check(cudaMemcpyAsync(ts.y, y0, nd * 8, cudaMemcpyHostToDevice, st),
                           "copying the initial embedding"));
      GM_TRY(ctx[s]->check(cudaMemsetAsync(ts.uy, 0, nd * 8, st), "clearing the momentum"));
      fill_kernel<<<grid_1d((int64_t)nd, kThreads), kThreads, 0, st>>>(ts.gains, (int64_t)nd, 1.0);
      GM_TRY(ctx[s]->launched("initialising the gains"));
    }
    // Direct copies between distinct devices where the hardware allows (kept enabled:
    // a property of the process, as for the other calls that use these devices).
    for (int a = 0; a < count; a++)
      for (int b = 0; b < count; b++) {
        if (device[a] == device[b]) continue;
        int can = 0;
        GM_TRY(use(a));
        if (cudaDeviceCanAccessPeer(&can, device[a], device[b]) == cudaSuccess && can)
          cudaDeviceEnablePeerAccess(device[b], 0);  // "already enabled" is fine
        cudaGetLastError();
      }
    return sync_all("opening the shards");
  }

  gpuml_status sync_all(const char *what) {
    for (int s = 0; s < count; s++) GM_TRY(ctx[s]->sync(what));
    return GPUML_OK;
  }

  // Every shard's queue waits for all the others' up to here.
  gpuml_status barrier() {
    for (int s = 0; s < count; s++) {
      GM_TRY(use(s));
      GM_TRY(ctx[s]->check(cudaEventRecord(ready[s], ctx[s]->stream()), "cudaEventRecord"));
    }
    for (int d = 0; d < count; d++) {
      GM_TRY(use(d));
      for (int s = 0; s < count; s++)
        if (s != d)
          GM_TRY(ctx[d]->check(cudaStreamWaitEvent(ctx[d]->stream(), ready[s], 0),
                               "cudaStreamWaitEvent"));
    }
    return GPUML_OK;
  }

  // Every shard's rows of the array (cols columns of n) to every other shard.
  gpuml_status exchange(double *TsneGpu::*array, int cols) {
    GM_TRY(barrier());
    for (int d = 0; d < count; d++) {
      GM_TRY(use(d));
      for (int s = 0; s < count; s++) {
        const int64_t first = t[s]->first, rows = t[s]->last - first;
        if (s == d || rows == 0) continue;
        for (int c = 0; c < cols; c++)
          GM_TRY(ctx[d]->check(cudaMemcpyPeerAsync(t[d].get()->*array + first + c * n, device[d],
                                                   t[s].get()->*array + first + c * n, device[s],
                                                   (size_t)rows * 8, ctx[d]->stream()),
                               "copying between devices"));
      }
    }
    return GPUML_OK;
  }

  template <int DD>
  gpuml_status repulsion_all() {
    for (int s = 0; s < count; s++) {
      GM_TRY(use(s));
      GM_TRY(t[s]->repulsion<DD>());
    }
    return exchange(&TsneGpu::zrow, 1);
  }

  template <int DD>
  gpuml_status optimise(const gm_tsne_run *run, double *itercosts, gpuml_tsne_result *result,
                        const gpuml_options *opt) {
    // P's constant sums (zrow and attr serve as space, as on one device)
    for (int s = 0; s < count; s++) {
      GM_TRY(use(s));
      GM_TRY(t[s]->p_rows());
    }
    GM_TRY(exchange(&TsneGpu::zrow, 1));
    GM_TRY(exchange(&TsneGpu::attr, 1));
    double plogp, psum;
    GM_TRY(use(0));
    GM_TRY(t[0]->p_sums_read(&plogp, &psum));
    GM_TRY(sync_all("P's sums"));
    GM_TRY(run_schedule(
        run, itercosts, result, opt,
        [&]() {
          // every shard holds the same places, so all choose the same grid
          if (t[0]->method == GPUML_TSNE_FFT)
            for (int s = 0; s < count; s++) {
              GM_TRY(use(s));
              GM_TRY(t[s]->choose_grid(0));
            }
          return GPUML_OK;
        },
        [&](double exaggeration, double momentum) {
          GM_TRY(repulsion_all<DD>());
          for (int s = 0; s < count; s++) {
            GM_TRY(use(s));
            GM_TRY(t[s]->z_sum());
            GM_TRY(t[s]->step<DD>(exaggeration, momentum, run->learning_rate,
                                  run->max_step_norm));
          }
          GM_TRY(exchange(&TsneGpu::y, DD));
          GM_TRY(barrier());  // the copies of y read before the mean is taken off
          for (int s = 0; s < count; s++) {
            GM_TRY(use(s));
            GM_TRY(t[s]->recentre<DD>());
          }
          return GPUML_OK;
        },
        [&](double *value) {
          GM_TRY(repulsion_all<DD>());
          GM_TRY(use(0));
          GM_TRY(t[0]->z_sum());
          for (int s = 0; s < count; s++) {
            GM_TRY(use(s));
            GM_TRY(t[s]->kl_rows<DD>(t[s]->attr));
          }
          GM_TRY(exchange(&TsneGpu::attr, 1));
          GM_TRY(use(0));
          return t[0]->kl_read(t[0]->attr, plogp, psum, value);
        }));
    return sync_all("the t-SNE iterations");
  }
};

gpuml_status optimize_sharded(const gm_shard_plan &plan, const gm_csr *P, const gm_tsne_run *run,
                              double *y, double *itercosts, gpuml_tsne_result *result,
                              const gpuml_options *opt) {
  TsneShards sh;
  GM_TRY(sh.open(plan, P, run, y, opt));
  switch (run->dims) {
    case 1: GM_TRY(sh.optimise<1>(run, itercosts, result, opt)); break;
    case 2: GM_TRY(sh.optimise<2>(run, itercosts, result, opt)); break;
    default: GM_TRY(sh.optimise<3>(run, itercosts, result, opt)); break;
  }
  GM_TRY(sh.use(0));
  Context &c0 = *sh.ctx[0];
  GM_TRY(c0.check(cudaMemcpyAsync(y, sh.t[0]->y, (size_t)run->n * run->dims * 8,
                                  cudaMemcpyDeviceToHost, c0.stream()),
                  "copying the embedding"));
  return c0.sync("copying the embedding");
}

}  // namespace
}  // namespace gm

using namespace gm;

extern "C" gpuml_status gm_cuda_tsne_optimize(const gm_csr *P, const gm_tsne_run *run,
                                              double *y, double *itercosts,
                                              gpuml_tsne_result *result,
                                              const gpuml_options *opt) {
  gm_shard_plan plan;
  GM_TRY(gm_shard_plan_make(opt, run->n, &plan));
  if (plan.count > 1) return optimize_sharded(plan, P, run, y, itercosts, result, opt);
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  TsneGpu t(ctx);
  GM_TRY(t.init(P, run->n, run->dims, run->method, run->df));
  const size_t nd = (size_t)run->n * run->dims;
  GM_TRY(ctx.check(cudaMemcpyAsync(t.y, y, nd * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the initial embedding"));
  GM_TRY(ctx.check(cudaMemsetAsync(t.uy, 0, nd * 8, ctx.stream()), "clearing the momentum"));
  fill_kernel<<<grid_1d((int64_t)nd, kThreads), kThreads, 0, ctx.stream()>>>(t.gains, (int64_t)nd, 1.0);
  GM_TRY(ctx.launched("initialising the gains"));
  double plogp, psum;
  GM_TRY(t.p_sums(&plogp, &psum));
  switch (run->dims) {
    case 1: GM_TRY(run_optimiser<1>(t, run, itercosts, result, opt, plogp, psum)); break;
    case 2: GM_TRY(run_optimiser<2>(t, run, itercosts, result, opt, plogp, psum)); break;
    default: GM_TRY(run_optimiser<3>(t, run, itercosts, result, opt, plogp, psum)); break;
  }
  GM_TRY(ctx.check(cudaMemcpyAsync(y, t.y, nd * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                   "copying the embedding"));
  return ctx.sync("copying the embedding");
}

extern "C" int64_t gm_cuda_tsne_exact_max_n(int dims, double df) {
  (void)df;  // (the heavy-tailed exact kernel's pow has not been timed on a GPU yet)
  return dims == 3 ? GM_TSNE_EXACT_MAX_N_3D : GM_TSNE_EXACT_MAX_N;
}

extern "C" gpuml_status gm_cuda_tsne_place(const gm_csr *P, const gm_tsne_place_run *run,
                                           double *y, const gpuml_options *opt) {
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  TsneGpu t(ctx);
  t.fixed = run->n_fixed;  // only the points from n_fixed on move, and only the fixed repel
  GM_TRY(t.init(P, run->n, run->dims, run->method, run->df));
  const size_t nd = (size_t)run->n * run->dims;
  GM_TRY(ctx.check(cudaMemcpyAsync(t.y, y, nd * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the embedding"));
  GM_TRY(ctx.check(cudaMemsetAsync(t.uy, 0, nd * 8, ctx.stream()), "clearing the momentum"));
  fill_kernel<<<grid_1d((int64_t)nd, kThreads), kThreads, 0, ctx.stream()>>>(t.gains, (int64_t)nd, 1.0);
  GM_TRY(ctx.launched("initialising the gains"));
  switch (run->dims) {
    case 1: GM_TRY(t.place<1>(run, opt)); break;
    case 2: GM_TRY(t.place<2>(run, opt)); break;
    default: GM_TRY(t.place<3>(run, opt)); break;
  }
  GM_TRY(ctx.check(cudaMemcpyAsync(y, t.y, nd * 8, cudaMemcpyDeviceToHost, ctx.stream()),
                   "copying the places"));
  return ctx.sync("copying the places");
}

extern "C" gpuml_status gm_cuda_tsne_gradient(const gm_csr *P, const double *y, int64_t n,
                                              int dims, gpuml_tsne_method method, int boxes,
                                              double exaggeration, double df, double *grad,
                                              double *z, const gpuml_options *opt) {
  if (dims < 1 || dims > 3) return gm_fail(GPUML_ERR_ARG, "tsne:badDims", "dims = %d must be 1, 2 or 3", dims);
  Context ctx("tsne:cuda");
  GM_TRY(ctx.init(opt, 0));
  TsneGpu t(ctx);
  GM_TRY(t.init(P, n, dims, method, df));
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
