// Density peaks on the GPU on the cell index (d <= GM_DPC_GRID_MAX_DIM): the passes over
// the points sorted by cell (kernels/dpc.cu's GridDev) and their host side. The same
// walks as the CPU's (core/cpu/dpc_grid.c), with the same formulas (core/dpc_shared.h),
// one warp per item (at most 8 or 32 points of a cell) for the cutoff density, one thread
// per point for the others:
//  - the cutoff density: the rows of cells the ball of the item's points touches; cells
//    wholly inside are counted from the prefix counts start[], the points of the cells
//    the sphere crosses are tested (grid_count_lanes where the fp32 screen is on, on one
//    device each crossed pair of cells once for both, else grid_count_kernel);
//  - delta: rings of cells outwards, skipping rows and cells farther than the best and
//    cells whose densest point is below the point's density, until the rings' bound
//    passes the best (the first rings over the cutoff density's own cells where it has
//    them, up to 6-d: kernels/dpc.cu's delta_pass);
//  - the halo: the points whose densest possible partner of another cluster within the
//    cut (border_partner_kernel, by cell) cannot raise their cluster's largest border
//    density so far skipped whole, runs of cells of the point's own cluster skipped, and
//    runs and cells that cannot raise it past the largest so far.
// Included by kernels/dpc.cu inside its namespace.
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
#pragma unroll
  for (int t = 0; t < DIM; t++) p[t] = g.coords[(size_t)t * (size_t)g.n + (size_t)s];
  gm_dpc_cell_coords(&g.geom, DIM, g.cell[s], c);
}

// The box of the warp's points (point s of each lane; lanes past an item's points repeat
// one of them): qa, qb per dimension, in every lane.
template <int DIM>
__device__ __forceinline__ void warp_box(const GridDev &g, int64_t s, double *qa, double *qb) {
#pragma unroll
  for (int t = 0; t < DIM; t++) {
    double a = g.coords[(size_t)t * (size_t)g.n + (size_t)s], b = a;
    for (int off = 16; off > 0; off >>= 1) {
      a = fmin(a, __shfl_xor_sync(kFullMask, a, off));
      b = fmax(b, __shfl_xor_sync(kFullMask, b, off));
    }
    qa[t] = a;
    qb[t] = b;
  }
}

// The cutoff count's fp32 screen (core/dpc_shared.h's gm_dpc_screen, which derives its
// margin). Most tested pairs lie far enough from the cut that the squared distance of
// fp32 copies of the points decides them, and only the pairs in the band around the cut
// take the exact fp64 square (grid_sq), so every count is the fp64 rule's: one 16-byte
// load and six fp32 operations a pair in 3-d instead of three 8-byte loads and nine fp64
// ones.

// Floats a point of the copy: one 4-, 8- or 16-byte load (two above 4-d).
__host__ __device__ constexpr int screen_stride(int dim) {
  return dim == 1 ? 1 : dim == 2 ? 2 : dim <= 4 ? 4 : 8;
}

// Point j's fp32 copy into v (screen_stride(DIM) values).
template <int DIM>
__device__ __forceinline__ void load32(const float *__restrict__ coords32, int64_t j, float *v) {
  constexpr int kStride = screen_stride(DIM);
  if constexpr (kStride == 1) {
    v[0] = __ldg(coords32 + j);
  } else if constexpr (kStride == 2) {
    const float2 a = __ldg(reinterpret_cast<const float2 *>(coords32) + j);
    v[0] = a.x;
    v[1] = a.y;
  } else {
    const float4 *q = reinterpret_cast<const float4 *>(coords32) + j * (kStride / 4);
#pragma unroll
    for (int k = 0; k < kStride / 4; k++) {
      const float4 a = __ldg(q + k);
      v[4 * k] = a.x;
      v[4 * k + 1] = a.y;
      v[4 * k + 2] = a.z;
      v[4 * k + 3] = a.w;
    }
  }
}

// A launch's screen as integers: the fp32 squares are +0 or more (never -0) and `in` > 0,
// so they order as their bits do, and one subtraction places a square:
// rel = bits(sq) - bits(in) wraps to 2^31 or more below `in` (inside), and lies below
// `width` in the band.
struct ScreenBits {
  unsigned in, width;
};

__device__ __forceinline__ ScreenBits screen_bits(const gm_dpc_screen &screen) {
  const unsigned in = __float_as_uint(screen.in);
  return {in, __float_as_uint(screen.out) - in};
}

// The points j0 .. j0 + n - 1 (n <= kScreenGroup) with s < cut from p (pf: its fp32
// copy): the screen decides, the fp64 square where it cannot. Their loads are in flight
// together and their band test is one branch (rarely taken); with n = kScreenGroup, a
// constant, the guards on n fold away.
constexpr int kScreenGroup = 4;

template <int DIM>
__device__ __forceinline__ unsigned count_screened_group(const GridDev &g, const double *p,
                                                         const float *pf, int64_t j0, int n,
                                                         double cut, const ScreenBits screen) {
  float q[kScreenGroup][screen_stride(DIM)];
  unsigned rel[kScreenGroup];
#pragma unroll
  for (int u = 0; u < kScreenGroup; u++)
    if (u < n) load32<DIM>(g.coords32, j0 + u, q[u]);
  unsigned hits = 0, nearest = 0xffffffffu;
#pragma unroll
  for (int u = 0; u < kScreenGroup; u++)
    if (u < n) {
      rel[u] = __float_as_uint(gm_dpc_screen_sq(DIM, q[u], pf)) - screen.in;
      hits += rel[u] >> 31;
      nearest = min(nearest, rel[u]);
    }
  if (nearest < screen.width) {
#pragma unroll
    for (int u = 0; u < kScreenGroup; u++)
      if (u < n && rel[u] < screen.width) hits += grid_sq<DIM>(g, p, j0 + u) < cut;
  }
  return hits;
}

// The points a .. b - 1 with s < cut from p, in groups of kScreenGroup, the rest one at
// a time (a partial group, n = len - k not a constant, made ptxas spill in most of the
// kernels); counted in int, 2^30 points at a time.
template <int DIM>
__device__ __forceinline__ int64_t count_screened(const GridDev &g, const double *p,
                                                  const float *pf, int64_t a, int64_t b,
                                                  double cut, const ScreenBits screen) {
  int64_t count = 0;
  while (a < b) {
    const int len = b - a < ((int64_t)1 << 30) ? (int)(b - a) : 1 << 30;
    unsigned hits = 0;
    int k = 0;
    for (; k + kScreenGroup <= len; k += kScreenGroup)
      hits += count_screened_group<DIM>(g, p, pf, a + k, kScreenGroup, cut, screen);
#pragma unroll 1  // (fewer than kScreenGroup points)
    for (; k < len; k++) hits += count_screened_group<DIM>(g, p, pf, a + k, 1, cut, screen);
    count += hits;
    a += len;
  }
  return count;
}

// The cutoff density of up to 32 points of one cell together, one warp per such item (the
// CPU's rho_cell takes a whole cell): the rows, and the cells wholly inside the ball of
// every point of the item, are found from the bounding box of its points, and only the
// points of the cells between are tested. A lane holds one point of the cell; with at most 16 (8) points,
// 2 (4) groups of lanes hold them all and take every 2nd (4th) row each, so that a row
// is classified once for all the points and a tested point is read once per group
// (the same address across the group). The counts are exact integers, so they equal
// the CPU's and the brute force's. With inv_dc2 > 0 (the truncated Gaussian) the lanes
// sum the weights exp(-s inv_dc2) of every point within the cut but themselves instead
// (no cell taken whole); sums in another order than the CPU's, so equal to rounding.
// Without it, the pairs go through the fp32 screen when screen.on (above), to the same
// counts; grid_count_lanes (below) takes those counts instead unless
// GPUML_CUDA_DPC_LANES=0.
// rho by point index, or by sorted position when by_position (a part's values in one span).
// A cell of more than 32 points is several items (grid_items). Blocks an SM: 4 up to 3-d
// (at 3-d 64 registers and a few bytes spilled, 8% faster than 3 blocks at 80 registers
// for 2.4 x 10^7 points: bench/RESULTS.md round 11), 3 in 4-d (80), 2 from 5-d on (128,
// where the screen's loop would take up to 170); ptxas then spills a few of the row walk's
// values at 2-d, 3-d, 4-d, 7-d and 8-d.
template <int DIM>
__global__ void __launch_bounds__(kPassThreads, DIM <= 3 ? 4 : DIM <= 4 ? 3 : 2)
    grid_count_kernel(GridDev g, double cut, double inv_dc2, gm_dpc_screen screen,
                      double *__restrict__ rho, const int64_t *__restrict__ item_cell,
                      const int64_t *__restrict__ item_start, int64_t i0, int64_t i1,
                      int by_position) {
  // one item (at most 32 points of one cell) per warp, so that a dense cell is spread
  // over several warps instead of holding up its launch
  const int64_t item = i0 + ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (item >= i1) return;  // the whole warp
  const gm_dpc_geom *geo = &g.geom;
  const int64_t cell = item_cell[item];
  const int64_t s0 = g.start[cell], m = g.start[cell + 1] - s0;
  {
    const int64_t k0 = item_start[item] - s0;
    const int mk = m - k0 < 32 ? (int)(m - k0) : 32;
    const int width = mk <= 8 ? 8 : mk <= 16 ? 16 : 32, share = 32 / width;
    const int k = lane % width, part = lane / width;
    const bool mine = k < mk;
    const int64_t s = s0 + k0 + (mine ? k : 0);
    double p[DIM], qa[GM_DPC_GRID_MAX_DIM], qb[GM_DPC_GRID_MAX_DIM];
#pragma unroll
    for (int t = 0; t < DIM; t++) p[t] = g.coords[(size_t)t * (size_t)g.n + (size_t)s];
    warp_box<DIM>(g, s, qa, qb);
    int64_t count = 0;
    double weight = 0;
    const bool gauss = inv_dc2 > 0;
    float pf[screen_stride(DIM)] = {};
    if (screen.on) load32<DIM>(g.coords32, s, pf);
    const ScreenBits bits = screen_bits(screen);
    gm_dpc_rows rows;
    bool more = gm_dpc_rows_ball(geo, DIM, qa, qb, sqrt(cut * GM_DPC_CUT_OUT), &rows);
    for (int r = 0; r < part && more; r++) more = gm_dpc_rows_next(DIM, &rows);
    while (more) {
      double near_sq, far_sq;
      const int64_t base = gm_dpc_row_base(geo, DIM, &rows, qa, qb, &near_sq, &far_sq);
      int64_t o_lo, o_hi, i_lo, i_hi;
      if (gm_dpc_row_cells(geo, qa[0], qb[0], near_sq, far_sq, cut, &o_lo, &o_hi, &i_lo, &i_hi)) {
        int64_t a1 = g.start[base + o_lo], b1 = g.start[base + o_hi + 1], a2 = b1, b2 = b1;
        if (i_lo <= i_hi && !gauss) {
          count += g.start[base + i_hi + 1] - g.start[base + i_lo];
          b1 = g.start[base + i_lo];
          a2 = g.start[base + i_hi + 1];
        }
        if (gauss) {
          for (int64_t j = a1; j < b1; j++) {
            const double sq = grid_sq<DIM>(g, p, j);
            if (sq < cut && j != s) weight += exp(-sq * inv_dc2);
          }
        } else if (screen.on) {
          count += count_screened<DIM>(g, p, pf, a1, b1, cut, bits);
          count += count_screened<DIM>(g, p, pf, a2, b2, cut, bits);
        } else {
          // unrolled so that several points' loads are in flight at once
#pragma unroll 4
          for (int64_t j = a1; j < b1; j++) count += grid_sq<DIM>(g, p, j) < cut;
#pragma unroll 4
          for (int64_t j = a2; j < b2; j++) count += grid_sq<DIM>(g, p, j) < cut;
        }
      }
      for (int r = 0; r < share && more; r++) more = gm_dpc_rows_next(DIM, &rows);
    }
    // the groups hold the counts of their rows
    for (int off = width; off < 32; off <<= 1) {
      count += __shfl_xor_sync(0xffffffffu, count, off);
      weight += __shfl_xor_sync(0xffffffffu, weight, off);
    }
    // each point itself, at 0 < cut, is counted once: not a neighbour
    if (mine && part == 0)
      rho[by_position ? s : g.order[s]] = gauss ? weight : (double)(count - 1);
  }
}

