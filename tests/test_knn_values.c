#define _POSIX_C_SOURCE 200809L /* clock_gettime (check.h) */
/* C tests of the check for NA, NaN and Inf in kNN's input, which the CUDA backend makes as
 * it stages the values for the device instead of a scan of its own by the core
 * (core/knn.c, staged_check; gm_neighbour_ops.checks_staged_values; kernels/points.cuh,
 * stage_rows):
 *   1. host only (runs everywhere): the core's checking copy gm_pack_rows and its scan
 *      gm_rows_non_finite copy bit for bit as a plain copy does and flag every class of
 *      non-finite value (both infinities, quiet and signalling NaNs, R's NA, any payload)
 *      at every position of a block, and nothing outside it;
 *   2. on every backend of the parity harness: NaN, R's NA, +Inf and -Inf at the first
 *      value, the last, a row in a later chunk of the page-locked ring or a later query
 *      tile, and before a value staged earlier (the first in column-major order is the
 *      one named), in the data or the query, of matrices over 16 MB (the ring's slot,
 *      kPinnedChunk) and under 8 MB (copied from host memory straight), of the GEMM form
 *      and the low-dimensional fused kernel: the plain search (double and float), the
 *      index build and the index search, the cosine metric. Each gives the CPU's error
 *      word for word ("knn:nonFinite", the row and column of the first such value), leaves
 *      the outputs untouched, and the next valid calls on the same context are right.
 * Environment (besides the harness's): GPUML_TEST_QUICK=1 runs NaN at a later row only
 * (for compute-sanitizer). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "internal.h" /* gm_pack_rows, gm_rows_non_finite, gm_copy_parallel, gm_pages */

static gpuml_backend test_backend = GPUML_BACKEND_CPU;
static int quick = 0;

static uint64_t rng_state = 4242;
static uint64_t next_bits(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return rng_state;
}
static double uniform(void) { return (double)(next_bits() >> 11) / 9007199254740992.0; }

/* ---- 1. the core's checking copy, on the host ------------------------------------------ */

/* The non-finite classes, as bits. */
static const uint64_t bad64[] = {
    0x7ff0000000000000ULL, /* +Inf */
    0xfff0000000000000ULL, /* -Inf */
    0x7ff8000000000000ULL, /* quiet NaN */
    0xfff8000000000000ULL, /* the x86 default NaN (sign set) */
    0x7ff00000000007a2ULL, /* R's NA_real_ */
    0x7ff0000000000001ULL, /* signalling NaN, the smallest payload */
    0x7fffffffffffffffULL, /* NaN, every payload bit */
    0xffffffffffffffffULL};
static const uint32_t bad32[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                 0x7f8007a2u, 0x7f800001u, 0x7fffffffu, 0xffffffffu};
/* Finite values at the edges of the test: zeros, denormals, the smallest normal, the
 * largest finite (every exponent bit but the lowest), one. */
static const uint64_t edge64[] = {0x0000000000000000ULL, 0x8000000000000000ULL,
                                  0x0000000000000001ULL, 0x800fffffffffffffULL,
                                  0x0010000000000000ULL, 0x7fefffffffffffffULL,
                                  0xffefffffffffffffULL, 0x7fe0000000000000ULL,
                                  0x3ff0000000000000ULL};
static const uint32_t edge32[] = {0x00000000u, 0x80000000u, 0x00000001u,
                                  0x807fffffu, 0x00800000u, 0x7f7fffffu,
                                  0xff7fffffu, 0x7f000000u, 0x3f800000u};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Random finite values of `item` bytes (8, 4, or any other size: random bytes), with the
 * edge values sprinkled in. */
