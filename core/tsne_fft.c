/* A small radix-2 complex FFT for the FFT-accelerated t-SNE repulsion on the CPU, in
 * single precision (the interpolation's error, about 1e-3, dwarfs float rounding, and
 * float doubles the SIMD width and halves the memory traffic). The grid sizes are
 * chosen as powers of two (gm_tsne_fft_size), so nothing more general is needed; lines
 * of a multi-dimensional grid are independent and run in parallel, which keeps the
 * result independent of the number of threads. */
#include <math.h>
#include <stdlib.h>
#include "tsne.h"

gpuml_status gm_fft_init(gm_fft *f, int size) {
  f->size = size;
  f->cos_t = gm_alloc((size_t)size / 2 + 1, sizeof *f->cos_t);
  f->sin_t = gm_alloc((size_t)size / 2 + 1, sizeof *f->sin_t);
  f->reverse = gm_alloc((size_t)size, sizeof *f->reverse);
  if (!f->cos_t || !f->sin_t || !f->reverse) {
    gm_fft_free(f);
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate FFT tables of size %d", size);
  }
  const double two_pi = 6.283185307179586476925286766559;
  for (int j = 0; j < size / 2; j++) {
    f->cos_t[j] = (float)cos(two_pi * j / size);
    f->sin_t[j] = (float)sin(two_pi * j / size);
  }
  int bits = 0;
  while ((1 << bits) < size) bits++;
  for (int i = 0; i < size; i++) {
    int r = 0;
    for (int b = 0; b < bits; b++)
      if (i & (1 << b)) r |= 1 << (bits - 1 - b);
    f->reverse[i] = r;
  }
  return GPUML_OK;
}

void gm_fft_free(gm_fft *f) {
  free(f->cos_t);
  free(f->sin_t);
  free(f->reverse);
  f->cos_t = f->sin_t = NULL;
  f->reverse = NULL;
}

void gm_fft_line(const gm_fft *f, float *re, float *im, int inverse) {
  const int size = f->size;
  for (int i = 0; i < size; i++) {
    const int r = f->reverse[i];
    if (r > i) {
      float t = re[i];
      re[i] = re[r];
      re[r] = t;
      t = im[i];
      im[i] = im[r];
      im[r] = t;
    }
  }
  const float sign = inverse ? 1.0f : -1.0f;
  for (int half = 1; half < size; half <<= 1) {
    const int step = size / (2 * half);
    for (int j = 0; j < half; j++) {
      const float wr = f->cos_t[j * step], wi = sign * f->sin_t[j * step];
      for (int a = j; a < size; a += 2 * half) {
        const int b = a + half;
        const float tr = wr * re[b] - wi * im[b];
        const float ti = wr * im[b] + wi * re[b];
        re[b] = re[a] - tr;
        im[b] = im[a] - ti;
        re[a] += tr;
        im[a] += ti;
      }
    }
  }
}

/* Lines are transformed GM_FFT_BATCH at a time, element t of line l at
 * [t * GM_FFT_BATCH + l], so that the butterflies vectorise across lines: each line
 * gets exactly the arithmetic of gm_fft_line(), whatever the vector width. */
#define GM_FFT_BATCH 16

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define GM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GM_VECTOR_CLONES
#endif

