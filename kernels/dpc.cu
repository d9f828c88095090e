// gm_cuda_dpc_density() and gm_cuda_dpc_border(): the passes of density peaks over pairs
// on the GPU, with the same exact decisions as the CPU (core/dpc_grid.c,
// core/dpc_tiles.c), so that both backends give the same answers:
//  - d <= GM_DPC_GRID_MAX_DIM: the cell index of core's geometry (points sorted by cell)
//    is built on the device (sort_index) and walked as on the CPU (kernels/dpc_grid.cuh):
//    the rows of cells within dc for the cutoff density and the halo (when core's rule
//    says so), rings of cells with pruning for delta.
//  - otherwise (and for the Gaussian density at any d), all pairs: a direct kernel for
//    d < 16 (one thread per point, blocks of points through shared memory, exact fp64),
//    cuBLAS DGEMM tiles for d >= 16 screened against the thresholds and recomputed
//    exactly within the screening margin.
// The grid passes are kernels/dpc_grid.cuh, the all-pairs passes kernels/dpc_pairs.cuh.
// Every pass writes per point from one thread or one block, in a fixed order: no float
// atomics, so results are reproducible. The data and the O(n) arrays stay resident on
// the device; only the GEMM tiles are sized from the memory budget.
#include <cub/cub.cuh>
#include "gpuml_cuda.h"
#include "distance_tiles.cuh"
#include "dpc.h"

