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
// the device; only the GEMM tiles are sized from the memory budget. Over several devices
// (core/dpc_shards.c) each device keeps them in a session (PartSession) from its rho parts
// to its delta parts.
#include <new>
#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include "gpuml_cuda.h"
#include "distance_tiles.cuh"
#include "dpc.h"

namespace gm {
namespace {

constexpr int kPassThreads = 256;        // grid kernels and GEMM epilogues
constexpr int kDirectThreads = 128;      // direct pair kernel (shared tile per block)
constexpr int64_t kGridChunk = 1 << 20;  // points per launch between interrupt checks
constexpr int64_t kGridItemChunk = 1 << 17;  // items (<= 32 points) per launch of the cutoff density
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
  // The cutoff count's fp32 copy of coords (screen_index; null when not built): point s
  // at coords32[s * screen_stride(dim)], relative to the grid's centre; reach32[t]: the
  // largest |coords32| of dimension t, as float bits.
  const float *coords32 = nullptr;
  const unsigned *reach32 = nullptr;
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

// Device arrays that outlive the call that made them (a part session's, below): blocks
// of the device's pool, given back by their destructors outside any Context.
struct HeldList {
  static constexpr int kMax = 20;
  HeldBlock block[kMax];
  int count = 0;
};

// An array in `keep` when given, else in the call's Context (freed when it ends).
template <typename P>
gpuml_status keep_alloc(Context &ctx, HeldList *keep, P **p, size_t count, const char *what) {
  if (!keep) return ctx.alloc(p, count, what);
  *p = nullptr;
  if (keep->count == HeldList::kMax)
    return gm_fail(GPUML_ERR_CUDA, ctx.id(), "internal: too many held device arrays");
  return ctx.alloc_held(keep->block[keep->count++], p, count, what);
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
  return upload(ctx, *dev, host, (size_t)n * sizeof(T), what);
}

template <typename T>
gpuml_status to_host(Context &ctx, T *host, const T *dev, int64_t n, const char *what) {
  return ctx.check(cudaMemcpyAsync(host, dev, (size_t)n * sizeof(T), cudaMemcpyDeviceToHost,
                                   ctx.stream()),
                   what);
}

// The bits of a compact index's sub-cells a side: 6 in all (64 sub-cells a cell), fewer
// where the key would pass 62 bits; none above 6-d. GPUML_CUDA_DPC_SUB_CELLS=0: none (for
// comparisons; the counts are the same).
int sub_cell_bits(int dim, int cell_bits) {
  const char *knob = getenv("GPUML_CUDA_DPC_SUB_CELLS");
  if (knob && strcmp(knob, "0") == 0) return 0;
  int sub = 6 / dim;
  while (sub > 0 && cell_bits + sub * dim > 62) sub--;
  return sub;
}

// The cell index of `plan` (core's geometry) built on the device: keys, a stable radix
// sort, the cell starts and the points gathered into cell order; no host round trip but
// the data's upload (none when *uploaded holds the data already; else it gets them). The
// index's arrays in `keep` when given (else in the Context), the data and the sort's
// work space in the Context. With `compact`, the points of a cell are in the Morton order
// of its sub-cells (sub_cell_bits a side) rather than by index, so that the cutoff
// count's items (consecutive points of a cell) have small boxes.
gpuml_status sort_index(Context &ctx, const double *x, const gm_dpc_grid *plan, GridDev &g,
                        HeldList *keep, double **uploaded = nullptr, bool compact = false) {
  const int64_t n = plan->n, dim = plan->geom.dim;
  g.geom = plan->geom;
  g.n = n;
  g.ncells = plan->ncells;
  double *x_d = uploaded ? *uploaded : nullptr, *coords = nullptr;
  int64_t *key_in = nullptr, *key = nullptr, *row_in = nullptr, *order = nullptr,
          *start = nullptr;
  if (!x_d) GM_TRY(to_device(ctx, &x_d, x, n * dim, "copying the points to the GPU"));
  if (uploaded) *uploaded = x_d;
  GM_TRY(ctx.alloc(&key_in, (size_t)n, "the cells of the points"));
  GM_TRY(ctx.alloc(&row_in, (size_t)n, "the cells of the points"));
  GM_TRY(keep_alloc(ctx, keep, &key, (size_t)n, "the index"));
  GM_TRY(keep_alloc(ctx, keep, &order, (size_t)n, "the index"));
  GM_TRY(keep_alloc(ctx, keep, &start, (size_t)plan->ncells + 1, "the index"));
  GM_TRY(keep_alloc(ctx, keep, &coords, (size_t)(n * dim), "the index's points"));
  const unsigned blocks = grid_1d(n + 1, 256) < 8192u ? grid_1d(n + 1, 256) : 8192u;
  int bits = 1;  // the cell ids lie in 0 .. ncells - 1
  while (bits < 63 && ((int64_t)1 << bits) < plan->ncells) bits++;
  const int sub = compact ? sub_cell_bits((int)dim, bits) : 0;
  cell_key_kernel<<<blocks, 256, 0, ctx.stream()>>>(plan->geom, x_d, n, sub, key_in, row_in);
  GM_TRY(ctx.launched("the cells of the points"));
  bits += sub * (int)dim;
  size_t temp_bytes = 0;
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, key_in, key, row_in, order,
                                                   n, 0, bits, ctx.stream()),
                   "sorting the points by cell (cub::DeviceRadixSort)"));
  unsigned char *temp = nullptr;
  GM_TRY(ctx.alloc(&temp, temp_bytes, "sorting the points by cell"));
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, key_in, key, row_in, order,
                                                   n, 0, bits, ctx.stream()),
                   "sorting the points by cell (cub::DeviceRadixSort)"));
  if (sub > 0) {
    sub_cells_kernel<<<blocks, 256, 0, ctx.stream()>>>(key, n, sub * (int)dim);
    GM_TRY(ctx.launched("the cells of the points"));
  }
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

// The halo's runs of cells by cluster on the device: each cell's map (its label and
// densest point) and the maps composed from the last cell by a scan (core/dpc_shared.h's
// rule, which the CPU applies one cell at a time), in the call's Context.
gpuml_status cell_runs(Context &ctx, GridDev &g, const int64_t *cluster_sorted,
                       const double *cell_max) {
  const int64_t nc = g.ncells;
  int64_t *label_d = nullptr, *end_d = nullptr;
  double *top_d = nullptr;
  gm_dpc_run_map *maps = nullptr, *composite = nullptr;
  GM_TRY(ctx.alloc(&label_d, (size_t)nc, "the halo's runs"));
  GM_TRY(ctx.alloc(&end_d, (size_t)nc, "the halo's runs"));
  GM_TRY(ctx.alloc(&top_d, (size_t)nc, "the halo's runs"));
  GM_TRY(ctx.alloc(&maps, (size_t)nc, "the halo's runs"));
  GM_TRY(ctx.alloc(&composite, (size_t)nc, "the halo's runs"));
  const unsigned blocks = grid_1d(nc, 256) < 4096u ? grid_1d(nc, 256) : 4096u;
  run_maps_kernel<<<blocks, 256, 0, ctx.stream()>>>(g, cluster_sorted, cell_max, maps);
  GM_TRY(ctx.launched("the halo's runs"));
  size_t temp_bytes = 0;
  GM_TRY(ctx.check(cub::DeviceScan::InclusiveScan(nullptr, temp_bytes, maps, composite,
                                                  RunMapsAfter(), nc, ctx.stream()),
                   "the halo's runs (cub::DeviceScan)"));
  unsigned char *temp = nullptr;
  GM_TRY(ctx.alloc(&temp, temp_bytes, "the halo's runs"));
  GM_TRY(ctx.check(cub::DeviceScan::InclusiveScan(temp, temp_bytes, maps, composite,
                                                  RunMapsAfter(), nc, ctx.stream()),
                   "the halo's runs (cub::DeviceScan)"));
  run_out_kernel<<<blocks, 256, 0, ctx.stream()>>>(nc, composite, label_d, end_d, top_d);
  GM_TRY(ctx.launched("the halo's runs"));
  g.run_label = label_d;
  g.run_end = end_d;
  g.run_max = top_d;
  return GPUML_OK;
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
                    rho_d, 0, opt, nullptr);
  return gaussian ? all_pairs_pass<kGauss>(ctx, ap, n, d, args, first, last, opt)
                  : all_pairs_pass<kCount>(ctx, ap, n, d, args, first, last, opt);
}

