// Density peaks on the GPU, d <= 3 with the cutoff kernel: the passes over the points
// bucketed by cells (kernels/dpc.cu's GridDev), and their host side. Included by
// kernels/dpc.cu inside its namespace.
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

// Host side of the grid passes.

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