// The cutoff count with the tested points across the lanes (the fp32 screen's counts; used
// where it is on): a warp takes an item of at most kLaneQueries points of one cell, its
// lanes walk 32 rows of the item's ball at a time (one row a lane, with the same
// classification as grid_count_kernel), and the crossed cells of those rows, laid end to
// end, go through the warp 32 points at a time: a lane loads one point (consecutive
// points: one coalesced read) and tests it against each of the item's points, read from
// shared memory. grid_count_kernel instead tests one point a step against the lanes'
// points (the same address across a group), so that an item of a few points leaves
// lanes idle and its row walk is serial: at 2.4 x 10^7 x 3 the rho pass took 3.5 s here
// against 6.4 s there (bench/RESULTS.md round 14, where items of 16 points (spills),
// cells of 8 or 32 points, 2 blocks an SM and a test of three FMAs a pair were slower).
// Blocks an SM: 4 up to 3-d (64 registers, a few bytes spilled), 3 at 4-d and 5-d (80),
// 2 above: at 2.4 x 10^7 x 3 the pass took 2,985 ms against 3,409 at 3 blocks (80
// registers) and 3,063 at 5 (48 registers, more spilled); at 10^6 x 5, 91 against 106 ms
// at 2 blocks (bench/RESULTS.md round 16). The block's warps (consecutive items: the
// same or the next cells) walk the rows of their boxes' union in lockstep, so that most
// of a round's points come from L1 (70% of the sectors against 18% for warps on their
// own rows; L2's reads 2.8 times fewer); the pass then issues in about 74% of its
// cycles, and the relative form's fewer instructions a pair pay: rho 2,690 ms at
// 2.4 x 10^7 x 3 against 2,910 with the square form and 3,006 without the lockstep
// (bench/RESULTS.md round 17, where the pairs on the fp64 tensor cores were slower).
// Where every cell is whole to itself the count is symmetric (kSym), on one device over
// all cells or over the parts of several devices, whose counts the host sums:
// the cells are classified by core/dpc_shared.h's pair rule, from their offsets alone, so
// a pair of cells is crossed for both or for neither, and an item tests the crossed cells
// past its own in cell order only, adding each tested point's pairs inside to that point
// too (one atomic a lane and chunk into `counts`); the cells before it test its cell. A
// pair is tested once instead of twice, against boxes of whole cells instead of the
// item's points: 2,076 against 2,690 ms at 2.4 x 10^7 x 3 (items of 8), 1,969 against
// 2,788 with items of 16 on another H100 (bench/RESULTS.md round 18). Placing each tested
// point against the box of the item's points first, to test only those it leaves
// crossed (about 0.44 of them), was slower: 2,475 against 1,964 ms (round 19).
constexpr int kLaneQueries = 8;
// The symmetric count's items (its rule classifies whole cells, so an item's box costs
// no tests): 16 points up to 3-d, 8 above (at 2.4 x 10^7 x 3 rho 1,969 against 2,160 ms
// with 8; at 10^6 x 5 84 against 67 ms; bench/RESULTS.md round 18).
__host__ __device__ constexpr int sym_queries(int dim) { return dim <= 3 ? 16 : 8; }
constexpr int kStartWords = 128;  // grid_count_lanes's bits of segment starts a warp

// Floats of a query's record in the relative form (core/dpc_shared.h's gm_dpc_rel_query:
// m, then c), padded to whole 16-byte loads from 2-d on.
__host__ __device__ constexpr int rel_stride(int dim) {
  return dim == 1 ? 2 : dim <= 3 ? 4 : dim <= 7 ? 8 : 12;
}

// A tested point's relative form from its copy v (screen_stride(DIM) floats): t' = v - o
// in v[0 .. DIM - 1], and its w after them (kept apart: v[DIM] is a padding lane only
// below 4-d).
template <int DIM>
__device__ __forceinline__ float rel_target(float *v, const float *o) {
  gm_dpc_rel_point(DIM, v, o, v);
  return gm_dpc_rel_square(DIM, v);
}

// Two chunks' points t0, t1 (this lane's, relative to the item's origin, with their
// squares w0, w1) against the item's first Q points (their records from shared memory,
// each read once for both): hits[p] counts the pairs whose r is negative (inside),
// nearest0 and nearest1 keep each chunk's least r as unsigned bits (a negative r's bits
// lie above every band), so that a test after the chunks finds a pair in the band and
// only its chunk takes the exact path (rho at 10^7 x 2 9% faster than one least r for
// both: bench/RESULTS.md round 27). kSym: the pairs inside are counted for the tested
// points too (pc0, pc1).
template <int DIM, int Q, bool kSym, int N>
__device__ __forceinline__ void lanes_test(const float *t0, float w0, const float *t1, float w1,
                                           const float *records, unsigned (&hits)[N],
                                           unsigned &nearest0, unsigned &nearest1, unsigned &pc0,
                                           unsigned &pc1) {
  constexpr int kRec = rel_stride(DIM);
#pragma unroll
  for (int p = 0; p < Q; p++) {
    float m[kRec];
#pragma unroll
    for (int u = 0; u < kRec; u++) m[u] = records[p * kRec + u];
    const unsigned r0 = __float_as_uint(gm_dpc_rel_value(DIM, t0, w0, m));
    const unsigned r1 = __float_as_uint(gm_dpc_rel_value(DIM, t1, w1, m));
    hits[p] += r0 >> 31;  // (two shifted adds: LEA.HI each, not a shift, a LEA.HI and an add)
    hits[p] += r1 >> 31;
    if constexpr (kSym) {
      pc0 += r0 >> 31;
      pc1 += r1 >> 31;
    }
    nearest0 = min(nearest0, r0);
    nearest1 = min(nearest1, r1);
  }
}

// The symmetric rule's classes of the rows (gm_dpc_pair_row's k_in and k_out), which
// depend on the rows' offsets alone: a table over |Delta_t| <= reach[t] (t = 1 .. dim - 1;
// entry sum |Delta_t| stride[t]), made once a pass by pair_rows_kernel with the same
// functions, instead of two fp64 square roots a row and lane (k == nullptr: computed).
// Rows beyond the reach hold no cell within the cut of the item's: the walk without the
// lockstep never visits them, and in lockstep they are skipped alike.
struct PairRows {
  const int2 *k = nullptr;
  int64_t reach[GM_DPC_GRID_MAX_DIM] = {}, stride[GM_DPC_GRID_MAX_DIM] = {};
};
constexpr int64_t kPairRowsMax = (int64_t)1 << 18;  // entries (2 MiB)

__global__ void pair_rows_kernel(gm_dpc_geom geo, double cut, PairRows pr, int64_t entries,
                                 int2 *__restrict__ out) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < entries;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t delta[GM_DPC_GRID_MAX_DIM] = {}, rest = e;
    for (int t = geo.dim - 1; t >= 1; t--) {
      delta[t] = rest / pr.stride[t];
      rest -= delta[t] * pr.stride[t];
    }
    double near_sq, far_sq;
    gm_dpc_pair_cross(&geo, geo.dim, delta, &near_sq, &far_sq);
    int64_t k_in, k_out;
    gm_dpc_pair_row(&geo, near_sq, far_sq, cut, &k_in, &k_out);
    out[e] = make_int2((int)k_in, (int)k_out);
  }
}

// Row k of r's odometer (gm_dpc_rows_at) in 32-bit arithmetic where the rows number
// below 2^31 (64-bit division is a long sequence on the device).
template <int DIM>
__device__ __forceinline__ void rows_at(int64_t nrows, int64_t k, gm_dpc_rows *r) {
  if (nrows <= INT32_MAX) {
    unsigned q = (unsigned)k;
#pragma unroll
    for (int t = 1; t < DIM; t++) {
      const unsigned len = (unsigned)(r->b[t] - r->a[t] + 1);
      r->y[t] = r->a[t] + (int64_t)(q % len);
      q /= len;
    }
  } else {
    gm_dpc_rows_at(DIM, k, r);
  }
}

