/* The t-SNE optimiser on the CPU: gradient descent with momentum and gains on the
 * sparse P, the repulsion exact (all pairs, tile by tile, in single precision) or by
 * FFT-accelerated interpolation (Linderman et al. 2019). Every sum has a fixed order
 * (per row, then rows in index order; FFT lines are independent), so the result does
 * not depend on the number of threads. kernels/tsne.cu does the same steps on the GPU
 * (its exact tiles in double precision). */
#define _DEFAULT_SOURCE /* madvise */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "cpu_backend.h"

typedef struct {
  const gm_csr *P;
  int64_t n;
  int dims, threads;
  gpuml_tsne_method method;
  double df;                 /* degrees of freedom of the kernel */
  int heavy;                 /* df != 1: the kernel's own formulas (df = 1 keeps Cauchy's) */
  int64_t charged;           /* the FFT method's charges: points 0 .. charged - 1 (all but
                                the new points of a placement) */
  double *attr, *rep, *zrow; /* n x dims, n x dims, n */
  float *yf;                 /* exact method: y in single precision, padded, and a mask */
  float *slots;              /* exact method: the columns' share of each pair of tiles */
  /* FFT method: the grid of the last gm_tsne_grid_boxes() choice */
  int boxes, size;
  gm_fft fft;
  float *grid;     /* (dims + 3) / 2 complex grids of size^dims, each a real and an
                      imaginary plane: channel c is plane c of the lot */
  float *kernel;   /* complex size^dims: the kernel, then its spectrum */
  float *scratch;  /* threads x gm_fft_scratch(size) */
  int32_t *box;    /* n: each point's box */
  double *weight;  /* n x dims x GM_TSNE_NODES interpolation weights */
  int64_t *start, *order; /* boxes^dims + 1 offsets, n points sorted by box */
  double *offset2; /* gm_fft_row(size): the kernel's squared offset per coordinate */
  int64_t box_cap;
  size_t grid_cap;
} cpu_state;

/* Loops over fewer items than this run on the calling thread: waking a team costs more
 * than the work (and much more on a busy machine). */
#define GM_TSNE_PARALLEL_MIN 4096

static int64_t ipow(int64_t b, int e) {
  int64_t r = 1;
  while (e-- > 0) r *= b;
  return r;
}

static void state_free(cpu_state *s) {
  free(s->yf);
  free(s->slots);
  free(s->attr);
  free(s->rep);
  free(s->zrow);
  gm_fft_free(&s->fft);
  free(s->grid);
  free(s->kernel);
  free(s->scratch);
  free(s->offset2);
  free(s->box);
  free(s->weight);
  free(s->start);
  free(s->order);
}

static gpuml_status nomem(const char *what, double bytes) {
  return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for %s", bytes / 1e6,
                 what);
}

static gpuml_status state_init(cpu_state *s, const gm_csr *P, int64_t n, int dims,
                               gpuml_tsne_method method, double df, const gpuml_options *opt) {
  memset(s, 0, sizeof *s);
  s->P = P;
  s->df = df;
  s->heavy = df != 1.0;
  s->charged = n;
  s->n = n;
  s->dims = dims;
  s->method = method;
  s->threads = gm_threads(opt);
  s->attr = gm_alloc((size_t)n * dims, sizeof *s->attr);
  s->rep = gm_alloc((size_t)n * dims, sizeof *s->rep);
  s->zrow = gm_alloc((size_t)n, sizeof *s->zrow);
  if (!s->attr || !s->rep || !s->zrow) return nomem("the gradient", (double)n * (2 * dims + 1) * 8);
  if (method == GPUML_TSNE_FFT) {
    s->box = gm_alloc((size_t)n, sizeof *s->box);
    s->weight = gm_alloc((size_t)n * dims * GM_TSNE_NODES, sizeof *s->weight);
    s->order = gm_alloc((size_t)n, sizeof *s->order);
    if (!s->box || !s->weight || !s->order)
      return nomem("the interpolation weights", (double)n * (dims * GM_TSNE_NODES + 2) * 8);
  }
  return GPUML_OK;
}

/* The FFT method's channels: 1, y_1 .. y_D, then |y|^2 (Cauchy: Z follows from the
 * same kernel) or 1 again (heavy tails: Z has a kernel of its own, w instead of w u).
 * Two channels share a complex grid (real and imaginary planes) when they share a
 * kernel, so heavy tails put the last channel on a grid of its own. */
static int fft_grids(int D, int heavy) { return heavy ? (D + 2) / 2 + 1 : (D + 3) / 2; }
static int64_t channel_plane(int D, int heavy, int c) {
  return heavy && c == D + 1 ? 2 * ((D + 2) / 2) : c;
}

/* The FFT walks its grids across rows (one cache line from each of `size` rows, each
 * row in another 4 KB page): with small pages nearly every access misses the TLB. Grids
 * of 2 MB or more get 2 MB-aligned memory marked for huge pages (Linux gives them to
 * memory that asks, under the default "madvise" setting): at 10,000 points the t-SNE
 * run took 25% less time (measured on an AVX2 EPYC, 1000 iterations, one thread). */
static float *grid_alloc(size_t count) {
  const size_t huge = (size_t)2 << 20;
  if (count > SIZE_MAX / sizeof(float) - huge) return NULL;
  const size_t bytes = count * sizeof(float);
  if (bytes < huge) return gm_alloc(count, sizeof(float));
  void *p = NULL;
  const size_t rounded = (bytes + huge - 1) / huge * huge;
  if (posix_memalign(&p, huge, rounded)) return NULL;
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE); /* advice only: small pages if refused */
#endif
  return p;
}

