// gm_cuda_dpc_density() and gm_cuda_dpc_border(): the passes of density peaks over pairs
// on the GPU, with the same exact decisions as the CPU (core/dpc_grid.c,
// core/dpc_tiles.c), so that both backends give the same answers:
//  - d <= 3: the grids built by core/ (points sorted by cell) are uploaded. With cells
//    of side >= dc, one thread per point scans the 3^d cells around it for the cutoff
//    density and the halo. On the finer grid of delta, each point scans the cells
//    around it, then, when its nearest denser point may lie farther, rings of cells
//    outwards until the ring's distance bound passes the best found.
//  - otherwise (and for the Gaussian density at any d), all pairs: a direct kernel for
//    d < 16 (one thread per point, blocks of points through shared memory, exact fp64),
//    cuBLAS DGEMM tiles for d >= 16 screened against the thresholds and recomputed
//    exactly within the screening margin.
// Every pass writes per point from one thread or one block, in a fixed order: no float
// atomics, so results are reproducible. The data and the O(n) arrays stay resident on
// the device; only the GEMM tiles are sized from the memory budget.
#include "gpuml_cuda.h"
#include "distance_tiles.cuh"
#include "dpc.h"

namespace gm {
namespace {

constexpr int kPassThreads = 256;        // grid kernels and GEMM epilogues
constexpr int kDirectThreads = 128;      // direct pair kernel (shared tile per block)
constexpr int64_t kGridChunk = 1 << 18;  // points per launch between interrupt checks
constexpr int64_t kDirectChunk = 1 << 17;
constexpr int64_t kQueryTile = 4096;     // GEMM tile columns
constexpr int64_t kRefTile = 32768;      // GEMM tile rows

enum Mode { kCount = 0, kGauss = 1, kDelta = 2, kBorder = 3 };

struct PassArgs {
  double cut = 0;                   // kCount, kBorder: s < cut
  double inv_dc2 = 0;               // kGauss
  const double *rho = nullptr;      // kDelta, kBorder (by point index)
  const int64_t *cluster = nullptr; // kBorder
  double *value = nullptr;          // rho, delta_sq or border, by point index
  int64_t *index = nullptr;         // kDelta: the nearest denser point
};

struct GridDev {
  int64_t n = 0;
  double h = 0;
  int64_t cells[GM_DPC_GRID_MAX_DIM] = {1, 1, 1};
  int64_t max_cells = 0;
  const int64_t *start = nullptr, *cell = nullptr, *order = nullptr;
  const double *coords = nullptr;
};

__device__ __forceinline__ bool above(double rho_j, int64_t j, double rho_i, int64_t i) {
  return rho_j > rho_i || (rho_j == rho_i && j < i);
}

// ---------------------------------------------------------------------------------------
// Grid kernels

template <int DIM>
__device__ __forceinline__ double grid_sq(const GridDev &g, const double *p, int64_t j) {
  double s = 0;
#pragma unroll
  for (int t = 0; t < DIM; t++) {
    double diff = __dsub_rn(g.coords[(size_t)t * (size_t)g.n + (size_t)j], p[t]);
    s = __dadd_rn(s, __dmul_rn(diff, diff));
  }
  return s;
}

template <int DIM>
__device__ __forceinline__ void load_point(const GridDev &g, int64_t s, double *p, int64_t *c) {
  int64_t id = g.cell[s];
#pragma unroll
  for (int t = 0; t < DIM; t++) {
    p[t] = g.coords[(size_t)t * (size_t)g.n + (size_t)s];
    c[t] = id % g.cells[t];
    id /= g.cells[t];
  }
}

// f(a, b) for the runs of sorted positions in the cells at Chebyshev distance exactly r
// from cell c (r = 0: the cell; rows along dimension 0 are contiguous), as in
// walk_ring() of core/dpc_grid.c.
template <int DIM, typename F>
__device__ __forceinline__ void walk_ring(const GridDev &g, const int64_t *c, int64_t r, F f) {
  const int64_t m0 = g.cells[0];
  const int64_t m1 = DIM > 1 ? g.cells[1] : 1, m2 = DIM > 2 ? g.cells[2] : 1;
  const int64_t r1 = DIM > 1 ? r : 0, r2 = DIM > 2 ? r : 0;
  const int64_t c1 = DIM > 1 ? c[1] : 0, c2 = DIM > 2 ? c[2] : 0;
  for (int64_t o2 = -r2; o2 <= r2; o2++) {
    const int64_t y2 = c2 + o2;
    if (y2 < 0 || y2 >= m2) continue;
    for (int64_t o1 = -r1; o1 <= r1; o1++) {
      const int64_t y1 = c1 + o1;
      if (y1 < 0 || y1 >= m1) continue;
      const int64_t row = (y1 + y2 * m1) * m0;
      if (r == 0 || o1 == r || o1 == -r || o2 == r || o2 == -r) {
        const int64_t lo = c[0] - r < 0 ? 0 : c[0] - r;
        const int64_t hi = c[0] + r >= m0 ? m0 - 1 : c[0] + r;
        f(g.start[row + lo], g.start[row + hi + 1]);
      } else {
        if (c[0] - r >= 0) f(g.start[row + c[0] - r], g.start[row + c[0] - r + 1]);
        if (c[0] + r < m0) f(g.start[row + c[0] + r], g.start[row + c[0] + r + 1]);
      }
    }
  }
}

// The 3^DIM cells around c: one run per row.
template <int DIM, typename F>
__device__ __forceinline__ void walk_block(const GridDev &g, const int64_t *c, F f) {
  const int64_t m0 = g.cells[0];
  const int64_t m1 = DIM > 1 ? g.cells[1] : 1, m2 = DIM > 2 ? g.cells[2] : 1;
  const int64_t c1 = DIM > 1 ? c[1] : 0, c2 = DIM > 2 ? c[2] : 0;
  const int64_t r1 = DIM > 1 ? 1 : 0, r2 = DIM > 2 ? 1 : 0;
  const int64_t lo = c[0] > 0 ? c[0] - 1 : 0, hi = c[0] + 1 < m0 ? c[0] + 1 : m0 - 1;
  for (int64_t y2 = c2 - r2; y2 <= c2 + r2; y2++) {
    if (y2 < 0 || y2 >= m2) continue;
    for (int64_t y1 = c1 - r1; y1 <= c1 + r1; y1++) {
      if (y1 < 0 || y1 >= m1) continue;
      const int64_t row = (y1 + y2 * m1) * m0;
      f(g.start[row + lo], g.start[row + hi + 1]);
    }
  }
}

template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    grid_count_kernel(GridDev g, double cut, double *__restrict__ rho, int64_t s0, int64_t s1) {
  const int64_t s = s0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= s1) return;
  double p[DIM];
  int64_t c[DIM];
  load_point<DIM>(g, s, p, c);
  int64_t count = 0;
  walk_block<DIM>(g, c, [&](int64_t a, int64_t b) {
    for (int64_t j = a; j < b; j++) count += grid_sq<DIM>(g, p, j) < cut;
  });
  rho[g.order[s]] = (double)(count - 1);  // itself, at 0 < cut, is not counted
}

template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    grid_border_kernel(GridDev g, double cut, const double *__restrict__ rho_sorted,
                       const int64_t *__restrict__ cluster_sorted, double *__restrict__ border,
                       int64_t s0, int64_t s1) {
  const int64_t s = s0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= s1) return;
  double p[DIM];
  int64_t c[DIM];
  load_point<DIM>(g, s, p, c);
  const int64_t own = cluster_sorted[s];
  const double rho_i = rho_sorted[s];
  double best = 0;
  walk_block<DIM>(g, c, [&](int64_t a, int64_t b) {
    for (int64_t j = a; j < b; j++) {
      if (cluster_sorted[j] == own) continue;
      const double avg = (rho_i + rho_sorted[j]) / 2;
      if (avg > best && grid_sq<DIM>(g, p, j) < cut) best = avg;
    }
  });
  border[g.order[s]] = best;
}