template <int DIM, bool kSym>
__device__ __forceinline__ void grid_count_lanes(const GridDev &g, double cut,
                                                 const gm_dpc_screen_rel &rel,
                                                 double *__restrict__ rho,
                                                 unsigned *__restrict__ counts,
                                                 const int64_t *__restrict__ item_cell,
                                                 const int64_t *__restrict__ item_start,
                                                 int64_t i0, int64_t i1, int by_position,
                                                 int start_bits, int lockstep,
                                                 const PairRows &pr) {
  constexpr int kStride = screen_stride(DIM);
  constexpr int kRec = rel_stride(DIM);
  constexpr int kWarps = kPassThreads / 32;
  constexpr int kQ = kSym ? sym_queries(DIM) : kLaneQueries;
  // Per warp, in one record so that every array is a constant offset from one base (the
  // arrays apart took a register, or its recomputation, each): the item's records (the
  // relative form's m and c of its points) and its origin o (the fp32 copy of its first
  // point); the item's box, which only the rows' walk reads (kept out of the registers
  // the chunks need); kSym: its cell (-1: none); the rows' bounds (gm_dpc_rows' a and b),
  // their count and the item's first position (the same in every lane), read where used
  // rather than held in registers through the chunks (3-d: 36 bytes spilled against 116,
  // rho 3% faster at 2.4 x 10^7 x 3 and 9% at 10^6 x 5; bench/RESULTS.md round 20); a
  // round's non-empty segments (at most 2 a lane): the sorted position of a run's offset
  // 0 in each (its first position less its offset in the round's run: a position's
  // point is base + offset) and its offset, with the run's length after the last (the
  // host launches this kernel for n < 2^31 only, so that positions and offsets fit an
  // int); and, for a run of at most 32 kStartWords positions, a bit for each position
  // that starts a segment, so that a lane finds its position's segment by counting bits.
  struct Scratch {
    float records[kQ * kRec];
    float origin[kStride];
    double box[2][DIM];
    int64_t cell[DIM];
    int64_t rows[2][DIM];
    int64_t nrows, first;
    int seg_base[64];
    int seg_off[65];
    unsigned starts[kStartWords];
  };
  __shared__ __align__(16) Scratch scratch[kWarps];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  Scratch &me = scratch[warp];
  float *const records = me.records;
  float *const origin = me.origin;
  int *const seg_base = me.seg_base;
  int *const seg_off = me.seg_off;
  double *const qa = me.box[0], *const qb = me.box[1];
  unsigned *const starts = me.starts;
  const int64_t item = i0 + ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  // lockstep: the block's warps walk the rows of the union of their items' boxes together,
  // a round of 32 rows at a time, so that the points one warp loads are still in L1 when
  // the others (items of the same or the next cells) load them; a warp without an item
  // stays for the barriers
  const bool active = item < i1;
  if (!active && (!lockstep || i0 + (int64_t)blockIdx.x * kWarps >= i1)) return;
  const gm_dpc_geom *geo = &g.geom;
  const int64_t cell = active ? item_cell[item] : 0;
  const int64_t s0 = active ? item_start[item] : 0;
  const int64_t left = active ? g.start[cell + 1] - s0 : 0;
  const int mk = left < kQ ? (int)left : kQ;
  const bool mine = lane < mk;
  const int64_t s = s0 + (mine ? lane : 0);
  // kSym: the item's cell, read from shared memory where needed (kept out of the registers
  // the chunks need)
  const int64_t *const own = me.cell;
  if constexpr (kSym) {
    if (lane == 0) {
      int64_t c[DIM];
      gm_dpc_cell_coords(geo, DIM, cell, c);
#pragma unroll
      for (int t = 0; t < DIM; t++) me.cell[t] = active ? c[t] : -1;
    }
  } else if (active) {
    double a[DIM], b[DIM];
    warp_box<DIM>(g, s, a, b);
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < DIM; t++) {
        qa[t] = a[t];
        qb[t] = b[t];
      }
  } else if (lane == 0) {
#pragma unroll
    for (int t = 0; t < DIM; t++) {
      qa[t] = INFINITY;
      qb[t] = -INFINITY;
    }
  }
  {
    // the item's origin (lane 0's point, which every lane loads: s is s0 past the item's
    // points), then each point's record
    float v[kStride];
    load32<DIM>(g.coords32, s, v);
    if (lane == 0)
#pragma unroll
      for (int u = 0; u < kStride; u++) origin[u] = v[u];
    __syncwarp();
    if (mine) {
      float q[DIM], m[kRec];
      gm_dpc_rel_point(DIM, v, origin, q);
      gm_dpc_rel_query(DIM, q, rel.in, m);
#pragma unroll
      for (int u = DIM + 1; u < kRec; u++) m[u] = 0;
#pragma unroll
      for (int u = 0; u < kRec; u++) records[lane * kRec + u] = m[u];
    }
  }
  __syncwarp();
  const unsigned band = __float_as_uint(rel.band);
  const unsigned below = (1u << lane) - 1, upto = below | (1u << lane);  // lanes before (and this)
  unsigned hits[kQ] = {};
  int64_t whole = 0;  // this lane's rows' cells wholly inside, for every point of the item
  gm_dpc_rows rows;
  int64_t nrows = 0;
  if constexpr (kSym) {
    // the rows within reach of the item's cell, or in lockstep of the block's cells
    if (lockstep) __syncthreads();  // every warp's cell written
    else __syncwarp();
    nrows = 1;
#pragma unroll
    for (int t = 1; t < DIM; t++) {
      int64_t lo = active ? own[t] : INT64_MAX, hi = active ? own[t] : -1;
      if (lockstep)
        for (int w = 0; w < kWarps; w++)
          if (scratch[w].cell[0] >= 0) {
            lo = min(lo, scratch[w].cell[t]);
            hi = max(hi, scratch[w].cell[t]);
          }
      const int64_t reach = gm_dpc_pair_reach(geo, t, cut);
      rows.a[t] = lo - reach > 0 ? lo - reach : 0;
      rows.b[t] = hi + reach < geo->cells[t] - 1 ? hi + reach : geo->cells[t] - 1;
      rows.y[t] = rows.a[t];
      nrows *= rows.b[t] - rows.a[t] + 1;
    }
  } else {
    double ua[DIM], ub[DIM];  // the rows' box: the item's, or in lockstep the block's
    if (lockstep) __syncthreads();  // every warp's box written
#pragma unroll
    for (int t = 0; t < DIM; t++) {
      ua[t] = qa[t];
      ub[t] = qb[t];
      if (lockstep)
        for (int w = 0; w < kWarps; w++) {
          ua[t] = fmin(ua[t], scratch[w].box[0][t]);
          ub[t] = fmax(ub[t], scratch[w].box[1][t]);
        }
    }
    if (gm_dpc_rows_ball(geo, DIM, ua, ub, sqrt(cut * GM_DPC_CUT_OUT), &rows)) {
      nrows = 1;
      for (int t = 1; t < DIM; t++) nrows *= rows.b[t] - rows.a[t] + 1;
    }
  }
  if (lane == 0) {  // (unused where nrows is 0)
#pragma unroll
    for (int t = 1; t < DIM; t++) {
      me.rows[0][t] = rows.a[t];
      me.rows[1][t] = rows.b[t];
    }
    me.nrows = nrows;
    me.first = s0;
  }
  __syncwarp();
  for (int64_t r0 = 0; r0 < me.nrows; r0 += 32) {
    nrows = me.nrows;
    int64_t a1 = 0, b1 = 0, a2 = 0, b2 = 0;
    if (active && r0 + lane < nrows) {
#pragma unroll
      for (int t = 1; t < DIM; t++) {
        rows.a[t] = me.rows[0][t];
        rows.b[t] = me.rows[1][t];
      }
    }
    if (kSym && active && r0 + lane < nrows) {
      // the symmetric rule (gm_dpc_pair_row): whole cells counted, crossed ones tested
      // only past the item's cell in cell order (the rows above it, the cells after it in
      // its own row); the cells below test this item's cell for both
      rows_at<DIM>(nrows, r0 + lane, &rows);
      int64_t delta[DIM], base = 0, entry = 0;
      int side = 0;
      bool reached = true;
      delta[0] = 0;
#pragma unroll
      for (int t = 1; t < DIM; t++) {
        delta[t] = rows.y[t] - own[t];
        base += rows.y[t] * geo->stride[t];
        if (delta[t] != 0) side = delta[t] > 0 ? 1 : -1;  // the highest dimension's decides
        const int64_t off = delta[t] < 0 ? -delta[t] : delta[t];
        reached = reached && off <= pr.reach[t];
        entry += off * pr.stride[t];
      }
      int64_t k_in = -1, k_out = -1;
      if (pr.k) {
        if (reached) {
          const int2 k = __ldg(pr.k + entry);
          k_in = k.x;
          k_out = k.y;
        }
      } else if (reached) {
        double near_sq, far_sq;
        gm_dpc_pair_cross(geo, DIM, delta, &near_sq, &far_sq);
        gm_dpc_pair_row(geo, near_sq, far_sq, cut, &k_in, &k_out);
      }
      if (k_out >= 0) {
        const int64_t x = own[0], last = geo->cells[0] - 1;
        const int64_t lo = x - k_out > 0 ? x - k_out : 0, hi = x + k_out < last ? x + k_out : last;
        // the whole cells wl .. wh (none: wl = hi + 1 > wh = lo - 1, so that the crossed
        // ones lo .. hi fall on the right)
        int64_t wl = hi + 1, wh = lo - 1;
        if (k_in >= 0) {
          wl = x - k_in > 0 ? x - k_in : 0;
          wh = x + k_in < last ? x + k_in : last;
          whole += g.start[base + wh + 1] - g.start[base + wl];
        }
        if (side > 0) {
          a1 = g.start[base + lo];
          b1 = g.start[base + (wl < hi + 1 ? wl : hi + 1)];
        }
        if (side >= 0) {
          a2 = g.start[base + (wh + 1 > lo ? wh + 1 : lo)];
          b2 = g.start[base + hi + 1];
          if (k_in < 0) b1 = a1;  // lo .. hi once, on the right
        }
      }
    } else if (!kSym && active && r0 + lane < nrows) {
      rows_at<DIM>(nrows, r0 + lane, &rows);
      double near_sq, far_sq;
      const int64_t base = gm_dpc_row_base(geo, DIM, &rows, qa, qb, &near_sq, &far_sq);
      int64_t o_lo, o_hi, i_lo, i_hi;
      if (gm_dpc_row_cells(geo, qa[0], qb[0], near_sq, far_sq, cut, &o_lo, &o_hi, &i_lo, &i_hi)) {
        a1 = g.start[base + o_lo];
        b1 = a2 = b2 = g.start[base + o_hi + 1];
        if (i_lo <= i_hi) {
          b1 = g.start[base + i_lo];
          a2 = g.start[base + i_hi + 1];
          whole += a2 - b1;
        }
      }
    }
    // the non-empty segments end to end: their places by ballot, their offsets by a scan
    const int len1 = (int)(b1 - a1), len2 = (int)(b2 - a2), len = len1 + len2;
    int end = len;
    for (int off = 1; off < 32; off <<= 1) {
      const int v = __shfl_up_sync(kFullMask, end, off);
      if (lane >= off) end += v;
    }
    const int run = __shfl_sync(kFullMask, end, 31);
    if (run > 0) {
      const int words = (run + 31) >> 5;
      const bool by_bits = start_bits && words <= kStartWords;
      if (by_bits)
        for (int w = lane; w < words; w += 32) starts[w] = 0;
      __syncwarp();
      const unsigned has1 = __ballot_sync(kFullMask, len1 > 0), has2 = __ballot_sync(kFullMask, len2 > 0);
      int at = __popc(has1 & below) + __popc(has2 & below);
      if (len1 > 0) {
        seg_base[at] = (int)a1 - (end - len);
        seg_off[at++] = end - len;
        if (by_bits) atomicOr(&starts[(end - len) >> 5], 1u << ((end - len) & 31));
      }
      if (len2 > 0) {
        seg_base[at] = (int)a2 - (end - len2);
        seg_off[at] = end - len2;
        if (by_bits) atomicOr(&starts[(end - len2) >> 5], 1u << ((end - len2) & 31));
      }
      if (lane == 0) seg_off[__popc(has1) + __popc(has2)] = run;
      __syncwarp();
      // two chunks of 32 positions at a time, their loads in flight together; a position's
      // segment k: the segments starting at or before it less one (by_bits: `before` those
      // before the chunk), else found by stepping (positions grow, so k does); returns the
      // position's point (sorted position), -1 past the run, kept for its atomic and the
      // band (not found again from the segments there)
      int k = 0, before = 0;
      auto fetch = [&](int chunk, float *v) {  // (chunk: its first position, in every lane)
        const int pos = chunk + lane;
        if (by_bits) {
          if (chunk < run) {  // the whole warp: one word of starts for the chunk
            const unsigned w = starts[chunk >> 5];
            k = before + __popc(w & upto) - 1;
            before += __popc(w);
          }
        } else if (pos < run) {
          while (seg_off[k + 1] <= pos) k++;
        }
        int j = -1;
        if (pos < run) {
          j = seg_base[k] + pos;
          load32<DIM>(g.coords32, j, v);
        } else {
#pragma unroll
          for (int u = 0; u < kStride; u++) v[u] = 1e18f;  // far from every point: counts nothing
        }
        return j;
      };
      for (int chunk = 0; chunk < run; chunk += 64) {
        float t0[kStride], t1[kStride], o[DIM];
        const int j0 = fetch(chunk, t0), j1 = fetch(chunk + 32, t1);
#pragma unroll
        for (int u = 0; u < DIM; u++) o[u] = origin[u];
        const float w0 = rel_target<DIM>(t0, o), w1 = rel_target<DIM>(t1, o);
        unsigned nearest0 = 0xffffffffu, nearest1 = 0xffffffffu, pc0 = 0, pc1 = 0;
        switch (mk) {  // warp-uniform: one branch for both chunks
#define GM_LANES_TEST(Q) lanes_test<DIM, (Q <= kQ ? Q : kQ), kSym>(t0, w0, t1, w1, records, hits, nearest0, nearest1, pc0, pc1)
          case 16: GM_LANES_TEST(16); break;
          case 15: GM_LANES_TEST(15); break;
          case 14: GM_LANES_TEST(14); break;
          case 13: GM_LANES_TEST(13); break;
          case 12: GM_LANES_TEST(12); break;
          case 11: GM_LANES_TEST(11); break;
          case 10: GM_LANES_TEST(10); break;
          case 9: GM_LANES_TEST(9); break;
          case 8: GM_LANES_TEST(8); break;
          case 7: GM_LANES_TEST(7); break;
          case 6: GM_LANES_TEST(6); break;
          case 5: GM_LANES_TEST(5); break;
          case 4: GM_LANES_TEST(4); break;
          case 3: GM_LANES_TEST(3); break;
          case 2: GM_LANES_TEST(2); break;
          default: GM_LANES_TEST(1); break;
#undef GM_LANES_TEST
        }
        const unsigned band0 = __ballot_sync(kFullMask, nearest0 < band),
                       band1 = __ballot_sync(kFullMask, nearest1 < band);
        if (band0 | band1) {
          // a pair in the band around the cut: the fp64 square decides, in the chunks
          // that hold one (mostly one of the two)
#pragma unroll
          for (int c = 0; c < 2; c++) {  // unrolled: t0 and t1 stay in registers
            const int j = c ? j1 : j0;
            if (j < 0 || !(c ? band1 : band0)) continue;
            for (int p = 0; p < mk; p++) {
              float m[kRec];
#pragma unroll
              for (int u = 0; u < kRec; u++) m[u] = records[p * kRec + u];
              const unsigned r = __float_as_uint(gm_dpc_rel_value(DIM, c ? t1 : t0, c ? w1 : w0, m));
              if (r < band) {
                double pp[DIM];
#pragma unroll
                for (int t = 0; t < DIM; t++)
                  pp[t] = g.coords[(size_t)t * (size_t)g.n + (size_t)(me.first + p)];
                const unsigned in = grid_sq<DIM>(g, pp, j) < cut;
#pragma unroll
                for (int r = 0; r < kQ; r++) hits[r] += r == p ? in : 0;
                if constexpr (kSym) (c ? pc1 : pc0) += in;
              }
            }
          }
        }
        if constexpr (kSym) {
          // the tested points' pairs inside, for them (consecutive positions mostly: few
          // sectors a warp): a reduction from every lane, no branch around it (0 where no
          // pair is inside; a lane past the run adds its 0 to its own point). With the chunk
          // loop's bound the same in every lane, rho 1% faster at 2.4 x 10^7 x 3 than
          // reductions only where pairs are inside (bench/RESULTS.md round 24)
          // Their addresses from 32-bit positions (n < 2^31 here): a select and one wide
          // multiply-add each instead of 64-bit sign extensions and selects, rho 1.2%
          // faster at 2.4 x 10^7 x 3 (bench/RESULTS.md round 27).
          atomicAdd(counts + (j0 >= 0 ? (unsigned)j0 : (unsigned)s), pc0);
          atomicAdd(counts + (j1 >= 0 ? (unsigned)j1 : (unsigned)s), pc1);
        }
      }
      __syncwarp();  // the segments are read before the next round writes them
    }
    if (lockstep) __syncthreads();
  }
  for (int off = 16; off > 0; off >>= 1) whole += __shfl_xor_sync(kFullMask, whole, off);
  int64_t mine_count = 0;