static void fill_finite(unsigned char *x, size_t count, size_t item) {
  for (size_t i = 0; i < count; i++) {
    unsigned char *at = x + i * item;
    if (item == 8) {
      uint64_t u = next_bits();
      if ((u & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL) u ^= 0x0010000000000000ULL;
      if (i % 7 == 3) u = edge64[(i / 7) % COUNT(edge64)];
      memcpy(at, &u, 8);
    } else if (item == 4) {
      uint32_t u = (uint32_t)(next_bits() >> 32);
      if ((u & 0x7f800000u) == 0x7f800000u) u ^= 0x00800000u;
      if (i % 7 == 3) u = edge32[(i / 7) % COUNT(edge32)];
      memcpy(at, &u, 4);
    } else {
      for (size_t b = 0; b < item; b++) at[b] = (unsigned char)(next_bits() >> 56);
    }
  }
}

static void put_bits(unsigned char *x, size_t at, size_t item, int which) {
  if (item == 8) memcpy(x + at * 8, &bad64[which], 8);
  else memcpy(x + at * 4, &bad32[which], 4);
}

/* Packs rows [r0, r0 + rn) of the ld x d matrix x and compares with a plain copy, bit for
 * bit, with guard bytes after the block; returns gm_pack_rows's flag (-1: the copy is
 * wrong) and checks that gm_rows_non_finite agrees. */
static int pack_and_compare(const unsigned char *x, int64_t ld, int64_t r0, int64_t rn,
                            int64_t d, size_t item, const char *label) {
  const size_t bytes = (size_t)rn * (size_t)d * item, guard = 64;
  unsigned char *out = malloc(bytes + guard), *ref = malloc(bytes);
  memset(out, 0xa5, bytes + guard);
  for (int64_t j = 0; j < d; j++)
    memcpy(ref + (size_t)j * (size_t)rn * item, x + ((size_t)j * (size_t)ld + (size_t)r0) * item,
           (size_t)rn * item);
  const int flag = gm_pack_rows(x, ld, r0, rn, d, item, out);
  int ok = memcmp(out, ref, bytes) == 0;
  for (size_t b = 0; b < guard; b++) ok = ok && out[bytes + b] == 0xa5;
  const int scan = gm_rows_non_finite(x, ld, r0, rn, d, item);
  CHECK(ok, "%s: the packed block differs from a plain copy", label);
  CHECK((flag != 0) == (scan != 0), "%s: gm_pack_rows says %d, gm_rows_non_finite %d", label,
        flag, scan);
  free(out);
  free(ref);
  return ok ? flag : -1;
}

/* Blocks of several shapes (one value; vector tails; a block of a larger matrix; blocks
 * above a megabyte, packed on all threads): finite values copy exactly and are not
 * flagged; each non-finite class at each position class of the block is flagged and
 * copied exactly (payloads kept); values outside the block are not looked at. */
static void test_pack_rows(void) {
  static const int64_t shapes[][4] = {/* ld, d, r0, rn */
                                      {1, 1, 0, 1},         {37, 5, 3, 29},
                                      {1000, 3, 0, 1000},   {257, 17, 100, 157},
                                      {70000, 3, 1000, 60000}, {8, 300, 2, 5}};
  static const size_t items[] = {8, 4};
  for (size_t it = 0; it < COUNT(items); it++) {
    const size_t item = items[it];
    for (size_t sh = 0; sh < COUNT(shapes); sh++) {
      int64_t ld = shapes[sh][0], d = shapes[sh][1], r0 = shapes[sh][2], rn = shapes[sh][3];
      if (item == 4 && ld == 70000) {  /* over a megabyte in floats too */
        ld = 140000;
        rn = 120000;
      }
      unsigned char *x = malloc((size_t)ld * (size_t)d * item);
      fill_finite(x, (size_t)ld * (size_t)d, item);
      char label[160];
      snprintf(label, sizeof label, "pack %zu-byte rows %lld..%lld of %lld x %lld, finite", item,
               (long long)r0, (long long)(r0 + rn - 1), (long long)ld, (long long)d);
      CHECK(pack_and_compare(x, ld, r0, rn, d, item, label) == 0, "%s: flagged", label);
      /* positions: first, last, middle, first row of the last column, last row of the
       * first column (as row, column of the block) */
      const int64_t pos[][2] = {{0, 0}, {rn - 1, d - 1}, {rn / 2, d / 2}, {0, d - 1}, {rn - 1, 0}};
      for (size_t b = 0; b < COUNT(bad64); b++)
        for (size_t p = 0; p < COUNT(pos); p++) {
          const size_t at = (size_t)(r0 + pos[p][0]) + (size_t)pos[p][1] * (size_t)ld;
          unsigned char keep[8];
          memcpy(keep, x + at * item, item);
          put_bits(x, at, item, (int)b);
          snprintf(label, sizeof label,
                   "pack %zu-byte rows of %lld x %lld, class %zu at block row %lld, column %lld",
                   item, (long long)ld, (long long)d, b, (long long)pos[p][0], (long long)pos[p][1]);
          CHECK(pack_and_compare(x, ld, r0, rn, d, item, label) == 1, "%s: not flagged", label);
          memcpy(x + at * item, keep, item);
        }
      /* just outside the block: not part of the copy, not flagged */
      for (int side = 0; side < 2; side++) {
        const int64_t row = side ? r0 + rn : r0 - 1;
        if (row < 0 || row >= ld) continue;
        const size_t at = (size_t)row + (size_t)(d / 2) * (size_t)ld;
        unsigned char keep[8];
        memcpy(keep, x + at * item, item);
        put_bits(x, at, item, 2);
        snprintf(label, sizeof label, "pack %zu-byte rows, NaN in row %lld outside the block",
                 item, (long long)row);
        CHECK(pack_and_compare(x, ld, r0, rn, d, item, label) == 0, "%s: flagged", label);
        memcpy(x + at * item, keep, item);
      }
      free(x);
    }
    /* Every position of columns of 1 to 67 values (the vector loops' heads and tails). */
    int64_t wrong = 0;
    unsigned char *x = malloc(67 * item), *out = malloc(67 * item);
    for (int64_t len = 1; len <= 67; len++) {
      fill_finite(x, (size_t)len, item);
      if (gm_pack_rows(x, len, 0, len, 1, item, out) || gm_rows_non_finite(x, len, 0, len, 1, item))
        wrong++;
      for (int64_t i = 0; i < len; i++)
        for (size_t b = 0; b < COUNT(bad64); b++) {
          unsigned char keep[8];
          memcpy(keep, x + (size_t)i * item, item);
          put_bits(x, (size_t)i, item, (int)b);
          if (!gm_pack_rows(x, len, 0, len, 1, item, out) || memcmp(out, x, (size_t)len * item) ||
              !gm_rows_non_finite(x, len, 0, len, 1, item))
            wrong++;
          memcpy(x + (size_t)i * item, keep, item);
        }
    }
    CHECK(wrong == 0, "pack %zu-byte columns of 1..67 values: %lld cases wrong", item,
          (long long)wrong);
    free(x);
    free(out);
  }
  /* Other sizes are copied as they are, unchecked. */
  unsigned char x[40 * 2], out[20 * 2];
  fill_finite(x, 40, 2);
  const int flag = gm_pack_rows(x, 10, 5, 5, 4, 2, out);
  int same = 1;
  for (int j = 0; j < 4; j++) same = same && memcmp(out + j * 10, x + (j * 10 + 5) * 2, 10) == 0;
  CHECK(flag == 0 && same, "pack 2-byte rows: flag %d, copy %s", flag, same ? "exact" : "wrong");
}

/* ---- 2. non-finite values through the API ---------------------------------------------- */

/* The value classes put into the matrices: NaN, R's NA, +Inf, -Inf. */
static const uint64_t kind64[] = {0x7ff8000000000000ULL, 0x7ff00000000007a2ULL,
                                  0x7ff0000000000000ULL, 0xfff0000000000000ULL};
static const uint32_t kind32[] = {0x7fc00000u, 0x7f8007a2u, 0x7f800000u, 0xff800000u};
static const char *const kind_name[] = {"NaN", "NA", "+Inf", "-Inf"};

typedef struct {
  const char *name;
  int64_t n, d, m;
  int64_t data_later, query_later; /* rows in a later ring chunk or query tile */
} size_case;

/* "ring": 36.9 MB of data in 16 MB chunks of 8192 rows (float: 18.4 MB, chunks of
 * 16384), row 17000 in the third (second); queries in tiles of 8192 rows (16 MB, float
 * 8 MB: the ring too), row 10000 in the second. "pageable": 3 MB. "low-dim": the fused
 * kernel (d < 16), straight from host memory; "low-dim ring": 19.2 MB, row 780000 in the
 * ring's second chunk (rows 699051 on). */
static const size_case sizes[] = {{"ring", 18000, 256, 18000, 17000, 10000},
                                  {"pageable", 3000, 128, 3000, 2500, 2500},
                                  {"low-dim", 2000, 3, 500, 1500, 400},
                                  {"low-dim ring", 800000, 3, 1000, 780000, 900}};

typedef enum {
  CALL_SELF,        /* gpuml_knn_search, data against itself: bad data */
  CALL_DATA,        /* gpuml_knn_search with queries: bad data */
  CALL_QUERY,       /* the same: bad queries */
  CALL_F32_SELF,    /* gpuml_knn_search_f: bad data */
  CALL_F32_QUERY,   /* gpuml_knn_search_f with queries: bad queries */
  CALL_INDEX_BUILD, /* gpuml_knn_index_build: bad data */
  CALL_INDEX_QUERY, /* gpuml_knn_index_search: bad queries */
  CALL_COSINE_SELF, /* cosine metric (the core's own scan): bad data */
  CALL_COSINE_QUERY,
  CALL_MANY_LISTS,  /* queries with k = 256: lists beyond a small memory limit (copied out
                       tile by tile), bad queries */
  CALL_COUNT
} call_kind;
static const char *const call_name[] = {"self",        "data",          "query",
                                        "f32 self",    "f32 query",     "index build",
                                        "index query", "cosine self",   "cosine query",
                                        "many lists"};

static int call_f32(call_kind c) { return c == CALL_F32_SELF || c == CALL_F32_QUERY; }
static int call_bad_query(call_kind c) {
  return c == CALL_QUERY || c == CALL_F32_QUERY || c == CALL_INDEX_QUERY ||
         c == CALL_COSINE_QUERY || c == CALL_MANY_LISTS;
}
/* A search of the data against itself (the others search queries; the index build's
 * valid call searches the new index with them). */
static int call_self(call_kind c) {
  return c == CALL_SELF || c == CALL_F32_SELF || c == CALL_COSINE_SELF;
}
static int64_t call_k(call_kind c) { return c == CALL_MANY_LISTS ? 256 : 5; }

/* A size's matrices: data and queries, double and float (the same values), a small query
 * set for the valid calls that would be slow with all the queries, and the indexes of the
 * data (built valid, per backend). */
typedef struct {
  const size_case *sc;
  double *D, *Q, *Qs;
  float *Df, *Qf, *Qsf;
  int64_t ms;
  gpuml_knn_index *ix, *ix_cpu;
} mats;

/* The staging's host helpers: gm_copy_parallel copies as memcpy does on any number of
 * threads, and gm_pages (the results' pages faulted in on a thread of their own) writes a
 * byte in every page a range meets and nothing outside its ranges. */
static void test_host_copies(void) {
  const size_t bytes = ((size_t)5 << 20) + 3;
  unsigned char *src = malloc(bytes), *dst = malloc(bytes);
  if (!src || !dst) {
    CHECK(0, "host copies: out of memory");
    free(src);
    free(dst);
    return;
  }
  for (size_t i = 0; i < bytes; i++) src[i] = (unsigned char)(i * 2654435761u >> 13);
  for (int threads = 1; threads <= 3; threads += 2) {
    memset(dst, 0, bytes);
    gm_copy_parallel(dst + 1, src + 2, bytes - 2, threads);
    CHECK(!memcmp(dst + 1, src + 2, bytes - 2) && dst[0] == 0 && dst[bytes - 1] == 0,
          "gm_copy_parallel on %d threads: not memcpy's copy", threads);
  }
  /* ranges at odd offsets, one a few bytes over a page boundary, one empty, one NULL */
  const size_t page = 4096, at[3] = {100, ((size_t)2 << 20) + page - 1, 3 * page + 5};
  const size_t len[3] = {((size_t)1 << 20) + 17, 5000, 0};
  for (int threads = 1; threads <= 3; threads += 2) {
    memset(dst, 0xab, bytes);
    gm_pages_touched t;
    gm_pages_init(&t);
    gm_pages_wait(&t); /* nothing started: returns at once */
    for (int r = 0; r < 3; r++) gm_pages_add(&t, dst + at[r], len[r]);
    gm_pages_add(&t, NULL, 4096);
    gm_pages_start(&t, threads);
    gm_pages_wait(&t);
    size_t outside = 0, missed = 0;
    for (size_t i = 0; i < bytes; i++) {
      int in = 0;
      for (int r = 0; r < 3; r++) in |= i >= at[r] && i < at[r] + len[r];
      if (!in && dst[i] != 0xab) outside++;
    }
    for (int r = 0; r < 2; r++) /* each page the range meets holds a zero inside it */
      for (size_t pg = (at[r] / page) * page; pg < at[r] + len[r]; pg += page) {
        const size_t lo = pg > at[r] ? pg : at[r];
        const size_t hi = pg + page < at[r] + len[r] ? pg + page : at[r] + len[r];
        int zero = 0;
        for (size_t i = lo; i < hi; i++) zero |= dst[i] == 0;
        missed += !zero;
      }
    CHECK(outside == 0 && missed == 0,
          "gm_pages on %d threads: %zu bytes written outside the ranges, %zu pages missed",
          threads, outside, missed);
  }
  free(src);
  free(dst);
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    exit(2);
  }
  return p;
}