namespace gm {
namespace {

constexpr int kPassThreads = 256;        // grid kernels and GEMM epilogues
constexpr int kDirectThreads = 128;      // direct pair kernel (shared tile per block)
constexpr int64_t kGridChunk = 1 << 18;  // points per launch between interrupt checks
constexpr int64_t kGridCellChunk = 1 << 14;  // cells per launch of the cutoff density
constexpr int64_t kDirectChunk = 1 << 17;
constexpr int64_t kQueryTile = 4096;     // GEMM tile columns
// A part of the Gaussian density over several devices starts at a multiple of
// GM_DPC_GAUSS_PART_ROWS, so that its GEMM tiles are one device's (kQueryTile or its
// halves, from the part's first row; the tiles then need the same memory budget).
static_assert(GM_DPC_GAUSS_PART_ROWS % kQueryTile == 0, "query tiles must divide a part");
constexpr int64_t kRefTile = 32768;      // GEMM tile rows

enum Mode { kCount = 0, kGauss = 1, kDelta = 2, kBorder = 3 };

struct PassArgs {
  double cut = 0;                   // kCount, kGauss, kBorder: s < cut
  double inv_dc2 = 0;               // kGauss
  const double *rho = nullptr;      // kDelta, kBorder (by point index)
  const int64_t *cluster = nullptr; // kBorder
  double *value = nullptr;          // rho, delta_sq or border, by point index
  int64_t *index = nullptr;         // kDelta: the nearest denser point
};

struct GridDev {
  gm_dpc_geom geom;
  int64_t n = 0, ncells = 0;
  const int64_t *start = nullptr, *cell = nullptr, *order = nullptr;
  const double *coords = nullptr;
  const int64_t *run_label = nullptr, *run_end = nullptr;  // the halo's runs
  const double *run_max = nullptr;
};

__device__ __forceinline__ bool above(double rho_j, int64_t j, double rho_i, int64_t i) {
  return rho_j > rho_i || (rho_j == rho_i && j < i);
}

// ---------------------------------------------------------------------------------------
// All pairs, GEMM form (d >= 16): G (rn x qn) = -2 p_r . p_q from cuBLAS; one block per
// query column folds its rn values into the query's running value (count, Gaussian sum,
// border density; the nearest denser point has a kernel of its own below).

template <int Mode>
__global__ void __launch_bounds__(kPassThreads)
    gemm_fold_kernel(const double *__restrict__ G, int64_t rn, int64_t r0, int64_t q0,
                     const double *__restrict__ norm, const double *__restrict__ X, int64_t d,
                     double slack, PassArgs a, int fresh) {
  __shared__ double red_v[kPassThreads];
  const int tid = threadIdx.x;
  const int64_t b = blockIdx.x, i = q0 + b;
  const double *col = G + (size_t)b * (size_t)rn;
  const double ni = norm[i];
  const double *xi = X + (size_t)i * (size_t)d;
  const double rho_i = Mode == kBorder ? a.rho[i] : 0;
  const int64_t cl_i = Mode == kBorder ? a.cluster[i] : 0;
  int64_t count = 0;
  double acc = Mode == kBorder && !fresh ? a.value[i] : 0;
  for (int64_t r = tid; r < rn; r += kPassThreads) {
    const int64_t j = r0 + r;
    if (Mode == kBorder && (a.cluster[j] == cl_i || (rho_i + a.rho[j]) / 2 <= acc)) continue;
    if ((Mode == kCount || Mode == kGauss) && j == i) continue;
    const double nj = norm[j];
    const double *xj = X + (size_t)j * (size_t)d;
    double s = gemm_value<double, double>(col[r], nj, ni, xj, xi, d);
    const double margin = slack * (nj + ni);
    if (Mode == kCount) {
      if (fabs(s - a.cut) <= margin) s = exact_sqdist(xj, xi, d);
      count += s < a.cut;
    }
    // the Gaussian: the pairs with s < cut (all when cut is INFINITY), decided exactly
    if (Mode == kGauss && (fabs(s - a.cut) <= margin ? exact_sqdist(xj, xi, d) : s) < a.cut)
      acc += exp(-s * a.inv_dc2);
    if (Mode == kBorder) {
      if (fabs(s - a.cut) <= margin) s = exact_sqdist(xj, xi, d);
      if (s < a.cut) acc = (rho_i + a.rho[j]) / 2;
    }
  }
  // Fixed-order tree reductions: the same result on every run.
  red_v[tid] = Mode == kCount ? (double)count : acc;
  __syncthreads();
  for (int w = kPassThreads / 2; w > 0; w >>= 1) {
    if (tid < w) {
      const double v2 = red_v[tid + w];
      if (Mode == kCount || Mode == kGauss) red_v[tid] += v2;
      if (Mode == kBorder && v2 > red_v[tid]) red_v[tid] = v2;
    }
    __syncthreads();
  }
  if (tid != 0) return;
  if (Mode == kCount || Mode == kGauss) a.value[i] = (fresh ? 0 : a.value[i]) + red_v[0];
  if (Mode == kBorder) a.value[i] = red_v[0];
}

// The nearest denser point from a GEMM tile, in two sweeps of the column: the screened
// values give an upper bound of the exact minimum (value + margin), then only the pairs
// that may reach it are recomputed exactly.
__global__ void __launch_bounds__(kPassThreads)
    gemm_delta_kernel(const double *__restrict__ G, int64_t rn, int64_t r0, int64_t q0,
                      const double *__restrict__ norm, const double *__restrict__ X, int64_t d,
                      double slack, PassArgs a, int fresh) {
  __shared__ double red_v[kPassThreads];
  __shared__ int64_t red_j[kPassThreads];
  const int tid = threadIdx.x;
  const int64_t b = blockIdx.x, i = q0 + b;
  const double *col = G + (size_t)b * (size_t)rn;
  const double ni = norm[i];
  const double *xi = X + (size_t)i * (size_t)d;
  const double rho_i = a.rho[i];
  const double inf = __longlong_as_double(0x7ff0000000000000LL);
  const double prev = fresh ? inf : a.value[i];
  const int64_t prev_j = fresh ? -1 : a.index[i];
  double bound = prev;
  for (int64_t r = tid; r < rn; r += kPassThreads) {
    const int64_t j = r0 + r;
    if (!above(a.rho[j], j, rho_i, i)) continue;
    const double nj = norm[j];
    const double s = gemm_value<double, double>(col[r], nj, ni, X + (size_t)j * (size_t)d, xi, d);
    const double up = s + slack * (nj + ni);
    if (up < bound) bound = up;
  }
  red_v[tid] = bound;
  __syncthreads();
  for (int w = kPassThreads / 2; w > 0; w >>= 1) {
    if (tid < w && red_v[tid + w] < red_v[tid]) red_v[tid] = red_v[tid + w];
    __syncthreads();
  }
  bound = red_v[0];
  __syncthreads();
  double best = prev;
  int64_t best_j = prev_j;
  for (int64_t r = tid; r < rn; r += kPassThreads) {
    const int64_t j = r0 + r;
    if (!above(a.rho[j], j, rho_i, i)) continue;
    const double nj = norm[j];
    const double *xj = X + (size_t)j * (size_t)d;
    const double s = gemm_value<double, double>(col[r], nj, ni, xj, xi, d);
    if (s - slack * (nj + ni) > bound) continue;
    const double e = exact_sqdist(xj, xi, d);
    if (e < best || (e == best && j < best_j)) {
      best = e;
      best_j = j;
    }
  }
  red_v[tid] = best;
  red_j[tid] = best_j;
  __syncthreads();
  for (int w = kPassThreads / 2; w > 0; w >>= 1) {
    if (tid < w) {
      const double v2 = red_v[tid + w];
      const int64_t j2 = red_j[tid + w];
      if (v2 < red_v[tid] || (v2 == red_v[tid] && j2 >= 0 && (red_j[tid] < 0 || j2 < red_j[tid]))) {
        red_v[tid] = v2;
        red_j[tid] = j2;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {
    a.value[i] = red_v[0];
    a.index[i] = red_j[0];
  }
}

// ---------------------------------------------------------------------------------------
// Host side

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

const char *stage_of(int mode) {
  return mode == kDelta ? "dpc delta" : mode == kBorder ? "dpc halo" : "dpc rho";
}

gpuml_status interrupted(Context &ctx, const gpuml_options *opt) {
  if (gm_interrupted(opt)) {
    ctx.sync("density peaks");
    return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "density peaks interrupted");
  }
  return GPUML_OK;
}

#include "dpc_grid.cuh"

#include "dpc_pairs.cuh"

template <typename T>
gpuml_status gather(Context &ctx, const T *in, const int64_t *order, int64_t n, T *out) {
  gather_kernel<T><<<grid_1d(n, 256) < 4096u ? grid_1d(n, 256) : 4096u, 256, 0, ctx.stream()>>>(
      in, order, n, out);
  return ctx.launched("reordering by cell");
}

template <typename T>
gpuml_status to_device(Context &ctx, T **dev, const T *host, int64_t n, const char *what) {
  GM_TRY(ctx.alloc(dev, (size_t)n, what));
  return ctx.check(cudaMemcpyAsync(*dev, host, (size_t)n * sizeof(T), cudaMemcpyHostToDevice,
                                   ctx.stream()),
                   what);
}

template <typename T>
gpuml_status to_host(Context &ctx, T *host, const T *dev, int64_t n, const char *what) {
  return ctx.check(cudaMemcpyAsync(host, dev, (size_t)n * sizeof(T), cudaMemcpyDeviceToHost,
                                   ctx.stream()),
                   what);
}

// The cell index of `plan` (core's geometry) built on the device: keys, a stable radix
// sort, the cell starts and the points gathered into cell order; no host round trip but
// the data's upload.
gpuml_status sort_index(Context &ctx, const double *x, const gm_dpc_grid *plan, GridDev &g) {
  const int64_t n = plan->n, dim = plan->geom.dim;
  g.geom = plan->geom;
  g.n = n;
  g.ncells = plan->ncells;
  double *x_d = nullptr, *coords = nullptr;
  int64_t *key_in = nullptr, *key = nullptr, *row_in = nullptr, *order = nullptr,
          *start = nullptr;
  GM_TRY(to_device(ctx, &x_d, x, n * dim, "copying the points to the GPU"));
  GM_TRY(ctx.alloc(&key_in, (size_t)n, "the cells of the points"));
  GM_TRY(ctx.alloc(&row_in, (size_t)n, "the cells of the points"));
  GM_TRY(ctx.alloc(&key, (size_t)n, "the index"));
  GM_TRY(ctx.alloc(&order, (size_t)n, "the index"));
  GM_TRY(ctx.alloc(&start, (size_t)plan->ncells + 1, "the index"));
  GM_TRY(ctx.alloc(&coords, (size_t)(n * dim), "the index's points"));
  const unsigned blocks = grid_1d(n + 1, 256) < 8192u ? grid_1d(n + 1, 256) : 8192u;
  cell_key_kernel<<<blocks, 256, 0, ctx.stream()>>>(plan->geom, x_d, n, key_in, row_in);
  GM_TRY(ctx.launched("the cells of the points"));
  int bits = 1;  // the cell ids lie in 0 .. ncells - 1
  while (bits < 63 && ((int64_t)1 << bits) < plan->ncells) bits++;
  size_t temp_bytes = 0;
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, key_in, key, row_in, order,
                                                   n, 0, bits, ctx.stream()),
                   "sorting the points by cell (cub::DeviceRadixSort)"));
  unsigned char *temp = nullptr;
  GM_TRY(ctx.alloc(&temp, temp_bytes, "sorting the points by cell"));
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, key_in, key, row_in, order,
                                                   n, 0, bits, ctx.stream()),
                   "sorting the points by cell (cub::DeviceRadixSort)"));
  cell_start_kernel<<<blocks, 256, 0, ctx.stream()>>>(key, n, plan->ncells, start);
  GM_TRY(ctx.launched("the cell starts"));
  gather_points_kernel<<<blocks, 256, 0, ctx.stream()>>>(x_d, order, n, (int)dim, coords);
  GM_TRY(ctx.launched("the points in cell order"));
  g.start = start;
  g.cell = key;
  g.order = order;
  g.coords = coords;
  return GPUML_OK;
}