/* Makes the FFT buffers fit `boxes` boxes per dimension. */
static gpuml_status use_grid(cpu_state *s, int boxes) {
  const int size = gm_tsne_fft_size(boxes);
  const size_t cells = (size_t)gm_fft_plane(size, s->dims);
  const int grids = fft_grids(s->dims, s->heavy), kernels = s->heavy ? 2 : 1;
  const int64_t nbox = ipow(boxes, s->dims);
  s->boxes = boxes;
  if (size != s->size) {
    gm_fft_free(&s->fft);
    s->size = 0;
    GM_TSNE_TRY(gm_fft_init(&s->fft, size));
    s->size = size;
    free(s->scratch);
    s->scratch = gm_alloc((size_t)s->threads * gm_fft_scratch(size), sizeof *s->scratch);
    free(s->offset2);
    s->offset2 = gm_alloc((size_t)gm_fft_row(size), sizeof *s->offset2);
    if (!s->scratch || !s->offset2)
      return nomem("FFT lines", (double)s->threads * 4 * gm_fft_scratch(size));
  }
  if (cells > s->grid_cap) {
    free(s->grid);
    free(s->kernel);
    s->grid_cap = 0;
    s->grid = grid_alloc((size_t)grids * 2 * cells);
    s->kernel = grid_alloc((size_t)kernels * 2 * cells);
    if (!s->grid || !s->kernel) return nomem("the FFT grids", (double)(grids + kernels) * 8 * cells);
    s->grid_cap = cells;
  }
  if (nbox > s->box_cap) {
    free(s->start);
    s->box_cap = 0;
    s->start = gm_alloc((size_t)nbox + 1, sizeof *s->start);
    if (!s->start) return nomem("the boxes", (double)nbox * 8);
    s->box_cap = nbox;
  }
  return GPUML_OK;
}

static double spread_of(const double *y, int64_t count) {
  double lo = y[0], hi = y[0];
  for (int64_t e = 1; e < count; e++) {
    lo = y[e] < lo ? y[e] : lo;
    hi = y[e] > hi ? y[e] : hi;
  }
  return hi - lo;
}

/* ---- exact repulsion: zrow[i] = sum_{j != i} w_ij, rep[i] = sum_j w_ij^2 (y_i - y_j) ---- */

/* Each pair's terms are computed in single precision, GM_VF columns per vector (GNU C
 * vector extensions: one AVX-512 instruction, two AVX2 ones, four SSE ones), for
 * GM_EXACT_ROWS rows at a time so that each column is loaded once for all of them:
 * twice the pairs per instruction of double, whose division bounds it. Each lane sums
 * at most one tile's columns in single precision before the sums go on in double, so
 * Z and the forces carry about 1e-7 of relative error (the tests allow 1e-6): far
 * below what moves an embedding, and far below the FFT method's. Every sum has a
 * fixed order whatever the threads. */
#define GM_VF 16
#define GM_EXACT_TILE 256
#define GM_EXACT_ROWS 4
typedef float gm_vf __attribute__((vector_size(GM_VF * sizeof(float))));
typedef float gm_vf_half __attribute__((vector_size(GM_VF / 2 * sizeof(float))));
typedef double gm_vd_half __attribute__((vector_size(GM_VF / 2 * sizeof(double))));

/* Unaligned vector loads and stores; acc[0..1] (GM_VF double lanes) += v. Macros:
 * functions taking or returning vectors would change the ABI between the clones. */
#define GM_VF_LOAD(v, p) memcpy(&(v), (p), sizeof(gm_vf))
#define GM_VF_STORE(p, v) memcpy((p), &(v), sizeof(gm_vf))
#define GM_VD_ADD(acc, v)                                                    \
  do {                                                                       \
    gm_vf_half lo_, hi_;                                                     \
    memcpy(&lo_, &(v), sizeof lo_);                                          \
    memcpy(&hi_, (const char *)&(v) + sizeof lo_, sizeof hi_);               \
    (acc)[0] += __builtin_convertvector(lo_, gm_vd_half);                    \
    (acc)[1] += __builtin_convertvector(hi_, gm_vd_half);                    \
  } while (0)

/* out = u^df for u in (0, 1] lane by lane, as exp2(df log2 u) in single precision:
 * log2 from the exponent and an odd series of the mantissa (|s| <= 0.172: to 1e-9),
 * exp2 from the integer part (into the exponent) and a degree-7 series of the rest
 * about 1/2 (to 5e-9). The single-precision exponent df log2 u carries the error: at
 * most 5e-7 relative for df <= 0.5, 6e-6 for df = 10 where u^df is below 1e-20 (checked
 * against pow for u in [1e-7, 1]); the near pairs, which make the forces, stay near
 * 1e-7 like the tiles' other terms. A power below 2^-126 is 0. A macro: functions taking vectors would change the ABI between the
 * clones. */
typedef int32_t gm_vi __attribute__((vector_size(GM_VF * sizeof(int32_t))));
#define GM_VF_POW(out, u, df)                                                         \
  do {                                                                                \
    gm_vi b_, e_;                                                                     \
    gm_vf m_, s_, s2_, l_, t_, f_, g_, p_;                                            \
    memcpy(&b_, &(u), sizeof b_);                                                     \
    e_ = ((b_ >> 23) & 0xff) - 127;                                                   \
    b_ = (b_ & 0x7fffff) | 0x3f800000;                                                \
    memcpy(&m_, &b_, sizeof m_);                                                      \
    const gm_vi big_ = m_ > 1.41421356f;                    /* -1 where true */       \
    e_ -= big_;                                                                       \
    m_ *= 1.0f + 0.5f * __builtin_convertvector(big_, gm_vf);                         \
    s_ = (m_ - 1.0f) / (m_ + 1.0f);                                                   \
    s2_ = s_ * s_;                                                                    \
    l_ = 2.0f * s_ * (1.0f + s2_ * (1.0f / 3 + s2_ * (1.0f / 5 + s2_ * (1.0f / 7 +    \
                      s2_ * (1.0f / 9)))));                /* ln m */                \
    t_ = (df) * (__builtin_convertvector(e_, gm_vf) + l_ * 1.44269504f);              \
    {                                                   /* t = max(t, -126) */        \
      const gm_vi low_ = t_ < -126.0f;                                                \
      gm_vi tb_;                                                                      \
      memcpy(&tb_, &t_, sizeof tb_);                                                  \
      tb_ = (tb_ & ~low_) | (low_ & 0xc2fc0000);        /* -126.0f */                 \
      memcpy(&t_, &tb_, sizeof t_);                                                   \
    }                                                                                 \
    gm_vi i_ = __builtin_convertvector(t_, gm_vi);          /* toward 0 */            \
    i_ += (__builtin_convertvector(i_, gm_vf) > t_);        /* -1: floor */           \
    f_ = t_ - __builtin_convertvector(i_, gm_vf);           /* [0, 1) */              \
    g_ = (f_ - 0.5f) * 0.693147181f;                                                  \
    p_ = 1.41421356f * (1.0f + g_ * (1.0f + g_ * (0.5f + g_ * (1.0f / 6 + g_ *        \
                       (1.0f / 24 + g_ * (1.0f / 120 + g_ * (1.0f / 720 + g_ *        \
                       (1.0f / 5040))))))));                                          \
    memcpy(&b_, &p_, sizeof b_);                                                      \
    b_ += i_ << 23;                                                                   \
    b_ &= ~(i_ <= -126);                                                              \
    memcpy(&(out), &b_, sizeof(out));                                                 \
  } while (0)

