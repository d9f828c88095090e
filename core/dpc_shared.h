/* The geometry of the density peaks cell index that the CPU (core/cpu/dpc_grid.c) and the
 * GPU (kernels/dpc_grid.cuh) walk with the same formulas: which cells a ball of radius
 * w around a point can touch, and, row by row, which cells lie wholly inside the ball
 * (counted without looking at their points) or wholly outside it (skipped). Header-only,
 * so that nvcc compiles the same code for the device.
 *
 * Every classification is conservative: a cell is called inside only when every point
 * it can hold is within the ball by a relative margin (GM_DPC_CUT_IN) far above the
 * rounding of the squared distances and of the cell boxes, outside only when every
 * point is beyond it by GM_DPC_CUT_OUT. The cells between are decided point by point
 * with the exact squared distance, so the answers do not depend on the classification
 * and are the same as those of the brute force, on either backend. */
#ifndef GPUML_DPC_SHARED_H
#define GPUML_DPC_SHARED_H

#include <math.h>
#include <stdint.h>

#ifndef GM_HD
#ifdef __CUDACC__
#define GM_HD __host__ __device__ __forceinline__
#else
#define GM_HD static inline
#endif
#endif

/* The index serves d <= this many dimensions. */
#define GM_DPC_GRID_MAX_DIM 8
/* The Gaussian density over all pairs, split into parts (several devices or processes,
 * core/dpc_shards.c), splits at multiples of this many rows: in the GEMM form each weight
 * carries the rounding of its tile's GEMM, so a point must fall in the same tile of
 * queries as on one device. Both backends lay their query tiles on a grid of multiples of
 * a power of two that divides it (CPU: at most GM_DPC_QUERY_BLOCK; CUDA: kQueryTile or
 * its halves), so that a part starting at a multiple holds whole tiles. */
#define GM_DPC_GAUSS_PART_ROWS 4096
/* A cell is inside the ball s < cut when its farthest point is below cut * GM_DPC_CUT_IN,
 * outside when its nearest is above cut * GM_DPC_CUT_OUT. */
#define GM_DPC_CUT_IN (1 - 1e-9)
#define GM_DPC_CUT_OUT (1 + 1e-9)
/* Cell labels of the halo's runs (cluster ids are >= 0). */
#define GM_DPC_MIXED (-1)
#define GM_DPC_EMPTY (-2)

/* Cells of side h over the bounding box; cell ids row-major with dimension 0 fastest
 * (stride[0] = 1), so the cells of a row along dimension 0 hold one contiguous run of
 * sorted points. slack[t] is the rounding allowance of the cell of a coordinate, in
 * cells: a point in cell y lies in [lo + y h - slack h, lo + (y + 1) h + slack h]. */
typedef struct gm_dpc_geom {
  int dim;
  double h, inv_h;
  double lo[GM_DPC_GRID_MAX_DIM], slack[GM_DPC_GRID_MAX_DIM];
  int64_t cells[GM_DPC_GRID_MAX_DIM], stride[GM_DPC_GRID_MAX_DIM];
  int64_t max_cells; /* the largest of cells[] */
} gm_dpc_geom;

/* floor and ceil of v clamped to [-2, 2^52] first (cell indices and their margins),
 * without a library call. */
GM_HD double gm_dpc_floor(double v) {
  v = v > -2 ? v : -2;
  v = v < 4503599627370496.0 ? v : 4503599627370496.0;
  const double t = (double)(int64_t)v;
  return t > v ? t - 1 : t;
}
GM_HD double gm_dpc_ceil(double v) {
  v = v > -2 ? v : -2;
  v = v < 4503599627370496.0 ? v : 4503599627370496.0;
  const double t = (double)(int64_t)v;
  return t < v ? t + 1 : t;
}

/* The cell id of point i of x (n x d, column-major): the rule of both backends' sorts by
 * cell. */