#pragma unroll
  for (int p = 0; p < kQ; p++) {
    uint64_t h = hits[p];
    for (int off = 16; off > 0; off >>= 1) h += __shfl_xor_sync(kFullMask, h, off);
    if (lane == p) mine_count = (int64_t)h;
  }
  // each point itself, at 0 < cut, is counted once: not a neighbour (kSym:
  // counts_to_rho takes it off once every item has added its pairs)
  if constexpr (kSym) {
    if (mine) atomicAdd(counts + s, (unsigned)(whole + mine_count));
  } else if (mine) {
    rho[by_position ? s : g.order[s]] = (double)(whole + mine_count - 1);
  }
}

// rho from the symmetric count's counts (each point counted itself once).
__global__ void counts_to_rho_kernel(const unsigned *__restrict__ counts,
                                     const int64_t *__restrict__ order, int64_t n,
                                     int by_position, double *__restrict__ rho) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x)
    rho[by_position ? s : order[s]] = (double)counts[s] - 1;
}

// The lanes count's kernels, as GM_DPC_DIM_SWITCH takes them: each item's pairs for
// itself (_own), or each crossed pair once (_sym). Blocks an SM as above.
#define GM_DPC_LANES_KERNEL(NAME, SYM)                                                        \
  template <int DIM>                                                                          \
  __global__ void __launch_bounds__(kPassThreads, DIM <= 3 ? 4 : DIM <= 5 ? 3 : 2)            \
      NAME(GridDev g, double cut, gm_dpc_screen_rel rel, double *__restrict__ rho,           \
           unsigned *__restrict__ counts, const int64_t *__restrict__ item_cell,              \
           const int64_t *__restrict__ item_start, int64_t i0, int64_t i1, int by_position,  \
           int start_bits, int lockstep, PairRows pr) {                                       \
    grid_count_lanes<DIM, SYM>(g, cut, rel, rho, counts, item_cell, item_start, i0, i1,      \
                               by_position, start_bits, lockstep, pr);                        \
  }
GM_DPC_LANES_KERNEL(grid_count_lanes_own, false)
GM_DPC_LANES_KERNEL(grid_count_lanes_sym, true)
#undef GM_DPC_LANES_KERNEL

// The cutoff count's items: a cell of m points is ceil(m / per_item) of them, its first
// (first[c - c0]: 1 where m > 0) and the rest (rest[c - c0]), for the cells c0 .. c1 - 1;
// their exclusive prefix sums place them.
__global__ void item_count_kernel(GridDev g, int per_item, int64_t c0, int64_t c1,
                                  int64_t *__restrict__ first, int64_t *__restrict__ rest) {
  for (int64_t c = c0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < c1;
       c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = g.start[c + 1] - g.start[c];
    first[c - c0] = m > 0;
    rest[c - c0] = m > 0 ? (m + per_item - 1) / per_item - 1 : 0;
  }
}

// Each item's cell and first sorted position: by_class, the first items of the cells in
// cell order, then the others (n_first on) in cell order; else each cell's items together.
__global__ void item_place_kernel(GridDev g, int per_item, int64_t c0, int64_t c1,
                                  const int64_t *__restrict__ first,
                                  const int64_t *__restrict__ rest, int64_t n_first,
                                  int by_class, int64_t *__restrict__ item_cell,
                                  int64_t *__restrict__ item_start) {
  for (int64_t c = c0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < c1;
       c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = c - c0, k = first[i + 1] - first[i] + rest[i + 1] - rest[i];
    for (int64_t t = 0; t < k; t++) {
      const int64_t at = !by_class ? first[i] + rest[i] + t
                         : t == 0  ? first[i]
                                   : n_first + rest[i] + t - 1;
      item_cell[at] = c;
      item_start[at] = g.start[c] + t * per_item;
    }
  }
}

