/* Exact k nearest neighbours on the CPU. Queries are taken in blocks; for each block,
 * distance tiles against blocks of the data feed one bounded max-heap per query, so
 * memory stays O((block + k) x block) whatever m and n are. */
#include <math.h>
#include <stdlib.h>
#include "cpu_backend.h"
#include "blas.h"
#include "distance_tiles.h"

#define GM_KNN_REF_BLOCK 2048
#define GM_KNN_QUERY_BLOCK 512
/* Heaps of one query block (one per thread) stay below this many bytes (large k). */
#define GM_KNN_HEAP_BYTES ((size_t)64 << 20)
/* The GEMM form screens with values that may differ from the exact ones in the last
 * bits; this many extra candidates are kept and re-ranked by exact distance, so that
 * near-ties at the k-th place are settled by the exact distance and the index. */
#define GM_KNN_EXTRA_CANDIDATES 16

typedef struct {
  double dist;
  int64_t index;
} gm_candidate;

/* The strict order used everywhere: by distance, then by index. */
static int before(double d1, int64_t i1, double d2, int64_t i2) {
  return d1 < d2 || (d1 == d2 && i1 < i2);
}

static int compare_candidates(const void *pa, const void *pb) {
  const gm_candidate *a = pa, *b = pb;
  if (before(a->dist, a->index, b->dist, b->index)) return -1;
  if (before(b->dist, b->index, a->dist, a->index)) return 1;
  return 0;
}

/* Max-heap on (dist, index): heap[0] is the worst kept candidate. */
static void sift_down(gm_candidate *heap, int64_t size, int64_t at) {
  for (;;) {
    int64_t worst = at, l = 2 * at + 1, r = l + 1;
    if (l < size && before(heap[worst].dist, heap[worst].index, heap[l].dist, heap[l].index))
      worst = l;
    if (r < size && before(heap[worst].dist, heap[worst].index, heap[r].dist, heap[r].index))
      worst = r;
    if (worst == at) return;
    gm_candidate t = heap[at];
    heap[at] = heap[worst];
    heap[worst] = t;
    at = worst;
  }
}

static void sift_up(gm_candidate *heap, int64_t at) {
  while (at > 0) {
    int64_t parent = (at - 1) / 2;
    if (!before(heap[parent].dist, heap[parent].index, heap[at].dist, heap[at].index)) return;
    gm_candidate t = heap[at];
    heap[at] = heap[parent];
    heap[parent] = t;
    at = parent;
  }
}

/* Offers the distances from one query to data points r0 .. r0 + rn - 1. */
static void offer_row(gm_candidate *heap, int64_t *size, int64_t capacity, const double *row,
                      int64_t r0, int64_t rn, int64_t self_index) {
  int64_t s = *size;
  for (int64_t j = 0; j < rn; j++) {
    int64_t idx = r0 + j;
    if (idx == self_index) continue;
    double v = row[j];
    if (s < capacity) {
      heap[s].dist = v;
      heap[s].index = idx;
      sift_up(heap, s++);
    } else if (before(v, idx, heap[0].dist, heap[0].index)) {
      heap[0].dist = v;
      heap[0].index = idx;
      sift_down(heap, s, 0);
    }
  }
  *size = s;
}

/* One block of queries against all the data, on the calling thread: distance tiles
 * feed one heap per query, then exact distances decide the final order. */
static void knn_block(const gm_points *R, const gm_points *Q, int self, int64_t q0,
                      int64_t qn, int64_t k, int64_t capacity, int64_t rblock, double *tile,
                      gm_candidate *heaps, int64_t *sizes, int64_t *index, double *dist,
                      float *distf, const gpuml_options *opt, volatile int *stop) {
  const int64_t n = R->n, m = Q->n, d = R->d;
  for (int64_t i = 0; i < qn; i++) sizes[i] = 0;
  for (int64_t r0 = 0; r0 < n && !*stop; r0 += rblock) {
    const int64_t rn = n - r0 < rblock ? n - r0 : rblock;
    gm_sqdist_tile(R, r0, rn, Q, q0, qn, tile, rn);
    for (int64_t i = 0; i < qn; i++)
      offer_row(heaps + i * capacity, sizes + i, capacity, tile + i * rn, r0, rn,
                self ? q0 + i : -1);
    if (gm_is_calling_thread() && gm_interrupted(opt)) *stop = 1;
  }
  if (*stop) return;
  for (int64_t i = 0; i < qn; i++) {
    gm_candidate *c = heaps + i * capacity;
    const int64_t qi = q0 + i;
    for (int64_t j = 0; j < sizes[i]; j++)
      c[j].dist = gm_sqdist(R->x + c[j].index, n, Q->x + qi, m, d);
    qsort(c, (size_t)sizes[i], sizeof *c, compare_candidates);
    for (int64_t j = 0; j < k; j++) {
      index[qi + j * m] = c[j].index;
      double v = sqrt(c[j].dist);
      if (dist) dist[qi + j * m] = v;
      else distf[qi + j * m] = (float)v;
    }
  }
}