GM_HD int64_t gm_dpc_cell_of(const gm_dpc_geom *g, const double *x, int64_t n, int64_t i) {
  int64_t id = 0;
  for (int t = 0; t < g->dim; t++) {
    const double y = gm_dpc_floor((x[i + (int64_t)t * n] - g->lo[t]) * g->inv_h);
    int64_t c = (int64_t)y;
    if (c < 0) c = 0;
    if (c >= g->cells[t]) c = g->cells[t] - 1;
    id += c * g->stride[t];
  }
  return id;
}

/* The coordinates c[0 .. dim - 1] of cell id (gm_dpc_cell_of's ids; dim = g->dim, an
 * argument as for the walks below, so that a kernel's loop unrolls). */
GM_HD void gm_dpc_cell_coords(const gm_dpc_geom *g, int dim, int64_t id, int64_t *c) {
  for (int t = 0; t < dim; t++) {
    c[t] = id % g->cells[t];
    id /= g->cells[t];
  }
}

/* The cells a .. b along dimension t that can hold a coordinate within w of some point
 * of [qa, qb] (a query point: qa = qb; a query cell: its box); 0 when none. */
GM_HD int gm_dpc_span(const gm_dpc_geom *g, int t, double qa, double qb, double w, int64_t *a,
                      int64_t *b) {
  const double lo = gm_dpc_floor((qa - w - g->lo[t]) * g->inv_h - g->slack[t]);
  const double hi = gm_dpc_floor((qb + w - g->lo[t]) * g->inv_h + g->slack[t]);
  const double last = (double)(g->cells[t] - 1);
  if (!(hi >= 0) || !(lo <= last)) return 0;
  *a = lo > 0 ? (int64_t)lo : 0;
  *b = hi < last ? (int64_t)hi : g->cells[t] - 1;
  return 1;
}

/* The box [a, b] of cell y along dimension t, widened by the slack. */
GM_HD void gm_dpc_box(const gm_dpc_geom *g, int t, int64_t y, double *a, double *b) {
  const double e = g->slack[t] * g->h;
  *a = g->lo[t] + (double)y * g->h - e;
  *b = g->lo[t] + (double)(y + 1) * g->h + e;
}

/* The nearest and farthest distance along dimension t between a point of [qa, qb] and a
 * point of the box of cell y. */
GM_HD void gm_dpc_gap(const gm_dpc_geom *g, int t, int64_t y, double qa, double qb,
                      double *near, double *far) {
  double blo, bhi;
  gm_dpc_box(g, t, y, &blo, &bhi);
  *near = qb < blo ? blo - qb : (qa > bhi ? qa - bhi : 0);
  *far = qb - blo > bhi - qa ? qb - blo : bhi - qa;
}

/* The rows (cells along dimensions 1 .. dim - 1) of a ball or a ring, as an odometer.
 * The walks take dim (= g->dim) as an argument so that a kernel compiled for one
 * dimension passes a constant: its loops unroll and the odometer stays in registers. */
typedef struct gm_dpc_rows {
  int64_t y[GM_DPC_GRID_MAX_DIM], a[GM_DPC_GRID_MAX_DIM], b[GM_DPC_GRID_MAX_DIM];
} gm_dpc_rows;

/* The rows that can hold a point within w of a point of the box qa .. qb (qa = qb = p for
 * a point); 0 when none. */
GM_HD int gm_dpc_rows_ball(const gm_dpc_geom *g, int dim, const double *qa, const double *qb, double w,
                           gm_dpc_rows *r) {
  for (int t = 1; t < dim; t++) {
    if (!gm_dpc_span(g, t, qa[t], qb[t], w, &r->a[t], &r->b[t])) return 0;
    r->y[t] = r->a[t];
  }
  return 1;
}