template <int DIM>
__device__ __forceinline__ void scan_above(const GridDev &g, const double *__restrict__ rho_sorted,
                                           const double *p, double rho_i, int64_t i, int64_t a,
                                           int64_t b, double &best, int64_t &best_j) {
  for (int64_t j = a; j < b; j++) {
    const double rj = rho_sorted[j];
    if (rj < rho_i) continue;
    const int64_t oj = g.order[j];
    if (!above(rj, oj, rho_i, i)) continue;
    const double sq = grid_sq<DIM>(g, p, j);
    if (sq < best || (sq == best && oj < best_j)) {
      best = sq;
      best_j = oj;
    }
  }
}

// Rings 0 and 1 for every point. Points whose best is nearer than h are done (anything
// outside is farther); the others go to a list with their best so far.
template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    grid_delta_near_kernel(GridDev g, const double *__restrict__ rho_sorted, int64_t top,
                           double *__restrict__ delta_sq, int64_t *__restrict__ nearest,
                           int64_t *__restrict__ pending, double *__restrict__ pending_best,
                           int64_t *__restrict__ pending_j,
                           unsigned long long *__restrict__ pending_count, int64_t s0,
                           int64_t s1) {
  const int64_t s = s0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= s1) return;
  const int64_t i = g.order[s];
  if (i == top) return;
  double p[DIM];
  int64_t c[DIM];
  load_point<DIM>(g, s, p, c);
  const double rho_i = rho_sorted[s];
  double best = __longlong_as_double(0x7ff0000000000000LL);
  int64_t best_j = -1;
  walk_block<DIM>(g, c, [&](int64_t a, int64_t b) {
    scan_above<DIM>(g, rho_sorted, p, rho_i, i, a, b, best, best_j);
  });
  if (best < g.h * g.h * (1 - GM_DPC_RING_SLACK)) {
    delta_sq[i] = best;
    nearest[i] = best_j;
  } else {
    const unsigned long long at = atomicAdd(pending_count, 1ULL);
    pending[at] = s;
    pending_best[at] = best;
    pending_j[at] = best_j;
  }
}