// The halo's runs of cells by cluster: each cell's label and densest point on the device,
// merged into runs on the host by core's rule (gm_dpc_grid_merge_runs: a serial pass over
// the cells, n / 16 of them), then uploaded.
gpuml_status cell_runs(Context &ctx, GridDev &g, const int64_t *cluster_sorted,
                       const double *cell_max) {
  const int64_t nc = g.ncells;
  int64_t *label_d = nullptr, *end_d = nullptr;
  double *top_d = nullptr;
  GM_TRY(ctx.alloc(&label_d, (size_t)nc, "the halo's runs"));
  const unsigned blocks = grid_1d(nc, 256) < 4096u ? grid_1d(nc, 256) : 4096u;
  cell_label_kernel<<<blocks, 256, 0, ctx.stream()>>>(g, cluster_sorted, label_d);
  GM_TRY(ctx.launched("the labels of the cells"));
  int64_t *label = (int64_t *)malloc((size_t)nc * sizeof(int64_t));
  int64_t *end = (int64_t *)malloc((size_t)nc * sizeof(int64_t));
  double *top = (double *)malloc((size_t)nc * sizeof(double));
  gpuml_status st = GPUML_OK;
  if (!label || !end || !top)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the halo's cell runs",
                 (double)nc * 24 / 1e6);
  if (!st) st = to_host(ctx, label, (const int64_t *)label_d, nc, "copying the cells' labels");
  if (!st) st = to_host(ctx, top, cell_max, nc, "copying the cells' densest points");
  if (!st) st = ctx.sync("copying the cells' labels");
  if (!st) {
    gm_dpc_grid_merge_runs(nc, label, end, top);
    st = ctx.check(cudaMemcpyAsync(label_d, label, (size_t)nc * sizeof(int64_t),
                                   cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the halo's runs");
  }
  if (!st) st = to_device(ctx, &end_d, (const int64_t *)end, nc, "copying the halo's runs");
  if (!st) st = to_device(ctx, &top_d, (const double *)top, nc, "copying the halo's runs");
  // the host arrays must outlive the copies
  if (!st) st = ctx.sync("copying the halo's runs");
  free(label);
  free(end);
  free(top);
  g.run_label = label_d;
  g.run_end = end_d;
  g.run_max = top_d;
  return st;
}

// The memory a call needs beside the points' own, checked against the budget where the
// index form allocates it whole.
gpuml_status check_fixed(Context &ctx, size_t fixed, int64_t n) {
  if (fixed <= ctx.budget()) return GPUML_OK;
  return gm_fail(GPUML_ERR_NOMEM, "dpc:cuda",
                 "density peaks needs %.1f MB of GPU memory for %lld points, more than the "
                 "budget of %.1f MB: raise gpu_memory_limit, free GPU memory or use backend "
                 "\"cpu\"",
                 (double)fixed / 1e6, (long long)n, (double)ctx.budget() / 1e6);
}

// rho into rho_d (by point index): on the index for the points of cells first .. last - 1,
// else over all pairs for rows first .. last - 1.
gpuml_status rho_pass(Context &ctx, const GridDev &g, const AllPairs &ap,
                      const gm_dpc_grid *rho_grid, int64_t n, int64_t d, int gaussian, double dc,
                      double cut, int64_t first, int64_t last, double *rho_d,
                      const gpuml_options *opt) {
  PassArgs args;
  args.cut = cut;
  args.inv_dc2 = 1 / (dc * dc);
  args.value = rho_d;
  if (rho_grid)
    return grid_rho(ctx, rho_grid->geom.dim, g, cut, gaussian ? args.inv_dc2 : 0, first, last,
                    rho_d, opt);
  return gaussian ? all_pairs_pass<kGauss>(ctx, ap, n, d, args, first, last, opt)
                  : all_pairs_pass<kCount>(ctx, ap, n, d, args, first, last, opt);
}

// delta_d and nearest_d (by point index) from rho_d: on the index for sorted positions
// first .. last - 1, else over all pairs for rows first .. last - 1.
gpuml_status delta_pass(Context &ctx, const GridDev &g, const AllPairs &ap,
                        const gm_dpc_grid *delta_grid, int64_t n, int64_t d, const double *rho_d,
                        int64_t top, int64_t first, int64_t last, double *delta_d,
                        int64_t *nearest_d, const gpuml_options *opt) {
  if (delta_grid) {
    double *rho_sorted = nullptr;
    GM_TRY(ctx.alloc(&rho_sorted, (size_t)n, "the densities by cell"));
    GM_TRY(gather(ctx, rho_d, g.order, n, rho_sorted));
    return grid_delta(ctx, delta_grid->geom.dim, g, rho_sorted, top, first, last, delta_d,
                      nearest_d, opt);
  }
  PassArgs da;
  da.rho = rho_d;
  da.value = delta_d;
  da.index = nearest_d;
  return all_pairs_pass<kDelta>(ctx, ap, n, d, da, first, last, opt);
}

gpuml_status dpc_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                     const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                     double *rho, double *delta_sq, int64_t *nearest, const gpuml_options *opt) {
  const bool all_pairs = !rho_grid || !delta_grid;
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, all_pairs && d >= kGemmMinDim));
  // rho, rho by cell, delta_sq, nearest, the index (one upload when rho and delta share it)
  const gm_dpc_grid *index = rho_grid ? rho_grid : delta_grid;
  const size_t fixed = (size_t)n * 8 * 4 + (index ? grid_bytes(index) : 0);
  if (!all_pairs) GM_TRY(check_fixed(ctx, fixed, n));
  GridDev g;
  if (index) GM_TRY(sort_index(ctx, x, index, g));
  AllPairs ap;
  if (all_pairs) GM_TRY(setup_all_pairs(ctx, ap, x, n, d, fixed));
  double *rho_d = nullptr, *delta_d = nullptr;
  int64_t *nearest_d = nullptr;
  GM_TRY(ctx.alloc(&rho_d, (size_t)n, "the densities"));
  GM_TRY(ctx.alloc(&delta_d, (size_t)n, "the distances to denser points"));
  GM_TRY(ctx.alloc(&nearest_d, (size_t)n, "the nearest denser points"));
  GM_TRY(rho_pass(ctx, g, ap, rho_grid, n, d, gaussian, dc, cut, 0,
                  rho_grid ? rho_grid->ncells : n, rho_d, opt));
  GM_TRY(to_host(ctx, rho, rho_d, n, "copying the densities to the host"));
  GM_TRY(ctx.sync("copying the densities to the host"));
  const int64_t top = gm_dpc_top(rho, n);
  GM_TRY(delta_pass(ctx, g, ap, delta_grid, n, d, rho_d, top, 0, n, delta_d, nearest_d, opt));
  GM_TRY(to_host(ctx, delta_sq, delta_d, n, "copying the distances to the host"));
  GM_TRY(to_host(ctx, nearest, nearest_d, n, "copying the nearest denser points to the host"));
  return ctx.sync("copying the results to the host");
}