/* The rows within Chebyshev distance `ring` of the cell c (clamped to the grid). */
GM_HD void gm_dpc_rows_cube(const gm_dpc_geom *g, int dim, const int64_t *c, int64_t ring,
                            gm_dpc_rows *r) {
  for (int t = 1; t < dim; t++) {
    r->a[t] = c[t] - ring > 0 ? c[t] - ring : 0;
    r->b[t] = c[t] + ring < g->cells[t] - 1 ? c[t] + ring : g->cells[t] - 1;
    r->y[t] = r->a[t];
  }
}

/* Steps to the next row; 0 after the last. */
GM_HD int gm_dpc_rows_next(int dim, gm_dpc_rows *r) {
  for (int t = 1; t < dim; t++) {
    if (r->y[t] < r->b[t]) {
      r->y[t]++;
      return 1;
    }
    r->y[t] = r->a[t];
  }
  return 0;
}

/* Row k of r's odometer (0 .. the product of b - a + 1 over dimensions 1 .. dim - 1, the
 * first dimension fastest) into r->y: rows dealt to the lanes of a warp. */
GM_HD void gm_dpc_rows_at(int dim, int64_t k, gm_dpc_rows *r) {
  for (int t = 1; t < dim; t++) {
    const int64_t len = r->b[t] - r->a[t] + 1;
    r->y[t] = r->a[t] + k % len;
    k /= len;
  }
}

/* The first cell id of the current row, and the nearest and farthest squared distance
 * between the box qa .. qb and the row's cross-section (dimensions 1 .. dim - 1). */
GM_HD int64_t gm_dpc_row_base(const gm_dpc_geom *g, int dim, const gm_dpc_rows *r, const double *qa,
                              const double *qb, double *near_sq, double *far_sq) {
  int64_t base = 0;
  double ns = 0, fs = 0;
  for (int t = 1; t < dim; t++) {
    double nr, fr;
    gm_dpc_gap(g, t, r->y[t], qa[t], qb[t], &nr, &fr);
    ns += nr * nr;
    fs += fr * fr;
    base += r->y[t] * g->stride[t];
  }
  *near_sq = ns;
  *far_sq = fs;
  return base;
}

/* For a row at squared cross distances near_sq .. far_sq from the box qa .. qb (along
 * dimension 0: q0a .. q0b): the cells o_lo .. o_hi of the row that can hold a point with
 * s < cut from a point of the box, and among them i_lo .. i_hi (empty when i_lo > i_hi)
 * whose every point has s < cut from every point of the box. 0 when the row holds none. */
GM_HD int gm_dpc_row_cells(const gm_dpc_geom *g, double q0a, double q0b, double near_sq,
                           double far_sq, double cut, int64_t *o_lo, int64_t *o_hi,
                           int64_t *i_lo, int64_t *i_hi) {
  const double out = cut * GM_DPC_CUT_OUT - near_sq;
  if (!(out > 0)) return 0;
  if (!gm_dpc_span(g, 0, q0a, q0b, sqrt(out), o_lo, o_hi)) return 0;
  *i_lo = 1;
  *i_hi = 0;
  const double in = cut * GM_DPC_CUT_IN - far_sq;
  if (in > 0) {
    const double wi = sqrt(in) * (1 - 1e-12);
    const double a = gm_dpc_ceil((q0b - wi - g->lo[0]) * g->inv_h + g->slack[0]);
    const double b = gm_dpc_floor((q0a + wi - g->lo[0]) * g->inv_h - g->slack[0]) - 1;
    if (a <= b && b >= (double)*o_lo && a <= (double)*o_hi) {
      *i_lo = a > (double)*o_lo ? (int64_t)a : *o_lo;
      *i_hi = b < (double)*o_hi ? (int64_t)b : *o_hi;
    }
  }
  return 1;
}