// The listed points: rings 2, 3, ... until the ring's distance bound passes the best.
template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    grid_delta_far_kernel(GridDev g, const double *__restrict__ rho_sorted,
                          double *__restrict__ delta_sq, int64_t *__restrict__ nearest,
                          const int64_t *__restrict__ pending,
                          const double *__restrict__ pending_best,
                          const int64_t *__restrict__ pending_j, int64_t k0, int64_t k1) {
  const int64_t k = k0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= k1) return;
  const int64_t s = pending[k];
  const int64_t i = g.order[s];
  double p[DIM];
  int64_t c[DIM];
  load_point<DIM>(g, s, p, c);
  const double rho_i = rho_sorted[s];
  double best = pending_best[k];
  int64_t best_j = pending_j[k];
  for (int64_t r = 2; r <= g.max_cells; r++) {
    const double bound = (double)(r - 1) * g.h;
    if (best < bound * bound * (1 - GM_DPC_RING_SLACK)) break;
    walk_ring<DIM>(g, c, r, [&](int64_t a, int64_t b) {
      scan_above<DIM>(g, rho_sorted, p, rho_i, i, a, b, best, best_j);
    });
  }
  delta_sq[i] = best;
  nearest[i] = best_j;
}

template <typename T>
__global__ void gather_kernel(const T *__restrict__ in, const int64_t *__restrict__ order,
                              int64_t n, T *__restrict__ out) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x)
    out[s] = in[order[s]];
}

// ---------------------------------------------------------------------------------------
// All pairs, direct form (d < 16): one thread per point, the others through shared
// memory in blocks of kDirectThreads. DIM > 0: d known at compile time.

