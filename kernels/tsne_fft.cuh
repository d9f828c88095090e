// The FFT method of the t-SNE optimiser on the GPU (Linderman et al. 2019): points
// assigned to boxes, spread onto the interpolation grid, convolved by cuFFT with the
// kernel's spectrum, gathered back; the grids in single precision as on the CPU.
// Included by kernels/tsne.cu inside its namespace.
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

// The grid cell of node `node` (k[d] its offsets along each axis) of box b.
template <int D>
__device__ __forceinline__ int64_t node_cell(int64_t b, int node, int boxes, int size, int *k) {
  int64_t cell = 0, scale = 1, rest = b;
  int nd = node;
  for (int d = 0; d < D; d++) {
    k[d] = nd % GM_TSNE_NODES;
    nd /= GM_TSNE_NODES;
    cell += ((rest % boxes) * GM_TSNE_NODES + k[d]) * scale;
    rest /= boxes;
    scale *= size;
  }
  return cell;
}

// A node's D + 2 channel sums into the grids (heavy tails: Z's channel is the real part
// of a grid of its own).
template <int D>
__device__ __forceinline__ void put_channels(const double *acc, bool heavy, int64_t cell,
                                             cufftComplex *__restrict__ grid, int64_t cells) {
  for (int c = 0; c < D + 2; c++) {
    const bool own = heavy && c == D + 1;
    float *g = reinterpret_cast<float *>(grid + (size_t)(own ? (D + 2) / 2 : c / 2) * cells + cell);
    g[own ? 0 : (c & 1)] = (float)acc[c];
  }
}

// One block per box and part (blockIdx.y of `parts`: the box's points in equal shares),
// one warp per node of the box: the node's C channel sums over the share's points (lanes
// stride over them; a fixed shuffle tree adds the lanes). One part: straight into the
// grid; several: into part_sums, added in part order by spread_parts_kernel. (Early
// iterations hold the whole embedding in a few boxes: parts keep the GPU busy.)
template <int D>
__global__ void spread_kernel(const double *__restrict__ y, int64_t n, int64_t charged, int boxes,
                              int size,
                              const int32_t *__restrict__ start, const int32_t *__restrict__ end,
                              const int32_t *__restrict__ order, const double *__restrict__ weight,
                              bool heavy, cufftComplex *__restrict__ grid, int64_t cells,
                              int parts, double *__restrict__ part_sums) {
  constexpr int C = D + 2;
  const int64_t b = blockIdx.x;
  const int32_t s0 = start[b], s1 = end[b];
  if (s1 <= s0) return;
  const int part = blockIdx.y;
  const int64_t len = s1 - s0;
  const int32_t p0 = s0 + (int32_t)(len * part / parts), p1 = s0 + (int32_t)(len * (part + 1) / parts);
  const int node = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int k[D];
  const int64_t cell = node_cell<D>(b, node, boxes, size, k);
  double acc[C];
  for (int c = 0; c < C; c++) acc[c] = 0;
  for (int32_t at = p0 + lane; at < p1; at += 32) {
    const int64_t i = order[at];
    if (i >= charged) continue;  // a new point of a placement: no charge
    double v = 1, sq = 0;
    for (int d = 0; d < D; d++) v *= weight[(i * D + d) * GM_TSNE_NODES + k[d]];
    acc[0] += v;
    for (int d = 0; d < D; d++) {
      const double yd = y[i + d * n];
      acc[1 + d] += v * yd;
      sq += yd * yd;
    }
    acc[D + 1] += heavy ? v : v * sq;  // heavy tails: Z from a kernel of its own
  }
  for (int c = 0; c < C; c++) acc[c] = warp_sum(acc[c]);
  if (lane != 0) return;
  if (parts == 1) {
    put_channels<D>(acc, heavy, cell, grid, cells);
  } else {
    double *out = part_sums + ((b * parts + part) * (blockDim.x >> 5) + node) * C;
    for (int c = 0; c < C; c++) out[c] = acc[c];
  }
}