// The values of a part's points into the host array at their original indices, all but
// `skip` (-1: none): sorted positions s0 .. s1 - 1 of the index g (through its order), or
// rows s0 .. s1 - 1 when g is null. The other entries of host stay as they are.
template <typename T>
gpuml_status part_to_host(Context &ctx, const GridDev *g, int64_t s0, int64_t s1, const T *dev,
                          T *host, int64_t skip) {
  const int64_t count = s1 - s0;
  if (count <= 0) return GPUML_OK;
  const T *src = dev + s0;
  if (g) {
    T *packed = nullptr;
    GM_TRY(ctx.alloc(&packed, (size_t)count, "a part's values"));
    GM_TRY(gather(ctx, dev, g->order + s0, count, packed));
    src = packed;
  }
  T *values = (T *)malloc((size_t)count * sizeof(T));
  int64_t *rows = g ? (int64_t *)malloc((size_t)count * sizeof(int64_t)) : nullptr;
  gpuml_status st = GPUML_OK;
  if (!values || (g && !rows))
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for a part's values",
                 (double)count * 16 / 1e6);
  if (!st) st = to_host(ctx, values, src, count, "copying a part's values to the host");
  if (!st && g) st = to_host(ctx, rows, g->order + s0, count, "copying a part's points to the host");
  if (!st) st = ctx.sync("copying a part's values to the host");
  for (int64_t k = 0; !st && k < count; k++) {
    const int64_t i = g ? rows[k] : s0 + k;
    if (i != skip) host[i] = values[k];
  }
  free(values);
  free(rows);
  return st;
}