static gpuml_options options(gpuml_backend b, gpuml_metric metric) {
  gpuml_options opt = harness_options(b);
  opt.metric = metric;
  return opt;
}

/* One call of kind c on backend b (k neighbours; the queries Q of m rows, NULL: the
 * call's own). Outputs: idx and dist or distf. */
static gpuml_status do_call(call_kind c, gpuml_backend b, const mats *M, const double *Q,
                            const float *Qf, int64_t m, int64_t *idx, double *dist,
                            float *distf) {
  const size_case *s = M->sc;
  const int64_t k = call_k(c);
  gpuml_options opt =
      options(b, c == CALL_COSINE_SELF || c == CALL_COSINE_QUERY ? GPUML_METRIC_COSINE
                                                                  : GPUML_METRIC_EUCLIDEAN);
  if (!Q) Q = M->Q;
  if (!Qf) Qf = M->Qf;
  if (m == 0) m = s->m;
  switch (c) {
    case CALL_SELF:
    case CALL_COSINE_SELF:
      return gpuml_knn_search(M->D, s->n, s->d, NULL, 0, k, idx, dist, &opt, NULL);
    case CALL_DATA:
    case CALL_QUERY:
    case CALL_COSINE_QUERY:
    case CALL_MANY_LISTS:
      return gpuml_knn_search(M->D, s->n, s->d, Q, m, k, idx, dist, &opt, NULL);
    case CALL_F32_SELF:
      return gpuml_knn_search_f(M->Df, s->n, s->d, NULL, 0, k, idx, distf, &opt, NULL);
    case CALL_F32_QUERY:
      return gpuml_knn_search_f(M->Df, s->n, s->d, Qf, m, k, idx, distf, &opt, NULL);
    case CALL_INDEX_BUILD: {
      gpuml_knn_index *ix = (gpuml_knn_index *)0x1;
      gpuml_status st = gpuml_knn_index_build(M->D, s->n, s->d, &opt, &ix);
      if (st) {
        CHECK(ix == NULL, "a failed index build leaves the index pointer NULL");
      } else {
        /* the valid call: the new index searched */
        st = gpuml_knn_index_search(ix, Q, m, k, idx, dist, &opt, NULL);
        gpuml_knn_index_free(ix);
      }
      return st;
    }
    case CALL_INDEX_QUERY: {
      const gpuml_knn_index *ix = b == GPUML_BACKEND_CPU ? M->ix_cpu : M->ix;
      return gpuml_knn_index_search(ix, Q, m, k, idx, dist, &opt, NULL);
    }
    default:
      return GPUML_ERR_ARG;
  }
}