// What a fit's density() leaves on the device for its cut and halo (core/backend.h's
// kept): the halo's index (delta's: the fit's cells of the mean density) with its points,
// rho by point index and by the index's positions, each cell's densest point, the nearest
// denser points (-1 at the top) and the density order; the cut's clusters, by point
// index, once assign has made them. Freed outside any Context (gm_cuda_dpc_release_kept).
struct FitKept {
  int device = 0;
  int64_t n = 0;
  GridDev g;  // start null: the delta pass ran over all pairs, no index kept
  const double *rho_d = nullptr, *rho_sorted = nullptr, *cell_max = nullptr;
  const int64_t *nearest_d = nullptr, *order_d = nullptr;
  const int64_t *cluster_d = nullptr;
  HeldList held;
};

// Whether kept holds the index of grid (the same geometry, the same points).
bool kept_index_of(const FitKept &kept, const gm_dpc_grid *grid) {
  const gm_dpc_geom &a = kept.g.geom, &b = grid->geom;
  if (!kept.g.start || kept.g.ncells != grid->ncells || kept.g.n != grid->n || a.dim != b.dim ||
      a.h != b.h)
    return false;
  for (int t = 0; t < a.dim; t++)
    if (a.lo[t] != b.lo[t] || a.cells[t] != b.cells[t]) return false;
  return true;
}

// Whether delta's first rings take the cutoff density's finer cells, where it has them:
// up to 6-d. A ring of r has (2r + 1)^d cells, so above that the more rings a point needs
// on finer cells cost more than their fewer points save (10^6 blobs: 6-d 254 against 577
// ms, 8-d 819 against 668; bench/RESULTS.md round 15). GPUML_CUDA_DPC_DELTA_CELLS=mean:
// never (for comparisons; the answers are the same).
bool delta_on_fine_cells(int dim) {
  const char *knob = getenv("GPUML_CUDA_DPC_DELTA_CELLS");
  return !(knob && strcmp(knob, "mean") == 0) && dim <= 6;
}

// The densities by position of g's points and the densest point of each cell, in `keep`
// when given, else in the call's Context.
gpuml_status delta_index(Context &ctx, const GridDev &g, const double *rho_d, DeltaIndex &ix,
                         HeldList *keep = nullptr) {
  double *rho_sorted = nullptr, *cell_max = nullptr;
  GM_TRY(keep_alloc(ctx, keep, &rho_sorted, (size_t)g.n, "the densities by cell"));
  GM_TRY(gather(ctx, rho_d, g.order, g.n, rho_sorted));
  GM_TRY(keep_alloc(ctx, keep, &cell_max, (size_t)g.ncells, "the densest point of each cell"));
  GM_TRY(cell_max_fill(ctx, g, rho_sorted, cell_max));
  ix.g = g;
  ix.rho_sorted = rho_sorted;
  ix.cell_max = cell_max;
  return GPUML_OK;
}

// delta_d and nearest_d (by point index) of all points from rho_d: on delta's index g,
// the first rings on fine (the cutoff density's finer cells, where not null): a point's
// nearest denser point is mostly a few points away, and the mean density's cells of
// clustered data hold hundreds to thousands (bench/RESULTS.md round 15).
gpuml_status delta_pass(Context &ctx, const GridDev &g, const GridDev *fine, const AllPairs &ap,
                        const gm_dpc_grid *delta_grid, int64_t n, int64_t d, const double *rho_d,
                        int64_t top, double *delta_d, int64_t *nearest_d,
                        const gpuml_options *opt, FitKept *kept) {
  if (delta_grid) {
    DeltaIndex walk, far;
    GM_TRY(delta_index(ctx, g, rho_d, far, kept ? &kept->held : nullptr));
    if (kept) {
      kept->rho_sorted = far.rho_sorted;
      kept->cell_max = far.cell_max;
    }
    if (fine && delta_on_fine_cells((int)d))
      GM_TRY(delta_index(ctx, *fine, rho_d, walk));
    else
      walk = far;
    return grid_delta(ctx, delta_grid->geom.dim, walk, far, top, 0, n, delta_d, nearest_d, 0,
                      opt);
  }
  PassArgs da;
  da.rho = rho_d;
  da.value = delta_d;
  da.index = nearest_d;
  return all_pairs_pass<kDelta>(ctx, ap, n, d, da, 0, n, opt);
}

// The density order (core's gm_dpc_density_order) of rho_d (by point index) into the
// host's order: a stable radix sort of (rho, index) pairs by decreasing rho, so equal
// densities keep the index order. The sort's arrays live until the call's Context ends,
// but the order itself in kept's when given.
gpuml_status density_order(Context &ctx, const double *rho_d, int64_t n, int64_t *order,
                           FitKept *kept = nullptr) {
  double *keys = nullptr;
  int64_t *index = nullptr, *order_d = nullptr;
  GM_TRY(ctx.alloc(&keys, (size_t)n, "the density order"));
  GM_TRY(ctx.alloc(&index, (size_t)n, "the density order"));
  GM_TRY(keep_alloc(ctx, kept ? &kept->held : nullptr, &order_d, (size_t)n, "the density order"));
  if (kept) kept->order_d = order_d;
  const unsigned blocks = grid_1d(n, 256) < 8192u ? grid_1d(n, 256) : 8192u;
  iota_kernel<<<blocks, 256, 0, ctx.stream()>>>(index, n);
  GM_TRY(ctx.launched("the density order"));
  size_t temp_bytes = 0;
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairsDescending(nullptr, temp_bytes, rho_d, keys,
                                                             index, order_d, n, 0, 64,
                                                             ctx.stream()),
                   "sorting the densities (cub::DeviceRadixSort)"));
  unsigned char *temp = nullptr;
  GM_TRY(ctx.alloc(&temp, temp_bytes, "sorting the densities"));
  GM_TRY(ctx.check(cub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, rho_d, keys,
                                                             index, order_d, n, 0, 64,
                                                             ctx.stream()),
                   "sorting the densities (cub::DeviceRadixSort)"));
  return download(ctx, order, order_d, (size_t)n * sizeof *order,
                  "copying the density order to the host");
}