// The densest point of each cell (-1 when empty).
__global__ void cell_max_kernel(GridDev g, const double *__restrict__ rho_sorted,
                                double *__restrict__ cell_max) {
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < g.ncells;
       c += (int64_t)gridDim.x * blockDim.x) {
    double top = -1;
    for (int64_t s = g.start[c]; s < g.start[c + 1]; s++)
      top = rho_sorted[s] > top ? rho_sorted[s] : top;
    cell_max[c] = top;
  }
}

// Each cell's map of the halo's runs (core/dpc_shared.h) from its label (a cluster,
// GM_DPC_MIXED or GM_DPC_EMPTY, as on the CPU: gm_dpc_grid_runs) and densest point, the
// last cell's first: maps[ncells - 1 - c] is cell c's, so that a scan in array order
// composes each cell's map after those of the cells behind it.
__global__ void run_maps_kernel(GridDev g, const int64_t *__restrict__ cluster_sorted,
                                const double *__restrict__ cell_max,
                                gm_dpc_run_map *__restrict__ maps) {
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < g.ncells;
       c += (int64_t)gridDim.x * blockDim.x) {
    int64_t own = GM_DPC_EMPTY;
    for (int64_t s = g.start[c]; s < g.start[c + 1]; s++) {
      if (own == GM_DPC_EMPTY) own = cluster_sorted[s];
      else if (own != cluster_sorted[s]) own = GM_DPC_MIXED;
    }
    maps[g.ncells - 1 - c] = gm_dpc_run_map_of(c, own, cell_max[c]);
  }
}

// The scan's operator: the later map (a cell before) after the composite of those behind.
struct RunMapsAfter {
  __device__ gm_dpc_run_map operator()(const gm_dpc_run_map &behind,
                                       const gm_dpc_run_map &cell) const {
    return gm_dpc_run_compose(cell, behind);
  }
};

// Each cell's run from its composite map, applied past the last cell as on the CPU.
__global__ void run_out_kernel(int64_t nc, const gm_dpc_run_map *__restrict__ composite,
                               int64_t *__restrict__ label, int64_t *__restrict__ end,
                               double *__restrict__ top) {
  gm_dpc_run last;
  last.label = GM_DPC_EMPTY;
  last.end = nc - 1;
  last.top = -1;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < nc;
       c += (int64_t)gridDim.x * blockDim.x) {
    const gm_dpc_run r = gm_dpc_run_apply(composite[nc - 1 - c], last);
    label[c] = r.label;
    end[c] = r.end;
    top[c] = r.top;
  }
}

// The index sorted on the device from core's geometry (gm_dpc_grid_plan), as the CPU
// sorts it: each point's cell id by the shared rule (gm_dpc_cell_of), then a stable radix
// sort of (cell, index) pairs, so that a cell's points keep their index order.
// With sub > 0 the key is the cell id times 2^(dim sub) plus the point's sub-cell (2^sub
// a side) in Morton order, so that within a cell nearby points lie together
// (sub_cells_kernel then takes the cell ids back).
__global__ void cell_key_kernel(gm_dpc_geom geo, const double *__restrict__ x, int64_t n,
                                int sub, int64_t *__restrict__ key, int64_t *__restrict__ row) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t k = gm_dpc_cell_of(&geo, x, n, i);
    if (sub > 0) {
      int64_t c[GM_DPC_GRID_MAX_DIM], morton = 0;
      gm_dpc_cell_coords(&geo, geo.dim, k, c);
      const double side = (double)(1 << sub);
      for (int t = 0; t < geo.dim; t++) {
        // the point's place in its cell, clamped (points clamped into the edge cells)
        double f = ((x[i + (int64_t)t * n] - geo.lo[t]) * geo.inv_h - (double)c[t]) * side;
        f = f > 0 ? (f < side - 1 ? f : side - 1) : 0;
        const int64_t u = (int64_t)f;
        for (int b = 0; b < sub; b++) morton |= ((u >> b) & 1) << (b * geo.dim + t);
      }
      k = (k << (sub * geo.dim)) | morton;
    }
    key[i] = k;
    row[i] = i;
  }
}

// The sorted keys of cell_key_kernel with sub-cells back to cell ids.
__global__ void sub_cells_kernel(int64_t *__restrict__ key, int64_t n, int shift) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x)
    key[s] >>= shift;
}

// start[c] = the first sorted position whose cell is >= c (start[ncells] = n): position
// s writes the cells after the one before it, up to its own.
__global__ void cell_start_kernel(const int64_t *__restrict__ key, int64_t n, int64_t ncells,
                                  int64_t *__restrict__ start) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s <= n;
       s += (int64_t)gridDim.x * blockDim.x) {
    const int64_t prev = s == 0 ? -1 : key[s - 1], own = s == n ? ncells : key[s];
    for (int64_t c = prev + 1; c <= own; c++) start[c] = s;
  }
}

// coords[t * n + s] = x[order[s] + t * n]: the points in cell order, dimension-major.
__global__ void gather_points_kernel(const double *__restrict__ x, const int64_t *__restrict__ order,
                                     int64_t n, int dim, double *__restrict__ coords) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = order[s];
    for (int t = 0; t < dim; t++) coords[(size_t)t * (size_t)n + (size_t)s] = x[(size_t)t * (size_t)n + (size_t)i];
  }
}

// The screen's origin (gm_dpc_screen_origin: the grid's centre, so that the copy's values,
// and their rounding, stay small).
struct ScreenOrigin {
  double at[GM_DPC_GRID_MAX_DIM];
};

// coords32 (GridDev) from coords: point s less the origin, rounded to fp32 (the padding
// lanes dim .. stride - 1 zero); each dimension's largest |value| into reach32 (float
// bits, which order as unsigned integers; zeroed before).
__global__ void screen_points_kernel(const double *__restrict__ coords, int64_t n, int dim,
                                     ScreenOrigin origin, float *__restrict__ coords32,
                                     unsigned *__restrict__ reach32) {
  const int stride = screen_stride(dim);
  unsigned top[GM_DPC_GRID_MAX_DIM] = {};
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x) {
#pragma unroll
    for (int t = 0; t < GM_DPC_GRID_MAX_DIM; t++) {
      if (t >= stride) break;
      const double x = t < dim ? coords[(size_t)t * (size_t)n + (size_t)s] : 0;
      const float v = t < dim ? gm_dpc_screen_coord(x, origin.at[t]) : 0.0f;
      coords32[(size_t)s * (size_t)stride + (size_t)t] = v;
      top[t] = max(top[t], __float_as_uint(fabsf(v)));
    }
  }
#pragma unroll
  for (int t = 0; t < GM_DPC_GRID_MAX_DIM; t++) {
    if (t >= dim) break;
    unsigned m = top[t];
    for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(kFullMask, m, off));
    if ((threadIdx.x & 31) == 0) atomicMax(&reach32[t], m);
  }
}

