/* A small complex FFT for the FFT-accelerated t-SNE repulsion on the CPU, in single
 * precision (the interpolation's error, about 1e-3, dwarfs float rounding, and float
 * doubles the SIMD width and halves the memory traffic). Sizes are 2^a 3^b, so that
 * the grid can follow the embedding's spread closely (a power of two can be nearly
 * twice too large per dimension). Stockham's self-sorting form (no bit reversal),
 * radix 4, then 2, then 3; the lines of a multi-dimensional grid are transformed
 * GM_FFT_BATCH at a time, one per vector lane, and run in parallel, which keeps the
 * result independent of the number of threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tsne.h"

int gm_fft_good_size(int n) {
  int best = 0;
  for (int odd = 1; odd <= 9; odd *= 3) {
    int size = odd;
    while (size < n) size *= 2;
    if (!best || size < best) best = size;
  }
  return best;
}

gpuml_status gm_fft_init(gm_fft *f, int size) {
  memset(f, 0, sizeof *f);
  int rest = size;
  while (rest % 4 == 0 && f->stages < GM_FFT_MAX_STAGES) rest /= 4, f->radix[f->stages++] = 4;
  if (rest % 2 == 0 && f->stages < GM_FFT_MAX_STAGES) rest /= 2, f->radix[f->stages++] = 2;
  while (rest % 3 == 0 && f->stages < GM_FFT_MAX_STAGES) rest /= 3, f->radix[f->stages++] = 3;
  if (size < 1 || rest != 1)
    return gm_fail(GPUML_ERR_ARG, "internal", "internal: FFT size %d is not 2^a 3^b", size);
  f->size = size;
  /* stage st (length n, radix p, m = n / p): w^(j r) = exp(-2 pi i j r / n) for
   * j < m, 1 <= r < p, at twiddle_at[st] + j (p - 1) + r - 1 */
  int64_t total = 0;
  for (int st = 0, n = size; st < f->stages; n /= f->radix[st], st++) {
    f->twiddle_at[st] = total;
    total += (int64_t)(n / f->radix[st]) * (f->radix[st] - 1);
  }
  f->cos_t = gm_alloc((size_t)total, sizeof *f->cos_t);
  f->sin_t = gm_alloc((size_t)total, sizeof *f->sin_t);
  if (!f->cos_t || !f->sin_t) {
    gm_fft_free(f);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate FFT tables of size %d", size);
  }
  const double two_pi = 6.283185307179586476925286766559;
  for (int st = 0, n = size; st < f->stages; n /= f->radix[st], st++) {
    const int p = f->radix[st], m = n / p;
    for (int j = 0; j < m; j++)
      for (int r = 1; r < p; r++) {
        const int64_t at = f->twiddle_at[st] + (int64_t)j * (p - 1) + r - 1;
        f->cos_t[at] = (float)cos(two_pi * (double)j * r / n);
        f->sin_t[at] = (float)sin(two_pi * (double)j * r / n);
      }
  }
  return GPUML_OK;
}

void gm_fft_free(gm_fft *f) {
  free(f->cos_t);
  free(f->sin_t);
  f->cos_t = f->sin_t = NULL;
}

/* Lines are transformed GM_FFT_BATCH at a time, element t of line l at
 * [t * GM_FFT_BATCH + l], so that the butterflies vectorise across lines. */
#define GM_FFT_BATCH 16

/* One Stockham stage (decimation in frequency) on L interleaved lines: radix p over
 * length n with stride s (m = n / p) takes a_k = x[q + s (j + k m)] and writes
 * y[q + s (p j + r)] = w^(j r) sum_k a_k e^(-2 pi i r k / p). Each lane gets the same
 * arithmetic, whatever L. */