/* Rows i .. i + GM_EXACT_ROWS - 1 (yf: D columns of npad floats, zero beyond n; mask:
 * 1 for a point, 0 for padding) against the columns of tiles [t0, t1). acc[q][0] gets
 * row q's sum of w, acc[q][1 + d] its sum of w^2 (y_i - y_j)_d, in GM_VF double lanes.
 * With `paired`, the columns' share (the same terms, the forces negated) goes to
 * slots: one slot of (D + 1) x GM_EXACT_TILE floats per tile, z then the D forces. */
static inline __attribute__((always_inline)) void exact_block(
    const float *yf, const float *mask, int64_t npad, const int D, const int paired,
    const int heavy, const float df, int64_t i, int64_t t0, int64_t t1, float *slots,
    gm_vd_half acc[GM_EXACT_ROWS][4][2]) {
  const int R = GM_EXACT_ROWS;
  gm_vf a[GM_EXACT_ROWS][3];
  for (int q = 0; q < R; q++)
    for (int d = 0; d < D; d++) a[q][d] = (gm_vf){0} + yf[i + q + d * npad];
  for (int64_t t = t0; t < t1; t++) {
    gm_vf zs[GM_EXACT_ROWS], rs[GM_EXACT_ROWS][3];
    for (int q = 0; q < R; q++) {
      zs[q] = (gm_vf){0};
      for (int d = 0; d < D; d++) rs[q][d] = (gm_vf){0};
    }
    float *slot = paired ? slots + (t - t0) * (D + 1) * GM_EXACT_TILE : NULL;
    for (int64_t c = 0; c < GM_EXACT_TILE; c += GM_VF) {
      const int64_t j = t * GM_EXACT_TILE + c;
      gm_vf m, b[3], cz = {0}, cr[3];
      GM_VF_LOAD(m, mask + j);
      for (int d = 0; d < D; d++) {
        GM_VF_LOAD(b[d], yf + j + d * npad);
        cr[d] = (gm_vf){0};
      }
#pragma GCC unroll 4
      for (int q = 0; q < R; q++) {
        gm_vf diff[3], r2 = (gm_vf){0} + (heavy ? 0.0f : 1.0f);
        for (int d = 0; d < D; d++) {
          diff[d] = a[q][d] - b[d];
          r2 += diff[d] * diff[d];
        }
        gm_vf w, wu;
        if (heavy) {  /* u = 1 / (1 + d^2 / df), w = u^df */
          const gm_vf u = 1.0f / (1.0f + r2 / df);
          gm_vf pw;
          GM_VF_POW(pw, u, df);
          w = m * pw;
          wu = w * u;
        } else {
          w = m / r2;
          wu = w * w;
        }
        zs[q] += w;
        if (paired) cz += w;
        for (int d = 0; d < D; d++) {
          const gm_vf f = wu * diff[d];
          rs[q][d] += f;
          if (paired) cr[d] += f;
        }
      }
      if (paired) {
        gm_vf o;
        GM_VF_LOAD(o, slot + c);
        o += cz;
        GM_VF_STORE(slot + c, o);
        for (int d = 0; d < D; d++) {
          float *at = slot + (1 + d) * GM_EXACT_TILE + c;
          GM_VF_LOAD(o, at);
          o -= cr[d];
          GM_VF_STORE(at, o);
        }
      }
    }
    for (int q = 0; q < R; q++) {
      GM_VD_ADD(acc[q][0], zs[q]);
      for (int d = 0; d < D; d++) GM_VD_ADD(acc[q][1 + d], rs[q][d]);
    }
  }
}

/* One block of rows: its own tile (each pair of the tile from both ends, itself
 * included with w = 1 and no force, taken off Z here), then either the tiles after
 * it with the columns' share into `slots` (paired) or every other tile.
 * z (GM_EXACT_ROWS) and r (GM_EXACT_ROWS x 3) receive the rows' sums. */
GM_VECTOR_CLONES
static void exact_rows(const float *yf, const float *mask, int64_t npad, int D, int paired,
                       int heavy, float df, int64_t i, int64_t tile, int64_t tiles,
                       float *slots, double *z, double *r) {
  gm_vd_half acc[GM_EXACT_ROWS][4][2];
  memset(acc, 0, sizeof acc);
#define GM_EXACT_CASE(DIMS, HEAVY)                                                            \
  case DIMS:                                                                                  \
    exact_block(yf, mask, npad, DIMS, 0, HEAVY, df, i, tile, tile + 1, NULL, acc);            \
    if (paired)                                                                               \
      exact_block(yf, mask, npad, DIMS, 1, HEAVY, df, i, tile + 1, tiles, slots, acc);        \
    else {                                                                                    \
      exact_block(yf, mask, npad, DIMS, 0, HEAVY, df, i, 0, tile, NULL, acc);                 \
      exact_block(yf, mask, npad, DIMS, 0, HEAVY, df, i, tile + 1, tiles, NULL, acc);         \
    }                                                                                         \
    break;
  if (heavy) {
    switch (D) {
      GM_EXACT_CASE(1, 1)
      GM_EXACT_CASE(2, 1)
      GM_EXACT_CASE(3, 1)
    }
  } else {
    switch (D) {
      GM_EXACT_CASE(1, 0)
      GM_EXACT_CASE(2, 0)
      GM_EXACT_CASE(3, 0)
    }
  }
#undef GM_EXACT_CASE
  for (int q = 0; q < GM_EXACT_ROWS; q++)
    for (int v = 0; v <= D; v++) {
      double s = 0;
      for (int h = 0; h < 2; h++)
        for (int l = 0; l < GM_VF / 2; l++) s += acc[q][v][h][l];
      if (v == 0) z[q] = s - 1.0;
      else r[q * 3 + v - 1] = s;
    }
}

/* Tile by tile: each pair once, the columns' share kept per pair of tiles (I, J > I)
 * and added up afterwards in the order of I. Beyond GM_TSNE_EXACT_PAIRED_MAX points
 * those slots would take too much memory, and each row goes through all columns (each
 * pair twice). */