// With kept, what the fit's cut and halo read again stays on the device there (FitKept).
gpuml_status dpc_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                     const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                     double *rho, double *delta_sq, int64_t *nearest, int64_t *order,
                     const gpuml_options *opt, FitKept *kept) {
  const bool all_pairs = !rho_grid || !delta_grid;
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, all_pairs && d >= kGemmMinDim));
  // rho, rho by cell, delta_sq, nearest, the index (one upload when rho and delta share it;
  // a second index when rho has its own cells, core's GM_DPC_CELLS_SEEN, with rho by its
  // cells for delta's first rings)
  const gm_dpc_grid *index = rho_grid ? rho_grid : delta_grid;
  const bool own_rho_grid = rho_grid && delta_grid && rho_grid != delta_grid;
  // and the density order's sort (its keys and values, in and out, when asked for); the
  // cutoff count's fp32 copy of the points (rho's index)
  const bool screen = screens(rho_grid, gaussian);
  const size_t fixed = (size_t)n * 8 * 4 + (index ? grid_bytes(index) : 0) +
                       (own_rho_grid ? grid_bytes(delta_grid) + (size_t)n * 8 : 0) +
                       (order ? (size_t)n * 8 * 5 : 0) + (screen ? screen_bytes(rho_grid) : 0);
  if (!all_pairs) GM_TRY(check_fixed(ctx, fixed, n));
  GM_TRY(ctx.trace("dpc cuda: context"));
  // the index delta walks (the halo's) kept with the fit
  HeldList *keep = kept ? &kept->held : nullptr;
  GridDev g, g_delta;
  double *x_d = nullptr;
  if (index) GM_TRY(sort_index(ctx, x, index, g, own_rho_grid ? nullptr : keep, &x_d, screen));
  if (screen) GM_TRY(screen_index(ctx, g, nullptr));  // g is rho's index
  if (own_rho_grid) GM_TRY(sort_index(ctx, x, delta_grid, g_delta, keep, &x_d));
  if (kept && delta_grid) {
    kept->g = own_rho_grid ? g_delta : g;
    kept->g.coords32 = nullptr;  // the count's copy stays in the Context
    kept->g.reach32 = nullptr;
  }
  AllPairs ap;
  if (all_pairs) GM_TRY(setup_all_pairs(ctx, ap, x, n, d, fixed, nullptr));
  GM_TRY(ctx.trace("dpc cuda: points uploaded, index sorted"));
  double *rho_d = nullptr, *delta_d = nullptr;
  int64_t *nearest_d = nullptr;
  GM_TRY(keep_alloc(ctx, keep, &rho_d, (size_t)n, "the densities"));
  GM_TRY(ctx.alloc(&delta_d, (size_t)n, "the distances to denser points"));
  GM_TRY(keep_alloc(ctx, keep, &nearest_d, (size_t)n, "the nearest denser points"));
  if (kept) {
    kept->n = n;
    kept->rho_d = rho_d;
    kept->nearest_d = nearest_d;
  }
  // the results' pages faulted in while the device counts
  PagesTouched results;
  gm_pages_add(&results.pages, rho, (size_t)n * sizeof *rho);
  gm_pages_add(&results.pages, delta_sq, (size_t)n * sizeof *delta_sq);
  gm_pages_add(&results.pages, nearest, (size_t)n * sizeof *nearest);
  gm_pages_add(&results.pages, order, (size_t)n * sizeof *order);
  gm_pages_start(&results.pages, ctx.threads());
  GM_TRY(rho_pass(ctx, g, ap, rho_grid, n, d, gaussian, dc, cut, 0,
                  rho_grid ? rho_grid->ncells : n, rho_d, opt));
  GM_TRY(ctx.trace("dpc cuda: rho pass"));
  gm_pages_wait(&results.pages);
  GM_TRY(ctx.trace("dpc cuda: the results' pages touched"));
  GM_TRY(download(ctx, rho, rho_d, (size_t)n * sizeof *rho, "copying the densities to the host"));
  GM_TRY(ctx.trace("dpc cuda: rho to the host"));
  const int64_t top = gm_dpc_top(rho, n, gm_threads(opt));
  GM_TRY(ctx.trace("dpc cuda: the top point"));
  GM_TRY(delta_pass(ctx, own_rho_grid ? g_delta : g, own_rho_grid ? &g : nullptr, ap,
                    delta_grid, n, d, rho_d, top, delta_d, nearest_d, opt, kept));
  // as the host's nearest after the fit (the top point has none)
  if (kept)
    GM_TRY(ctx.check(cudaMemsetAsync(nearest_d + top, 0xff, sizeof *nearest_d, ctx.stream()),
                     "the nearest denser points"));
  GM_TRY(ctx.trace("dpc cuda: delta pass"));
  if (order) {
    GM_TRY(density_order(ctx, rho_d, n, order, kept));
    GM_TRY(ctx.trace("dpc cuda: the density order to the host"));
  }
  GM_TRY(download(ctx, delta_sq, delta_d, (size_t)n * sizeof *delta_sq,
                  "copying the distances to the host"));
  GM_TRY(download(ctx, nearest, nearest_d, (size_t)n * sizeof *nearest,
                  "copying the nearest denser points to the host"));
  return ctx.trace("dpc cuda: delta and nearest to the host");
}

// ---------------------------------------------------------------------------------------
// The passes over parts (core/dpc_shards.c, core/backend.h's part_open .. part_close): a
// session per device holds the index (or the points resident for the tiles) and the
// arrays of the passes in blocks of the device's pool, so that the points go up and the
// index is sorted once for the device's rho parts and delta parts. Each call runs under a
// Context of its own, which holds the device for that call only: any thread may make the
// calls of a session, and the session is freed outside any call.
//
// A part's values come back in one span: off the index they lie by point index, rows
// first .. last - 1; on it the kernels write them by sorted position (by_position), and
// the span of the index's order tells the host where each goes (gm_dpc_scatter).

struct PartSession {
  int device = 0;
  const double *x = nullptr;  // the caller's points (they outlive the session)
  int64_t n = 0, d = 0;
  const gm_dpc_grid *rho_grid = nullptr, *delta_grid = nullptr;
  int gaussian = 0;
  double dc = 0, cut = 0;
  GridDev g;    // the index, when either pass runs on it (delta's, when rho has its own)
  GridDev gr;   // rho's own index (core's GM_DPC_CELLS_SEEN), when it has one (own_rho)
  bool own_rho = false, walk_fine = false;  // walk_fine: delta's first rings on gr
  AllPairs ap;  // the resident points, when either pass runs over all pairs
  // rho_d by point index: the parts' rho off the index, then all rho for delta.
  // rho_sorted by sorted position of g: the parts' rho on it (when rho has no index of
  // its own), then all rho for delta; rho_sorted_r by position of gr: the parts' rho on
  // it, then all rho for delta's first rings.
  double *rho_d = nullptr, *rho_sorted = nullptr, *rho_sorted_r = nullptr;
  double *cell_max = nullptr;    // delta on the index: the densest point of each cell of g
  double *cell_max_r = nullptr;  // and of gr, for delta's first rings
  double *delta_d = nullptr;     // by sorted position of the walked index, else by point index
  int64_t *nearest_d = nullptr;
  bool has_rho = false;        // all rho on the device (taken by the first part_delta)
  // part_counts: a part's symmetric counts by sorted position of rho's index, and by
  // point index
  unsigned *counts_d = nullptr, *counts_by_index = nullptr;
  // A part's values on the host before they go in place, kept for the next part.
  int64_t cap = 0;
  int64_t *rows = nullptr, *indices = nullptr;
  double *values = nullptr;
  HeldList held;  // the device arrays above, given back when the session goes

  ~PartSession() {
    free(rows);
    free(indices);
    free(values);
  }
};

// The session's options: the call's, on the session's device.
gpuml_options on_device(const PartSession &s, const gpuml_options *opt) {
  gpuml_options o = *opt;
  o.device = s.device;
  return o;
}

// The index the rho parts walk: rho's own, or the one both passes share.
const GridDev &rho_index(const PartSession &s) { return s.own_rho ? s.gr : s.g; }