/* The message gm_check_values gives for the first non-finite value (column-major) of an
 * r x d matrix, "" when there is none. */
static void first_bad(const void *x, int f32, int64_t r, int64_t d, const char *what, char *msg,
                      size_t len) {
  msg[0] = '\0';
  for (int64_t e = 0; e < r * d; e++) {
    const double v = f32 ? (double)((const float *)x)[e] : ((const double *)x)[e];
    if (isfinite(v)) continue;
    snprintf(msg, len,
             "%s contains %s at row %lld, column %lld: remove or impute non-finite values first",
             what, isnan(v) ? "NA/NaN" : "Inf", (long long)(e % r + 1), (long long)(e / r + 1));
    return;
  }
}

/* Values put in a matrix and taken out again. */
typedef struct {
  void *x;
  int f32;
  size_t at;
  uint64_t keep;
} planted;

static void plant(planted *p, void *x, int f32, int64_t rows, int64_t row, int64_t col,
                  int kind, int infinity_instead) {
  p->x = x;
  p->f32 = f32;
  p->at = (size_t)row + (size_t)col * (size_t)rows;
  p->keep = 0;
  if (f32) {
    uint32_t keep, v = infinity_instead ? 0x7f800000u : kind32[kind];
    memcpy(&keep, (float *)x + p->at, 4);
    p->keep = keep;
    memcpy((float *)x + p->at, &v, 4);
  } else {
    const uint64_t v = infinity_instead ? 0x7ff0000000000000ULL : kind64[kind];
    memcpy(&p->keep, (double *)x + p->at, 8);
    memcpy((double *)x + p->at, &v, 8);
  }
}