static inline __attribute__((always_inline)) void stockham_stage(
    const gm_fft *f, int st, int64_t n, int64_t s, const float *restrict xr,
    const float *restrict xi, float *restrict yr, float *restrict yi, float sg, const int L) {
  const float half = 0.5f, s3 = 0.866025403784438646763723170753f; /* sin(2 pi / 3) */
  const int p = f->radix[st];
  const int64_t m = n / p, step = s * m * L, ostep = s * L;
  const float *ct = f->cos_t + f->twiddle_at[st], *sn = f->sin_t + f->twiddle_at[st];
  for (int64_t j = 0; j < m; j++) {
    float wr[3], wi[3];
    for (int r = 1; r < p; r++) {
      wr[r - 1] = ct[j * (p - 1) + r - 1];
      wi[r - 1] = sg * sn[j * (p - 1) + r - 1];
    }
    for (int64_t q = 0; q < s; q++) {
      const int64_t a = (q + s * j) * L, b = (q + s * p * j) * L;
      if (p == 4) {
#pragma omp simd
        for (int l = 0; l < L; l++) {
          const float t0r = xr[a + l] + xr[a + 2 * step + l], t0i = xi[a + l] + xi[a + 2 * step + l];
          const float t1r = xr[a + l] - xr[a + 2 * step + l], t1i = xi[a + l] - xi[a + 2 * step + l];
          const float t2r = xr[a + step + l] + xr[a + 3 * step + l];
          const float t2i = xi[a + step + l] + xi[a + 3 * step + l];
          const float t3r = xr[a + step + l] - xr[a + 3 * step + l];
          const float t3i = xi[a + step + l] - xi[a + 3 * step + l];
          const float b1r = t1r - sg * t3i, b1i = t1i + sg * t3r;
          const float b2r = t0r - t2r, b2i = t0i - t2i;
          const float b3r = t1r + sg * t3i, b3i = t1i - sg * t3r;
          yr[b + l] = t0r + t2r;
          yi[b + l] = t0i + t2i;
          yr[b + ostep + l] = b1r * wr[0] - b1i * wi[0];
          yi[b + ostep + l] = b1r * wi[0] + b1i * wr[0];
          yr[b + 2 * ostep + l] = b2r * wr[1] - b2i * wi[1];
          yi[b + 2 * ostep + l] = b2r * wi[1] + b2i * wr[1];
          yr[b + 3 * ostep + l] = b3r * wr[2] - b3i * wi[2];
          yi[b + 3 * ostep + l] = b3r * wi[2] + b3i * wr[2];
        }
      } else if (p == 2) {
#pragma omp simd
        for (int l = 0; l < L; l++) {
          const float dr = xr[a + l] - xr[a + step + l], di = xi[a + l] - xi[a + step + l];
          yr[b + l] = xr[a + l] + xr[a + step + l];
          yi[b + l] = xi[a + l] + xi[a + step + l];
          yr[b + ostep + l] = dr * wr[0] - di * wi[0];
          yi[b + ostep + l] = dr * wi[0] + di * wr[0];
        }
      } else {
#pragma omp simd
        for (int l = 0; l < L; l++) {
          const float sr = xr[a + step + l] + xr[a + 2 * step + l];
          const float si = xi[a + step + l] + xi[a + 2 * step + l];
          const float dr = s3 * (xr[a + step + l] - xr[a + 2 * step + l]);
          const float di = s3 * (xi[a + step + l] - xi[a + 2 * step + l]);
          const float cr = xr[a + l] - half * sr, ci = xi[a + l] - half * si;
          const float b1r = cr - sg * di, b1i = ci + sg * dr;
          const float b2r = cr + sg * di, b2i = ci - sg * dr;
          yr[b + l] = xr[a + l] + sr;
          yi[b + l] = xi[a + l] + si;
          yr[b + ostep + l] = b1r * wr[0] - b1i * wi[0];
          yi[b + ostep + l] = b1r * wi[0] + b1i * wr[0];
          yr[b + 2 * ostep + l] = b2r * wr[1] - b2i * wi[1];
          yi[b + 2 * ostep + l] = b2r * wi[1] + b2i * wr[1];
        }
      }
    }
  }
}

/* The transform of L interleaved lines (element t of line l at [t * L + l]) held in
 * (xr, xi); (yr, yi) is as large and the stages go back and forth between the two.
 * Returns 0 when the result is in x, 1 when in y. */