static gpuml_status exact_repulsion(cpu_state *s, const double *y) {
  const int64_t n = s->n;
  const int D = s->dims;
  const int64_t tiles = (n + GM_EXACT_TILE - 1) / GM_EXACT_TILE, npad = tiles * GM_EXACT_TILE;
  const int paired = tiles > 1 && n <= GM_TSNE_EXACT_PAIRED_MAX;
  const size_t slot = (size_t)(D + 1) * GM_EXACT_TILE;
  if (!s->yf) {
    s->yf = gm_alloc((size_t)npad * (D + 1), sizeof *s->yf);
    if (paired) s->slots = gm_alloc((size_t)(tiles * (tiles - 1) / 2) * slot, sizeof *s->slots);
    if (!s->yf || (paired && !s->slots))
      return nomem("the exact repulsion",
                   ((double)npad * (D + 1) + (paired ? (double)tiles * (tiles - 1) / 2 * slot : 0)) * 4);
    float *mask = s->yf + (size_t)npad * D;
    for (int64_t j = 0; j < npad; j++) mask[j] = j < n ? 1.0f : 0.0f;
  }
  for (int d = 0; d < D; d++)
    for (int64_t j = 0; j < npad; j++) s->yf[j + d * npad] = j < n ? (float)y[j + d * n] : 0.0f;
  const float *mask = s->yf + (size_t)npad * D;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads) if (tiles > 1)
  for (int64_t ti = 0; ti < tiles; ti++) {
    /* the slots of (ti, ti + 1 .. tiles - 1) are consecutive */
    float *slots = paired ? s->slots + (size_t)(ti * (2 * tiles - ti - 1) / 2) * slot : NULL;
    if (paired) memset(slots, 0, sizeof *slots * slot * (size_t)(tiles - 1 - ti));
    const int64_t i1 = (ti + 1) * GM_EXACT_TILE < n ? (ti + 1) * GM_EXACT_TILE : n;
    for (int64_t i = ti * GM_EXACT_TILE; i < i1; i += GM_EXACT_ROWS) {
      double z[GM_EXACT_ROWS], r[GM_EXACT_ROWS * 3];
      exact_rows(s->yf, mask, npad, D, paired, s->heavy, (float)s->df, i, ti, tiles, slots, z,
                 r);
      for (int q = 0; q < GM_EXACT_ROWS && i + q < n; q++) {
        s->zrow[i + q] = z[q];
        for (int d = 0; d < D; d++) s->rep[i + q + d * n] = r[q * 3 + d];
      }
    }
  }
  if (!paired) return GPUML_OK;
#pragma omp parallel for schedule(static) num_threads(s->threads)
  for (int64_t tj = 1; tj < tiles; tj++) {
    const int64_t j0 = tj * GM_EXACT_TILE, j1 = j0 + GM_EXACT_TILE < n ? j0 + GM_EXACT_TILE : n;
    for (int64_t ti = 0; ti < tj; ti++) {
      const float *o = s->slots + (size_t)(ti * (2 * tiles - ti - 1) / 2 + tj - ti - 1) * slot;
      for (int64_t j = j0; j < j1; j++) {
        s->zrow[j] += o[j - j0];
        for (int d = 0; d < D; d++) s->rep[j + d * n] += o[(1 + d) * GM_EXACT_TILE + j - j0];
      }
    }
  }
  return GPUML_OK;
}

/* ---- FFT repulsion ---------------------------------------------------------------- */

/* The node (k_0, k_1, k_2) of a box, numbered 0 .. 3^dims - 1. */
static inline void node_coords(int D, int node, int *k) {
  for (int d = 0; d < D; d++) {
    k[d] = node % GM_TSNE_NODES;
    node /= GM_TSNE_NODES;
  }
}

/* ... and its interpolation weight for a point with weights w (dims x NODES). */
static inline double node_weight(const double *w, int D, int node, int *k) {
  node_coords(D, node, k);
  double v = 1;
  for (int d = 0; d < D; d++) v *= w[d * GM_TSNE_NODES + k[d]];
  return v;
}

/* The charges of box b's points onto its nodes (D a constant in each caller: the node
 * loops unroll). */
static inline __attribute__((always_inline)) void spread_box(cpu_state *s, const double *y,
                                                             int64_t b, const int D) {
  const int64_t n = s->n, cells = gm_fft_plane(s->size, D), row = gm_fft_row(s->size);
  const int C = D + 2, B = s->boxes, heavy = s->heavy, nodes = (int)ipow(GM_TSNE_NODES, D);
  const int64_t size = s->size;
  double acc[27][5];
  memset(acc, 0, sizeof acc);
  for (int64_t at = s->start[b]; at < s->start[b + 1]; at++) {
    const int64_t i = s->order[at];
    if (i >= s->charged) continue;
    double q[5], sq = 0;
    q[0] = 1;
    for (int d = 0; d < D; d++) {
      q[1 + d] = y[i + d * n];
      sq += q[1 + d] * q[1 + d];
    }
    q[D + 1] = heavy ? 1.0 : sq;
    const double *w = s->weight + (size_t)i * D * GM_TSNE_NODES;
    for (int node = 0; node < nodes; node++) {
      int k[3];
      const double v = node_weight(w, D, node, k);
      for (int c = 0; c < C; c++) acc[node][c] += v * q[c];
    }
  }
  for (int node = 0; node < nodes; node++) {
    int k[3];
    node_coords(D, node, k);
    int64_t cell = 0, scale = 1, rest = b;
    for (int d = 0; d < D; d++) {
      const int64_t g = (rest % B) * GM_TSNE_NODES + k[d];
      rest /= B;
      cell += g * scale;
      scale *= d == 0 ? row : size;
    }
    for (int c = 0; c < C; c++)
      s->grid[channel_plane(D, heavy, c) * cells + cell] = (float)acc[node][c];
  }
}

/* The potentials at point i from its box's nodes, then its terms of Z and the
 * repulsion (D a constant in each caller). */