// delta's candidates in the row `rows` of ring r around cell c of point p (position's
// index i, density rho_i): the denser points of its cells (the whole row on the ring's
// faces, else its two cells at c[0] -+ r) that can beat (best, best_j), taken in by the
// tie rule (the smaller squared distance, then the smaller index).
template <int DIM>
__device__ __forceinline__ void delta_row(const GridDev &g, const double *__restrict__ rho_sorted,
                                          const double *__restrict__ cell_max,
                                          const gm_dpc_rows &rows, const int64_t *c, int64_t r,
                                          const double *p, double rho_i, int64_t i, double &best,
                                          int64_t &best_j) {
  const gm_dpc_geom *geo = &g.geom;
  int on_ring = r == 0;
  for (int t = 1; t < DIM; t++)
    if (rows.y[t] == c[t] - r || rows.y[t] == c[t] + r) on_ring = 1;
  double near_sq, far_sq;
  const int64_t base = gm_dpc_row_base(geo, DIM, &rows, p, p, &near_sq, &far_sq);
  if (near_sq > best * GM_DPC_CUT_OUT) return;
  const int64_t m0 = geo->cells[0];
  const int64_t lo = c[0] - r > 0 ? c[0] - r : 0, hi = c[0] + r < m0 - 1 ? c[0] + r : m0 - 1;
  const int64_t step = on_ring ? 1 : 2 * r;
  for (int64_t q = on_ring ? lo : c[0] - r; q <= hi; q += step) {
    if (q < 0) continue;
    const int64_t id = base + q;
    if (cell_max[id] < rho_i) continue;
    double gap, far;
    gm_dpc_gap(geo, 0, q, p[0], p[0], &gap, &far);
    if (near_sq + gap * gap > best * GM_DPC_CUT_OUT) continue;
    for (int64_t j = g.start[id]; j < g.start[id + 1]; j++) {
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
}

// The rings a thread walks for one point before the point is left to a warp
// (grid_delta_far_kernel): most points find their nearest denser point within a ring or
// two, but a local peak of the density walks out to the next denser region, and a thread
// walking hundreds of rings holds up its warp and its launch. GPUML_CUDA_DPC_RINGS=N sets
// it (0: every point past its own cell goes to a warp; for tests).
inline int64_t delta_thread_rings(int dim) {
  static const char *knob = getenv("GPUML_CUDA_DPC_RINGS");
  if (knob && *knob >= '0' && *knob <= '9') return atoll(knob);
  return dim <= 2 ? 8 : dim == 3 ? 4 : 2;
}

// delta_sq and nearest by point index, or by sorted position when by_position; top's
// entry is left as it is. A point not settled within `rings` rings (delta_thread_rings)
// is appended to far (far_count: its length) and left to grid_delta_far_kernel.
template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    grid_delta_kernel(GridDev g, const double *__restrict__ rho_sorted,
                      const double *__restrict__ cell_max, int64_t top,
                      double *__restrict__ delta_sq, int64_t *__restrict__ nearest, int64_t s0,
                      int64_t s1, int by_position, int64_t rings, int64_t *__restrict__ far,
                      unsigned long long *far_count) {
  const int64_t s = s0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= s1) return;
  const int64_t i = g.order[s];
  if (i == top) return;
  double p[GM_DPC_GRID_MAX_DIM];
  int64_t c[GM_DPC_GRID_MAX_DIM];
  load_point<DIM>(g, s, p, c);
  const gm_dpc_geom *geo = &g.geom;
  const double rho_i = rho_sorted[s];
  double best = __longlong_as_double(0x7ff0000000000000LL);
  int64_t best_j = -1;
  for (int64_t r = 0; r < geo->max_cells; r++) {
    if (r >= 1 && best < gm_dpc_ring_bound(geo, DIM, c, p, r)) break;
    if (r > rings) {
      far[atomicAdd(far_count, 1ull)] = s;
      return;
    }
    gm_dpc_rows rows;
    gm_dpc_rows_cube(geo, DIM, c, r, &rows);
    do delta_row<DIM>(g, rho_sorted, cell_max, rows, c, r, p, rho_i, i, best, best_j);
    while (gm_dpc_rows_next(DIM, &rows));
  }
  const int64_t at = by_position ? s : i;
  delta_sq[at] = best;
  nearest[at] = best_j;
}

// The points grid_delta_kernel left (far[0 .. count - 1], sorted positions of the index
// it walked, `from`, with from_rho its densities by position), one warp each: the same
// walk from ring 0 on g (`from` itself, or the mean density's cells when the first rings
// went over the cutoff density's finer ones), the rows of each ring dealt to the lanes,
// the lanes' bests merged by the tie rule after each ring before its bound is checked,
// so the answer is the one-thread walk's.
template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    grid_delta_far_kernel(GridDev g, const double *__restrict__ rho_sorted,
                          const double *__restrict__ cell_max, GridDev from,
                          const double *__restrict__ from_rho, const int64_t *__restrict__ far,
                          int64_t count, double *__restrict__ delta_sq,
                          int64_t *__restrict__ nearest, int by_position) {
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (w >= count) return;  // the whole warp
  const int64_t s = far[w];
  const int64_t i = from.order[s];
  double p[GM_DPC_GRID_MAX_DIM];
  int64_t c[GM_DPC_GRID_MAX_DIM];
#pragma unroll
  for (int t = 0; t < DIM; t++) p[t] = from.coords[(size_t)t * (size_t)from.n + (size_t)s];
  // the point's cell in g by the sorts' own rule (p as a matrix of one point)
  gm_dpc_cell_coords(&g.geom, DIM, gm_dpc_cell_of(&g.geom, p, 1, 0), c);
  const double rho_i = from_rho[s];
  const gm_dpc_geom *geo = &g.geom;
  double best = __longlong_as_double(0x7ff0000000000000LL);
  int64_t best_j = -1;
  for (int64_t r = 0; r < geo->max_cells; r++) {
    if (r >= 1 && best < gm_dpc_ring_bound(geo, DIM, c, p, r)) break;
    gm_dpc_rows rows;
    gm_dpc_rows_cube(geo, DIM, c, r, &rows);
    int64_t total = 1;
    for (int t = 1; t < DIM; t++) total *= rows.b[t] - rows.a[t] + 1;
    for (int64_t k = lane; k < total; k += 32) {
      gm_dpc_rows_at(DIM, k, &rows);
      delta_row<DIM>(g, rho_sorted, cell_max, rows, c, r, p, rho_i, i, best, best_j);
    }
    for (int off = 16; off > 0; off >>= 1) {
      const double o = __shfl_xor_sync(kFullMask, best, off);
      const int64_t oj = __shfl_xor_sync(kFullMask, best_j, off);
      if (o < best || (o == best && oj < best_j)) {
        best = o;
        best_j = oj;
      }
    }
  }
  if (lane == 0) {
    const int64_t at = by_position ? s : i;
    delta_sq[at] = best;
    nearest[at] = best_j;
  }
}

// Calls visit(base, o_lo, o_hi, i_lo, i_hi) (gm_dpc_row_cells' cells of the row at
// cell id base) for each row of cells within the cut of the box [qa, qb] (a point:
// qa = qb), until visit returns false.
template <int DIM, typename Visit>
__device__ __forceinline__ void rows_within(const gm_dpc_geom *geo, const double *qa,
                                            const double *qb, double cut, Visit visit) {
  gm_dpc_rows rows;
  if (!gm_dpc_rows_ball(geo, DIM, qa, qb, sqrt(cut * GM_DPC_CUT_OUT), &rows)) return;
  do {
    double near_sq, far_sq;
    const int64_t base = gm_dpc_row_base(geo, DIM, &rows, qa, qb, &near_sq, &far_sq);
    int64_t o_lo, o_hi, i_lo, i_hi;
    if (gm_dpc_row_cells(geo, qa[0], qb[0], near_sq, far_sq, cut, &o_lo, &o_hi, &i_lo, &i_hi) &&
        !visit(base, o_lo, o_hi, i_lo, i_hi))
      return;
  } while (gm_dpc_rows_next(DIM, &rows));
}

// partner[c]: at least the density of any point of another cluster that may lie within
// the cut of a point of cell c (the largest run_max over the runs of other clusters, or
// of cells holding several, that the ball around the box of c's points meets; for a cell
// holding several clusters, over all non-empty runs there), or -1 where there is none
// (no point of c has a border density). A point of c cannot raise its cluster's largest
// border density past (rho_i + partner[c]) / 2, so grid_border_kernel skips the walks of
// the points below their cluster's largest so far. One thread a cell, over the halo's
// runs (empty cells and runs of c's own cluster skipped a run at a time).
template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    border_partner_kernel(GridDev g, double cut, double *__restrict__ partner) {
  const gm_dpc_geom *geo = &g.geom;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < g.ncells;
       c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t s0 = g.start[c], s1 = g.start[c + 1];
    const int64_t own = g.run_label[c];  // a non-empty cell's own label (not merged)
    if (s0 == s1) {
      partner[c] = -1;
      continue;
    }
    double qa[DIM], qb[DIM];
#pragma unroll
    for (int t = 0; t < DIM; t++) {
      qa[t] = INFINITY;
      qb[t] = -INFINITY;
    }
    for (int64_t s = s0; s < s1; s++)
#pragma unroll
      for (int t = 0; t < DIM; t++) {
        const double v = g.coords[(size_t)t * (size_t)g.n + (size_t)s];
        qa[t] = fmin(qa[t], v);
        qb[t] = fmax(qb[t], v);
      }
    double best = -1;
    rows_within<DIM>(geo, qa, qb, cut, [&](int64_t base, int64_t o_lo, int64_t o_hi, int64_t,
                                           int64_t) {
      for (int64_t q = o_lo; q <= o_hi;) {
        const int64_t id = base + q, label = g.run_label[id];
        if (label != GM_DPC_EMPTY && (label != own || own == GM_DPC_MIXED))
          best = fmax(best, g.run_max[id]);
        q = g.run_end[id] - base + 1;
      }
      return true;
    });
    partner[c] = best;
  }
}

// found[c]: the largest border density written so far for cluster c, as the bits of a
// non-negative double (ordered as integers). grid_border_kernel takes g's points, rho_sorted
// and cluster_sorted in each cell's density order (densest first; kernels/dpc.cu's
// border_run), one thread a point.
__device__ __forceinline__ double found_of(const unsigned long long *found, int64_t c) {
  return __longlong_as_double((long long)*(volatile const unsigned long long *)&found[c]);
}

template <int DIM>
__global__ void __launch_bounds__(kPassThreads)
    grid_border_kernel(GridDev g, double cut, const double *__restrict__ rho_sorted,
                       const int64_t *__restrict__ cluster_sorted,
                       const double *__restrict__ cell_max, unsigned long long *found,
                       const double *__restrict__ partner, double seed_rho, int seeding,
                       int64_t s0, int64_t s1, unsigned long long *stats) {
  const int64_t s = s0 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= s1) return;
  const int64_t own = cluster_sorted[s];
  const double rho_i = rho_sorted[s];
  if ((rho_i >= seed_rho) != (seeding != 0)) return;  // the densest points go first
  double best = 0;
  const double most = partner[g.cell[s]];
  if (most < 0 || (rho_i + most) / 2 <= found_of(found, own)) return;
  if (stats) atomicAdd(&stats[0], 1ull);  // GPUML_TRACE: the walks, cells and points read
  double p[GM_DPC_GRID_MAX_DIM];
  int64_t c[GM_DPC_GRID_MAX_DIM];
  load_point<DIM>(g, s, p, c);
  rows_within<DIM>(&g.geom, p, p, cut, [&](int64_t base, int64_t o_lo, int64_t o_hi,
                                            int64_t i_lo, int64_t i_hi) {
    const double seen = found_of(found, own);
    double bar = best > seen ? best : seen;
    int64_t q = o_lo;
    while (q <= o_hi) {
      const int64_t id = base + q, label = g.run_label[id], end = g.run_end[id] - base;
      if (label == own || label == GM_DPC_EMPTY || (rho_i + g.run_max[id]) / 2 <= bar) {
        q = end + 1;
        continue;
      }
      const int64_t stop = end < o_hi ? end : o_hi;
      for (; q <= stop; q++) {
        const int64_t cq = base + q;
        const double top = cell_max[cq];
        if (top < 0 || (rho_i + top) / 2 <= bar) continue;
        if (label >= 0 && q >= i_lo && q <= i_hi) {
          best = bar = (rho_i + top) / 2;  // another cluster, every point within the cut
          continue;
        }
        // the cell's points densest first: none after one that cannot pass the bar can
        const int64_t j0 = g.start[cq], j1 = g.start[cq + 1];
        int64_t j = j0;
        for (; j < j1; j++) {
          const double avg = (rho_i + rho_sorted[j]) / 2;
          if (avg <= bar) break;
          if (cluster_sorted[j] != own && grid_sq<DIM>(g, p, j) < cut) best = bar = avg;
        }
        if (stats) {
          atomicAdd(&stats[1], 1ull);
          atomicAdd(&stats[2], (unsigned long long)(j - j0 + (j < j1)));
        }
      }
    }
    return true;
  });
  if (best > 0) atomicMax(&found[own], (unsigned long long)__double_as_longlong(best));
}

__global__ void iota_kernel(int64_t *__restrict__ out, int64_t n) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x)
    out[s] = s;
}