static gpuml_status knn_cpu(const double *data, int64_t n, int64_t d, const double *query,
                            int64_t m, int64_t k, int64_t *index, double *dist,
                            float *distf, const gpuml_options *opt) {
  const int self = (query == NULL), threads = gm_threads(opt);
  if (self) {
    query = data;
    m = n;
  }
  const int gemm = gm_use_gemm(d);
  const int64_t available = n - (self ? 1 : 0);
  int64_t extra = gemm ? GM_KNN_EXTRA_CANDIDATES : 0;
  if (extra > available - k) extra = available - k;
  const int64_t capacity = k + extra;
  /* Blocks small enough for every thread to get some, and heaps within budget. */
  int64_t qblock = (int64_t)(GM_KNN_HEAP_BYTES / ((size_t)capacity * sizeof(gm_candidate)));
  if (qblock > GM_KNN_QUERY_BLOCK) qblock = GM_KNN_QUERY_BLOCK;
  if (qblock > (m + threads - 1) / threads) qblock = (m + threads - 1) / threads;
  if (qblock < 1) qblock = 1;
  const int64_t rblock = n < GM_KNN_REF_BLOCK ? n : GM_KNN_REF_BLOCK;
  const int64_t nblocks = (m + qblock - 1) / qblock;

  double *centre = NULL, *tiles = NULL;
  gm_candidate *heaps = NULL;
  int64_t *sizes = NULL;
  gm_points R = {0}, Q = {0};
  gpuml_status st = GPUML_OK;
  if (gemm && (st = gm_gemm_centre(data, n, self ? NULL : query, m, d, &centre))) goto done;
  if ((st = gm_points_init(&R, data, n, d, centre, threads))) goto done;
  if (!self && (st = gm_points_init(&Q, query, m, d, centre, threads))) goto done;
  const gm_points *Qp = self ? &R : &Q;
  tiles = gm_alloc((size_t)threads * (size_t)rblock * (size_t)qblock, sizeof *tiles);
  heaps = gm_alloc((size_t)threads * (size_t)qblock * (size_t)capacity, sizeof *heaps);
  sizes = gm_alloc((size_t)threads * (size_t)qblock, sizeof *sizes);
  if (!tiles || !heaps || !sizes) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB of kNN work space",
                 threads * ((double)rblock * qblock * 8 + (double)qblock * capacity * 16) / 1e6);
    goto done;
  }

  volatile int stop = 0;
  int64_t queries_done = 0, reported = 0;
  const int blas_threads = gm_blas_serial_begin();
#pragma omp parallel num_threads(threads)
  {
    const int t = gm_thread_id();
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < nblocks; b++) {
      if (stop) continue;
      const int64_t q0 = b * qblock, qn = m - q0 < qblock ? m - q0 : qblock;
      knn_block(&R, Qp, self, q0, qn, k, capacity, rblock, tiles + (size_t)t * rblock * qblock,
                heaps + (size_t)t * qblock * capacity, sizes + (size_t)t * qblock, index, dist,
                distf, opt, &stop);
      int64_t now;
#pragma omp atomic capture
      now = queries_done += qn;
      if (gm_is_calling_thread() && !stop) gm_progress(opt, "knn", reported = now, m);
    }
  }
  gm_blas_serial_end(blas_threads);
  if (stop)
    st = gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "kNN search interrupted");
  else if (reported < m)
    gm_progress(opt, "knn", m, m);
done:
  free(tiles);
  free(heaps);
  free(sizes);
  free(centre);
  gm_points_free(&R);
  gm_points_free(&Q);
  return st;
}

gpuml_status gm_cpu_knn(const gm_matrix *data, const gm_matrix *query, int64_t k,
                        int64_t *index, void *dist, const gpuml_options *opt,
                        int64_t *rechecked) {
  if (rechecked) *rechecked = 0; /* the CPU computes in fp64 throughout */
  const int64_t n = data->rows, d = data->cols, m = query ? query->rows : n;
  if (data->dtype == GM_F64)
    return knn_cpu(data->values, n, d, query ? query->values : NULL, m, k, index, dist, NULL,
                   opt);
  /* Single precision is widened: the CPU computes in double either way. */
  double *dd = NULL, *qd = NULL;
  gpuml_status st = gm_widen(data->values, n * d, &dd);
  if (!st && query) st = gm_widen(query->values, m * d, &qd);
  if (!st) st = knn_cpu(dd, n, d, qd, m, k, index, NULL, dist, opt);
  free(dd);
  free(qd);
  return st;
}