static inline __attribute__((always_inline)) void gather_point(cpu_state *s, const double *y,
                                                               int64_t i, const int D) {
  const int64_t n = s->n, cells = gm_fft_plane(s->size, D), row = gm_fft_row(s->size);
  const int C = D + 2, B = s->boxes, heavy = s->heavy, nodes = (int)ipow(GM_TSNE_NODES, D);
  const int64_t size = s->size;
  double phi[5] = {0, 0, 0, 0, 0};
  const double *w = s->weight + (size_t)i * D * GM_TSNE_NODES;
  int64_t rest = s->box[i];
  int64_t base[3];
  for (int d = 0; d < D; d++) {
    base[d] = (rest % B) * GM_TSNE_NODES;
    rest /= B;
  }
  for (int node = 0; node < nodes; node++) {
    int k[3];
    const double v = node_weight(w, D, node, k);
    int64_t cell = 0, scale = 1;
    for (int d = 0; d < D; d++) {
      cell += (base[d] + k[d]) * scale;
      scale *= d == 0 ? row : size;
    }
    for (int c = 0; c < C; c++)
      phi[c] += v * (double)s->grid[channel_plane(D, heavy, c) * cells + cell];
  }
  double sq = 0, dot = 0;
  for (int d = 0; d < D; d++) {
    const double yd = y[i + d * n];
    sq += yd * yd;
    dot += yd * phi[1 + d];
    s->rep[i + d * n] = yd * phi[0] - phi[1 + d];
  }
  s->zrow[i] = heavy ? phi[D + 1] : (1 + sq) * phi[0] - 2 * dot + phi[D + 1];
}

static gpuml_status fft_repulsion(cpu_state *s, const double *y) {
  const int64_t n = s->n;
  const int D = s->dims, B = s->boxes, size = s->size, N = B * GM_TSNE_NODES;
  const int heavy = s->heavy;
  const int64_t nbox = ipow(B, D), cells = gm_fft_plane(size, D), row = gm_fft_row(size);
  double lo = y[0], hi = y[0];
  for (int64_t e = 1; e < n * D; e++) {
    lo = y[e] < lo ? y[e] : lo;
    hi = y[e] > hi ? y[e] : hi;
  }
  double width = (hi - lo) / B;
  if (!(width > 0)) width = 1;

#pragma omp parallel for schedule(static) num_threads(s->threads) if (n >= GM_TSNE_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) {
    int64_t lin = 0, mul = 1;
    for (int d = 0; d < D; d++) {
      double t;
      const int b = gm_tsne_box_of(y[i + d * n], lo, width, B, &t);
      gm_tsne_lagrange(t, s->weight + ((size_t)i * D + d) * GM_TSNE_NODES);
      lin += b * mul;
      mul *= B;
    }
    s->box[i] = (int32_t)lin;
  }
  /* Points sorted by box (counting sort, stable): each box's nodes get their sums
   * from its own points in index order. */
  memset(s->start, 0, sizeof *s->start * ((size_t)nbox + 1));
  for (int64_t i = 0; i < n; i++) s->start[s->box[i] + 1]++;
  for (int64_t b = 0; b < nbox; b++) s->start[b + 1] += s->start[b];
  for (int64_t i = 0; i < n; i++) s->order[s->start[s->box[i]]++] = i;
  for (int64_t b = nbox; b > 0; b--) s->start[b] = s->start[b - 1];
  s->start[0] = 0;

  const int grids = fft_grids(D, heavy);
  const int64_t grid_rows = 2 * grids * (cells / row); /* cleared by the threads together */
#pragma omp parallel for schedule(static) num_threads(s->threads) if (cells >= GM_TSNE_PARALLEL_MIN)
  for (int64_t r = 0; r < grid_rows; r++) memset(s->grid + r * row, 0, sizeof *s->grid * (size_t)row);
#pragma omp parallel for schedule(dynamic, 16) num_threads(s->threads) if (nbox >= GM_TSNE_PARALLEL_MIN)
  for (int64_t b = 0; b < nbox; b++) {
    if (s->start[b] == s->start[b + 1]) continue;
    switch (D) {
      case 1: spread_box(s, y, b, 1); break;
      case 2: spread_box(s, y, b, 2); break;
      default: spread_box(s, y, b, 3); break;
    }
  }

  /* The kernel on the node offsets, embedded in a circulant grid of size^dims (the
   * padding of the rows is zero everywhere): the squared offset of each coordinate
   * along an axis (-1 where the kernel is zero), then line by line along axis 0. */
  const double spacing = width / GM_TSNE_NODES;
  for (int64_t g = 0; g < row; g++) {
    const int64_t off = g >= size ? -1 : (g < N ? g : (g > size - N ? size - g : -1));
    s->offset2[g] = off < 0 ? -1.0 : (double)(off * off) * spacing * spacing;
  }
  const int64_t lines = cells / row;
#pragma omp parallel for schedule(static) num_threads(s->threads) if (cells >= GM_TSNE_PARALLEL_MIN)
  for (int64_t line = 0; line < lines; line++) {
    double across = 0; /* the squared offset along axes 1 .. D - 1 */
    int inside = 1;
    int64_t rest = line;
    for (int d = 1; d < D; d++, rest /= size) {
      const double o2 = s->offset2[rest % size];
      inside &= o2 >= 0;
      across += o2;
    }
    float *force = s->kernel + line * row, *imag = force + cells;
    for (int64_t g = 0; g < row; g++) {
      const double o2 = s->offset2[g], r2 = across + o2;
      const int in = inside && o2 >= 0;
      if (heavy) {  /* w u for the forces, then w for Z */
        force[g] = in ? (float)gm_tsne_heavy_wu(r2, s->df) : 0;
        force[2 * cells + g] = in ? (float)gm_tsne_heavy_w(r2, s->df) : 0;
        force[3 * cells + g] = 0;
      } else {
        force[g] = in ? (float)gm_tsne_kernel2(r2) : 0;
      }
      imag[g] = 0;
    }
  }
  gm_fft_even_spectrum(&s->fft, s->kernel, D, s->threads, s->scratch);
  if (heavy) gm_fft_even_spectrum(&s->fft, s->kernel + 2 * cells, D, s->threads, s->scratch);
  const float norm = (float)(1.0 / (double)ipow(size, D));  /* the FFT round trip scales by size^D */
  for (int g = 0; g < grids; g++) {
    float *grid = s->grid + (size_t)g * 2 * cells;
    const float *spectrum = heavy && g == grids - 1 ? s->kernel + 2 * cells : s->kernel;
    gm_fft_convolve(&s->fft, grid, spectrum, norm, D, N, s->threads, s->scratch);
  }

  /* Potentials at the points, then Z's terms and the repulsion. */