static void unplant(const planted *p) {
  if (p->f32) {
    const uint32_t keep = (uint32_t)p->keep;
    memcpy((float *)p->x + p->at, &keep, 4);
  } else {
    memcpy((double *)p->x + p->at, &p->keep, 8);
  }
}

/* k nearest of query row q (of Q, ld rows; self: Q is the data and q is left out) by
 * brute force in long double, for the metric, by (distance, index). */
static void brute_force(const void *data, const void *Q, int f32, int cosine, int64_t n,
                        int64_t d, int64_t ld, int64_t q, int self, int64_t k, int64_t *ri,
                        long double *rd) {
  for (int64_t t = 0; t < k; t++) {
    ri[t] = -1;
    rd[t] = INFINITY;
  }
  for (int64_t j = 0; j < n; j++) {
    if (self && j == q) continue;
    long double s = 0, xy = 0, xx = 0, yy = 0;
    for (int64_t t = 0; t < d; t++) {
      const long double a = f32 ? ((const float *)data)[j + t * n] : ((const double *)data)[j + t * n];
      const long double b = f32 ? ((const float *)Q)[q + t * ld] : ((const double *)Q)[q + t * ld];
      s += (a - b) * (a - b);
      xy += a * b;
      xx += a * a;
      yy += b * b;
    }
    const long double v = cosine ? 1.0L - xy / sqrtl(xx * yy) : sqrtl(s);
    if (!(v < rd[k - 1])) continue;
    int64_t t = k - 1;
    while (t > 0 && v < rd[t - 1]) {
      rd[t] = rd[t - 1];
      ri[t] = ri[t - 1];
      t--;
    }
    rd[t] = v;
    ri[t] = j;
  }
}