template <int Mode, int DIM>
__global__ void __launch_bounds__(kDirectThreads)
    direct_pass_kernel(const double *__restrict__ X, int64_t n, int d, PassArgs a, int64_t q0,
                       int64_t q1) {
  extern __shared__ double smem[];
  double *sx = smem;                               // kDirectThreads points, d values each
  double *srho = smem + (size_t)kDirectThreads * d;  // kDelta, kBorder
  int64_t *scl = (int64_t *)(srho + kDirectThreads); // kBorder
  const int dd = DIM > 0 ? DIM : d;
  const int64_t i = q0 + (int64_t)blockIdx.x * kDirectThreads + threadIdx.x;
  const bool active = i < q1;
  double xi[DIM > 0 ? DIM : kDirectMaxDim - 1];
#pragma unroll
  for (int t = 0; t < (DIM > 0 ? DIM : kDirectMaxDim - 1); t++)
    xi[t] = active && t < dd ? X[(size_t)i * dd + t] : 0;
  const double rho_i = (Mode == kDelta || Mode == kBorder) && active ? a.rho[i] : 0;
  const int64_t cl_i = Mode == kBorder && active ? a.cluster[i] : 0;
  int64_t count = 0;
  double acc = Mode == kDelta ? __longlong_as_double(0x7ff0000000000000LL) : 0;
  int64_t best_j = -1;
  for (int64_t j0 = 0; j0 < n; j0 += kDirectThreads) {
    const int64_t jn = n - j0 < kDirectThreads ? n - j0 : kDirectThreads;
    for (int64_t e = threadIdx.x; e < jn * dd; e += kDirectThreads) sx[e] = X[(size_t)j0 * dd + e];
    if (Mode == kDelta || Mode == kBorder)
      if (threadIdx.x < jn) srho[threadIdx.x] = a.rho[j0 + threadIdx.x];
    if (Mode == kBorder)
      if (threadIdx.x < jn) scl[threadIdx.x] = a.cluster[j0 + threadIdx.x];
    __syncthreads();
    if (active) {
      for (int jj = 0; jj < (int)jn; jj++) {
        const int64_t j = j0 + jj;
        if (Mode == kDelta && !above(srho[jj], j, rho_i, i)) continue;
        if (Mode == kBorder && (scl[jj] == cl_i || (rho_i + srho[jj]) / 2 <= acc)) continue;
        if ((Mode == kCount || Mode == kGauss) && j == i) continue;
        const double *xj = sx + (size_t)jj * dd;
        double s = 0;
#pragma unroll
        for (int t = 0; t < (DIM > 0 ? DIM : kDirectMaxDim - 1); t++)
          if (t < dd) {
            double diff = __dsub_rn(xj[t], xi[t]);
            s = __dadd_rn(s, __dmul_rn(diff, diff));
          }
        if (Mode == kCount) count += s < a.cut;
        if (Mode == kGauss) acc += exp(-s * a.inv_dc2);
        if (Mode == kDelta && (s < acc || (s == acc && j < best_j))) {
          acc = s;
          best_j = j;
        }
        if (Mode == kBorder && s < a.cut) acc = (rho_i + srho[jj]) / 2;
      }
    }
    __syncthreads();
  }
  if (!active) return;
  if (Mode == kCount) a.value[i] = (double)count;
  if (Mode == kGauss || Mode == kBorder) a.value[i] = acc;
  if (Mode == kDelta) {
    a.value[i] = acc;
    a.index[i] = best_j;
  }
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
    if (Mode == kGauss) acc += exp(-s * a.inv_dc2);
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

// The points resident on the device (points-major, plus the centred copy and norms for
// the GEMM form), and the GEMM tile.
struct AllPairs {
  bool gemm = false;
  PointSet<double, double> R;
  Staging<double> sg;
  double *centre = nullptr;
  double *G = nullptr;
  int64_t rt = 0, qt = 0;
};

size_t resident_bytes(int64_t n, int64_t d, bool gemm, int64_t staging_rows) {
  return (size_t)n * point_bytes<double, double>(d, gemm) +
         (size_t)staging_rows * (size_t)d * 8 + (size_t)d * 8 + 4096;
}

template <int Mode>
gpuml_status direct_pass(Context &ctx, const AllPairs &ap, int64_t n, int64_t d,
                         const PassArgs &args, const gpuml_options *opt) {
  const size_t shared = ((size_t)kDirectThreads * (size_t)d + kDirectThreads) * 8 +
                        (Mode == kBorder ? kDirectThreads * 8 : 0);
  const double *X = ap.R.x;
  for (int64_t q0 = 0; q0 < n; q0 += kDirectChunk) {
    const int64_t q1 = min64(n, q0 + kDirectChunk);
    const unsigned blocks = grid_1d(q1 - q0, kDirectThreads);
    switch (d) {
      case 1: direct_pass_kernel<Mode, 1><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, 1, args, q0, q1); break;
      case 2: direct_pass_kernel<Mode, 2><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, 2, args, q0, q1); break;
      case 3: direct_pass_kernel<Mode, 3><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, 3, args, q0, q1); break;
      default: direct_pass_kernel<Mode, 0><<<blocks, kDirectThreads, shared, ctx.stream()>>>(X, n, (int)d, args, q0, q1);
    }
    GM_TRY(ctx.launched("density peaks pass (direct)"));
    GM_TRY(ctx.sync("density peaks pass (direct)"));
    GM_TRY(interrupted(ctx, opt));
    gm_progress(opt, stage_of(Mode), q1, n);
  }
  return GPUML_OK;
}