gpuml_status part_open(PartSession &s, const gpuml_options *opt) {
  const bool all_pairs = !s.rho_grid || !s.delta_grid;
  const gm_dpc_grid *index = s.rho_grid ? s.rho_grid : s.delta_grid;
  s.own_rho = s.rho_grid && s.delta_grid && s.rho_grid != s.delta_grid;
  s.walk_fine = s.own_rho && delta_on_fine_cells((int)s.d);
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, all_pairs && s.d >= kGemmMinDim));
  // what density() holds beside the resident points (so that the tiles are one device's
  // under the same budget): rho, rho by cell, delta_sq, nearest and the index, with the
  // cutoff count's fp32 copy of the points; rho's own index and rho by its cells
  const bool screen = screens(s.rho_grid, s.gaussian);
  const size_t fixed = (size_t)s.n * 8 * 4 + (index ? grid_bytes(index) : 0) +
                       (s.own_rho ? grid_bytes(s.delta_grid) + (size_t)s.n * 8 : 0) +
                       (screen ? screen_bytes(s.rho_grid) : 0);
  if (!all_pairs) GM_TRY(check_fixed(ctx, fixed, s.n));
  // as on one device: the screened count's index in the Morton order of its sub-cells
  double *x_d = nullptr;
  GridDev &first = s.own_rho ? s.gr : s.g;
  if (index) GM_TRY(sort_index(ctx, s.x, index, first, &s.held, &x_d, screen));
  if (screen) GM_TRY(screen_index(ctx, first, &s.held));
  if (s.own_rho) GM_TRY(sort_index(ctx, s.x, s.delta_grid, s.g, &s.held, &x_d));
  if (all_pairs) {
    GM_TRY(setup_all_pairs(ctx, s.ap, s.x, s.n, s.d, fixed, &s.held));
    s.ap.sg = Staging<double>();  // the staging buffer was the Context's
  }
  GM_TRY(keep_alloc(ctx, &s.held, &s.rho_d, (size_t)s.n, "the densities"));
  if (index) {
    GM_TRY(keep_alloc(ctx, &s.held, &s.rho_sorted, (size_t)s.n, "the densities by cell"));
    GM_TRY(keep_alloc(ctx, &s.held, &s.cell_max, (size_t)s.g.ncells,
                      "the densest point of each cell"));
  }
  if (s.own_rho)
    GM_TRY(keep_alloc(ctx, &s.held, &s.rho_sorted_r, (size_t)s.n, "the densities by cell"));
  if (s.walk_fine)
    GM_TRY(keep_alloc(ctx, &s.held, &s.cell_max_r, (size_t)s.gr.ncells,
                      "the densest point of each cell"));
  GM_TRY(keep_alloc(ctx, &s.held, &s.delta_d, (size_t)s.n, "the distances to denser points"));
  GM_TRY(keep_alloc(ctx, &s.held, &s.nearest_d, (size_t)s.n, "the nearest denser points"));
  return ctx.sync("building the density peaks index");
}

// The values at sorted positions s0 .. s1 - 1 of the index (values, and indices when not
// null) into the host arrays at their points' original indices, all but `skip` (-1:
// none): the spans of the index's order and of the values copied as they lie, then put in
// place on the options' threads.
gpuml_status part_to_host(Context &ctx, PartSession &s, const GridDev &g, int64_t s0,
                          int64_t s1, const double *values, double *host_values,
                          const int64_t *indices, int64_t *host_indices, int64_t skip,
                          const gpuml_options *opt) {
  const int64_t count = s1 - s0;
  if (count <= 0) return GPUML_OK;
  if (count > s.cap) {
    free(s.rows);
    free(s.indices);
    free(s.values);
    s.rows = (int64_t *)gm_alloc((size_t)count, sizeof(int64_t));
    s.indices = (int64_t *)gm_alloc((size_t)count, sizeof(int64_t));
    s.values = (double *)gm_alloc((size_t)count, sizeof(double));
    s.cap = s.rows && s.indices && s.values ? count : 0;
    if (!s.cap)
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for a part's values",
                     (double)count * 24 / 1e6);
  }
  GM_TRY(to_host(ctx, s.rows, g.order + s0, count, "copying a part's points to the host"));
  GM_TRY(to_host(ctx, s.values, values + s0, count, "copying a part's values to the host"));
  if (indices)
    GM_TRY(to_host(ctx, s.indices, indices + s0, count, "copying a part's values to the host"));
  GM_TRY(ctx.sync("copying a part's values to the host"));
  gm_dpc_scatter(s.rows, count, skip, s.values, host_values, indices ? s.indices : nullptr,
                 host_indices, gm_threads(opt));
  return GPUML_OK;
}

// A cell's squared count, read by cub's scan as it goes (no array of them).
struct CellWeight {
  const int64_t *start;
  __host__ __device__ double operator()(int64_t c) const {
    const double count = (double)(start[c + 1] - start[c]);
    return count * count;
  }
};

// The parts' bounds written as the scan of the squared counts goes (gm_dpc_part_ends),
// without an array of its sums (8 bytes a cell: 757 MB at 2.4 x 10^7 x 3).
struct PartBoundWriter {
  CellWeight weight;
  int64_t nc;
  int parts;
  double total;
  int64_t *bounds;
  __device__ void operator()(int64_t c, double incl) const {
    const double w = weight(c);
    for (int p = 1; p < parts; p++)
      if (gm_dpc_part_ends(total, parts, p, incl, w)) bounds[p] = c + 1 < nc ? c + 1 : nc;
  }
};

__global__ void part_bound_ends_kernel(int64_t nc, int parts, int64_t *__restrict__ bounds) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p <= parts) bounds[p] = p == parts ? nc : 0;  // 0 where the targets are 0
}

// The rho parts' bounds (core's gm_dpc_part_target and gm_dpc_part_ends) on the device:
// the rho index's start[] stays there (it was copied to the host whole: 1 s of a 3 s fit
// of 2.4 x 10^7 points on 2 H100s, bench/RESULTS.md round 16), its squared counts summed
// once for their total and scanned once for the bounds.
gpuml_status part_bounds(PartSession &s, int parts, int64_t *bounds, const gpuml_options *opt) {
  const GridDev &g = rho_index(s);  // the rho parts are runs of its cells
  if (!g.start)
    return gm_fail(GPUML_ERR_CUDA, "dpc:cuda", "internal: the density peaks session has no index");
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, 0));
  const int64_t nc = g.ncells;
  int64_t *bounds_d = nullptr;
  GM_TRY(ctx.alloc(&bounds_d, (size_t)parts + 1, "splitting the cells"));
  part_bound_ends_kernel<<<grid_1d(parts + 1, 64), 64, 0, ctx.stream()>>>(nc, parts, bounds_d);
  GM_TRY(ctx.launched("splitting the cells"));
  if (nc > 0) {
    const auto weight = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                                        CellWeight{g.start});
    double *total_d = nullptr, total = 0;
    GM_TRY(ctx.alloc(&total_d, 1, "splitting the cells"));
    size_t sum_bytes = 0, scan_bytes = 0;
    GM_TRY(ctx.check(cub::DeviceReduce::Sum(nullptr, sum_bytes, weight, total_d, nc, ctx.stream()),
                     "splitting the cells (cub::DeviceReduce)"));
    unsigned char *temp = nullptr;
    GM_TRY(ctx.alloc(&temp, sum_bytes, "splitting the cells"));
    GM_TRY(ctx.check(cub::DeviceReduce::Sum(temp, sum_bytes, weight, total_d, nc, ctx.stream()),
                     "splitting the cells (cub::DeviceReduce)"));
    GM_TRY(to_host(ctx, &total, (const double *)total_d, 1, "splitting the cells"));
    GM_TRY(ctx.sync("splitting the cells"));
    const auto ends = thrust::make_tabulate_output_iterator(
        PartBoundWriter{CellWeight{g.start}, nc, parts, total, bounds_d});
    GM_TRY(ctx.check(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, weight, ends, nc,
                                                   ctx.stream()),
                     "splitting the cells (cub::DeviceScan)"));
    GM_TRY(ctx.alloc(&temp, scan_bytes, "splitting the cells"));
    GM_TRY(ctx.check(cub::DeviceScan::InclusiveSum(temp, scan_bytes, weight, ends, nc,
                                                   ctx.stream()),
                     "splitting the cells (cub::DeviceScan)"));
  }
  GM_TRY(to_host(ctx, bounds, bounds_d, parts + 1, "copying the parts' cells"));
  return ctx.sync("copying the parts' cells");
}