gpuml_status rho_part_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                          int gaussian, double dc, double cut, int64_t first, int64_t last,
                          double *rho, const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, !grid && d >= kGemmMinDim));
  const size_t fixed = (size_t)n * 8 * 2 + (grid ? grid_bytes(grid) : 0);
  GridDev g;
  AllPairs ap;
  if (grid) {
    GM_TRY(check_fixed(ctx, fixed, n));
    GM_TRY(sort_index(ctx, x, grid, g));
  } else {
    GM_TRY(setup_all_pairs(ctx, ap, x, n, d, fixed));
  }
  double *rho_d = nullptr;
  GM_TRY(ctx.alloc(&rho_d, (size_t)n, "the densities"));
  GM_TRY(rho_pass(ctx, g, ap, grid, n, d, gaussian, dc, cut, first, last, rho_d, opt));
  if (!grid) return part_to_host(ctx, nullptr, first, last, (const double *)rho_d, rho, -1);
  // the cells' points are sorted positions start[first] .. start[last] - 1
  int64_t span[2];
  GM_TRY(to_host(ctx, &span[0], g.start + first, 1, "copying the part's cell starts"));
  GM_TRY(to_host(ctx, &span[1], g.start + last, 1, "copying the part's cell starts"));
  GM_TRY(ctx.sync("copying the part's cell starts"));
  return part_to_host(ctx, &g, span[0], span[1], (const double *)rho_d, rho, -1);
}