template <int Mode>
gpuml_status gemm_pass(Context &ctx, const AllPairs &ap, int64_t n, int64_t d,
                       const PassArgs &args, const gpuml_options *opt) {
  const double slack = GM_DPC_SCREEN_SLACK * (double)(d + 4);
  for (int64_t q0 = 0; q0 < n; q0 += ap.qt) {
    const int64_t qn = min64(ap.qt, n - q0);
    for (int64_t r0 = 0; r0 < n; r0 += ap.rt) {
      const int64_t rn = min64(ap.rt, n - r0);
      GM_TRY(gemm_tile<double>(ctx, ap.R.p_at(r0), rn, ap.R.p_at(q0), qn, d, ap.G, rn));
      if (Mode == kDelta)
        gemm_delta_kernel<<<(unsigned)qn, kPassThreads, 0, ctx.stream()>>>(
            ap.G, rn, r0, q0, ap.R.norm, ap.R.x, d, slack, args, r0 == 0);
      else
        gemm_fold_kernel<Mode><<<(unsigned)qn, kPassThreads, 0, ctx.stream()>>>(
            ap.G, rn, r0, q0, ap.R.norm, ap.R.x, d, slack, args, r0 == 0);
      GM_TRY(ctx.launched("density peaks pass (GEMM)"));
    }
    GM_TRY(ctx.sync("density peaks pass (GEMM)"));
    GM_TRY(interrupted(ctx, opt));
    gm_progress(opt, stage_of(Mode), q0 + qn, n);
  }
  return GPUML_OK;
}

template <int Mode>
gpuml_status all_pairs_pass(Context &ctx, const AllPairs &ap, int64_t n, int64_t d,
                            const PassArgs &args, const gpuml_options *opt) {
  return ap.gemm ? gemm_pass<Mode>(ctx, ap, n, d, args, opt)
                 : direct_pass<Mode>(ctx, ap, n, d, args, opt);
}