/* The cell pairs' rule of the symmetric cutoff count (kernels/dpc_grid.cuh): a pair of
 * cells is classified from the offsets |Delta_t| of their coordinates alone, whole
 * (every pair of their points within the cut), apart (none) or crossed, so that both
 * cells of a pair classify it alike and the crossed pairs' points can be tested once,
 * from the lower cell, for both. Conservative as gm_dpc_row_cells: the boxes carry the
 * slack, the cut its margins, the square roots a relative 1e-12.
 *
 * The nearest and farthest distance along dimension t between a point of a cell and a
 * point of a cell delta >= 0 cells away. */
GM_HD void gm_dpc_pair_gap(const gm_dpc_geom *g, int t, int64_t delta, double *near,
                           double *far) {
  const double e2 = 2 * g->slack[t] * g->h;
  const double gap = (double)(delta - 1) * g->h - e2;
  *near = delta > 0 && gap > 0 ? gap : 0;
  *far = (double)(delta + 1) * g->h + e2;
}

/* The largest offset along dimension t at which a cell can hold a point within the cut
 * of a point of the other. */
GM_HD int64_t gm_dpc_pair_reach(const gm_dpc_geom *g, int t, double cut) {
  const double w = sqrt(cut * GM_DPC_CUT_OUT) * (1 + 1e-12) + 2 * g->slack[t] * g->h;
  return (int64_t)gm_dpc_floor(w * g->inv_h) + 1;
}

/* The squared distances near_sq .. far_sq across dimensions 1 .. dim - 1 between points
 * of two cells offset by delta[t] cells (gm_dpc_pair_gap's, summed in dimension order;
 * delta[0] is not read), as gm_dpc_pair_row takes them. */
GM_HD void gm_dpc_pair_cross(const gm_dpc_geom *g, int dim, const int64_t *delta,
                             double *near_sq, double *far_sq) {
  *near_sq = 0;
  *far_sq = 0;
  for (int t = 1; t < dim; t++) {
    double nr, fr;
    gm_dpc_pair_gap(g, t, delta[t] < 0 ? -delta[t] : delta[t], &nr, &fr);
    *near_sq += nr * nr;
    *far_sq += fr * fr;
  }
}

/* For cells whose offsets along dimensions 1 .. dim - 1 give squared distances near_sq ..
 * far_sq (the sums of gm_dpc_pair_gap's squares in dimension order): the largest offset
 * along dimension 0 of a pair not apart (k_out) and of a whole pair (k_in), -1 where
 * none. */
GM_HD void gm_dpc_pair_row(const gm_dpc_geom *g, double near_sq, double far_sq, double cut,
                           int64_t *k_in, int64_t *k_out) {
  const double e2 = 2 * g->slack[0] * g->h;
  const double out = cut * GM_DPC_CUT_OUT - near_sq;
  *k_out = -1;
  *k_in = -1;
  if (!(out > 0)) return;
  /* apart beyond: (k - 1) h - e2 > sqrt(out) */
  *k_out = (int64_t)gm_dpc_floor((sqrt(out) * (1 + 1e-12) + e2) * g->inv_h) + 1;
  const double in = cut * GM_DPC_CUT_IN - far_sq;
  if (!(in > 0)) return;
  /* whole up to: (k + 1) h + e2 < sqrt(in) */
  const int64_t k = (int64_t)gm_dpc_ceil((sqrt(in) * (1 - 1e-12) - e2) * g->inv_h) - 2;
  *k_in = k < -1 ? -1 : (k < *k_out ? k : *k_out);
}

/* The squared distance beyond which no point outside the cells within Chebyshev
 * distance ring - 1 of cell c can lie (INFINITY when those cells cover the grid):
 * the nearest face of their box that is not the grid's edge. */
GM_HD double gm_dpc_ring_bound(const gm_dpc_geom *g, int dim, const int64_t *c, const double *p,
                               int64_t ring) {
  double bound = INFINITY;
  for (int t = 0; t < dim; t++) {
    const double e = g->slack[t] * g->h;
    if (c[t] - ring >= 0) {
      const double face = p[t] - (g->lo[t] + (double)(c[t] - ring + 1) * g->h + e);
      if (face < bound) bound = face;
    }
    if (c[t] + ring < g->cells[t]) {
      const double face = g->lo[t] + (double)(c[t] + ring) * g->h - e - p[t];
      if (face < bound) bound = face;
    }
  }
  if (bound == INFINITY) return INFINITY;
  if (bound < 0) bound = 0;
  return bound * bound * GM_DPC_CUT_IN;
}