/* The lists of a valid call (rows x k) against brute force on 16 rows spread over them. */
static void check_sample(const char *label, const void *data, const void *Q, int f32,
                         int cosine, int64_t n, int64_t d, int64_t rows, int self, int64_t k,
                         const int64_t *idx, const double *dist, const float *distf) {
  const double tol = f32 || harness_precision == GPUML_PRECISION_SINGLE ? 2e-4
                     : cosine                                           ? 1e-12
                                                                        : 1e-10;
  int64_t *ri = xmalloc(sizeof(int64_t) * (size_t)k);
  long double *rd = xmalloc(sizeof(long double) * (size_t)k);
  int64_t wrong_index = 0, wrong_dist = 0;
  for (int s = 0; s < 16; s++) {
    const int64_t q = s == 15 ? rows - 1 : (rows - 1) * s / 15;
    brute_force(data, self ? data : Q, f32, cosine, n, d, rows, q, self, k, ri, rd);
    for (int64_t t = 0; t < k; t++) {
      const double got = f32 ? (double)distf[q + t * rows] : dist[q + t * rows];
      if (idx[q + t * rows] != ri[t]) wrong_index++;
      if (fabs(got - (double)rd[t]) > tol * (1 + (double)rd[t])) wrong_dist++;
    }
  }
  CHECK(wrong_index == 0 && wrong_dist == 0,
        "%s: %lld indices and %lld distances of 16 rows differ from brute force", label,
        (long long)wrong_index, (long long)wrong_dist);
  free(ri);
  free(rd);
}

/* A small valid search (400 x 32, double or float) on backend b against brute force: the
 * context works after a failed call. */
static double *probe_x;
static float *probe_xf;
static void probe(gpuml_backend b, int f32, const char *label) {
  const int64_t n = 400, d = 32, k = 5;
  int64_t idx[400 * 5];
  double dist[400 * 5];
  float distf[400 * 5];
  gpuml_options opt = options(b, GPUML_METRIC_EUCLIDEAN);
  const gpuml_status st =
      f32 ? gpuml_knn_search_f(probe_xf, n, d, NULL, 0, k, idx, distf, &opt, NULL)
          : gpuml_knn_search(probe_x, n, d, NULL, 0, k, idx, dist, &opt, NULL);
  CHECK(st == GPUML_OK, "%s, then a valid search: status %d (%s)", label, st, gpuml_last_error());
  if (st == GPUML_OK)
    check_sample(label, f32 ? (const void *)probe_xf : probe_x, NULL, f32, 0, n, d, n, 1, k, idx,
                 dist, distf);
}

/* The sentinels that a failed call must leave in the outputs. */
static void fill_outputs(int64_t *idx, double *dist, float *distf, size_t count) {
  for (size_t i = 0; i < count; i++) {
    idx[i] = -7;
    dist[i] = 1234.5;
    distf[i] = 1234.5f;
  }
}
static int64_t outputs_touched(const int64_t *idx, const double *dist, const float *distf,
                               size_t count) {
  int64_t touched = 0;
  for (size_t i = 0; i < count; i++)
    touched += idx[i] != -7 || dist[i] != 1234.5 || distf[i] != 1234.5f;
  return touched;
}

typedef enum { AT_FIRST, AT_LAST, AT_LATER, AT_ORDER, AT_BOTH, AT_COUNT } position;
static const char *const position_name[] = {"first value", "last value", "later chunk",
                                            "before a value staged earlier",
                                            "data and query"};

/* Every position and value class of call kind c on the current backend: the error word for
 * word (the CPU's), the outputs untouched, a valid search after each; then the call
 * itself with valid values against brute force. */