// Uploads the points; `fixed` is the other device memory the call needs. The GEMM tile
// takes what the budget leaves.
gpuml_status setup_all_pairs(Context &ctx, AllPairs &ap, const double *x, int64_t n, int64_t d,
                             size_t fixed) {
  ap.gemm = d >= kGemmMinDim;
  const size_t staging_bytes = ctx.budget() / 16 < ((size_t)32 << 20) ? ctx.budget() / 16
                                                                         : ((size_t)32 << 20);
  ap.sg.rows = staging_rows<double>(staging_bytes, d, n);
  const size_t need = fixed + resident_bytes(n, d, ap.gemm, ap.sg.rows);
  if (ap.gemm) {
    ap.qt = min64(n, kQueryTile);
    ap.rt = min64(n, kRefTile);
    while (need + (size_t)ap.rt * (size_t)ap.qt * 8 > ctx.budget() && ap.rt > 1024) ap.rt /= 2;
    while (need + (size_t)ap.rt * (size_t)ap.qt * 8 > ctx.budget() && ap.qt > 64) ap.qt /= 2;
  }
  const size_t total = need + (ap.gemm ? (size_t)ap.rt * (size_t)ap.qt * 8 : 0);
  if (total > ctx.budget())
    return gm_fail(GPUML_ERR_NOMEM, "dpc:cuda",
                   "density peaks needs %.1f MB of GPU memory for %lld points of dimension "
                   "%lld, more than the budget of %.1f MB: raise gpu_memory_limit, free GPU "
                   "memory or use backend \"cpu\"",
                   (double)total / 1e6, (long long)n, (long long)d, (double)ctx.budget() / 1e6);
  GM_TRY(ctx.alloc(&ap.sg.raw, (size_t)ap.sg.rows * (size_t)d, "the staging buffer"));
  ap.R.host = x;
  ap.R.ld = n;
  ap.R.d = d;
  ap.R.gemm = ap.gemm;
  if (ap.gemm) {
    GM_TRY(ctx.alloc(&ap.centre, (size_t)d, "the centre"));
    ap.R.centre = ap.centre;
  }
  GM_TRY(alloc_points(ctx, ap.R, n));
  if (ap.gemm) {
    GM_TRY(load_resident_with_centre(ctx, ap.sg, ap.R, (const double *)nullptr, 0, ap.centre));
    GM_TRY(ctx.alloc(&ap.G, (size_t)ap.rt * (size_t)ap.qt, "the distance tile"));
  } else {
    GM_TRY(load_points(ctx, ap.sg, ap.R, 0, n));
  }
  return GPUML_OK;
}

size_t grid_bytes(const gm_dpc_grid *grid) {
  return ((size_t)grid->ncells + 1 + 2 * (size_t)grid->n) * 8 +
         (size_t)grid->n * (size_t)grid->dim * 8;
}