GM_VECTOR_CLONES
static void fft_batch(const gm_fft *f, float *restrict re, float *restrict im, int inverse) {
  const int size = f->size, B = GM_FFT_BATCH;
  for (int i = 0; i < size; i++) {
    const int r = f->reverse[i];
    if (r > i)
#pragma omp simd
      for (int l = 0; l < B; l++) {
        float t = re[i * B + l];
        re[i * B + l] = re[r * B + l];
        re[r * B + l] = t;
        t = im[i * B + l];
        im[i * B + l] = im[r * B + l];
        im[r * B + l] = t;
      }
  }
  const float sign = inverse ? 1.0f : -1.0f;
  int half = 1;
  int stages = 0;
  while ((1 << stages) < size) stages++;
  if (stages % 2) {  /* one plain stage, then the rest two at a time */
    for (int a = 0; a < size; a += 2) {
      float *ra = re + a * B, *ia = im + a * B, *rb = ra + B, *ib = ia + B;
#pragma omp simd
      for (int l = 0; l < B; l++) {
        const float tr = rb[l], ti = ib[l];
        rb[l] = ra[l] - tr;
        ib[l] = ia[l] - ti;
        ra[l] += tr;
        ia[l] += ti;
      }
    }
    half = 2;
  }
  /* Stages `half` and `2 half` in one pass over the data: the same butterflies, in the
   * same order for each element, as two radix-2 stages. */
  for (; half < size; half <<= 2) {
    const int step1 = size / (2 * half), step2 = size / (4 * half);
    for (int j = 0; j < half; j++) {
      const float w1r = f->cos_t[j * step1], w1i = sign * f->sin_t[j * step1];
      const float w2r = f->cos_t[j * step2], w2i = sign * f->sin_t[j * step2];
      const float w3r = f->cos_t[(j + half) * step2], w3i = sign * f->sin_t[(j + half) * step2];
      for (int a = j; a < size; a += 4 * half) {
        float *r0 = re + a * B, *i0 = im + a * B;
        float *r1 = r0 + half * B, *i1 = i0 + half * B;
        float *r2 = r1 + half * B, *i2 = i1 + half * B;
        float *r3 = r2 + half * B, *i3 = i2 + half * B;
#pragma omp simd
        for (int l = 0; l < B; l++) {
          /* stage half: (0, 1) and (2, 3) with w1 */
          float tr = w1r * r1[l] - w1i * i1[l], ti = w1r * i1[l] + w1i * r1[l];
          const float x1r = r0[l] - tr, x1i = i0[l] - ti, x0r = r0[l] + tr, x0i = i0[l] + ti;
          tr = w1r * r3[l] - w1i * i3[l];
          ti = w1r * i3[l] + w1i * r3[l];
          const float x3r = r2[l] - tr, x3i = i2[l] - ti, x2r = r2[l] + tr, x2i = i2[l] + ti;
          /* stage 2 half: (0, 2) with w2, (1, 3) with w3 */
          tr = w2r * x2r - w2i * x2i;
          ti = w2r * x2i + w2i * x2r;
          r2[l] = x0r - tr;
          i2[l] = x0i - ti;
          r0[l] = x0r + tr;
          i0[l] = x0i + ti;
          tr = w3r * x3r - w3i * x3i;
          ti = w3r * x3i + w3i * x3r;
          r3[l] = x1r - tr;
          i3[l] = x1i - ti;
          r1[l] = x1r + tr;
          i1[l] = x1i + ti;
        }
      }
    }
  }
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

/* Transforms the lines along `axis`; the other axes run over [0, limit[axis']). */
GM_VECTOR_CLONES
static void fft_axis(const gm_fft *f, float *grid, int64_t cells, int dims, int axis,
                     const int *limit, int inverse, int threads, float *scratch) {
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
    float *re = scratch + (size_t)gm_thread_id() * 2 * (size_t)size * B, *im = re + size * B;
    int64_t base[GM_FFT_BATCH];
    const int64_t count = lines - bt * B < B ? lines - bt * B : B;
    if (count == 1) {  /* one line (1-D grids): no batch */
      const int64_t b0 = line_base(bt * B, dims, axis, limit, size);
      for (int64_t t = 0; t < size; t++) {
        re[t] = gre[b0 + t * stride];
        im[t] = gim[b0 + t * stride];
      }
      gm_fft_line(f, re, im, inverse);
      for (int64_t t = 0; t < size; t++) {
        gre[b0 + t * stride] = re[t];
        gim[b0 + t * stride] = im[t];
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
    fft_batch(f, re, im, inverse);
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

size_t gm_fft_scratch(int size) { return 2 * (size_t)size * GM_FFT_BATCH; }

/* In-place transpose of the two size x size planes, in 32 x 32 blocks. */
static void transpose_planes(float *grid, int64_t size, int64_t row, int threads) {
  const int64_t blocks = (size + 31) / 32;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && size >= 256)
  for (int64_t bi = 0; bi < blocks; bi++)
    for (int plane = 0; plane < 2; plane++) {
      float *g = grid + plane * row * size;
      for (int64_t bj = bi; bj < blocks; bj++)
        for (int64_t i = bi * 32; i < (bi + 1) * 32 && i < size; i++)
          for (int64_t j = (bj == bi ? i + 1 : bj * 32); j < (bj + 1) * 32 && j < size; j++) {
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
      fft_axis(f, grid, cells, 2, 1, kept, 0, threads, scratch);
      transpose_planes(grid, f->size, row, threads);
      fft_axis(f, grid, cells, 2, 1, all, 0, threads, scratch);
    } else {
      fft_axis(f, grid, cells, 2, 1, all, 1, threads, scratch);
      transpose_planes(grid, f->size, row, threads);
      fft_axis(f, grid, cells, 2, 1, kept, 1, threads, scratch);
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
    fft_axis(f, grid, cells, dims, axis, limit, inverse, threads, scratch);
  }
}