/* The rho parts of a fit over several devices or processes (core/dpc_shards.c): runs of
 * whole cells of about equal sums of squared counts (integers, exact in doubles below
 * 2^53, so in any order). Part p of `parts` (0 < p < parts) starts past the first cell c
 * whose cells 0 .. c weigh at least gm_dpc_part_target of their total (cell 0 where
 * that is 0). */
GM_HD double gm_dpc_part_target(double total, int parts, int p) { return total * p / parts; }

/* Whether cell c is that first cell for part p (the device's form, as its scan of the
 * squared counts goes; the host walks the cells once instead): cells 0 .. c weigh incl,
 * cell c weight, so cells 0 .. c - 1 weigh incl - weight below the target and cells
 * 0 .. c reach it. Part p then starts at cell c + 1 (nc at most). */
GM_HD int gm_dpc_part_ends(double total, int parts, int p, double incl, double weight) {
  const double target = gm_dpc_part_target(total, parts, p);
  return target > 0 && incl - weight < target && target <= incl;
}

/* The cutoff count's fp32 screen on both backends (kernels/dpc_grid.cuh,
 * core/cpu/dpc_grid.c): the index's points less the grid's centre, rounded to fp32
 * (gm_dpc_screen_coord); a tested pair whose fp32 square (gm_dpc_screen_sq on the GPU;
 * the products added in dimension order on the CPU, whose vector units may lack FMA) is
 * below `in` lies within the cut, one at or above `out` beyond it, and the exact fp64
 * square decides between them, so the counts are the fp64 rule's. Shared so that
 * tests/test_dpc.c can check the margin on the host. */
typedef struct gm_dpc_screen {
  float in, out;
  int on; /* 0: no screen, every pair in fp64 */
} gm_dpc_screen;

GM_HD double gm_dpc_screen_origin(const gm_dpc_geom *g, int t) {
  return g->lo[t] + 0.5 * (double)g->cells[t] * g->h;
}

GM_HD float gm_dpc_screen_coord(double x, double origin) { return (float)(x - origin); }

/* A product, then FMAs in dimension order: the rounding the margin counts. */
GM_HD float gm_dpc_screen_sq(int dim, const float *q, const float *p) {
  float diff = q[0] - p[0];
  float s = diff * diff;
  for (int t = 1; t < dim; t++) {
    diff = q[t] - p[t];
    s = fmaf(diff, diff, s);
  }
  return s;
}