gpuml_status upload_grid(Context &ctx, const gm_dpc_grid *grid, GridDev &g) {
  g.n = grid->n;
  g.h = grid->h;
  for (int t = 0; t < grid->dim; t++) g.cells[t] = grid->cells[t];
  g.max_cells = grid->max_cells;
  int64_t *start = nullptr, *cell = nullptr, *order = nullptr;
  double *coords = nullptr;
  const size_t n = (size_t)grid->n;
  GM_TRY(ctx.alloc(&start, (size_t)grid->ncells + 1, "the grid cells"));
  GM_TRY(ctx.alloc(&cell, n, "the grid"));
  GM_TRY(ctx.alloc(&order, n, "the grid"));
  GM_TRY(ctx.alloc(&coords, n * (size_t)grid->dim, "the grid points"));
  GM_TRY(ctx.check(cudaMemcpyAsync(start, grid->start, ((size_t)grid->ncells + 1) * 8,
                                   cudaMemcpyHostToDevice, ctx.stream()), "copying the grid"));
  GM_TRY(ctx.check(cudaMemcpyAsync(cell, grid->cell, n * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the grid"));
  GM_TRY(ctx.check(cudaMemcpyAsync(order, grid->order, n * 8, cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the grid"));
  GM_TRY(ctx.check(cudaMemcpyAsync(coords, grid->coords, n * (size_t)grid->dim * 8,
                                   cudaMemcpyHostToDevice, ctx.stream()),
                   "copying the grid points"));
  g.start = start;
  g.cell = cell;
  g.order = order;
  g.coords = coords;
  return GPUML_OK;
}

#define GM_DPC_DIM_SWITCH(dim, KERNEL, ...)                                       \
  switch (dim) {                                                                  \
    case 1: KERNEL<1><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    case 2: KERNEL<2><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    default: KERNEL<3><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
  }

gpuml_status grid_rho(Context &ctx, int dim, const GridDev &g, double cut, double *rho,
                      const gpuml_options *opt) {
  for (int64_t s0 = 0; s0 < g.n; s0 += kGridChunk) {
    const int64_t s1 = min64(g.n, s0 + kGridChunk);
    const unsigned blocks = grid_1d(s1 - s0, kPassThreads);
    GM_DPC_DIM_SWITCH(dim, grid_count_kernel, g, cut, rho, s0, s1);
    GM_TRY(ctx.launched("density peaks rho (grid)"));
    GM_TRY(ctx.sync("density peaks rho (grid)"));
    GM_TRY(interrupted(ctx, opt));
    gm_progress(opt, "dpc rho", s1, g.n);
  }
  return GPUML_OK;
}

gpuml_status grid_delta(Context &ctx, int dim, const GridDev &g, const double *rho_sorted,
                        int64_t top, double *delta_sq, int64_t *nearest,
                        const gpuml_options *opt) {
  int64_t *pending = nullptr, *pending_j = nullptr;
  double *pending_best = nullptr;
  unsigned long long *count_d = nullptr;
  GM_TRY(ctx.alloc(&pending, (size_t)g.n, "the ring search list"));
  GM_TRY(ctx.alloc(&pending_j, (size_t)g.n, "the ring search list"));
  GM_TRY(ctx.alloc(&pending_best, (size_t)g.n, "the ring search list"));
  GM_TRY(ctx.alloc(&count_d, 1, "the ring search count"));
  GM_TRY(ctx.check(cudaMemsetAsync(count_d, 0, sizeof *count_d, ctx.stream()),
                   "clearing the ring search count"));
  // The cells around each point; progress counts the points of this first step.
  for (int64_t s0 = 0; s0 < g.n; s0 += kGridChunk) {
    const int64_t s1 = min64(g.n, s0 + kGridChunk);
    const unsigned blocks = grid_1d(s1 - s0, kPassThreads);
    GM_DPC_DIM_SWITCH(dim, grid_delta_near_kernel, g, rho_sorted, top, delta_sq, nearest,
                      pending, pending_best, pending_j, count_d, s0, s1);
    GM_TRY(ctx.launched("density peaks delta (grid)"));
    GM_TRY(ctx.sync("density peaks delta (grid)"));
    GM_TRY(interrupted(ctx, opt));
    if (s1 < g.n) gm_progress(opt, "dpc delta", s1, g.n);
  }
  unsigned long long count = 0;
  GM_TRY(ctx.check(cudaMemcpyAsync(&count, count_d, sizeof count, cudaMemcpyDeviceToHost,
                                   ctx.stream()),
                   "copying the ring search count"));
  GM_TRY(ctx.sync("copying the ring search count"));
  // The points whose nearest denser point may lie farther out (local density maxima).
  for (int64_t k0 = 0; k0 < (int64_t)count; k0 += kGridChunk) {
    const int64_t k1 = min64((int64_t)count, k0 + kGridChunk);
    const unsigned blocks = grid_1d(k1 - k0, kPassThreads);
    GM_DPC_DIM_SWITCH(dim, grid_delta_far_kernel, g, rho_sorted, delta_sq, nearest, pending,
                      pending_best, pending_j, k0, k1);
    GM_TRY(ctx.launched("density peaks delta (rings)"));
    GM_TRY(ctx.sync("density peaks delta (rings)"));
    GM_TRY(interrupted(ctx, opt));
  }
  gm_progress(opt, "dpc delta", g.n, g.n);
  return GPUML_OK;
}

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

gpuml_status dpc_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *rho_grid,
                     const gm_dpc_grid *delta_grid, int gaussian, double dc, double cut,
                     double *rho, double *delta_sq, int64_t *nearest, const gpuml_options *opt) {
  const bool all_pairs = !rho_grid || !delta_grid;
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, all_pairs && d >= kGemmMinDim));
  // rho, rho by cell, delta_sq, nearest, the ring search list (3 arrays), the grids
  const size_t fixed = (size_t)n * 8 * 7 + (rho_grid ? grid_bytes(rho_grid) : 0) +
                       (delta_grid ? grid_bytes(delta_grid) : 0);
  if (!all_pairs && fixed > ctx.budget())
    return gm_fail(GPUML_ERR_NOMEM, "dpc:cuda",
                   "density peaks needs %.1f MB of GPU memory for %lld points, more than the "
                   "budget of %.1f MB: raise gpu_memory_limit, free GPU memory or use backend "
                   "\"cpu\"",
                   (double)fixed / 1e6, (long long)n, (double)ctx.budget() / 1e6);
  AllPairs ap;
  if (all_pairs) GM_TRY(setup_all_pairs(ctx, ap, x, n, d, fixed));
  double *rho_d = nullptr, *delta_d = nullptr;
  int64_t *nearest_d = nullptr;
  GM_TRY(ctx.alloc(&rho_d, (size_t)n, "the densities"));
  GM_TRY(ctx.alloc(&delta_d, (size_t)n, "the distances to denser points"));
  GM_TRY(ctx.alloc(&nearest_d, (size_t)n, "the nearest denser points"));

  PassArgs args;
  args.cut = cut;
  args.inv_dc2 = 1 / (dc * dc);
  args.value = rho_d;
  if (rho_grid) {
    GridDev g;
    GM_TRY(upload_grid(ctx, rho_grid, g));
    GM_TRY(grid_rho(ctx, rho_grid->dim, g, cut, rho_d, opt));
  } else if (gaussian) {
    GM_TRY(all_pairs_pass<kGauss>(ctx, ap, n, d, args, opt));
  } else {
    GM_TRY(all_pairs_pass<kCount>(ctx, ap, n, d, args, opt));
  }
  GM_TRY(to_host(ctx, rho, rho_d, n, "copying the densities to the host"));
  GM_TRY(ctx.sync("copying the densities to the host"));
  const int64_t top = gm_dpc_top(rho, n);

  if (delta_grid) {
    GridDev g;
    GM_TRY(upload_grid(ctx, delta_grid, g));
    double *rho_sorted = nullptr;
    GM_TRY(ctx.alloc(&rho_sorted, (size_t)n, "the densities by cell"));
    GM_TRY(gather(ctx, (const double *)rho_d, g.order, n, rho_sorted));
    GM_TRY(grid_delta(ctx, delta_grid->dim, g, rho_sorted, top, delta_d, nearest_d, opt));
  } else {
    PassArgs da;
    da.rho = rho_d;
    da.value = delta_d;
    da.index = nearest_d;
    GM_TRY(all_pairs_pass<kDelta>(ctx, ap, n, d, da, opt));
  }
  GM_TRY(to_host(ctx, delta_sq, delta_d, n, "copying the distances to the host"));
  GM_TRY(to_host(ctx, nearest, nearest_d, n, "copying the nearest denser points to the host"));
  return ctx.sync("copying the results to the host");
}

gpuml_status border_run(const double *x, int64_t n, int64_t d, const gm_dpc_grid *grid,
                        double cut, const double *rho, const int64_t *cluster, double *border,
                        const gpuml_options *opt) {
  Context ctx("dpc:cuda");
  GM_TRY(ctx.init(opt, !grid && d >= kGemmMinDim));
  const size_t fixed = (size_t)n * 8 * 5 + (grid ? grid_bytes(grid) : 0);
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
    GM_TRY(upload_grid(ctx, grid, g));
    double *rho_sorted = nullptr;
    int64_t *cluster_sorted = nullptr;
    GM_TRY(ctx.alloc(&rho_sorted, (size_t)n, "the densities by cell"));
    GM_TRY(ctx.alloc(&cluster_sorted, (size_t)n, "the clusters by cell"));
    GM_TRY(gather(ctx, (const double *)rho_d, g.order, n, rho_sorted));
    GM_TRY(gather(ctx, (const int64_t *)cluster_d, g.order, n, cluster_sorted));
    for (int64_t s0 = 0; s0 < n; s0 += kGridChunk) {
      const int64_t s1 = min64(n, s0 + kGridChunk);
      const unsigned blocks = grid_1d(s1 - s0, kPassThreads);
      GM_DPC_DIM_SWITCH(grid->dim, grid_border_kernel, g, cut, rho_sorted, cluster_sorted,
                        border_d, s0, s1);
      GM_TRY(ctx.launched("density peaks halo (grid)"));
      GM_TRY(ctx.sync("density peaks halo (grid)"));
      GM_TRY(interrupted(ctx, opt));
      gm_progress(opt, "dpc halo", s1, n);
    }
  } else {
    PassArgs args;
    args.cut = cut;
    args.rho = rho_d;
    args.cluster = cluster_d;
    args.value = border_d;
    GM_TRY(all_pairs_pass<kBorder>(ctx, ap, n, d, args, opt));
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