gpuml_status part_rho(PartSession &s, int64_t first, int64_t last, double *rho,
                      const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, s.ap.gemm));
  const double inv_dc2 = 1 / (s.dc * s.dc);
  if (!s.rho_grid) {
    PassArgs args;
    args.cut = s.cut;
    args.inv_dc2 = inv_dc2;
    args.value = s.rho_d;
    GM_TRY(s.gaussian ? all_pairs_pass<kGauss>(ctx, s.ap, s.n, s.d, args, first, last, opt)
                      : all_pairs_pass<kCount>(ctx, s.ap, s.n, s.d, args, first, last, opt));
    GM_TRY(to_host(ctx, rho + first, (const double *)s.rho_d + first, last - first,
                   "copying a part's densities to the host"));
    return ctx.sync("copying a part's densities to the host");
  }
  const GridDev &g = rho_index(s);
  double *by_cell = s.own_rho ? s.rho_sorted_r : s.rho_sorted;
  GM_TRY(grid_rho(ctx, s.rho_grid->geom.dim, g, s.cut, s.gaussian ? inv_dc2 : 0, first, last,
                  by_cell, 1, opt, nullptr));
  // the cells' points are sorted positions start[first] .. start[last] - 1
  int64_t span[2];
  GM_TRY(to_host(ctx, &span[0], g.start + first, 1, "copying the part's cell starts"));
  GM_TRY(to_host(ctx, &span[1], g.start + last, 1, "copying the part's cell starts"));
  GM_TRY(ctx.sync("copying the part's cell starts"));
  return part_to_host(ctx, s, g, span[0], span[1], by_cell, rho, nullptr, nullptr, -1, opt);
}

// Whether the rho parts count each crossed pair once (grid_rho's symmetric count over
// parts): on rho's index, for the cutoff density, where sym_count holds; 0 where the
// device cannot tell (part_rho then reports what fails).
int part_counts_on(PartSession &s, const gpuml_options *opt) {
  if (!s.rho_grid || s.gaussian) return 0;
  Context ctx("dpc:cuda");
  CountForms forms;
  if (ctx.init(opt, 0) ||
      count_forms(ctx, s.rho_grid->geom.dim, rho_index(s), s.cut, 0, &forms))
    return 0;
  return sym_count(forms, rho_index(s), s.cut);
}

__global__ void counts_by_index_kernel(const unsigned *__restrict__ counts,
                                       const int64_t *__restrict__ order, int64_t n,
                                       unsigned *__restrict__ out) {
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n;
       p += (int64_t)gridDim.x * blockDim.x)
    out[order[p]] = counts[p];
}

// The symmetric count of the items of cells first .. last - 1 (part_counts_on), added up
// on the device by sorted position; with counts, all the session's so far written into
// counts by point index: put in index order on the device, copied whole (n 4-byte counts:
// a part's pairs reach points of any cell), and cleared.
gpuml_status part_counts(PartSession &s, int64_t first, int64_t last, uint32_t *counts,
                         const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, 0));
  const GridDev &g = rho_index(s);
  if (!s.counts_d) {
    GM_TRY(keep_alloc(ctx, &s.held, &s.counts_d, (size_t)s.n, "the density pass's counts"));
    GM_TRY(keep_alloc(ctx, &s.held, &s.counts_by_index, (size_t)s.n, "the density pass's counts"));
    GM_TRY(ctx.check(cudaMemsetAsync(s.counts_d, 0, (size_t)s.n * sizeof *s.counts_d, ctx.stream()),
                     "the density pass's counts"));
  }
  GM_TRY(grid_rho(ctx, s.rho_grid->geom.dim, g, s.cut, 0, first, last, nullptr, 1, opt,
                  s.counts_d));
  if (!counts) return ctx.sync("density peaks rho (index)");
  const unsigned blocks = grid_1d(s.n, 256) < 4096u ? grid_1d(s.n, 256) : 4096u;
  counts_by_index_kernel<<<blocks, 256, 0, ctx.stream()>>>(s.counts_d, g.order, s.n,
                                                           s.counts_by_index);
  GM_TRY(ctx.launched("the density pass's counts"));
  GM_TRY(download(ctx, counts, s.counts_by_index, (size_t)s.n * sizeof *counts,
                  "copying a part's counts to the host"));
  GM_TRY(ctx.check(cudaMemsetAsync(s.counts_d, 0, (size_t)s.n * sizeof *s.counts_d, ctx.stream()),
                   "the density pass's counts"));
  return ctx.sync("copying a part's counts to the host");
}

// The density order of all rho, which the session took with its first part_delta: sorted
// where it lies (density_order), instead of on the host (2.4 x 10^7 points: about 1.5 s
// on 2 cores).
gpuml_status part_order(PartSession &s, int64_t *order, const gpuml_options *opt) {
  if (!s.has_rho)
    return gm_fail(GPUML_ERR_CUDA, "dpc:cuda", "internal: the density order before the densities");
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, 0));
  GM_TRY(density_order(ctx, s.rho_d, s.n, order));
  return ctx.sync("the density order");
}

gpuml_status part_delta(PartSession &s, const double *rho, int64_t top, int64_t first,
                        int64_t last, double *delta_sq, int64_t *nearest,
                        const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, s.ap.gemm));
  if (!s.has_rho) {
    // all rho, by point index and (for the index) by sorted position with each cell's
    // densest point: the same for every part of the session
    GM_TRY(upload(ctx, s.rho_d, rho, (size_t)s.n * sizeof(double),
                  "copying the densities to the GPU"));
    if (s.delta_grid) {
      GM_TRY(gather(ctx, (const double *)s.rho_d, s.g.order, s.n, s.rho_sorted));
      GM_TRY(cell_max_fill(ctx, s.g, s.rho_sorted, s.cell_max));
    }
    if (s.walk_fine) {
      GM_TRY(gather(ctx, (const double *)s.rho_d, s.gr.order, s.n, s.rho_sorted_r));
      GM_TRY(cell_max_fill(ctx, s.gr, s.rho_sorted_r, s.cell_max_r));
    }
    GM_TRY(ctx.sync("copying the densities to the GPU"));
    s.has_rho = true;
  }
  if (s.delta_grid) {
    // as on one device (delta_pass): the first rings over rho's own cells where walk_fine,
    // the points left over g; the part is positions first .. last - 1 of the walked index
    DeltaIndex far, walk;
    far.g = s.g;
    far.rho_sorted = s.rho_sorted;
    far.cell_max = s.cell_max;
    walk = far;
    if (s.walk_fine) {
      walk.g = s.gr;
      walk.rho_sorted = s.rho_sorted_r;
      walk.cell_max = s.cell_max_r;
    }
    if (first == 0 && last == s.n) {
      // one part of all points: written by point index and copied whole as on one device
      // (at 2.4 x 10^7 x 3, 0.14 s against 0.36 s for two parts' spans put in place on
      // the host, bench/RESULTS.md round 19), top's entries left as they were
      GM_TRY(grid_delta(ctx, s.delta_grid->geom.dim, walk, far, top, 0, s.n, s.delta_d,
                        s.nearest_d, 0, opt));
      const double top_delta = top >= 0 ? delta_sq[top] : 0;
      const int64_t top_nearest = top >= 0 ? nearest[top] : 0;
      GM_TRY(download(ctx, delta_sq, s.delta_d, (size_t)s.n * sizeof *delta_sq,
                      "copying the distances to the host"));
      GM_TRY(download(ctx, nearest, s.nearest_d, (size_t)s.n * sizeof *nearest,
                      "copying the nearest denser points to the host"));
      if (top >= 0) {
        delta_sq[top] = top_delta;
        nearest[top] = top_nearest;
      }
      return GPUML_OK;
    }
    GM_TRY(grid_delta(ctx, s.delta_grid->geom.dim, walk, far, top, first, last, s.delta_d,
                      s.nearest_d, 1, opt));
    return part_to_host(ctx, s, walk.g, first, last, s.delta_d, delta_sq, s.nearest_d, nearest,
                        top, opt);
  }
  PassArgs da;
  da.rho = s.rho_d;
  da.value = s.delta_d;
  da.index = s.nearest_d;
  GM_TRY(all_pairs_pass<kDelta>(ctx, s.ap, s.n, s.d, da, first, last, opt));
  // rows first .. last - 1 as they lie, around top's
  const int64_t spans[2][2] = {{first, top >= first && top < last ? top : last},
                               {top >= first && top < last ? top + 1 : last, last}};
  for (int k = 0; k < 2; k++) {
    const int64_t a = spans[k][0], count = spans[k][1] - a;
    if (count <= 0) continue;
    GM_TRY(to_host(ctx, delta_sq + a, (const double *)s.delta_d + a, count,
                   "copying a part's distances to the host"));
    GM_TRY(to_host(ctx, nearest + a, (const int64_t *)s.nearest_d + a, count,
                   "copying a part's nearest denser points to the host"));
  }
  return ctx.sync("copying a part's distances to the host");
}