/* The screen for s < cut, from reach[t]: the largest |gm_dpc_screen_coord| of dimension t.
 * The margin M: u = 2^-24, v = 2^-53, tiny = 2^-126 (what a flush to zero loses). For a
 * pair q, p and dimension t let a = q_t - o_t, b = p_t - o_t (o: the origin),
 * d_t = a - b, S = sum d_t^2, all exact.
 *  - The fp32 value A of a has |A - a| <= (u + 2v) |a| + tiny, and |a| <= R_t: reach[t]
 *    times 1 + 2^-20, plus 2 tiny.
 *  - D_t = fl32(A - B) = (d_t + e_t)(1 + w_t) with |w_t| <= u and
 *    |e_t| <= 2 (u + 2v) R_t + 3 tiny; Delta = ||e||_2 <= 2 (u + 2v) ||R||_2 + 3 sqrt(dim) tiny.
 *  - The fp32 square is sum D_t^2 within gamma_dim = dim u / (1 - dim u) relative, plus
 *    dim tiny, formed with FMAs or as rounded products added in order (the bound of a
 *    dot product of dim terms either way); by Cauchy-Schwarz |sum D_t^2 - S| <= (1 + u)^2 (2 sqrt(S) Delta + Delta^2)
 *    + (2u + u^2) S. Together (dim <= 8) |sq32 - S| <= E(S) = (dim + 2.1) u S
 *    + 2.02 sqrt(S) Delta + 1.02 Delta^2 + 2.1 dim tiny.
 *  - The fp64 square (dim + 2 roundings) has |sq64 - S| <= 1e-14 S.
 * If sq64 < cut, S < S1 = cut (1 + 1e-14) and sq32 <= S + E(S) < S1 + E(S1). If
 * sq64 >= cut, S >= cut (1 - 1e-14) and, as S - E(S) grows with S once sqrt(S) > 1.1 Delta
 * (here: M <= cut / 64 below gives Delta <= sqrt(cut) / 258), sq32 >= cut - 1e-14 cut
 * - E(S1). So with M >= 1e-14 cut + E(S1), sq32 < cut - M means sq64 < cut and
 * sq32 >= cut + M means sq64 >= cut. M is twice that (the rounding of this function),
 * `in` the float at or below cut - M, `out` the one at or above cut + M. Off where fp32
 * could overflow or lose the cut's scale, or where M > cut / 64 (a band that wide holds
 * too many pairs to pay). */
GM_HD gm_dpc_screen gm_dpc_screen_for(double cut, int dim, const float *reach) {
  const double u = 0x1p-24, v = 0x1p-53, tiny = 0x1p-126;
  gm_dpc_screen screen = {0, 0, 0};
  if (!(cut >= 0x1p-60 && cut <= 0x1p60)) return screen;
  double r2 = 0;
  for (int t = 0; t < dim; t++) {
    if (!(reach[t] <= 0x1p50f)) return screen; /* also inf and NaN */
    const double rt = (double)reach[t] * (1 + 0x1p-20) + 2 * tiny;
    r2 += rt * rt;
  }
  const double delta = 2 * (u + 2 * v) * sqrt(r2) + 3 * sqrt((double)dim) * tiny;
  const double s1 = cut * (1 + 1e-14);
  const double err = (dim + 2.1) * u * s1 + 2.02 * sqrt(s1) * delta + 1.02 * delta * delta +
                     2.1 * dim * tiny;
  const double margin = 2 * (1e-14 * cut + err);
  if (!(margin <= cut / 64)) return screen;
  screen.in = (float)(cut - margin);
  if ((double)screen.in > cut - margin) screen.in = nextafterf(screen.in, 0.0f);
  screen.out = (float)(cut + margin);
  if ((double)screen.out < cut + margin) screen.out = nextafterf(screen.out, INFINITY);
  screen.on = 1;
  return screen;
}

/* The GPU's lanes count takes the screen in a form relative to its item (the up to 8
 * points of one cell it counts together): with o the fp32 copy of the item's first
 * point, a tested point's copy t gives t' = t - o and w = |t'|^2 (gm_dpc_rel_square),
 * once for all the item's points, and each of the item's points q gives m = -2 q' and
 * c = |q'|^2 - in (gm_dpc_rel_query, q' = q - o), so that a pair takes
 * r = c + w + m . t' (gm_dpc_rel_value): one add and dim FMAs instead of dim
 * differences, a product and dim - 1 FMAs, and r's sign bit places it. r < 0: within the
 * cut; r >= band: beyond it; the exact fp64 square decides between. Shared so that
 * tests/test_dpc.c checks the margin on the host with the device's arithmetic. */
typedef struct gm_dpc_screen_rel {
  double in;  /* cut - M */
  float band; /* at or above M + E (below) */
  int on;     /* 0: the direct form (gm_dpc_screen) instead */
} gm_dpc_screen_rel;

/* The side the relative form takes: two points of one cell lie within the cell's side,
 * its slack included, in each dimension. */