static void check_call(mats *M, call_kind c, int64_t *idx, double *dist, float *distf) {
  const size_case *s = M->sc;
  const int f32 = call_f32(c), bad_q = call_bad_query(c);
  const int self = call_self(c);
  const int64_t k = call_k(c);
  const size_t out_count = (size_t)(self ? s->n : s->m) * (size_t)k;
  const int64_t rows = bad_q ? s->m : s->n, later = bad_q ? s->query_later : s->data_later;
  void *X = bad_q ? (f32 ? (void *)M->Qf : (void *)M->Q) : (f32 ? (void *)M->Df : (void *)M->D);
  for (int p = 0; p < AT_COUNT; p++) {
    if (p == AT_BOTH && c != CALL_DATA) continue;
    if (quick && p != AT_LATER) continue;
    for (int kind = 0; kind < 4; kind++) {
      if (quick && kind != 0) continue;
      planted a, b2;
      int two = 0;
      switch (p) {
        case AT_FIRST: plant(&a, X, f32, rows, 0, 0, kind, 0); break;
        case AT_LAST: plant(&a, X, f32, rows, rows - 1, s->d - 1, kind, 0); break;
        case AT_LATER: plant(&a, X, f32, rows, later, s->d / 2, kind, 0); break;
        case AT_ORDER:
          /* the value at a later row of the first column comes first in column-major order;
           * an Inf in an early row of the last column is staged before it */
          plant(&a, X, f32, rows, later, 0, kind, 0);
          plant(&b2, X, f32, rows, 5, s->d - 1, kind, 1);
          two = 1;
          break;
        case AT_BOTH:
          /* the data's value is named, though the query's is first in its matrix */
          plant(&a, X, f32, rows, later, s->d / 2, kind, 0);
          plant(&b2, M->Q, 0, s->m, 0, 0, kind, 1);
          two = 1;
          break;
      }
      char label[256], want[256], cpu_msg[512] = "";
      snprintf(label, sizeof label, "%s, %s: %s, %s at the %s", s->name,
               gpuml_backend_name(test_backend), call_name[c], kind_name[kind], position_name[p]);
      if (p == AT_BOTH) first_bad(M->D, 0, s->n, s->d, "data", want, sizeof want);
      else first_bad(X, f32, rows, s->d, bad_q ? "query" : "data", want, sizeof want);
      if (test_backend != GPUML_BACKEND_CPU) {
        const gpuml_status cst = do_call(c, GPUML_BACKEND_CPU, M, NULL, NULL, 0, idx, dist, distf);
        snprintf(cpu_msg, sizeof cpu_msg, "%s", cst == GPUML_ERR_ARG ? gpuml_last_error() : "");
      }
      fill_outputs(idx, dist, distf, out_count);
      const gpuml_status st = do_call(c, test_backend, M, NULL, NULL, 0, idx, dist, distf);
      CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:nonFinite") == 0 &&
                strcmp(gpuml_last_error(), want) == 0,
            "%s: status %d, %s: %s (expected \"%s\")", label, st, gpuml_last_error_id(),
            gpuml_last_error(), want);
      if (test_backend != GPUML_BACKEND_CPU)
        CHECK(strcmp(cpu_msg, want) == 0, "%s: the CPU says \"%s\"", label, cpu_msg);
      const int64_t touched = outputs_touched(idx, dist, distf, out_count);
      CHECK(touched == 0, "%s: %lld output values written by a failed call", label,
            (long long)touched);
      if (two) unplant(&b2);
      unplant(&a);
      /* the device's context after the failure (the CPU keeps none: its valid calls are
       * those below) */
      if (test_backend != GPUML_BACKEND_CPU) probe(test_backend, f32, label);
    }
  }
  /* The call itself, valid: all the queries where the search is quick on this backend,
   * else the small query set (which still loads all the data). */
  const int gpu = test_backend != GPUML_BACKEND_CPU;
  const double work = (double)(self ? s->n : s->m) * (double)s->n * (double)s->d;
  const int all = work <= (gpu ? 1e11 : 3e8) && !(quick && gpu);
  if (self && !all) return;  /* the small query set's search follows other calls */
  const int64_t m = self ? s->n : all ? s->m : M->ms;
  const double *Q = self ? NULL : all ? M->Q : M->Qs;
  const float *Qf = self ? NULL : all ? M->Qf : M->Qsf;
  char label[160];
  snprintf(label, sizeof label, "%s, %s: %s, valid (%lld %s)", s->name,
           gpuml_backend_name(test_backend), call_name[c], (long long)m,
           self ? "points" : "queries");
  const gpuml_status st = do_call(c, test_backend, M, Q, Qf, self ? 0 : m, idx, dist, distf);
  if (st == GPUML_ERR_NOMEM && gpu) {
    SKIP("%s: %s", label, gpuml_last_error());
    return;
  }
  CHECK(st == GPUML_OK, "%s: status %d (%s)", label, st, gpuml_last_error());
  if (st == GPUML_OK)
    check_sample(label, f32 ? (const void *)M->Df : M->D,
                 self ? NULL : f32 ? (const void *)Qf : (const void *)Q, f32,
                 c == CALL_COSINE_SELF || c == CALL_COSINE_QUERY, s->n, s->d, m, self, k, idx,
                 dist, distf);
}