gpuml_status delta_part_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                            const double *rho, int64_t top, int64_t first, int64_t last,
                            double *delta_sq, int64_t *nearest, const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, !grid && d >= kGemmMinDim));
  // rho, rho by cell, delta_sq, nearest, a part's values
  const size_t fixed = (size_t)n * 8 * 5 + (grid ? grid_bytes(grid) : 0);
  GridDev g;
  AllPairs ap;
  if (grid) {
    GM_TRY(check_fixed(ctx, fixed, n));
    GM_TRY(sort_index(ctx, x, grid, g));
  } else {
    GM_TRY(setup_all_pairs(ctx, ap, x, n, d, fixed));
  }
  double *rho_d = nullptr, *delta_d = nullptr;
  int64_t *nearest_d = nullptr;
  GM_TRY(to_device(ctx, &rho_d, rho, n, "copying the densities to the GPU"));
  GM_TRY(ctx.alloc(&delta_d, (size_t)n, "the distances to denser points"));
  GM_TRY(ctx.alloc(&nearest_d, (size_t)n, "the nearest denser points"));
  GM_TRY(delta_pass(ctx, g, ap, grid, n, d, rho_d, top, first, last, delta_d, nearest_d, opt));
  const GridDev *order = grid ? &g : nullptr;
  GM_TRY(part_to_host(ctx, order, first, last, (const double *)delta_d, delta_sq, top));
  return part_to_host(ctx, order, first, last, (const int64_t *)nearest_d, nearest, top);
}

