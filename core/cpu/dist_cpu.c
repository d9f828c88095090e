/* Euclidean distance matrices on the CPU, one tile at a time. */
#include <math.h>
#include <stdlib.h>
#include "cpu_backend.h"
#include "blas.h"
#include "distance_tiles.h"

#define GM_DIST_TILE 1024

/* Writes a tile (rows of x by rows of y) into the n x m output. For x against itself
 * (`self`) only the upper triangle is taken and mirrored, so the result is exactly
 * symmetric. */
static void store_tile(const double *tile, int64_t an, int64_t bn, int64_t a0, int64_t b0,
                       int64_t n, int squared, int self, double *out, float *outf) {
  for (int64_t b = 0; b < bn; b++) {
    for (int64_t a = 0; a < an; a++) {
      if (self && a0 + a > b0 + b) continue;
      int mirror = self && a0 + a < b0 + b;
      double v = tile[a + b * an];
      if (!squared) v = sqrt(v);
      int64_t at = (a0 + a) + (b0 + b) * n, mirror_at = (b0 + b) + (a0 + a) * n;
      if (out) {
        out[at] = v;
        if (mirror) out[mirror_at] = v;
      } else {
        outf[at] = (float)v;
        if (mirror) outf[mirror_at] = (float)v;
      }
    }
  }
}

static gpuml_status dist_cpu(const double *x, int64_t n, int64_t d, const double *y, int64_t m,
                             int squared, double *out, float *outf, const gpuml_options *opt) {
  const int self = (y == NULL), threads = gm_threads(opt);
  if (self) {
    y = x;
    m = n;
  }
  /* Tiles of GM_DIST_TILE x GM_DIST_TILE; for x against itself only those on or above
   * the diagonal (a_block <= b_block). */
  const int64_t a_blocks = (n + GM_DIST_TILE - 1) / GM_DIST_TILE;
  const int64_t b_blocks = (m + GM_DIST_TILE - 1) / GM_DIST_TILE;
  const int64_t ntiles = self ? a_blocks * (a_blocks + 1) / 2 : a_blocks * b_blocks;
  double *centre = NULL, *tiles = NULL;
  gm_points X = {0}, Y = {0};
  gpuml_status st = GPUML_OK;
  if (gm_use_gemm(d) && (st = gm_gemm_centre(x, n, self ? NULL : y, m, d, &centre))) goto done;
  if ((st = gm_points_init(&X, x, n, d, centre, threads))) goto done;
  if (!self && (st = gm_points_init(&Y, y, m, d, centre, threads))) goto done;
  const gm_points *Yp = self ? &X : &Y;
  tiles = gm_alloc((size_t)threads * GM_DIST_TILE * GM_DIST_TILE, sizeof *tiles);
  if (!tiles) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the distance tiles");
    goto done;
  }
  volatile int stop = 0;
  int64_t tiles_done = 0, reported = 0;
  const int blas_threads = gm_blas_serial_begin();
#pragma omp parallel num_threads(threads)
  {
    double *tile = tiles + (size_t)gm_thread_id() * GM_DIST_TILE * GM_DIST_TILE;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntiles; t++) {
      if (stop) continue;
      int64_t ab, bb;
      if (self) { /* t enumerates the upper triangle column by column */
        bb = (int64_t)((sqrt(8.0 * (double)t + 1) - 1) / 2);
        while (bb * (bb + 1) / 2 > t) bb--;
        while ((bb + 1) * (bb + 2) / 2 <= t) bb++;
        ab = t - bb * (bb + 1) / 2;
      } else {
        ab = t % a_blocks;
        bb = t / a_blocks;
      }
      const int64_t a0 = ab * GM_DIST_TILE, b0 = bb * GM_DIST_TILE;
      const int64_t an = n - a0 < GM_DIST_TILE ? n - a0 : GM_DIST_TILE;
      const int64_t bn = m - b0 < GM_DIST_TILE ? m - b0 : GM_DIST_TILE;
      gm_sqdist_tile(&X, a0, an, Yp, b0, bn, tile, an);
      store_tile(tile, an, bn, a0, b0, n, squared, self, out, outf);
      int64_t now;
#pragma omp atomic capture
      now = ++tiles_done;
      if (gm_is_calling_thread()) {
        if (gm_interrupted(opt)) stop = 1;
        else gm_progress(opt, "dist", reported = now, ntiles);
      }
    }
  }
  gm_blas_serial_end(blas_threads);
  if (stop)
    st = gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "distance computation interrupted");
  else if (reported < ntiles)
    gm_progress(opt, "dist", ntiles, ntiles);
done:
  free(tiles);
  free(centre);
  gm_points_free(&X);
  gm_points_free(&Y);
  return st;
}

gpuml_status gm_cpu_dist(const gm_matrix *x, const gm_matrix *y, int squared, void *out,
                         const gpuml_options *opt) {
  const int64_t n = x->rows, d = x->cols, m = y ? y->rows : n;
  if (x->dtype == GM_F64)
    return dist_cpu(x->values, n, d, y ? y->values : NULL, m, squared, out, NULL, opt);
  double *xd = NULL, *yd = NULL;
  gpuml_status st = gm_widen(x->values, n * d, &xd);
  if (!st && y) st = gm_widen(y->values, m * d, &yd);
  if (!st) st = dist_cpu(xd, n, d, yd, m, squared, NULL, out, opt);
  free(xd);
  free(yd);
  return st;
}