#pragma omp parallel for schedule(static) num_threads(s->threads) if (n >= GM_TSNE_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) switch (D) {
      case 1: gather_point(s, y, i, 1); break;
      case 2: gather_point(s, y, i, 2); break;
      default: gather_point(s, y, i, 3); break;
    }
  return GPUML_OK;
}

/* Z from the rows, in index order. The FFT sums include each point with itself. */
static gpuml_status normaliser(cpu_state *s, const double *y, double *z) {
  if (s->method == GPUML_TSNE_FFT) {
    GM_TSNE_TRY(fft_repulsion(s, y));
  } else {
    GM_TSNE_TRY(exact_repulsion(s, y));
  }
  double total = 0;
  for (int64_t i = 0; i < s->n; i++) total += s->zrow[i];
  if (s->method == GPUML_TSNE_FFT) total -= (double)s->n;
  if (!(total > 0) || !isfinite(total))
    return gm_fail(GPUML_ERR_NUMERIC, "tsne:numeric",
                   "the t-SNE normaliser Z became %g: the embedding diverged; try a smaller learning_rate",
                   total);
  *z = total;
  return GPUML_OK;
}

/* attr[i] = sum_j p_ij w_ij (y_i - y_j) for rows [i0, i1): each row's entries in
 * GM_ATTR_LANES lanes (entry e in lane (e - row start) % lanes), added up in lane order:
 * a fixed order that vectorises (gathers). */
#define GM_ATTR_LANES 8
/* acc[d][lane] += p_ij w_ij (a - y_j)_d for the entry (j, pij). */
static inline __attribute__((always_inline)) void attraction_term(
    const double *y, int64_t n, const int D, const int heavy, const double df, const double *a,
    int64_t j, double pij, int lane, double acc[3][GM_ATTR_LANES]) {
  double diff[3], r2 = heavy ? 0.0 : 1.0;
  for (int d = 0; d < D; d++) {
    diff[d] = a[d] - y[j + d * n];
    r2 += diff[d] * diff[d];
  }
  const double pw = heavy ? pij / (1.0 + r2 / df) : pij / r2;
  for (int d = 0; d < D; d++) acc[d][lane] += pw * diff[d];
}

static inline __attribute__((always_inline)) void attraction_block(
    const gm_csr *P, const double *y, int64_t n, const int D, const int heavy, const double df,
    int64_t i0, int64_t i1, double *attr) {
  const int L = GM_ATTR_LANES;
  for (int64_t i = i0; i < i1; i++) {
    double acc[3][GM_ATTR_LANES], a[3];
    for (int d = 0; d < D; d++) {
      a[d] = y[i + d * n];
      for (int l = 0; l < L; l++) acc[d][l] = 0;
    }
    int64_t e = P->row[i];
    const int64_t end = P->row[i + 1];
    for (; e + L <= end; e += L)
#pragma omp simd
      for (int l = 0; l < L; l++)
        attraction_term(y, n, D, heavy, df, a, P->col[e + l], P->val[e + l], l, acc);
    for (int l = 0; e < end; e++, l++)
      attraction_term(y, n, D, heavy, df, a, P->col[e], P->val[e], l, acc);
    for (int d = 0; d < D; d++) {
      double sum = 0;
      for (int l = 0; l < L; l++) sum += acc[d][l];
      attr[i + d * n] = sum;
    }
  }
}

GM_VECTOR_CLONES
static void attraction_rows(const gm_csr *P, const double *y, int64_t n, int D, double df,
                            int64_t i0, int64_t i1, double *attr) {
  if (df != 1.0) {
    switch (D) {
      case 1: attraction_block(P, y, n, 1, 1, df, i0, i1, attr); break;
      case 2: attraction_block(P, y, n, 2, 1, df, i0, i1, attr); break;
      default: attraction_block(P, y, n, 3, 1, df, i0, i1, attr); break;
    }
    return;
  }
  switch (D) {
    case 1: attraction_block(P, y, n, 1, 0, 1.0, i0, i1, attr); break;
    case 2: attraction_block(P, y, n, 2, 0, 1.0, i0, i1, attr); break;
    default: attraction_block(P, y, n, 3, 0, 1.0, i0, i1, attr); break;
  }
}

#define GM_ATTR_ROWS 256
static void attraction(cpu_state *s, const double *y) {
  const int64_t n = s->n, blocks = (n + GM_ATTR_ROWS - 1) / GM_ATTR_ROWS;
#pragma omp parallel for schedule(static) num_threads(s->threads) if (n >= GM_TSNE_PARALLEL_MIN)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t i0 = b * GM_ATTR_ROWS, i1 = i0 + GM_ATTR_ROWS < n ? i0 + GM_ATTR_ROWS : n;
    attraction_rows(s->P, y, n, s->dims, s->df, i0, i1, s->attr);
  }
}

static gpuml_status gradient(cpu_state *s, const double *y, double exaggeration, double *grad,
                             double *z_out) {
  double z;
  GM_TSNE_TRY(normaliser(s, y, &z));
  attraction(s, y);
  const int64_t count = s->n * s->dims;
  const double inv_z = 1.0 / z;
  for (int64_t e = 0; e < count; e++) grad[e] = exaggeration * s->attr[e] - s->rep[e] * inv_z;
  if (z_out) *z_out = z;
  return GPUML_OK;
}

/* KL(P || Q) = sum p log p - sum p log w + (sum p) log Z, with
 * -log w = df log(1 + d^2 / df) (log(1 + d^2) for df = 1). */
static gpuml_status kl_divergence(cpu_state *s, const double *y, double plogp, double psum,
                                  double *kl) {
  double z;
  GM_TSNE_TRY(normaliser(s, y, &z));
  const gm_csr *P = s->P;
  const int64_t n = s->n;
  const int D = s->dims;
#pragma omp parallel for schedule(static, 256) num_threads(s->threads) if (n >= GM_TSNE_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) {
    double sum = 0;
    for (int64_t e = P->row[i]; e < P->row[i + 1]; e++) {
      const int64_t j = P->col[e];
      double r2 = 0;
      for (int d = 0; d < D; d++) {
        const double diff = y[i + d * n] - y[j + d * n];
        r2 += diff * diff;
      }
      sum += P->val[e] * (s->heavy ? s->df * log1p(r2 / s->df) : log1p(r2));
    }
    s->zrow[i] = sum;
  }
  double total = 0;
  for (int64_t i = 0; i < n; i++) total += s->zrow[i];
  *kl = plogp + total + psum * log(z);
  return GPUML_OK;
}