// Each cluster's largest border density (core/backend.h's border). With kept (the fit's)
// holding the index of grid, its points, rho and the densest point of each cell are
// taken there, and the clusters too once the cut made them on the device.
gpuml_status border_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                        double cut, const double *rho, const int64_t *cluster, int64_t ncentres,
                        FitKept *kept, double *cluster_border, const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, !grid && d >= kGemmMinDim));
  const bool reuse = grid && kept && kept->device == opt->device && kept->n == n &&
                     kept->rho_d && kept->rho_sorted && kept_index_of(*kept, grid);
  // rho, cluster, border and both by cell; the index with its runs (3 arrays by cell, and
  // the scan's two of 32 bytes) and each cell's densest partner; the points, rho and
  // cluster again in each cell's density order with that order (and its sort's input):
  // less what the fit kept
  const size_t by_cell = grid ? (size_t)grid->ncells * 96 + (size_t)n * 8 * (4 + d) : 0;
  const size_t fixed = reuse ? (size_t)n * 8 * (kept->cluster_d ? 1 : 2) + by_cell
                             : (size_t)n * 8 * 5 + (grid ? grid_bytes(grid) : 0) + by_cell;
  if (grid && fixed > ctx.budget())
    return gm_fail(GPUML_ERR_NOMEM, "dpc:cuda",
                   "the halo needs %.1f MB of GPU memory for %lld points, more than the budget "
                   "of %.1f MB: raise gpu_memory_limit, free GPU memory or use backend \"cpu\"",
                   (double)fixed / 1e6, (long long)n, (double)ctx.budget() / 1e6);
  AllPairs ap;
  if (!grid) GM_TRY(setup_all_pairs(ctx, ap, x, n, d, fixed, nullptr));
  const double *rho_d = reuse ? kept->rho_d : nullptr;
  const int64_t *cluster_d = reuse ? kept->cluster_d : nullptr;
  if (!rho_d) {
    double *up = nullptr;
    GM_TRY(to_device(ctx, &up, rho, n, "copying the densities to the GPU"));
    rho_d = up;
  }
  if (!cluster_d) {
    int64_t *up = nullptr;
    GM_TRY(to_device(ctx, &up, cluster, n, "copying the clusters to the GPU"));
    cluster_d = up;
  }
  GM_TRY(ctx.trace("dpc cuda halo: densities and clusters on the device"));
  if (!grid) {
    double *border_d = nullptr;
    GM_TRY(ctx.alloc(&border_d, (size_t)n, "the border densities"));
    PassArgs args;
    args.cut = cut;
    args.rho = rho_d;
    args.cluster = cluster_d;
    args.value = border_d;
    GM_TRY(all_pairs_pass<kBorder>(ctx, ap, n, d, args, 0, n, opt));
    double *border = (double *)gm_alloc((size_t)n, sizeof(double));
    if (!border)
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the halo",
                     (double)n * 8 / 1e6);
    const gpuml_status st = download(ctx, border, border_d, (size_t)n * sizeof *border,
                                     "copying the border densities to the host");
    if (!st) gm_dpc_cluster_max(border, cluster, n, ncentres, cluster_border, gm_threads(opt));
    free(border);
    return st;
  }
  GridDev g;
  const double *rho_sorted = nullptr, *cell_max = nullptr;
  if (reuse) {
    g = kept->g;
    rho_sorted = kept->rho_sorted;
    cell_max = kept->cell_max;
  } else {
    GM_TRY(sort_index(ctx, x, grid, g, nullptr));
    DeltaIndex ix;  // rho by position and each cell's densest point, as delta takes them
    GM_TRY(delta_index(ctx, g, rho_d, ix));
    rho_sorted = ix.rho_sorted;
    cell_max = ix.cell_max;
  }
  GM_TRY(ctx.trace("dpc cuda halo: the index"));
  int64_t *cluster_sorted = nullptr;
  unsigned long long *found = nullptr;
  GM_TRY(ctx.alloc(&cluster_sorted, (size_t)n, "the clusters by cell"));
  GM_TRY(ctx.alloc(&found, (size_t)ncentres, "the border densities by cluster"));
  GM_TRY(ctx.check(cudaMemsetAsync(found, 0, (size_t)ncentres * sizeof *found, ctx.stream()),
                   "clearing the border densities by cluster"));
  GM_TRY(gather(ctx, cluster_d, g.order, n, cluster_sorted));
  GM_TRY(cell_runs(ctx, g, cluster_sorted, cell_max));
  // The walks read each cell's points densest first (a copy of the points, rho and cluster
  // in that order; the cells keep their points), so that a point stops reading a cell at
  // the first point that cannot raise its border density: at 2.4 x 10^7 x 3 the walks read
  // 2.0 x 10^9 points in cell order (bench/RESULTS.md round 22).
  {
    int64_t *position = nullptr, *by_density = nullptr, *cluster_by_density = nullptr;
    double *rho_by_density = nullptr, *coords_by_density = nullptr;
    GM_TRY(ctx.alloc(&position, (size_t)n, "the halo's density order"));
    GM_TRY(ctx.alloc(&by_density, (size_t)n, "the halo's density order"));
    GM_TRY(ctx.alloc(&rho_by_density, (size_t)n, "the halo's density order"));
    const unsigned blocks = grid_1d(n, 256) < 8192u ? grid_1d(n, 256) : 8192u;
    iota_kernel<<<blocks, 256, 0, ctx.stream()>>>(position, n);
    GM_TRY(ctx.launched("the halo's density order"));
    size_t temp_bytes = 0;
    GM_TRY(ctx.check(cub::DeviceSegmentedSort::SortPairsDescending(
                         nullptr, temp_bytes, rho_sorted, rho_by_density, position, by_density, n,
                         g.ncells, g.start, g.start + 1, ctx.stream()),
                     "the halo's density order (cub::DeviceSegmentedSort)"));
    unsigned char *temp = nullptr;
    GM_TRY(ctx.alloc(&temp, temp_bytes, "the halo's density order"));
    GM_TRY(ctx.check(cub::DeviceSegmentedSort::SortPairsDescending(
                         temp, temp_bytes, rho_sorted, rho_by_density, position, by_density, n,
                         g.ncells, g.start, g.start + 1, ctx.stream()),
                     "the halo's density order (cub::DeviceSegmentedSort)"));
    GM_TRY(ctx.alloc(&cluster_by_density, (size_t)n, "the halo's density order"));
    GM_TRY(gather(ctx, (const int64_t *)cluster_sorted, by_density, n, cluster_by_density));
    GM_TRY(ctx.alloc(&coords_by_density, (size_t)(n * d), "the halo's density order"));
    for (int64_t t = 0; t < d; t++)
      GM_TRY(gather(ctx, g.coords + t * n, by_density, n, coords_by_density + t * n));
    g.coords = coords_by_density;
    rho_sorted = rho_by_density;
    cluster_sorted = cluster_by_density;
  }
  // the densest point of another cluster each cell's points may pair with
  double *partner = nullptr;
  GM_TRY(ctx.alloc(&partner, (size_t)grid->ncells, "the cells near other clusters"));
  {
    const unsigned blocks = grid_1d(grid->ncells, kPassThreads) < 4096u
                                ? grid_1d(grid->ncells, kPassThreads)
                                : 4096u;
    GM_DPC_DIM_SWITCH(grid->geom.dim, border_partner_kernel, g, cut, partner);
    GM_TRY(ctx.launched("the cells near other clusters"));
  }
  GM_TRY(ctx.trace("dpc cuda halo: the cells' runs, the cells near other clusters"));
  // GPUML_TRACE: the walks, the cells and the points they read
  unsigned long long *stats = nullptr;
  if (gm_trace_on()) {
    GM_TRY(ctx.alloc(&stats, 3, "the halo's counts"));
    GM_TRY(ctx.check(cudaMemsetAsync(stats, 0, 3 * sizeof *stats, ctx.stream()),
                     "the halo's counts"));
  }
  // The densest points first (about 1%, as on the CPU): they raise each cluster's
  // largest border density early, so that most other points stop at once.
  const double seed_rho = gm_dpc_seed_rho(rho, n);
  for (int seeding = 1; seeding >= 0; seeding--)
    for (int64_t s0 = 0; s0 < n; s0 += kGridChunk) {
      const int64_t s1 = min64(n, s0 + kGridChunk);
      const unsigned blocks = grid_1d(s1 - s0, kPassThreads);
      GM_DPC_DIM_SWITCH(grid->geom.dim, grid_border_kernel, g, cut, rho_sorted, cluster_sorted,
                        cell_max, found, partner, seed_rho, seeding, s0, s1, stats);
      GM_TRY(ctx.launched("density peaks halo (index)"));
      GM_TRY(ctx.sync("density peaks halo (index)"));
      GM_TRY(interrupted(ctx, opt));
      if (!seeding) gm_progress(opt, "dpc halo", s1, n);
    }
  GM_TRY(ctx.trace("dpc cuda halo: the walks"));
  if (stats) {
    unsigned long long count[3] = {0, 0, 0};
    GM_TRY(download(ctx, count, stats, sizeof count, "the halo's counts"));
    char line[160];
    snprintf(line, sizeof line, "dpc cuda halo: %llu walks, %llu cells and %llu points read",
             count[0], count[1], count[2]);
    GM_TRY(ctx.trace(line));
  }
  // the largest border densities by cluster, as the bits of non-negative doubles
  static_assert(sizeof(unsigned long long) == sizeof(double), "the bits of a double");
  return download(ctx, cluster_border, found, (size_t)ncentres * sizeof *found,
                  "copying the border densities to the host");
}

