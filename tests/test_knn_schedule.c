#define _POSIX_C_SOURCE 200809L /* clock_gettime (check.h) */
/* A host emulation of the symmetric schedule of the GPU's self-search (kernels/knn.cu,
 * KnnSearch::run_symmetric; select.cuh, ColumnFeed and column_merge_kernel), run on the
 * CPU so that a mistake in its index arithmetic or its thresholds shows without a GPU:
 * the same loops (the diagonal tile of every query block, then block by block the
 * reference tiles after it), each tile's values offered row-wise to the block's lists
 * and, when at most the reference's threshold, queued column-wise (a fixed number of
 * slots; a reference whose queue overflows takes its whole row of the tile), the queues
 * merged after the tile, the thresholds taken from the lists. Every point's list must
 * then be the K smallest of all the other points by (value, index), exactly what a
 * brute-force pass gives, for every block size, tile size, slot count and K tried
 * (ties and duplicates included). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static uint64_t rng_state = 777;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* The strict order of the lists: by value, then by index. */
static int before(float d1, int64_t i1, float d2, int64_t i2) {
  return d1 < d2 || (d1 == d2 && i1 < i2);
}

/* A sorted list of K entries, unused slots (+inf, INT64_MAX) (WarpList). */
static void offer(float *ld, int64_t *li, int K, float v, int64_t j) {
  if (!before(v, j, ld[K - 1], li[K - 1])) return;
  int pos = K - 1;
  while (pos > 0 && before(v, j, ld[pos - 1], li[pos - 1])) {
    ld[pos] = ld[pos - 1];
    li[pos] = li[pos - 1];
    pos--;
  }
  ld[pos] = v;
  li[pos] = j;
}

typedef struct {
  int64_t n, qt, rt;
  int K, slots;
  const float *val; /* val[a * n + b]: the tile value of query a against reference b */
  float *Ld, *thr, *slot_d;
  int64_t *Li;
  int *count, *slot_q;
  int64_t overflows;
} emu;

/* select_small_gemm_kernel on the tile (references r0..r0+rn, queries q0..q0+qn):
 * row-wise into the queries' lists; with col, every value at most a reference's
 * threshold queued for it; row_thr, the queries' K-th values stored after. */
static void row_kernel(emu *e, int64_t r0, int64_t rn, int64_t q0, int64_t qn, int fresh,
                       int col, int row_thr) {
  const int K = e->K;
  for (int64_t q = 0; q < qn; q++) {
    float *ld = e->Ld + (q0 + q) * K;
    int64_t *li = e->Li + (q0 + q) * K;
    if (fresh)
      for (int t = 0; t < K; t++) {
        ld[t] = INFINITY;
        li[t] = INT64_MAX;
      }
    for (int64_t j = 0; j < rn; j++) {
      const int64_t gj = r0 + j;
      if (gj == q0 + q) continue; /* self */
      const float v = e->val[(q0 + q) * e->n + gj];
      offer(ld, li, K, v, gj);
      if (col && v <= e->thr[gj]) {
        const int s = e->count[j]++;
        if (s < e->slots) {
          e->slot_d[j * e->slots + s] = v;
          e->slot_q[j * e->slots + s] = (int)q;
        }
      }
    }
    if (row_thr) e->thr[q0 + q] = ld[K - 1];
  }
}

/* column_merge_kernel. */
static void merge_kernel(emu *e, int64_t r0, int64_t rn, int64_t q0, int64_t qn) {
  const int K = e->K;
  for (int64_t j = 0; j < rn; j++) {
    const int c = e->count[j];
    if (c == 0) continue;
    float *ld = e->Ld + (r0 + j) * K;
    int64_t *li = e->Li + (r0 + j) * K;
    if (c <= e->slots) {
      for (int s = 0; s < c; s++)
        offer(ld, li, K, e->slot_d[j * e->slots + s], q0 + e->slot_q[j * e->slots + s]);
    } else {
      e->overflows++;
      for (int64_t q = 0; q < qn; q++) offer(ld, li, K, e->val[(q0 + q) * e->n + r0 + j], q0 + q);
    }
    e->thr[r0 + j] = ld[K - 1];
    e->count[j] = 0;
  }
}