template <typename T>
__global__ void gather_kernel(const T *__restrict__ in, const int64_t *__restrict__ order,
                              int64_t n, T *__restrict__ out) {
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (int64_t)gridDim.x * blockDim.x)
    out[s] = in[order[s]];
}

// Host side of the grid passes.

// The index on the device (start, cell, order, coords), the densest point of each cell,
// and the sort's work space: the data, the unsorted (cell, index) pairs and cub's
// alternate buffers.
size_t grid_bytes(const gm_dpc_grid *grid) {
  const size_t n = (size_t)grid->n, dim = (size_t)grid->geom.dim;
  return ((size_t)grid->ncells + 1 + 2 * n) * 8 + n * dim * 8 + (size_t)grid->ncells * 8 +
         n * dim * 8 + 4 * n * 8;
}

// GPUML_CUDA_DPC_FP32=0 turns the cutoff count's fp32 screen off: every tested pair in
// fp64, as before the screen (for comparisons; the counts are the same).
bool screen_wanted() {
  const char *knob = getenv("GPUML_CUDA_DPC_FP32");
  return !(knob && strcmp(knob, "0") == 0);
}

// Whether the rho pass on rho_grid (null: off the index) takes the screen: the cutoff
// count only (the Gaussian's weights want the fp64 squares).
bool screens(const gm_dpc_grid *rho_grid, int gaussian) {
  return rho_grid && !gaussian && screen_wanted();
}

// The screen's copy of the points and its reach (screen_index).
size_t screen_bytes(const gm_dpc_grid *grid) {
  return (size_t)grid->n * (size_t)screen_stride(grid->geom.dim) * sizeof(float) +
         GM_DPC_GRID_MAX_DIM * sizeof(unsigned);
}

// The cutoff count's fp32 copy of the index's points (coords32, reach32), in `keep` when
// given, else in the Context.
gpuml_status screen_index(Context &ctx, GridDev &g, HeldList *keep) {
  const int dim = g.geom.dim;
  float *coords32 = nullptr;
  unsigned *reach32 = nullptr;
  GM_TRY(keep_alloc(ctx, keep, &coords32, (size_t)g.n * (size_t)screen_stride(dim),
                    "the index's fp32 points"));
  GM_TRY(keep_alloc(ctx, keep, &reach32, (size_t)GM_DPC_GRID_MAX_DIM, "the index's fp32 points"));
  GM_TRY(ctx.check(cudaMemsetAsync(reach32, 0, GM_DPC_GRID_MAX_DIM * sizeof *reach32, ctx.stream()),
                   "the index's fp32 points"));
  ScreenOrigin origin = {};
  for (int t = 0; t < dim; t++)
    origin.at[t] = gm_dpc_screen_origin(&g.geom, t);
  const unsigned blocks = grid_1d(g.n, 256) < 8192u ? grid_1d(g.n, 256) : 8192u;
  screen_points_kernel<<<blocks, 256, 0, ctx.stream()>>>(g.coords, g.n, dim, origin, coords32,
                                                         reach32);
  GM_TRY(ctx.launched("the index's fp32 points"));
  g.coords32 = coords32;
  g.reach32 = reach32;
  return GPUML_OK;
}

// The densest point of each cell into cell_max (ncells).
gpuml_status cell_max_fill(Context &ctx, const GridDev &g, const double *rho_sorted,
                           double *cell_max) {
  const unsigned blocks = grid_1d(g.ncells, 256) < 4096u ? grid_1d(g.ncells, 256) : 4096u;
  cell_max_kernel<<<blocks, 256, 0, ctx.stream()>>>(g, rho_sorted, cell_max);
  return ctx.launched("the densest point of each cell");
}

#define GM_DPC_DIM_SWITCH(dim, KERNEL, ...)                                            \
  switch (dim) {                                                                       \
    case 1: KERNEL<1><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    case 2: KERNEL<2><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    case 3: KERNEL<3><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    case 4: KERNEL<4><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    case 5: KERNEL<5><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    case 6: KERNEL<6><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    case 7: KERNEL<7><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
    default: KERNEL<8><<<blocks, kPassThreads, 0, ctx.stream()>>>(__VA_ARGS__); break; \
  }

// GPUML_CUDA_DPC_ITEMS=cells lays the cutoff count's items out cell by cell (a cell's
// items together) instead of by class (for comparisons; the counts are the same).
bool items_by_class() {
  const char *knob = getenv("GPUML_CUDA_DPC_ITEMS");
  return !(knob && strcmp(knob, "cells") == 0);
}

// The cutoff count's items of the cells first_cell .. last_cell - 1 (item_count_kernel),
// in the call's Context: each one's cell and first sorted position. By class, the first
// items of the cells (of per_item points, or the whole cell) come before the rest, so
// that the warps of a block (consecutive items, the same or the next cells along their
// row) mostly hold items of one size and the lockstep's rounds wait less on their largest.
struct Items {
  int64_t *cell = nullptr, *start = nullptr;
  int64_t count = 0;
};

gpuml_status grid_items(Context &ctx, const GridDev &g, int per_item, int64_t first_cell,
                        int64_t last_cell, Items *items) {
  const int64_t nc = last_cell - first_cell;
  int64_t *first = nullptr, *rest = nullptr;
  GM_TRY(ctx.alloc(&first, (size_t)nc + 1, "the density pass's items"));
  GM_TRY(ctx.alloc(&rest, (size_t)nc + 1, "the density pass's items"));
  GM_TRY(ctx.check(cudaMemsetAsync(first + nc, 0, sizeof *first, ctx.stream()),
                   "the density pass's items"));
  GM_TRY(ctx.check(cudaMemsetAsync(rest + nc, 0, sizeof *rest, ctx.stream()),
                   "the density pass's items"));
  // (a part may hold no cells)
  const unsigned blocks = nc == 0 ? 1u : grid_1d(nc, 256) < 4096u ? grid_1d(nc, 256) : 4096u;
  item_count_kernel<<<blocks, 256, 0, ctx.stream()>>>(g, per_item, first_cell, last_cell, first,
                                                      rest);
  GM_TRY(ctx.launched("the density pass's items"));
  size_t temp_bytes = 0;
  GM_TRY(ctx.check(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, first, first, nc + 1,
                                                 ctx.stream()),
                   "the density pass's items (cub::DeviceScan)"));
  unsigned char *temp = nullptr;
  GM_TRY(ctx.alloc(&temp, temp_bytes, "the density pass's items"));
  for (int64_t *scan : {first, rest})  // in place
    GM_TRY(ctx.check(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, scan, scan, nc + 1,
                                                   ctx.stream()),
                     "the density pass's items (cub::DeviceScan)"));
  int64_t n_first = 0, n_rest = 0;  // the first items and the rest
  GM_TRY(ctx.check(cudaMemcpyAsync(&n_first, first + nc, sizeof n_first, cudaMemcpyDeviceToHost,
                                   ctx.stream()),
                   "the density pass's items"));
  GM_TRY(ctx.check(cudaMemcpyAsync(&n_rest, rest + nc, sizeof n_rest, cudaMemcpyDeviceToHost,
                                   ctx.stream()),
                   "the density pass's items"));
  GM_TRY(ctx.sync("the density pass's items"));
  items->count = n_first + n_rest;
  const size_t room = (size_t)(items->count > 0 ? items->count : 1);
  GM_TRY(ctx.alloc(&items->cell, room, "the density pass's items"));
  GM_TRY(ctx.alloc(&items->start, room, "the density pass's items"));
  item_place_kernel<<<blocks, 256, 0, ctx.stream()>>>(g, per_item, first_cell, last_cell, first,
                                                      rest, n_first, items_by_class(),
                                                      items->cell, items->start);
  return ctx.launched("the density pass's items");
}

// GPUML_CUDA_DPC_LANES=0 keeps the screened cutoff count on grid_count_kernel instead of
// grid_count_lanes, "search" has the latter find every position's segment by
// stepping instead of by its bits of segment starts (for comparisons and tests; the
// counts are the same).
enum class LanesMode { kOff, kBits, kSearch };
LanesMode lanes_mode() {
  const char *knob = getenv("GPUML_CUDA_DPC_LANES");
  if (knob && strcmp(knob, "0") == 0) return LanesMode::kOff;
  if (knob && strcmp(knob, "search") == 0) return LanesMode::kSearch;
  return LanesMode::kBits;
}

// GPUML_CUDA_DPC_LOCKSTEP=0 has each warp of the lanes count walk its own item's rows (for
// comparisons; the counts are the same).
bool lockstep_wanted() {
  const char *knob = getenv("GPUML_CUDA_DPC_LOCKSTEP");
  return !(knob && strcmp(knob, "0") == 0);
}

// GPUML_CUDA_DPC_ROW_TABLE=0 has the symmetric count classify each row from its offsets
// instead of reading the pass's table (for comparisons; the counts are the same).
bool row_table_wanted() {
  const char *knob = getenv("GPUML_CUDA_DPC_ROW_TABLE");
  return !(knob && strcmp(knob, "0") == 0);
}

// GPUML_CUDA_DPC_SYM=0 has the lanes count test every crossed pair from both of its
// points' items instead of once (for comparisons; the counts are the same).
bool sym_wanted() {
  const char *knob = getenv("GPUML_CUDA_DPC_SYM");
  return !(knob && strcmp(knob, "0") == 0);
}

// Whether the symmetric count's rule calls every cell whole to itself (its row's k_in >= 0),
// as it needs: a cell's own points are counted, not tested, by each of them.
bool cells_whole_to_themselves(const gm_dpc_geom &geo, double cut) {
  const int64_t none[GM_DPC_GRID_MAX_DIM] = {0};
  double near_sq, far_sq;
  gm_dpc_pair_cross(&geo, geo.dim, none, &near_sq, &far_sq);
  int64_t k_in, k_out;
  gm_dpc_pair_row(&geo, near_sq, far_sq, cut, &k_in, &k_out);
  return k_in >= 0;
}

// The cutoff count's forms for g: the fp32 screen and its relative form (where the index
// has its fp32 copy: reach32, float bits), and whether the count runs across the lanes.
struct CountForms {
  gm_dpc_screen screen = {0.0f, 0.0f, 0};
  gm_dpc_screen_rel rel = {0, 0.0f, 0};
  bool lanes = false;
};