static inline __attribute__((always_inline)) int stockham(const gm_fft *f, float *xr, float *xi,
                                                          float *yr, float *yi, int inverse,
                                                          const int L) {
  const float sg = inverse ? 1.0f : -1.0f;
  int64_t n = f->size, s = 1;
  for (int st = 0; st < f->stages; st++) {
    if (st % 2 == 0) stockham_stage(f, st, n, s, xr, xi, yr, yi, sg, L);
    else stockham_stage(f, st, n, s, yr, yi, xr, xi, sg, L);
    n /= f->radix[st];
    s *= f->radix[st];
  }
  return f->stages % 2;
}

GM_VECTOR_CLONES
static int fft_batch(const gm_fft *f, float *xr, float *xi, float *yr, float *yi, int inverse) {
  return stockham(f, xr, xi, yr, yi, inverse, GM_FFT_BATCH);
}

static int fft_single(const gm_fft *f, float *xr, float *xi, float *yr, float *yi, int inverse) {
  return stockham(f, xr, xi, yr, yi, inverse, 1);
}

int64_t gm_fft_row(int size) { return size >= 32 ? size + 16 : size; }

int64_t gm_fft_plane(int size, int dims) {
  int64_t cells = gm_fft_row(size);
  for (int a = 1; a < dims; a++) cells *= size;
  return cells;
}

/* The offset of line l along `axis` (other axes over [0, limit)). */
static int64_t line_base(int64_t l, int dims, int axis, const int *limit, int64_t size) {
  int64_t base = 0, scale = 1;
  for (int a = 0; a < dims; a++) {
    if (a != axis) {
      base += (l % limit[a]) * scale;
      l /= limit[a];
    }
    scale *= a == 0 ? gm_fft_row((int)size) : size;
  }
  return base;
}

/* Multiplies the B interleaved lines (re, im) element-wise by the real spectrum at the
 * lines' places (base[l] + t * stride, or base[0] + t * stride + l when adjacent). */
static inline __attribute__((always_inline)) void multiply_lines(
    float *restrict re, float *restrict im, const float *spectrum, const int64_t *base,
    int adjacent, int64_t size, int64_t stride, float scale, const int B) {
  for (int64_t t = 0; t < size; t++) {
    if (adjacent) {
      const float *k = spectrum + base[0] + t * stride;
#pragma omp simd
      for (int l = 0; l < B; l++) {
        re[t * B + l] *= k[l] * scale;
        im[t * B + l] *= k[l] * scale;
      }
    } else {
      for (int l = 0; l < B; l++) {
        const float k = spectrum[base[l] + t * stride] * scale;
        re[t * B + l] *= k;
        im[t * B + l] *= k;
      }
    }
  }
}

/* Transforms the lines along `axis`; the other axes run over [0, limit[axis']). With a
 * spectrum, each line is transformed forward, multiplied by the spectrum times `scale`
 * and transformed back while it is at hand (a convolution along the last axis). */