GM_HD double gm_dpc_rel_side(const gm_dpc_geom *g) {
  double slack = 0;
  for (int t = 0; t < g->dim; t++) slack = slack > g->slack[t] ? slack : g->slack[t];
  return g->h * (1 + 2 * slack);
}

/* t' = t - o (fp32) for the dim coordinates. */
GM_HD void gm_dpc_rel_point(int dim, const float *t, const float *o, float *rel) {
  for (int k = 0; k < dim; k++) rel[k] = t[k] - o[k];
}

/* w = |t'|^2: a product, then FMAs in dimension order. */
GM_HD float gm_dpc_rel_square(int dim, const float *rel) {
  float w = rel[0] * rel[0];
  for (int k = 1; k < dim; k++) w = fmaf(rel[k], rel[k], w);
  return w;
}

/* A query's m = -2 q' (m[0 .. dim - 1]) and c = |q'|^2 - in (m[dim]), |q'|^2 in fp64. */
GM_HD void gm_dpc_rel_query(int dim, const float *rel, double in, float *m) {
  double qq = 0;
  for (int k = 0; k < dim; k++) {
    m[k] = -2 * rel[k];
    qq += (double)rel[k] * (double)rel[k];
  }
  m[dim] = (float)(qq - in);
}

/* r = c + w + m . t': the add, then FMAs from the last dimension down. */
GM_HD float gm_dpc_rel_value(int dim, const float *rel, float w, const float *m) {
  float r = w + m[dim];
  for (int k = dim - 1; k >= 0; k--) r = fmaf(rel[k], m[k], r);
  return r;
}

/* The relative form's bounds for s < cut, from reach[t] (as gm_dpc_screen_for) and side:
 * a bound on |q_t - o_t| for two points of one cell (the cell's side with its slack). The
 * error of r against S - in, S the exact square of the fp64 points: with u, v, tiny and
 * Delta (the copies' error) as in gm_dpc_screen_for, and e = sqrt(dim) (side + 2 Delta_1)
 * (1 + u) bounding |q'| (Delta_1: one copy's error in one dimension),
 *  - t' and q' are the differences of the copies rounded once more, so the fp32 points
 *    t', q' lie within Delta' = 1.001 (Delta + 1.01 u (sqrt(S) + 2 e)) of the exact
 *    difference, and | |t' - q'|^2 - S | <= 2 sqrt(S) Delta' + Delta'^2;
 *  - r computes |t'|^2 - 2 q'.t' + |q'|^2 - in (= |t' - q'|^2 - in exactly) with w a dot
 *    product of dim terms (gamma_dim), c rounded once from fp64 (u + 2^-50 relative to
 *    |q'|^2 + in), one add and dim FMAs (u each), every partial sum below
 *    B = (|t'| + |q'|)^2 + in <= (sqrt(S) + Delta' + 2 e)^2 + in: at most
 *    (2 dim + 2.1) u B + (dim + 2) tiny;
 *  - the fp64 square is within 1e-14 S of S.
 * E(S) is the sum; it and S - E(S) grow with S (M <= cut / 64 keeps Delta' well below
 * sqrt(S)), so with M = 2 E(S1), S1 = cut (1 + 1e-14): r < 0 means sq64 < cut, and
 * r >= band >= M + E(S1) means sq64 >= cut. Off where fp32 could overflow or lose the
 * cut's scale, or where M > cut / 64. */
