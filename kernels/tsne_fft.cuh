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

// One block per box, one warp per node of the box: the node's C channel sums over the
// box's points (lanes stride over them; a fixed shuffle tree adds the lanes).
template <int D>
__global__ void spread_kernel(const double *__restrict__ y, int64_t n, int64_t charged, int boxes,
                              int size,
                              const int32_t *__restrict__ start, const int32_t *__restrict__ end,
                              const int32_t *__restrict__ order, const double *__restrict__ weight,
                              bool heavy, cufftComplex *__restrict__ grid, int64_t cells) {
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
  if (lane == 0)
    for (int c = 0; c < C; c++) {
      const bool own = heavy && c == D + 1;  // Z's channel: the real part of the last grid
      float *g = reinterpret_cast<float *>(grid + (size_t)(own ? (D + 2) / 2 : c / 2) * cells + cell);
      g[own ? 0 : (c & 1)] = (float)acc[c];
    }
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

// Potentials at each point from its box's nodes, then Z's term and the repulsion.
template <int D>
__global__ void gather_kernel(const double *__restrict__ y, int64_t n, int boxes, int size,
                              const int32_t *__restrict__ key, const double *__restrict__ weight,
                              bool heavy, const cufftComplex *__restrict__ grid, int64_t cells,
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