static void test_non_finite_calls(void) {
  for (size_t z = 0; z < COUNT(sizes); z++) {
    const size_case *s = &sizes[z];
    if (quick && (s->d < 16)) continue;
    mats M = {s, NULL, NULL, NULL, NULL, NULL, NULL, 64, NULL, NULL};
    const size_t nd = (size_t)s->n * (size_t)s->d, md = (size_t)s->m * (size_t)s->d,
                 msd = (size_t)M.ms * (size_t)s->d;
    M.D = xmalloc(nd * 8);
    M.Q = xmalloc(md * 8);
    M.Qs = xmalloc(msd * 8);
    M.Df = xmalloc(nd * 4);
    M.Qf = xmalloc(md * 4);
    M.Qsf = xmalloc(msd * 4);
    /* float values, so that the double and float matrices hold the same points */
    for (size_t i = 0; i < nd; i++) M.D[i] = M.Df[i] = (float)(2 * uniform() - 1);
    for (size_t i = 0; i < md; i++) M.Q[i] = M.Qf[i] = (float)(2 * uniform() - 1);
    for (size_t i = 0; i < msd; i++) M.Qs[i] = M.Qsf[i] = (float)(2 * uniform() - 1);
    size_t out_count = (size_t)(s->n > s->m ? s->n : s->m) * 5;
    if (out_count < (size_t)s->m * (size_t)call_k(CALL_MANY_LISTS))
      out_count = (size_t)s->m * (size_t)call_k(CALL_MANY_LISTS);
    int64_t *idx = xmalloc(out_count * 8);
    double *dist = xmalloc(out_count * 8);
    float *distf = xmalloc(out_count * 4);
    gpuml_options opt = options(test_backend, GPUML_METRIC_EUCLIDEAN);
    gpuml_status st = gpuml_knn_index_build(M.D, s->n, s->d, &opt, &M.ix);
    const int have_index = st == GPUML_OK;
    if (st == GPUML_ERR_NOMEM && test_backend != GPUML_BACKEND_CPU)
      SKIP("%s: the index does not fit (%s)", s->name, gpuml_last_error());
    else
      CHECK(st == GPUML_OK, "%s: index build: %s", s->name, gpuml_last_error());
    opt = options(GPUML_BACKEND_CPU, GPUML_METRIC_EUCLIDEAN);
    st = gpuml_knn_index_build(M.D, s->n, s->d, &opt, &M.ix_cpu);
    CHECK(st == GPUML_OK, "%s: index build on the CPU: %s", s->name, gpuml_last_error());
    for (int c = 0; c < CALL_COUNT; c++) {
      if (c == CALL_INDEX_QUERY && (!have_index || !M.ix_cpu)) continue;
      if (c == CALL_MANY_LISTS && s->n < 256) continue;
      check_call(&M, (call_kind)c, idx, dist, distf);
    }
    /* The small query set against all the data: the data's staging after every failure. */
    for (int f32 = 0; f32 < 2; f32++) {
      char label[128];
      snprintf(label, sizeof label, "%s, %s: %s queries, valid (%lld)", s->name,
               gpuml_backend_name(test_backend), f32 ? "float" : "double", (long long)M.ms);
      opt = options(test_backend, GPUML_METRIC_EUCLIDEAN);
      st = f32 ? gpuml_knn_search_f(M.Df, s->n, s->d, M.Qsf, M.ms, 5, idx, distf, &opt, NULL)
               : gpuml_knn_search(M.D, s->n, s->d, M.Qs, M.ms, 5, idx, dist, &opt, NULL);
      CHECK(st == GPUML_OK, "%s: %s", label, gpuml_last_error());
      if (st == GPUML_OK)
        check_sample(label, f32 ? (const void *)M.Df : M.D, f32 ? (const void *)M.Qsf : M.Qs,
                     f32, 0, s->n, s->d, M.ms, 0, 5, idx, dist, distf);
    }
    gpuml_knn_index_free(M.ix);
    gpuml_knn_index_free(M.ix_cpu);
    free(M.D);
    free(M.Q);
    free(M.Qs);
    free(M.Df);
    free(M.Qf);
    free(M.Qsf);
    free(idx);
    free(dist);
    free(distf);
  }
}

int main(void) {
  harness_init();
  const char *q = getenv("GPUML_TEST_QUICK");
  quick = q && strcmp(q, "1") == 0;
  RUN(test_pack_rows);
  RUN(test_host_copies);
  probe_x = xmalloc(400 * 32 * sizeof(double));
  probe_xf = xmalloc(400 * 32 * sizeof(float));
  for (int i = 0; i < 400 * 32; i++) probe_x[i] = probe_xf[i] = (float)uniform();
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "non-finite kNN input")) continue;
    test_backend = b->id;
    RUN(test_non_finite_calls);
  }
  free(probe_x);
  free(probe_xf);
  gpuml_shutdown(); /* the contexts' own memory, so that a leak check sees only leaks */
  return check_summary("C");
}