gpuml_status border_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                        double cut, const double *rho, const int64_t *cluster, double *border,
                        const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, !grid && d >= kGemmMinDim));
  // rho, cluster, border and both by cell; the index with its runs (3 arrays by cell)
  const size_t fixed = (size_t)n * 8 * 5 + (grid ? grid_bytes(grid) + (size_t)grid->ncells * 24 : 0);
  if (grid && fixed > ctx.budget())
    return gm_fail(GPUML_ERR_NOMEM, "dpc:cuda",
                   "the halo needs %.1f MB of GPU memory for %lld points, more than the budget "
                   "of %.1f MB: raise gpu_memory_limit, free GPU memory or use backend \"cpu\"",
                   (double)fixed / 1e6, (long long)n, (double)ctx.budget() / 1e6);
  AllPairs ap;
  if (!grid) GM_TRY(setup_all_pairs(ctx, ap, x, n, d, fixed));
  double *rho_d = nullptr, *border_d = nullptr;
  int64_t *cluster_d = nullptr;
  GM_TRY(to_device(ctx, &rho_d, rho, n, "copying the densities to the GPU"));
  GM_TRY(to_device(ctx, &cluster_d, cluster, n, "copying the clusters to the GPU"));
  GM_TRY(ctx.alloc(&border_d, (size_t)n, "the border densities"));
  if (grid) {
    GridDev g;
    GM_TRY(sort_index(ctx, x, grid, g));
    double *rho_sorted = nullptr, *cell_max = nullptr;
    int64_t *cluster_sorted = nullptr;
    unsigned long long *found = nullptr;
    GM_TRY(ctx.alloc(&rho_sorted, (size_t)n, "the densities by cell"));
    GM_TRY(ctx.alloc(&cluster_sorted, (size_t)n, "the clusters by cell"));
    GM_TRY(ctx.alloc(&found, (size_t)(grid->nclusters > 0 ? grid->nclusters : 1),
                     "the border densities by cluster"));
    GM_TRY(ctx.check(cudaMemsetAsync(found, 0, (size_t)grid->nclusters * sizeof *found,
                                     ctx.stream()),
                     "clearing the border densities by cluster"));
    GM_TRY(gather(ctx, (const double *)rho_d, g.order, n, rho_sorted));
    GM_TRY(gather(ctx, (const int64_t *)cluster_d, g.order, n, cluster_sorted));
    GM_TRY(cell_max_of(ctx, g, rho_sorted, &cell_max));
    GM_TRY(cell_runs(ctx, g, cluster_sorted, cell_max));
    double rho_max = 0;
    for (int64_t i = 0; i < n; i++) rho_max = rho[i] > rho_max ? rho[i] : rho_max;
    // The densest points first (about 1%, as on the CPU): they raise each cluster's
    // largest border density early, so that most other points stop at once.
    const double seed_rho = gm_dpc_seed_rho(rho, n);
    for (int seeding = 1; seeding >= 0; seeding--)
      for (int64_t s0 = 0; s0 < n; s0 += kGridChunk) {
        const int64_t s1 = min64(n, s0 + kGridChunk);
        const unsigned blocks = grid_1d(s1 - s0, kPassThreads);
        GM_DPC_DIM_SWITCH(grid->geom.dim, grid_border_kernel, g, cut, rho_sorted,
                          cluster_sorted, cell_max, rho_max, found, border_d, seed_rho, seeding,
                          s0, s1);
        GM_TRY(ctx.launched("density peaks halo (index)"));
        GM_TRY(ctx.sync("density peaks halo (index)"));
        GM_TRY(interrupted(ctx, opt));
        if (!seeding) gm_progress(opt, "dpc halo", s1, n);
      }
  } else {
    PassArgs args;
    args.cut = cut;
    args.rho = rho_d;
    args.cluster = cluster_d;
    args.value = border_d;
    GM_TRY(all_pairs_pass<kBorder>(ctx, ap, n, d, args, 0, n, opt));
  }
  GM_TRY(to_host(ctx, border, border_d, n, "copying the border densities to the host"));
  return ctx.sync("copying the border densities to the host");
}

}  // namespace
}  // namespace gm

