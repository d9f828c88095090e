/* A small radix-2 complex FFT for the FFT-accelerated t-SNE repulsion on the CPU. The
 * grid sizes are chosen as powers of two (gm_tsne_fft_size), so nothing more general
 * is needed; lines of a multi-dimensional grid are independent and run in parallel,
 * which keeps the result independent of the number of threads. */
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
    f->cos_t[j] = cos(two_pi * j / size);
    f->sin_t[j] = sin(two_pi * j / size);
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

void gm_fft_line(const gm_fft *f, double *re, double *im, int inverse) {
  const int size = f->size;
  for (int i = 0; i < size; i++) {
    const int r = f->reverse[i];
    if (r > i) {
      double t = re[i];
      re[i] = re[r];
      re[r] = t;
      t = im[i];
      im[i] = im[r];
      im[r] = t;
    }
  }
  const double sign = inverse ? 1.0 : -1.0;
  for (int half = 1; half < size; half <<= 1) {
    const int step = size / (2 * half);
    for (int j = 0; j < half; j++) {
      const double wr = f->cos_t[j * step], wi = sign * f->sin_t[j * step];
      for (int a = j; a < size; a += 2 * half) {
        const int b = a + half;
        const double tr = wr * re[b] - wi * im[b];
        const double ti = wr * im[b] + wi * re[b];
        re[b] = re[a] - tr;
        im[b] = im[a] - ti;
        re[a] += tr;
        im[a] += ti;
      }
    }
  }
}

/* Transforms the lines along `axis`; the other axes run over [0, limit[axis']). */
static void fft_axis(const gm_fft *f, double *grid, int dims, int axis, const int *limit,
                     int inverse, int threads, double *scratch) {
  const int64_t size = f->size;
  int64_t stride = 1;
  for (int a = 0; a < axis; a++) stride *= size;
  int64_t lines = 1;
  for (int a = 0; a < dims; a++)
    if (a != axis) lines *= limit[a];
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && lines > 8)
  for (int64_t l = 0; l < lines; l++) {
    double *re = scratch + (size_t)gm_thread_id() * 2 * (size_t)size, *im = re + size;
    /* the line's base offset from its coordinates on the other axes */
    int64_t rest = l, base = 0, scale = 1;
    for (int a = 0; a < dims; a++) {
      if (a != axis) {
        base += (rest % limit[a]) * scale;
        rest /= limit[a];
      }
      scale *= size;
    }
    double *line = grid + 2 * base;
    for (int64_t t = 0; t < size; t++) {
      re[t] = line[2 * t * stride];
      im[t] = line[2 * t * stride + 1];
    }
    gm_fft_line(f, re, im, inverse);
    for (int64_t t = 0; t < size; t++) {
      line[2 * t * stride] = re[t];
      line[2 * t * stride + 1] = im[t];
    }
  }
}

void gm_fft_grid(const gm_fft *f, double *grid, int dims, int keep, int inverse, int threads,
                 double *scratch) {
  /* Forward: axes 0, 1, ... ; inverse: the reverse order. Either way, when axis a is
   * transformed, the axes after it are still in the space where only [0, keep) matters
   * and the axes before it are full. */
  for (int s = 0; s < dims; s++) {
    const int axis = inverse ? dims - 1 - s : s;
    int limit[3];
    for (int a = 0; a < dims; a++) limit[a] = a < axis ? f->size : keep;
    fft_axis(f, grid, dims, axis, limit, inverse, threads, scratch);
  }
}