// ---------------------------------------------------------------------------------------
// The cut's clusters (core's assign_in_order) on the device: each position's parent is
// the position of its nearest denser point (earlier in the order), the centres hold
// their cluster, and pointer jumping (each round a position takes its parent's entry, a
// cluster or a pointer two steps up) ends in O(log n) rounds; one read and one write per
// position and round instead of the host's chain of reads anywhere in memory.

// lab[s] = -1 (a centre's is written after), pos[order[s]] = s.
__global__ void assign_positions_kernel(const int64_t *__restrict__ order, int64_t n,
                                        int64_t *__restrict__ pos, int64_t *__restrict__ lab) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x) {
    pos[order[s]] = s;
    lab[s] = -1;
  }
}

__global__ void assign_centres_kernel(const int64_t *__restrict__ centres, int64_t k,
                                      const int64_t *__restrict__ pos, int64_t *__restrict__ lab) {
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < k;
       c += (int64_t)gridDim.x * blockDim.x)
    lab[pos[centres[c]]] = c;
}

// lab[s] = -2 - parent for the others; *bad = the least position whose nearest is not
// earlier (n when none).
__global__ void assign_parents_kernel(const int64_t *__restrict__ order,
                                      const int64_t *__restrict__ nearest,
                                      const int64_t *__restrict__ pos, int64_t n,
                                      int64_t *__restrict__ lab, unsigned long long *bad) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x) {
    if (lab[s] >= 0) continue;
    const int64_t j = nearest[order[s]];
    const int64_t p = j >= 0 && j < n ? pos[j] : n;
    if (p >= s) atomicMin(bad, (unsigned long long)s);
    else lab[s] = -2 - p;
  }
}

// One round: a pointer becomes its target's entry. Entries only move up the chains to
// their clusters, so reading a neighbour's old or new entry is right either way.
__global__ void assign_jump_kernel(int64_t n, int64_t *lab, int *more) {
  int pending = 0;
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x) {
    const int64_t v = lab[s];
    if (v >= 0) continue;
    const int64_t w = ((volatile int64_t *)lab)[-2 - v];
    lab[s] = w;
    pending |= w < 0;
  }
  if (__syncthreads_or(pending) && threadIdx.x == 0) *more = 1;
}

__global__ void assign_out_kernel(const int64_t *__restrict__ order, const int64_t *__restrict__ lab,
                                  int64_t n, int64_t *__restrict__ cluster) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x)
    cluster[order[s]] = lab[s];
}

// Points from which the copies (order and nearest up, the clusters down) pay;
// GPUML_CUDA_DPC_ASSIGN=all takes any n (tests), =host none.
bool assign_here(int64_t n) {
  static const char *knob = getenv("GPUML_CUDA_DPC_ASSIGN");
  if (knob && strcmp(knob, "all") == 0) return true;
  if (knob && strcmp(knob, "host") == 0) return false;
  return n >= ((int64_t)1 << 20);
}