GM_VECTOR_CLONES
static void fft_axis(const gm_fft *f, float *grid, int64_t cells, int dims, int axis,
                     const int *limit, int inverse, const float *spectrum, float scale,
                     int threads, float *scratch) {
  const int64_t size = f->size, B = GM_FFT_BATCH;
  int64_t stride = 1;
  for (int a = 0; a < axis; a++) stride *= a == 0 ? gm_fft_row(f->size) : size;
  int64_t lines = 1;
  for (int a = 0; a < dims; a++)
    if (a != axis) lines *= limit[a];
  const int64_t batches = (lines + B - 1) / B;
  float *gre = grid, *gim = grid + cells;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && batches > 1 && lines * size >= 32768)
  for (int64_t bt = 0; bt < batches; bt++) {
    float *re = scratch + (size_t)gm_thread_id() * gm_fft_scratch(f->size), *im = re + size * B;
    float *re2 = im + size * B, *im2 = re2 + size * B;
    int64_t base[GM_FFT_BATCH];
    const int64_t count = lines - bt * B < B ? lines - bt * B : B;
    if (count == 1) {  /* one line (1-D grids): no batch, the same arithmetic */
      const int64_t b0 = line_base(bt * B, dims, axis, limit, size);
      for (int64_t t = 0; t < size; t++) {
        re[t] = gre[b0 + t * stride];
        im[t] = gim[b0 + t * stride];
      }
      int in_second = fft_single(f, re, im, re2, im2, spectrum ? 0 : inverse);
      if (spectrum) {
        float *xr = in_second ? re2 : re, *xi = in_second ? im2 : im;
        multiply_lines(xr, xi, spectrum, &b0, 1, size, stride, scale, 1);
        if (fft_single(f, xr, xi, in_second ? re : re2, in_second ? im : im2, 1))
          in_second = !in_second;
      }
      const float *rr = in_second ? re2 : re, *ri = in_second ? im2 : im;
      for (int64_t t = 0; t < size; t++) {
        gre[b0 + t * stride] = rr[t];
        gim[b0 + t * stride] = ri[t];
      }
      continue;
    }
    /* a short last batch repeats its first line in the unused lanes */
    for (int64_t l = 0; l < B; l++)
      base[l] = line_base(bt * B + (l < count ? l : 0), dims, axis, limit, size);
    int adjacent = count == B;  /* the lines are neighbours along axis 0 */
    for (int64_t l = 1; l < B; l++) adjacent &= base[l] == base[0] + l;
    if (adjacent) {
      for (int64_t t = 0; t < size; t++) {
        const float *sr = gre + base[0] + t * stride, *si = gim + base[0] + t * stride;
#pragma omp simd
        for (int64_t l = 0; l < B; l++) {
          re[t * B + l] = sr[l];
          im[t * B + l] = si[l];
        }
      }
    } else {
      for (int64_t t = 0; t < size; t++)
        for (int64_t l = 0; l < B; l++) {
          re[t * B + l] = gre[base[l] + t * stride];
          im[t * B + l] = gim[base[l] + t * stride];
        }
    }
    if (fft_batch(f, re, im, re2, im2, spectrum ? 0 : inverse)) {
      float *t = re;
      re = re2, re2 = t;
      t = im;
      im = im2, im2 = t;
    }
    if (spectrum) {
      multiply_lines(re, im, spectrum, base, adjacent, size, stride, scale, GM_FFT_BATCH);
      if (fft_batch(f, re, im, re2, im2, 1)) {
        re = re2;
        im = im2;
      }
    }
    if (adjacent) {
      for (int64_t t = 0; t < size; t++) {
        float *dr = gre + base[0] + t * stride, *di = gim + base[0] + t * stride;
#pragma omp simd
        for (int64_t l = 0; l < B; l++) {
          dr[l] = re[t * B + l];
          di[l] = im[t * B + l];
        }
      }
    } else {
      for (int64_t t = 0; t < size; t++)
        for (int64_t l = 0; l < count; l++) {
          gre[base[l] + t * stride] = re[t * B + l];
          gim[base[l] + t * stride] = im[t * B + l];
        }
    }
  }
}

size_t gm_fft_scratch(int size) { return 4 * (size_t)size * GM_FFT_BATCH; }

/* 8 x 8 blocks of floats, one vector per row (GNU C vector extensions: one AVX
 * register, two SSE ones). */
typedef float gm_v8 __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t gm_v8i __attribute__((vector_size(8 * sizeof(int32_t)))); /* shuffle masks */

/* Transposes the 8 x 8 block in r (row k in r[k]) by the usual three rounds of
 * interleaving: pairs of rows, pairs of pairs, then halves. A macro: functions taking
 * vectors would change the ABI between the clones. */