// The parts' sums of each node of the non-empty boxes, added in part order.
template <int D>
__global__ void spread_parts_kernel(const int32_t *__restrict__ start, const int32_t *__restrict__ end,
                                    int64_t nbox, int parts, const double *__restrict__ part_sums,
                                    int boxes, int size, bool heavy,
                                    cufftComplex *__restrict__ grid, int64_t cells) {
  constexpr int C = D + 2;
  constexpr int kNodes = D == 1 ? 3 : (D == 2 ? 9 : 27);
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= nbox * kNodes) return;
  const int64_t b = t / kNodes;
  const int node = (int)(t % kNodes);
  if (end[b] <= start[b]) return;
  double acc[C];
  for (int c = 0; c < C; c++) acc[c] = 0;
  for (int part = 0; part < parts; part++) {
    const double *in = part_sums + ((b * parts + part) * kNodes + node) * C;
    for (int c = 0; c < C; c++) acc[c] += in[c];
  }
  int k[D];
  put_channels<D>(acc, heavy, node_cell<D>(b, node, boxes, size, k), grid, cells);
}

template <int D>
__global__ void kernel_grid_kernel(int size, int nodes_per_dim, int boxes,
                                   const double *__restrict__ scal, bool heavy, double df,
                                   cufftComplex *__restrict__ kernel, int64_t cells) {
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
  if (heavy) {  // w u for the forces, then w for Z
    kernel[cell].x = inside ? (float)gm_tsne_heavy_wu(r2, df) : 0.0f;
    kernel[cells + cell].x = inside ? (float)gm_tsne_heavy_w(r2, df) : 0.0f;
    kernel[cells + cell].y = 0.0f;
  } else {
    kernel[cell].x = inside ? (float)gm_tsne_kernel2(r2) : 0.0f;
  }
  kernel[cell].y = 0.0f;
}

__global__ void multiply_kernel(cufftComplex *__restrict__ grid, int grids, bool heavy,
                                const cufftComplex *__restrict__ kernel, int64_t cells, float norm) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < cells * grids;
       e += (int64_t)gridDim.x * blockDim.x) {
    const bool z_grid = heavy && e / cells == grids - 1;  // heavy tails: Z's own spectrum
    const float kr = kernel[e % cells + (z_grid ? cells : 0)].x * norm;
    grid[e].x *= kr;
    grid[e].y *= kr;
  }
}

// Potentials at each point (of first .. last - 1) from its box's nodes, then Z's term and
// the repulsion.
template <int D>
__global__ void gather_kernel(const double *__restrict__ y, int64_t n, int64_t first,
                              int64_t last, int boxes, int size,
                              const int32_t *__restrict__ key, const double *__restrict__ weight,
                              bool heavy, const cufftComplex *__restrict__ grid, int64_t cells,
                              double *__restrict__ zrow, double *__restrict__ rep) {
  constexpr int C = D + 2;
  constexpr int kNodes = D == 1 ? 3 : (D == 2 ? 9 : 27);
  const int64_t i = first + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= last) return;
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
      const bool own = heavy && c == D + 1;
      const float *g =
          reinterpret_cast<const float *>(grid + (size_t)(own ? (D + 2) / 2 : c / 2) * cells + cell);
      phi[c] += v * (double)g[own ? 0 : (c & 1)];
    }
  }
  double sq = 0, dot = 0;
  for (int d = 0; d < D; d++) {
    const double yd = y[i + d * n];
    sq += yd * yd;
    dot += yd * phi[1 + d];
    rep[i + d * n] = yd * phi[0] - phi[1 + d];
  }
  zrow[i] = heavy ? phi[D + 1] : (1 + sq) * phi[0] - 2 * dot + phi[D + 1];
}

// --- gradient and update -----------------------------------------------------------------