// With kept (the fit's, which holds order and nearest as given), they are read there and
// the clusters stay there for the halo.
gpuml_status assign_run(const int64_t *order, const int64_t *nearest, int64_t n,
                        const int64_t *centres, int64_t k, int64_t *cluster, int64_t *bad,
                        const gpuml_options *opt, FitKept *kept) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, false));
  if (kept && (kept->device != opt->device || !kept->order_d || !kept->nearest_d || kept->n != n))
    kept = nullptr;
  GM_TRY(check_fixed(ctx, (size_t)n * 8 * (kept ? 3 : 4) + (size_t)k * 8, n));
  const int64_t *order_d = kept ? kept->order_d : nullptr,
                *nearest_d = kept ? kept->nearest_d : nullptr;
  int64_t *centres_d = nullptr, *pos = nullptr, *lab = nullptr, *cluster_d = nullptr;
  unsigned long long *bad_d = nullptr;
  int *more_d = nullptr;
  if (!kept) {
    int64_t *up = nullptr;
    GM_TRY(to_device(ctx, &up, order, n, "copying the density order to the GPU"));
    order_d = up;
    GM_TRY(to_device(ctx, &up, nearest, n, "copying the nearest denser points to the GPU"));
    nearest_d = up;
  }
  GM_TRY(to_device(ctx, &centres_d, centres, k, "copying the centres to the GPU"));
  GM_TRY(ctx.alloc(&pos, (size_t)n, "the cut's positions"));
  GM_TRY(ctx.alloc(&lab, (size_t)n, "the cut's labels"));
  GM_TRY(ctx.alloc(&bad_d, 1, "the cut's labels"));
  GM_TRY(ctx.alloc(&more_d, 1, "the cut's labels"));
  const unsigned blocks = grid_1d(n, 256) < 8192u ? grid_1d(n, 256) : 8192u;
  const unsigned long long none = (unsigned long long)n;
  GM_TRY(ctx.check(cudaMemcpyAsync(bad_d, &none, sizeof none, cudaMemcpyHostToDevice, ctx.stream()),
                   "the cut's labels"));
  assign_positions_kernel<<<blocks, 256, 0, ctx.stream()>>>(order_d, n, pos, lab);
  assign_centres_kernel<<<grid_1d(k, 256), 256, 0, ctx.stream()>>>(centres_d, k, pos, lab);
  assign_parents_kernel<<<blocks, 256, 0, ctx.stream()>>>(order_d, nearest_d, pos, n, lab, bad_d);
  GM_TRY(ctx.launched("the cut's parents"));
  unsigned long long first_bad = 0;
  GM_TRY(ctx.check(cudaMemcpyAsync(&first_bad, bad_d, sizeof first_bad, cudaMemcpyDeviceToHost,
                                   ctx.stream()),
                   "the cut's labels"));
  GM_TRY(ctx.sync("the cut's parents"));
  *bad = (int64_t)first_bad;
  if (*bad != n) return GPUML_OK;
  for (int round = 0;; round++) {
    int more = 0;
    GM_TRY(ctx.check(cudaMemsetAsync(more_d, 0, sizeof *more_d, ctx.stream()), "the cut's labels"));
    assign_jump_kernel<<<blocks, 256, 0, ctx.stream()>>>(n, lab, more_d);
    GM_TRY(ctx.launched("the cut's labels"));
    GM_TRY(ctx.check(cudaMemcpyAsync(&more, more_d, sizeof more, cudaMemcpyDeviceToHost, ctx.stream()),
                     "the cut's labels"));
    GM_TRY(ctx.sync("the cut's labels"));
    if (!more) break;
    if (round > 130)  // each round at least halves every chain: never reached
      return gm_fail(GPUML_ERR_CUDA, "dpc:cuda", "the cut's labels did not settle");
  }
  if (kept) {
    GM_TRY(keep_alloc(ctx, &kept->held, &cluster_d, (size_t)n, "the clusters"));
    kept->cluster_d = cluster_d;
  } else {
    cluster_d = pos;  // pos is no longer needed
  }
  assign_out_kernel<<<blocks, 256, 0, ctx.stream()>>>(order_d, lab, n, cluster_d);
  GM_TRY(ctx.launched("the cut's clusters"));
  GM_TRY(ctx.trace("dpc cuda cut: the clusters on the device"));
  return download(ctx, cluster, cluster_d, (size_t)n * sizeof *cluster,
                  "copying the clusters to the host");
}

}  // namespace
}  // namespace gm

extern "C" gpuml_status gm_cuda_dpc_assign(const int64_t *order, const int64_t *nearest, int64_t n,
                                           const int64_t *centres, int64_t k, int64_t *cluster,
                                           int *done, int64_t *bad, void *kept,
                                           const gpuml_options *opt) {
  *done = gm::assign_here(n);
  *bad = n;
  if (!*done) return GPUML_OK;
  return gm::assign_run(order, nearest, n, centres, k, cluster, bad, opt,
                        static_cast<gm::FitKept *>(kept));
}

extern "C" gpuml_status gm_cuda_dpc_density(const double *x, int64_t n, int64_t d,
                                       const struct gm_dpc_grid *rho_grid,
                                       const struct gm_dpc_grid *delta_grid, int gaussian,
                                       double dc, double cut, double *rho, double *delta_sq,
                                       int64_t *nearest, int64_t *order, void **kept,
                                       const gpuml_options *opt) {
  gm::FitKept *keep = nullptr;
  if (kept) {
    *kept = nullptr;
    keep = new (std::nothrow) gm::FitKept();  // none: nothing kept, the same answers
    if (keep) keep->device = opt->device;
  }
  const gpuml_status st = gm::dpc_run(x, n, d, rho_grid, delta_grid, gaussian, dc, cut, rho,
                                      delta_sq, nearest, order, opt, keep);
  if (st) {
    delete keep;  // after dpc_run's Context: the held arrays go back to the pool
    return st;
  }
  if (kept) *kept = keep;
  return GPUML_OK;
}

extern "C" void gm_cuda_dpc_release_kept(void *kept) { delete static_cast<gm::FitKept *>(kept); }

extern "C" gpuml_status gm_cuda_dpc_border(const double *x, int64_t n, int64_t d,
                                           const struct gm_dpc_grid *grid, double cut,
                                           const double *rho, const int64_t *cluster,
                                           int64_t ncentres, void *kept, double *cluster_border,
                                           const gpuml_options *opt) {
  return gm::border_run(x, n, d, grid, cut, rho, cluster, ncentres,
                        static_cast<gm::FitKept *>(kept), cluster_border, opt);
}

extern "C" gpuml_status gm_cuda_dpc_part_open(const double *x, int64_t n, int64_t d,
                                              const struct gm_dpc_grid *rho_grid,
                                              const struct gm_dpc_grid *delta_grid,
                                              int gaussian, double dc, double cut,
                                              const gpuml_options *opt, void **session) {
  *session = nullptr;
  gm::PartSession *s = new (std::nothrow) gm::PartSession();
  if (!s) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate a density peaks session");
  s->device = opt->device;
  s->x = x;
  s->n = n;
  s->d = d;
  s->rho_grid = rho_grid;
  s->delta_grid = delta_grid;
  s->gaussian = gaussian;
  s->dc = dc;
  s->cut = cut;
  const gpuml_status st = gm::part_open(*s, opt);
  if (st) {
    delete s;  // after part_open's Context: the held arrays go back to the pool
    return st;
  }
  *session = s;
  return GPUML_OK;
}

extern "C" gpuml_status gm_cuda_dpc_part_bounds(void *session, int parts, int64_t *bounds,
                                                const gpuml_options *opt) {
  gm::PartSession &s = *static_cast<gm::PartSession *>(session);
  const gpuml_options o = gm::on_device(s, opt);
  return gm::part_bounds(s, parts, bounds, &o);
}

extern "C" gpuml_status gm_cuda_dpc_part_order(void *session, int64_t *order,
                                               const gpuml_options *opt) {
  gm::PartSession &s = *static_cast<gm::PartSession *>(session);
  const gpuml_options o = gm::on_device(s, opt);
  return gm::part_order(s, order, &o);
}

extern "C" gpuml_status gm_cuda_dpc_part_rho(void *session, int64_t first, int64_t last,
                                             double *rho, const gpuml_options *opt) {
  gm::PartSession &s = *static_cast<gm::PartSession *>(session);
  const gpuml_options o = gm::on_device(s, opt);
  return gm::part_rho(s, first, last, rho, &o);
}

extern "C" int gm_cuda_dpc_part_counts_on(void *session, const gpuml_options *opt) {
  gm::PartSession &s = *static_cast<gm::PartSession *>(session);
  const gpuml_options o = gm::on_device(s, opt);
  return gm::part_counts_on(s, &o);
}

extern "C" gpuml_status gm_cuda_dpc_part_counts(void *session, int64_t first, int64_t last,
                                                uint32_t *counts, const gpuml_options *opt) {
  gm::PartSession &s = *static_cast<gm::PartSession *>(session);
  const gpuml_options o = gm::on_device(s, opt);
  return gm::part_counts(s, first, last, counts, &o);
}

extern "C" gpuml_status gm_cuda_dpc_part_delta(void *session, const double *rho, int64_t top,
                                               int64_t first, int64_t last, double *delta_sq,
                                               int64_t *nearest, const gpuml_options *opt) {
  gm::PartSession &s = *static_cast<gm::PartSession *>(session);
  const gpuml_options o = gm::on_device(s, opt);
  return gm::part_delta(s, rho, top, first, last, delta_sq, nearest, &o);
}

extern "C" void gm_cuda_dpc_part_close(void *session) {
  delete static_cast<gm::PartSession *>(session);
}