static void p_sums(const gm_csr *P, double *plogp, double *psum) {
  double a = 0, b = 0;
  for (int64_t e = 0; e < P->nnz; e++) {
    b += P->val[e];
    if (P->val[e] > 0) a += P->val[e] * log(P->val[e]);
  }
  *plogp = a;
  *psum = b;
}

static int sign_of(double v) { return (v > 0) - (v < 0); }

gpuml_status gm_tsne_optimize_cpu(const gm_csr *P, const gm_tsne_run *run, double *y,
                                  double *itercosts, gpuml_tsne_result *result,
                                  const gpuml_options *opt) {
  const int64_t n = run->n;
  const int D = run->dims;
  const int64_t count = n * D;
  cpu_state s;
  gpuml_status st = state_init(&s, P, n, D, run->method, run->df, opt);
  double *grad = gm_alloc((size_t)count, sizeof *grad);
  double *uy = gm_alloc((size_t)count, sizeof *uy);
  double *gains = gm_alloc((size_t)count, sizeof *gains);
  if (!st && (!grad || !uy || !gains)) st = nomem("the optimiser", (double)count * 24);
  if (st) goto done;
  for (int64_t e = 0; e < count; e++) {
    uy[e] = 0;
    gains[e] = 1;
  }
  double plogp, psum;
  p_sums(P, &plogp, &psum);
  const double max_step2 = run->max_step_norm * run->max_step_norm;
  int cost_at = 0;
  for (int it = 0; it < run->max_iter; it++) {
    if (run->method == GPUML_TSNE_FFT && it % GM_TSNE_GRID_EVERY == 0)
      if ((st = use_grid(&s, gm_tsne_grid_boxes(spread_of(y, count), D)))) goto done;
    const double exaggeration = it < run->stop_lying_iter ? run->exaggeration : 1.0;
    const double momentum = it < run->mom_switch_iter ? run->momentum : run->final_momentum;
    if ((st = gradient(&s, y, exaggeration, grad, NULL))) goto done;
#pragma omp parallel for schedule(static) num_threads(s.threads) if (n >= GM_TSNE_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
      double step2 = 0;
      for (int d = 0; d < D; d++) {
        const int64_t e = i + d * n;
        double gain = sign_of(grad[e]) != sign_of(uy[e]) ? gains[e] + 0.2 : gains[e] * 0.8;
        if (gain < 0.01) gain = 0.01;
        gains[e] = gain;
        uy[e] = momentum * uy[e] - run->learning_rate * gain * grad[e];
        step2 += uy[e] * uy[e];
      }
      if (run->max_step_norm > 0 && step2 > max_step2) {
        const double scale = run->max_step_norm / sqrt(step2);
        for (int d = 0; d < D; d++) uy[i + d * n] *= scale;
      }
      for (int d = 0; d < D; d++) y[i + d * n] += uy[i + d * n];
    }
    for (int d = 0; d < D; d++) {
      double mean = 0;
      for (int64_t i = 0; i < n; i++) mean += y[i + d * n];
      mean /= (double)n;
      for (int64_t i = 0; i < n; i++) y[i + d * n] -= mean;
    }
    if ((it + 1) % GM_TSNE_COST_EVERY == 0 || it + 1 == run->max_iter) {
      double kl;
      if ((st = kl_divergence(&s, y, plogp, psum, &kl))) goto done;
      if (itercosts) itercosts[cost_at] = kl;
      cost_at++;
      if (result) {
        result->kl = kl;
        result->iterations_done = it + 1;
      }
      gm_progress(opt, "tsne", it + 1, run->max_iter);
    }
    if (gm_interrupted(opt)) {
      st = gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted at iteration %d",
                   it + 1);
      goto done;
    }
  }
done:
  state_free(&s);
  free(grad);
  free(uy);
  free(gains);
  return st;
}

gpuml_status gm_tsne_gradient_cpu(const gm_csr *P, const double *y, int64_t n, int dims,
                                  gpuml_tsne_method method, int boxes, double exaggeration,
                                  double df, double *grad, double *z, const gpuml_options *opt) {
  cpu_state s;
  gpuml_status st = state_init(&s, P, n, dims, method, df, opt);
  if (!st && method == GPUML_TSNE_FFT)
    st = use_grid(&s, boxes > 0 ? boxes : gm_tsne_grid_boxes(spread_of(y, n * dims), dims));
  if (!st) st = gradient(&s, y, exaggeration, grad, z);
  state_free(&s);
  return st;
}

gpuml_status gm_tsne_kl_cpu(const gm_csr *P, const double *y, int64_t n, int dims,
                            gpuml_tsne_method method, int boxes, double df, double *kl,
                            const gpuml_options *opt) {
  cpu_state s;
  gpuml_status st = state_init(&s, P, n, dims, method, df, opt);
  if (!st && method == GPUML_TSNE_FFT)
    st = use_grid(&s, boxes > 0 ? boxes : gm_tsne_grid_boxes(spread_of(y, n * dims), dims));
  double plogp, psum;
  p_sums(P, &plogp, &psum);
  if (!st) st = kl_divergence(&s, y, plogp, psum, kl);
  state_free(&s);
  return st;
}

/* Measured on a 2-core AVX-512 machine (bench/RESULTS.md, 1000 iterations): exact
 * 9.7e-8 s x n^2, FFT about 13.9 s + 1.5e-4 s x n, equal near 12,700 points (auto keeps
 * 10,000; that FFT predates its huge pages, fused convolution and even kernel spectrum).
 * Measured on a 2-core AVX2 EPYC without AVX-512, one thread, 1000 iterations on
 * Fashion-MNIST (PCA-50, perplexity 30), CPU seconds by perf stat, 2026-11-24:
 *   points  3,000  3,500  4,000  6,000  8,000  10,000
 *   exact     9.8   13.2   15.4   35.1   56.4    90.6
 *   FFT      11.9   11.4   13.1   16.7   23.8    23.6
 * equal between 3,000 and 3,500, so 3,000. Narrower vectors (SSE2, NEON) double the
 * exact cost per pair again (a cost model, not measured): 2,000. */