gpuml_status count_forms(Context &ctx, int dim, const GridDev &g, double cut, double inv_dc2,
                         CountForms *forms) {
  float reach[GM_DPC_GRID_MAX_DIM];
  const bool screened = inv_dc2 == 0 && g.coords32;
  *forms = CountForms();
  if (!screened) return GPUML_OK;
  GM_TRY(ctx.check(cudaMemcpyAsync(reach, g.reach32, (size_t)dim * sizeof *reach,
                                   cudaMemcpyDeviceToHost, ctx.stream()),
                   "the density pass's fp32 screen"));
  GM_TRY(ctx.sync("the density pass's fp32 screen"));
  forms->screen = gm_dpc_screen_for(cut, dim, reach);
  forms->rel = gm_dpc_screen_rel_for(cut, dim, reach, gm_dpc_rel_side(&g.geom));
  forms->lanes = forms->rel.on && g.n < ((int64_t)1 << 31) && lanes_mode() != LanesMode::kOff;
  return GPUML_OK;
}

// Whether the lanes count of g can be symmetric: every cell whole to itself by the pair
// rule (its own points counted, not tested, by each of them).
bool sym_count(const CountForms &forms, const GridDev &g, double cut) {
  return forms.lanes && sym_wanted() && cells_whole_to_themselves(g.geom, cut);
}

// rho of the points of cells first .. last - 1 (by point index, or by sorted position),
// in launches of kGridItemChunk items between interrupt checks. With part_counts (the
// parts of several devices, where sym_count holds): the symmetric count of those cells'
// items instead, each of their crossed pairs with the cells after them added for both
// points into part_counts (by sorted position; the caller clears it), rho left alone.
gpuml_status grid_rho(Context &ctx, int dim, const GridDev &g, double cut, double inv_dc2,
                      int64_t first, int64_t last, double *rho, int by_position,
                      const gpuml_options *opt, unsigned *part_counts) {
  CountForms forms;
  GM_TRY(count_forms(ctx, dim, g, cut, inv_dc2, &forms));
  const gm_dpc_screen &screen = forms.screen;
  const gm_dpc_screen_rel &rel = forms.rel;
  const bool lanes = forms.lanes;
  const int start_bits = lanes_mode() == LanesMode::kBits;
  const int lockstep = lockstep_wanted();
  // the symmetric count: each crossed pair tested once, from its lower cell, for both
  // points (their counts added up in `counts`): all cells on this device, or a part's
  // cells into part_counts
  const bool sym = sym_count(forms, g, cut) &&
                   (part_counts || (first == 0 && last == g.ncells));
  if (part_counts && !sym)
    return gm_fail(GPUML_ERR_CUDA, "dpc:cuda", "internal: a symmetric part where the count cannot be");
  unsigned *counts = part_counts;
  if (sym && !part_counts) {
    GM_TRY(ctx.alloc(&counts, (size_t)(g.n > 0 ? g.n : 1), "the density pass's counts"));
    GM_TRY(ctx.check(cudaMemsetAsync(counts, 0, (size_t)g.n * sizeof *counts, ctx.stream()),
                     "the density pass's counts"));
  }
  if (inv_dc2 == 0 && g.coords32 && gm_trace_on()) {
    char note[240];
    snprintf(note, sizeof note,
             "dpc cuda: fp32 screen %s, band %.9g .. %.9g around the cut %.9g; relative form "
             "%s, band %.9g .. %.9g; points %s%s",
             screen.on ? "on" : "off", (double)screen.in, (double)screen.out, cut,
             rel.on ? "on" : "off", rel.in, rel.in + (double)rel.band,
             lanes ? "across the lanes" : "one a step", sym ? ", each crossed pair once" : "");
    gm_trace(note);
  }
  PairRows pr;
  if (sym && row_table_wanted()) {
    int64_t entries = 1;
    for (int t = 1; t < dim; t++) {
      pr.reach[t] = gm_dpc_pair_reach(&g.geom, t, cut);
      pr.stride[t] = entries;
      entries = pr.reach[t] + 1 <= kPairRowsMax / entries ? entries * (pr.reach[t] + 1) : 0;
      if (!entries) break;
    }
    if (entries > 0) {
      int2 *table = nullptr;
      GM_TRY(ctx.alloc(&table, (size_t)entries, "the density pass's rows"));
      pair_rows_kernel<<<grid_1d(entries, 256), 256, 0, ctx.stream()>>>(g.geom, cut, pr, entries,
                                                                        table);
      GM_TRY(ctx.launched("the density pass's rows"));
      pr.k = table;
    }
  }
  if (!pr.k)
    for (int t = 1; t < dim; t++) pr.reach[t] = INT64_MAX;  // computed a row at a time
  const int per_item = sym ? sym_queries(dim) : lanes ? kLaneQueries : 32;
  Items items;
  GM_TRY(grid_items(ctx, g, per_item, first, last, &items));
  for (int64_t i0 = 0; i0 < items.count; i0 += kGridItemChunk) {
    const int64_t i1 = min64(items.count, i0 + kGridItemChunk);
    const unsigned blocks = grid_1d((i1 - i0) * 32, kPassThreads);
    if (sym) {
      GM_DPC_DIM_SWITCH(dim, grid_count_lanes_sym, g, cut, rel, rho, counts, items.cell,
                        items.start, i0, i1, by_position, start_bits, lockstep, pr);
    } else if (lanes) {
      GM_DPC_DIM_SWITCH(dim, grid_count_lanes_own, g, cut, rel, rho, counts, items.cell,
                        items.start, i0, i1, by_position, start_bits, lockstep, pr);
    } else {
      GM_DPC_DIM_SWITCH(dim, grid_count_kernel, g, cut, inv_dc2, screen, rho, items.cell,
                        items.start, i0, i1, by_position);
    }
    GM_TRY(ctx.launched("density peaks rho (index)"));
    GM_TRY(ctx.sync("density peaks rho (index)"));
    GM_TRY(interrupted(ctx, opt));
    // the points done, counted as the share of the items done
    gm_progress(opt, "dpc rho", (int64_t)((double)g.n * (double)i1 / (double)items.count), g.n);
  }
  if (sym && !part_counts) {
    const unsigned blocks = grid_1d(g.n, 256) < 4096u ? grid_1d(g.n, 256) : 4096u;
    counts_to_rho_kernel<<<blocks, 256, 0, ctx.stream()>>>(counts, g.order, g.n, by_position, rho);
    GM_TRY(ctx.launched("density peaks rho (index)"));
    GM_TRY(ctx.sync("density peaks rho (index)"));
  }
  return GPUML_OK;
}

// An index a delta walk goes over (grid_delta): the index with its densities by sorted
// position and the densest point of each cell.
struct DeltaIndex {
  GridDev g;
  const double *rho_sorted = nullptr, *cell_max = nullptr;
};

// delta of the points of sorted positions first .. last - 1 of near.g (by point index, or
// by sorted position), with the densest point of each cell (cell_max_fill): a thread walks
// each point's first rings on near, a warp each point left on far (near's positions; by
// position only where far is near). The far points wait until about kGridChunk of them
// are queued, so that their warps run together: one peak of the density walking out to
// the next denser region takes milliseconds on one warp.
gpuml_status grid_delta(Context &ctx, int dim, const DeltaIndex &near, const DeltaIndex &far_ix,
                        int64_t top, int64_t first, int64_t last, double *delta_sq,
                        int64_t *nearest, int by_position, const gpuml_options *opt) {
  int64_t *far = nullptr;
  unsigned long long *far_count = nullptr;
  // room for a launch's points past the queue's threshold
  const int64_t room = min64(last - first, 2 * kGridChunk);
  GM_TRY(ctx.alloc(&far, (size_t)room, "delta's far points"));
  GM_TRY(ctx.alloc(&far_count, 1, "delta's far points"));
  GM_TRY(ctx.check(cudaMemsetAsync(far_count, 0, sizeof *far_count, ctx.stream()),
                   "density peaks delta (index)"));
  // with GPUML_TRACE, the time of each kind of walk and the far points' count
  double near_s = 0, far_s = 0, t = gm_trace_on() ? gm_seconds() : 0;
  long long far_total = 0;
  for (int64_t s0 = first; s0 < last; s0 += kGridChunk) {
    const int64_t s1 = min64(last, s0 + kGridChunk);
    unsigned blocks = grid_1d(s1 - s0, kPassThreads);
    GM_DPC_DIM_SWITCH(dim, grid_delta_kernel, near.g, near.rho_sorted, near.cell_max, top,
                      delta_sq, nearest, s0, s1, by_position, delta_thread_rings(dim), far,
                      far_count);
    GM_TRY(ctx.launched("density peaks delta (index)"));
    unsigned long long count = 0;
    GM_TRY(ctx.check(cudaMemcpyAsync(&count, far_count, sizeof count, cudaMemcpyDeviceToHost,
                                     ctx.stream()),
                     "density peaks delta (index)"));
    GM_TRY(ctx.sync("density peaks delta (index)"));
    if (gm_trace_on()) {
      const double now = gm_seconds();
      near_s += now - t;
      t = now;
    }
    if (count > 0 && (s1 == last || (int64_t)count > room - kGridChunk)) {
      blocks = grid_1d((int64_t)count * 32, kPassThreads);
      GM_DPC_DIM_SWITCH(dim, grid_delta_far_kernel, far_ix.g, far_ix.rho_sorted,
                        far_ix.cell_max, near.g, near.rho_sorted, far, (int64_t)count,
                        delta_sq, nearest, by_position);
      GM_TRY(ctx.launched("density peaks delta (index, far points)"));
      GM_TRY(ctx.check(cudaMemsetAsync(far_count, 0, sizeof *far_count, ctx.stream()),
                       "density peaks delta (index, far points)"));
      GM_TRY(ctx.sync("density peaks delta (index, far points)"));
      far_total += (long long)count;
      if (gm_trace_on()) {
        const double now = gm_seconds();
        far_s += now - t;
        t = now;
      }
    }
    GM_TRY(interrupted(ctx, opt));
    gm_progress(opt, "dpc delta", s1 - first, last - first);
  }
  if (gm_trace_on()) {
    char note[200];
    snprintf(note, sizeof note, "dpc cuda: delta walks %.1f ms, far points' %.1f ms (%lld)",
             near_s * 1e3, far_s * 1e3, far_total);
    gm_trace(note);
  }
  return GPUML_OK;
}