#define GM_TRANSPOSE8(r)                                                                  \
  do {                                                                                    \
    gm_v8 t_[8], u_[8];                                                                   \
    const gm_v8i lo_ = {0, 8, 1, 9, 4, 12, 5, 13};                       \
    const gm_v8i hi_ = {2, 10, 3, 11, 6, 14, 7, 15};                     \
    const gm_v8i plo_ = {0, 1, 8, 9, 4, 5, 12, 13};                      \
    const gm_v8i phi_ = {2, 3, 10, 11, 6, 7, 14, 15};                    \
    const gm_v8i flo_ = {0, 1, 2, 3, 8, 9, 10, 11};                      \
    const gm_v8i fhi_ = {4, 5, 6, 7, 12, 13, 14, 15};                    \
    for (int k_ = 0; k_ < 8; k_ += 2) {                                                   \
      t_[k_] = __builtin_shuffle(r[k_], r[k_ + 1], lo_);                                  \
      t_[k_ + 1] = __builtin_shuffle(r[k_], r[k_ + 1], hi_);                              \
    }                                                                                     \
    for (int k_ = 0; k_ < 8; k_ += 4)                                                     \
      for (int h_ = 0; h_ < 2; h_++) {                                                    \
        u_[k_ + 2 * h_] = __builtin_shuffle(t_[k_ + h_], t_[k_ + h_ + 2], plo_);          \
        u_[k_ + 2 * h_ + 1] = __builtin_shuffle(t_[k_ + h_], t_[k_ + h_ + 2], phi_);      \
      }                                                                                   \
    for (int k_ = 0; k_ < 4; k_++) {                                                      \
      r[k_] = __builtin_shuffle(u_[k_], u_[k_ + 4], flo_);                                \
      r[k_ + 4] = __builtin_shuffle(u_[k_], u_[k_ + 4], fhi_);                            \
    }                                                                                     \
  } while (0)

/* Swaps the 8 x 8 block at a with the transpose of the one at b (rows `row` floats
 * apart); a == b transposes a block in place. */
static inline __attribute__((always_inline)) void swap_blocks8(float *a, float *b, int64_t row) {
  gm_v8 ra[8], rb[8];
  for (int k = 0; k < 8; k++) {
    memcpy(&ra[k], a + k * row, sizeof ra[k]);
    memcpy(&rb[k], b + k * row, sizeof rb[k]);
  }
  GM_TRANSPOSE8(ra);
  GM_TRANSPOSE8(rb);
  for (int k = 0; k < 8; k++) {
    memcpy(b + k * row, &ra[k], sizeof ra[k]);
    memcpy(a + k * row, &rb[k], sizeof rb[k]);
  }
}

/* In-place transpose of the first `planes` size x size planes: 8 x 8 blocks in vector registers
 * (a scalar swap took a fifth of a t-SNE run at 10,000 points), strips of 16 rows so
 * that each cache line read is used whole, then the rows and columns beyond the last
 * multiple of 8 one element at a time. */
GM_VECTOR_CLONES
static void transpose_planes(float *grid, int64_t size, int64_t row, int planes, int threads) {
  const int64_t whole = size / 8 * 8, strips = (whole + 15) / 16;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && size >= 256)
  for (int64_t strip = 0; strip < strips; strip++)
    for (int plane = 0; plane < planes; plane++) {
      float *g = grid + plane * row * size;
      for (int64_t bi = strip * 16; bi < strip * 16 + 16 && bi < whole; bi += 8)
        for (int64_t bj = bi; bj < whole; bj += 8) swap_blocks8(g + bi + bj * row, g + bj + bi * row, row);
    }
  for (int plane = 0; plane < planes; plane++) {
    float *g = grid + plane * row * size;
    for (int64_t j = whole; j < size; j++)
      for (int64_t i = 0; i < j; i++) {
        const float t = g[i + j * row];
        g[i + j * row] = g[j + i * row];
        g[j + i * row] = t;
      }
  }
}

void gm_fft_grid(const gm_fft *f, float *grid, int dims, int keep, int inverse, int threads,
                 float *scratch) {
  if (dims == 2) {
    /* Only lines along axis 1 (neighbours in memory, batched); axis 0 is reached by
     * transposing. The spectrum is held transposed, which a pointwise product with a
     * kernel spectrum made the same way does not mind. */
    const int all[2] = {f->size, f->size}, kept[2] = {keep, keep};
    const int64_t cells = gm_fft_plane(f->size, 2), row = gm_fft_row(f->size);
    if (!inverse) {
      fft_axis(f, grid, cells, 2, 1, kept, 0, NULL, 1, threads, scratch);
      transpose_planes(grid, f->size, row, 2, threads);
      fft_axis(f, grid, cells, 2, 1, all, 0, NULL, 1, threads, scratch);
    } else {
      fft_axis(f, grid, cells, 2, 1, all, 1, NULL, 1, threads, scratch);
      transpose_planes(grid, f->size, row, 2, threads);
      fft_axis(f, grid, cells, 2, 1, kept, 1, NULL, 1, threads, scratch);
    }
    return;
  }
  /* Forward: axes 0, 1, ... ; inverse: the reverse order. Either way, when axis a is
   * transformed, the axes after it are still in the space where only [0, keep) matters
   * and the axes before it are full. */
  for (int s = 0; s < dims; s++) {
    const int axis = inverse ? dims - 1 - s : s;
    int limit[3];
    const int64_t cells = gm_fft_plane(f->size, dims);
    for (int a = 0; a < dims; a++) limit[a] = a < axis ? f->size : keep;
    fft_axis(f, grid, cells, dims, axis, limit, inverse, NULL, 1, threads, scratch);
  }
}