extern "C" gpuml_status gm_cuda_dpc_density(const double *x, int64_t n, int64_t d,
                                       const struct gm_dpc_grid *rho_grid,
                                       const struct gm_dpc_grid *delta_grid, int gaussian,
                                       double dc, double cut, double *rho, double *delta_sq,
                                       int64_t *nearest, const gpuml_options *opt) {
  return gm::dpc_run(x, n, d, rho_grid, delta_grid, gaussian, dc, cut, rho, delta_sq, nearest,
                     opt);
}

extern "C" gpuml_status gm_cuda_dpc_border(const double *x, int64_t n, int64_t d,
                                              const struct gm_dpc_grid *grid, double cut,
                                              const double *rho, const int64_t *cluster,
                                              double *border, const gpuml_options *opt) {
  return gm::border_run(x, n, d, grid, cut, rho, cluster, border, opt);
}

extern "C" gpuml_status gm_cuda_dpc_rho(const double *x, int64_t n, int64_t d,
                                        const struct gm_dpc_grid *grid, int gaussian, double dc,
                                        double cut, int64_t first, int64_t last, double *rho,
                                        const gpuml_options *opt) {
  return gm::rho_part_run(x, n, d, grid, gaussian, dc, cut, first, last, rho, opt);
}

extern "C" gpuml_status gm_cuda_dpc_delta(const double *x, int64_t n, int64_t d,
                                          const struct gm_dpc_grid *grid, const double *rho,
                                          int64_t top, int64_t first, int64_t last,
                                          double *delta_sq, int64_t *nearest,
                                          const gpuml_options *opt) {
  return gm::delta_part_run(x, n, d, grid, rho, top, first, last, delta_sq, nearest, opt);
}