/* run_symmetric's loops. */
static void symmetric(emu *e) {
  const int64_t n = e->n, qt = e->qt, rt = e->rt;
  for (int64_t q0 = 0; q0 < n; q0 += qt) {
    const int64_t qn = n - q0 < qt ? n - q0 : qt;
    row_kernel(e, q0, qn, q0, qn, 1, 0, 1);
  }
  for (int64_t q0 = 0; q0 < n; q0 += qt) {
    const int64_t qn = n - q0 < qt ? n - q0 : qt;
    for (int64_t r0 = q0 + qn; r0 < n; r0 += rt) {
      const int64_t rn = n - r0 < rt ? n - r0 : rt;
      row_kernel(e, r0, rn, q0, qn, 0, 1, 0);
      merge_kernel(e, r0, rn, q0, qn);
    }
  }
}

/* One configuration against brute force; returns the lists that differ. */
static int64_t run_case(const float *val, int64_t n, int64_t qt, int64_t rt, int K, int slots,
                        int64_t *overflows) {
  emu e;
  memset(&e, 0, sizeof e);
  e.n = n;
  e.qt = qt;
  e.rt = rt;
  e.K = K;
  e.slots = slots;
  e.val = val;
  e.Ld = malloc(sizeof(float) * n * K);
  e.Li = malloc(sizeof(int64_t) * n * K);
  e.thr = malloc(sizeof(float) * n);
  e.count = calloc((size_t)rt, sizeof(int));
  e.slot_d = malloc(sizeof(float) * rt * slots);
  e.slot_q = malloc(sizeof(int) * rt * slots);
  symmetric(&e);
  float *bd = malloc(sizeof(float) * K);
  int64_t *bi = malloc(sizeof(int64_t) * K);
  int64_t bad = 0;
  for (int64_t a = 0; a < n; a++) {
    for (int t = 0; t < K; t++) {
      bd[t] = INFINITY;
      bi[t] = INT64_MAX;
    }
    /* both orientations give the same value here; the row-by-row path's orientation */
    for (int64_t b = 0; b < n; b++)
      if (b != a) offer(bd, bi, K, val[a * n + b], b);
    if (memcmp(bd, e.Ld + a * K, sizeof(float) * K) != 0 ||
        memcmp(bi, e.Li + a * K, sizeof(int64_t) * K) != 0)
      bad++;
  }
  *overflows = e.overflows;
  free(bd);
  free(bi);
  free(e.Ld);
  free(e.Li);
  free(e.thr);
  free(e.count);
  free(e.slot_d);
  free(e.slot_q);
  return bad;
}

int main(void) {
  const int64_t n = 700, d = 5;
  double *x = malloc(sizeof(double) * n * d);
  float *val = malloc(sizeof(float) * n * n);
  for (int data = 0; data < 2; data++) {
    /* 0: random points; 1: most points one point, the rest an integer grid with twins */
    for (int64_t i = 0; i < n; i++)
      for (int64_t t = 0; t < d; t++)
        x[i * d + t] = data == 0 ? uniform()
                       : i % 5 != 0 ? 1.0
                                    : (double)(((i / 10) * (t + 3) + t * t) % 7);
    for (int64_t a = 0; a < n; a++)
      for (int64_t b = 0; b < n; b++) {
        double s = 0;
        for (int64_t t = 0; t < d; t++) s += (x[a * d + t] - x[b * d + t]) * (x[a * d + t] - x[b * d + t]);
        val[a * n + b] = (float)s;
      }
    static const struct {
      int64_t qt, rt;
      int K, slots;
    } cfg[] = {{64, 96, 10, 64}, {64, 64, 26, 4},   {100, 256, 26, 64}, {256, 384, 32, 64},
               {50, 130, 1, 2},  {700, 700, 16, 64}, {699, 699, 40, 8},  {64, 200, 256, 64},
               {128, 128, 699, 64}, {1, 7, 3, 1}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
      int64_t overflows = 0;
      int64_t bad = run_case(val, n, cfg[c].qt, cfg[c].rt, cfg[c].K, cfg[c].slots, &overflows);
      CHECK(bad == 0,
            "symmetric schedule, %s data, blocks %lld, tiles %lld, K %d, %d slots: %lld of %lld "
            "lists differ from brute force (%lld overflows)",
            data ? "duplicate" : "random", (long long)cfg[c].qt, (long long)cfg[c].rt, cfg[c].K,
            cfg[c].slots, (long long)bad, (long long)n, (long long)overflows);
    }
  }
  free(x);
  free(val);
  return check_summary("C");
}