void gm_fft_convolve(const gm_fft *f, float *grid, const float *spectrum, float scale, int dims,
                     int keep, int threads, float *scratch) {
  const int64_t cells = gm_fft_plane(f->size, dims);
  if (dims == 2) {  /* as gm_fft_grid: the spectrum is held transposed */
    const int all[2] = {f->size, f->size}, kept[2] = {keep, keep};
    const int64_t row = gm_fft_row(f->size);
    fft_axis(f, grid, cells, 2, 1, kept, 0, NULL, 1, threads, scratch);
    transpose_planes(grid, f->size, row, 2, threads);
    fft_axis(f, grid, cells, 2, 1, all, 0, spectrum, scale, threads, scratch);
    transpose_planes(grid, f->size, row, 2, threads);
    fft_axis(f, grid, cells, 2, 1, kept, 1, NULL, 1, threads, scratch);
    return;
  }
  /* forward along axes 0 .. dims - 2, both ways along the last, back along the others */
  int limit[3];
  for (int s = 0; s < 2 * dims - 1; s++) {
    const int axis = s < dims ? s : 2 * dims - 2 - s;
    for (int a = 0; a < dims; a++) limit[a] = a < axis ? f->size : keep;
    fft_axis(f, grid, cells, dims, axis, limit, s >= dims, s == dims - 1 ? spectrum : NULL, scale,
             threads, scratch);
  }
}

/* One axis of a real grid that is even along it (x(g) = x(size - g)), in 2-D: the line
 * transforms are real and even too, so only the lines 0 .. size / 2 are transformed,
 * two at a time (one as the real part, one as the imaginary part: their transforms
 * come back as the two parts), and the others are mirrored from them. The lines run
 * along axis 1 and are numbered along axis 0. */
static void even_axis(const gm_fft *f, float *grid, int64_t cells, int threads, float *scratch) {
  const int64_t size = f->size, row = gm_fft_row(f->size), half = size / 2;
  const int64_t pairs = (half + 2) / 2, moved = half + 1 - pairs; /* lines 0 .. half */
  float *re = grid, *im = grid + cells;
  const int limit[2] = {(int)pairs, (int)size};
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && size >= 256)
  for (int64_t t = 0; t < size; t++) {
    memcpy(im + t * row, re + t * row + pairs, sizeof *im * (size_t)moved);
    memset(im + t * row + moved, 0, sizeof *im * (size_t)(pairs - moved));
  }
  fft_axis(f, grid, cells, 2, 1, limit, 0, NULL, 1, threads, scratch);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && size >= 256)
  for (int64_t t = 0; t < size; t++) {
    float *r = re + t * row;
    memcpy(r + pairs, im + t * row, sizeof *r * (size_t)moved);
    for (int64_t g = half + 1; g < size; g++) r[g] = r[size - g];
    memset(im + t * row, 0, sizeof *im * (size_t)row);
  }
}

void gm_fft_even_spectrum(const gm_fft *f, float *grid, int dims, int threads, float *scratch) {
  const int64_t cells = gm_fft_plane(f->size, dims);
  if (dims != 2) {  /* the general transform, its imaginary parts (rounding) dropped */
    memset(grid + cells, 0, sizeof *grid * (size_t)cells);
    gm_fft_grid(f, grid, dims, f->size, 0, threads, scratch);
    memset(grid + cells, 0, sizeof *grid * (size_t)cells);
    return;
  }
  even_axis(f, grid, cells, threads, scratch);
  transpose_planes(grid, f->size, gm_fft_row(f->size), 1, threads);
  even_axis(f, grid, cells, threads, scratch);
}