int64_t gm_tsne_exact_max_n_cpu(int dims, double df) {
  /* Heavy tails (df != 1) add a power per pair (GM_VF_POW): about 7.8 times the Cauchy
   * kernel's cost per pair (5,000 points, 300 iterations: 5.67 s against 0.73 s), equal
   * to the FFT method near 4,400 points on AVX-512: 2/5 of the Cauchy crossover. */
  const int64_t cauchy = dims == 3 ? GM_TSNE_EXACT_MAX_N_3D : GM_TSNE_EXACT_MAX_N;
  const int64_t widest = df != 1.0 ? cauchy * 2 / 5 : cauchy;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return widest;
  if (__builtin_cpu_supports("avx2")) return widest * 3 / 10;
  return widest / 5;
#else
  return widest / 5;  /* 4-lane vectors (NEON) */
#endif
}

/* ---- placing new points into a fixed embedding ------------------------------------ */

/* Exact: each new point against every fixed point, in double. */
static void place_exact_repulsion(cpu_state *s, const double *y, int64_t n_fixed) {
  const int64_t n = s->n;
  const int D = s->dims;
  const double df = s->df;
#pragma omp parallel for schedule(static, 16) num_threads(s->threads) if ((n - n_fixed) * n_fixed >= (int64_t)1 << 16)
  for (int64_t i = n_fixed; i < n; i++) {
    double z = 0, r[3] = {0, 0, 0}, a[3];
    for (int d = 0; d < D; d++) a[d] = y[i + d * n];
    for (int64_t j = 0; j < n_fixed; j++) {
      double diff[3], r2 = 0;
      for (int d = 0; d < D; d++) {
        diff[d] = a[d] - y[j + d * n];
        r2 += diff[d] * diff[d];
      }
      double w, wu;
      if (s->heavy) {
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
    s->zrow[i] = z;
    for (int d = 0; d < D; d++) s->rep[i + d * n] = r[d];
  }
}

gpuml_status gm_tsne_place_cpu(const gm_csr *P, const gm_tsne_place_run *run, double *y,
                               const gpuml_options *opt) {
  const int64_t n = run->n, n_fixed = run->n_fixed, m = n - n_fixed;
  const int D = run->dims;
  cpu_state s;
  gpuml_status st = state_init(&s, P, n, D, run->method, run->df, opt);
  s.charged = n_fixed;
  double *uy = gm_alloc((size_t)m * D, sizeof *uy), *gains = gm_alloc((size_t)m * D, sizeof *gains);
  if (!st && (!uy || !gains)) st = nomem("the placement", (double)m * D * 16);
  if (st) goto done;
  for (int64_t e = 0; e < m * D; e++) {
    uy[e] = 0;
    gains[e] = 1;
  }
  const double max_step2 = run->max_step_norm * run->max_step_norm;
  for (int it = 0; it < run->max_iter; it++) {
    if (run->method == GPUML_TSNE_FFT) {
      if (it % GM_TSNE_GRID_EVERY == 0 &&
          (st = use_grid(&s, gm_tsne_grid_boxes(spread_of(y, n * D), D))))
        goto done;
      if ((st = fft_repulsion(&s, y))) goto done;
    } else {
      place_exact_repulsion(&s, y, n_fixed);
    }
    attraction(&s, y);
    int bad = 0;
#pragma omp parallel for schedule(static) num_threads(s.threads) reduction(|: bad) if (m >= GM_TSNE_PARALLEL_MIN)
    for (int64_t i = n_fixed; i < n; i++) {
      const double z = s.zrow[i];
      if (!(z > 0) || !isfinite(z)) {
        bad = 1;
        continue;
      }
      double step2 = 0;
      for (int d = 0; d < D; d++) {
        const int64_t e = i + d * n, o = i - n_fixed + d * m;
        const double g = s.attr[e] - s.rep[e] / z;
        double gain = sign_of(g) != sign_of(uy[o]) ? gains[o] + 0.2 : gains[o] * 0.8;
        if (gain < 0.01) gain = 0.01;
        gains[o] = gain;
        uy[o] = run->momentum * uy[o] - run->learning_rate * gain * g;
        step2 += uy[o] * uy[o];
      }
      if (run->max_step_norm > 0 && step2 > max_step2) {
        const double scale = run->max_step_norm / sqrt(step2);
        for (int d = 0; d < D; d++) uy[i - n_fixed + d * m] *= scale;
      }
      for (int d = 0; d < D; d++) y[i + d * n] += uy[i - n_fixed + d * m];
    }
    if (bad) {
      st = gm_fail(GPUML_ERR_NUMERIC, "tsne:numeric",
                   "a new point's normaliser Z_i became 0 or non-finite: the placement diverged; try a smaller learning_rate");
      goto done;
    }
    if ((it + 1) % GM_TSNE_COST_EVERY == 0 || it + 1 == run->max_iter)
      gm_progress(opt, "transform", it + 1, run->max_iter);
    if (gm_interrupted(opt)) {
      st = gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE transform interrupted at iteration %d",
                   it + 1);
      goto done;
    }
  }
done:
  state_free(&s);
  free(uy);
  free(gains);
  return st;
}

/* Conditional affinities on the CPU: each point's bisection on its own, in blocks of
 * rows between interrupt checks. */
#define GM_TSNE_CONDITIONAL_BLOCK 8192
gpuml_status gm_cpu_tsne_conditional(const double *dist, int64_t n, int64_t k,
                                     double perplexity, double *p, double *entropy,
                                     const gpuml_options *opt) {
  const int threads = gm_threads(opt);
  const double log_perp = log(perplexity);
  double *d2 = gm_alloc(2 * (size_t)threads * (size_t)k, sizeof *d2);
  if (!d2) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the bisection space");
  for (int64_t r0 = 0; r0 < n; r0 += GM_TSNE_CONDITIONAL_BLOCK) {
    const int64_t r1 = r0 + GM_TSNE_CONDITIONAL_BLOCK < n ? r0 + GM_TSNE_CONDITIONAL_BLOCK : n;
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= 1024)
    for (int64_t i = r0; i < r1; i++) {
      double *sq = d2 + 2 * (size_t)gm_thread_id() * (size_t)k, *w = sq + k;
      for (int64_t t = 0; t < k; t++) sq[t] = dist[i + t * n] * dist[i + t * n];
      const double h = gm_tsne_bisect_point(sq, 1, k, log_perp, w);
      if (entropy) entropy[i] = h;
      for (int64_t t = 0; t < k; t++) p[i + t * n] = w[t];
    }
    if (gm_interrupted(opt)) {
      free(d2);
      return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted");
    }
  }
  free(d2);
  return GPUML_OK;
}