GM_HD gm_dpc_screen_rel gm_dpc_screen_rel_for(double cut, int dim, const float *reach, double side) {
  const double u = 0x1p-24, v = 0x1p-53, tiny = 0x1p-126;
  gm_dpc_screen_rel rel = {0, 0, 0};
  if (!(cut >= 0x1p-60 && cut <= 0x1p60) || !(side >= 0 && side <= 0x1p50)) return rel;
  double r2 = 0, one = 0;
  for (int t = 0; t < dim; t++) {
    if (!(reach[t] <= 0x1p50f)) return rel; /* also inf and NaN */
    const double rt = (double)reach[t] * (1 + 0x1p-20) + 2 * tiny;
    r2 += rt * rt;
    one = rt > one ? rt : one;
  }
  const double delta = 2 * (u + 2 * v) * sqrt(r2) + 3 * sqrt((double)dim) * tiny;
  const double e = sqrt((double)dim) * (side + 2 * ((u + 2 * v) * one + tiny)) * (1 + 2 * u);
  const double s1 = cut * (1 + 1e-14), root = sqrt(s1);
  const double dp = 1.001 * (delta + 1.01 * u * (root + 2 * e));
  const double b = (root + dp + 2 * e) * (root + dp + 2 * e) + cut;
  const double err = 1e-14 * cut + 2 * root * dp + dp * dp + (2 * dim + 2.1) * u * b +
                     (dim + 2) * tiny;
  const double margin = 2 * err;
  if (!(margin <= cut / 64)) return rel;
  rel.in = cut - margin;
  rel.band = (float)(2 * margin);
  if ((double)rel.band < 2 * margin) rel.band = nextafterf(rel.band, INFINITY);
  rel.on = 1;
  return rel;
}

/* The halo's runs of cells (core/dpc.h's gm_dpc_grid_merge_runs) as maps of a run: cell
 * c's run is f_c(run of c + 1), from (GM_DPC_EMPTY, last cell, -1) past the last cell.
 * An empty cell keeps the run after it; a cell of several clusters (GM_DPC_MIXED) gives
 * its own; a cell of cluster L extends a run of L or of empty cells (to that run's end,
 * with the larger densest point) and else gives its own. The maps compose into maps of
 * these three kinds, so the GPU scans them in parallel and the CPU applies them one by
 * one: the same runs. */
typedef struct gm_dpc_run {
  int64_t label, end;
  double top; /* the densest point of the run's cells, -1 for none */
} gm_dpc_run;
typedef struct gm_dpc_run_map {
  int kind; /* 0 keeps, 1 gives run, 2 extends a run of run.label (else gives run) */
  gm_dpc_run run;
} gm_dpc_run_map;

/* Cell c's map, from its label (a cluster, GM_DPC_MIXED or GM_DPC_EMPTY) and densest
 * point. */
GM_HD gm_dpc_run_map gm_dpc_run_map_of(int64_t c, int64_t label, double top) {
  gm_dpc_run_map m;
  m.kind = label == GM_DPC_EMPTY ? 0 : label == GM_DPC_MIXED ? 1 : 2;
  m.run.label = label;
  m.run.end = c;
  m.run.top = top;
  return m;
}

GM_HD gm_dpc_run gm_dpc_run_apply(gm_dpc_run_map f, gm_dpc_run x) {
  if (f.kind == 0) return x;
  if (f.kind == 2 && (x.label == f.run.label || x.label == GM_DPC_EMPTY)) {
    gm_dpc_run r;
    r.label = f.run.label;
    r.end = x.end;
    r.top = x.top > f.run.top ? x.top : f.run.top;
    return r;
  }
  return f.run;
}

/* f after g (g applied first). */
GM_HD gm_dpc_run_map gm_dpc_run_compose(gm_dpc_run_map f, gm_dpc_run_map g) {
  if (f.kind == 0) return g;
  if (f.kind == 1 || g.kind == 0) return f;
  gm_dpc_run_map r = f;
  if (g.kind == 1) {
    r.kind = 1;
    r.run = gm_dpc_run_apply(f, g.run);
  } else if (g.run.label == f.run.label) {
    /* g's run is always of its label: f extends it, or g's own start */
    r.run.end = g.run.end;
    r.run.top = g.run.top > f.run.top ? g.run.top : f.run.top;
  } else {
    r.kind = 1; /* g gives a run of another cluster, which f does not extend */
  }
  return r;
}

#endif
