/* Options, argument checks, memory and callbacks shared by every entry point. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "params.h" /* gm_same_name */
#ifdef _OPENMP
#include <omp.h>
#endif

void gpuml_options_init(gpuml_options *opt) {
  if (!opt) return;
  memset(opt, 0, sizeof *opt);
  opt->backend = GPUML_BACKEND_AUTO;
  opt->precision = GPUML_PRECISION_AUTO;
  opt->seed = 42;
}

gpuml_status gpuml_options_set_seed(gpuml_options *opt, double seed) {
  gm_clear_error();
  if (!opt) return gm_fail(GPUML_ERR_ARG, "badOptions", "options must not be NULL");
  if (!(seed >= 0) || seed >= 9007199254740992.0 || seed != floor(seed))
    return gm_fail(GPUML_ERR_ARG, "badSeed", "seed = %g must be a whole number in [0, 2^53)",
                   seed);
  opt->seed = (uint64_t)seed;
  return GPUML_OK;
}

gpuml_status gpuml_options_set_devices(gpuml_options *opt, const double *ids, int64_t count) {
  gm_clear_error();
  if (!opt) return gm_fail(GPUML_ERR_ARG, "badOptions", "options must not be NULL");
  if (count < 0 || count > GPUML_MAX_DEVICES || (count > 0 && !ids))
    return gm_fail(GPUML_ERR_ARG, "badDevice", "a device list holds 0 to %d devices, not %lld",
                   GPUML_MAX_DEVICES, (long long)count);
  for (int64_t i = 0; i < count; i++) {
    if (!(ids[i] >= 0) || ids[i] != floor(ids[i]) || ids[i] > 1e6)
      return gm_fail(GPUML_ERR_ARG, "badDevice",
                     "device %lld of the list is %g: devices are CUDA ordinals 0, 1, ... or \"all\"",
                     (long long)i + 1, ids[i]);
    for (int64_t j = 0; j < i; j++)
      if (ids[j] == ids[i])
        return gm_fail(GPUML_ERR_ARG, "badDevice", "device %g is listed twice", ids[i]);
  }
  for (int64_t i = 0; i < count; i++) opt->devices[i] = (int)ids[i];
  opt->ndevices = (int)count;
  return GPUML_OK;
}

gpuml_status gpuml_options_set_devices_word(gpuml_options *opt, const char *word) {
  gm_clear_error();
  if (!opt) return gm_fail(GPUML_ERR_ARG, "badOptions", "options must not be NULL");
  if (!word || !gm_same_name(word, "all"))
    return gm_fail(GPUML_ERR_ARG, "badDevice",
                   "unknown devices \"%s\": give CUDA ordinals (0, 1, ...) or \"all\"",
                   word ? word : "(null)");
  opt->ndevices = GPUML_ALL_DEVICES;
  return GPUML_OK;
}

gpuml_status gm_check_options(const gpuml_options *opt) {
  if (!opt) return gm_fail(GPUML_ERR_ARG, "badOptions", "options must not be NULL");
  if (opt->backend != GPUML_BACKEND_AUTO && opt->backend != GPUML_BACKEND_CPU &&
      opt->backend != GPUML_BACKEND_CUDA)
    return gm_fail(GPUML_ERR_ARG, "badBackend", "unknown backend code %d", (int)opt->backend);
  if (opt->precision != GPUML_PRECISION_DOUBLE && opt->precision != GPUML_PRECISION_SINGLE &&
      opt->precision != GPUML_PRECISION_AUTO)
    return gm_fail(GPUML_ERR_ARG, "badPrecision", "unknown precision code %d",
                   (int)opt->precision);
  if (opt->metric != GPUML_METRIC_EUCLIDEAN && opt->metric != GPUML_METRIC_COSINE)
    return gm_fail(GPUML_ERR_ARG, "badMetric", "unknown metric code %d", (int)opt->metric);
  if (opt->threads < 0)
    return gm_fail(GPUML_ERR_ARG, "badThreads", "threads = %d must be 0 (default) or positive",
                   opt->threads);
  if (opt->device < 0)
    return gm_fail(GPUML_ERR_ARG, "badDevice", "device = %d must be 0 or positive", opt->device);
  if (opt->ndevices != GPUML_ALL_DEVICES && (opt->ndevices < 0 || opt->ndevices > GPUML_MAX_DEVICES))
    return gm_fail(GPUML_ERR_ARG, "badDevice",
                   "ndevices = %d must lie in 0 .. %d, or be GPUML_ALL_DEVICES", opt->ndevices,
                   GPUML_MAX_DEVICES);
  for (int i = 0; i < opt->ndevices; i++) {
    if (opt->devices[i] < 0)
      return gm_fail(GPUML_ERR_ARG, "badDevice", "device %d of the list is %d: ordinals are 0 or positive",
                     i + 1, opt->devices[i]);
    for (int j = 0; j < i; j++)
      if (opt->devices[j] == opt->devices[i])
        return gm_fail(GPUML_ERR_ARG, "badDevice", "device %d is listed twice", opt->devices[i]);
  }
  return GPUML_OK;
}

/* Inputs larger than this are scanned for NaN/Inf by all threads (a single thread
 * measured 15 ms per 51 million values, much of a GPU kNN's time). */
#define GM_PARALLEL_SCAN 65536

static gpuml_status check_shape(const void *x, int64_t n, int64_t d, const char *what,
                                const char *id) {
  char full_id[64];
  snprintf(full_id, sizeof full_id, "%s:badData", id);
  if (n < 1) return gm_fail(GPUML_ERR_ARG, full_id, "%s has no rows", what);
  if (d < 1) return gm_fail(GPUML_ERR_ARG, full_id, "%s has no columns", what);
  if (!x) return gm_fail(GPUML_ERR_ARG, full_id, "%s must not be NULL", what);
  if (n > (int64_t)(SIZE_MAX / 8) / d)
    return gm_fail(GPUML_ERR_ARG, full_id, "%s is too large (%lld x %lld)", what,
                   (long long)n, (long long)d);
  return GPUML_OK;
}

gpuml_status gm_check_shape(const gm_matrix *x, const char *what, const char *id) {
  return check_shape(x->values, x->rows, x->cols, what, id);
}

/* Reports the first non-finite value by row and column, 1-based as users count. */
static gpuml_status non_finite(const char *what, const char *id, int64_t at, int64_t n,
                               double v) {
  char full_id[64];
  snprintf(full_id, sizeof full_id, "%s:nonFinite", id);
  return gm_fail(GPUML_ERR_ARG, full_id,
                 "%s contains %s at row %lld, column %lld: remove or impute non-finite values first",
                 what, isnan(v) ? "NA/NaN" : "Inf", (long long)(at % n + 1),
                 (long long)(at / n + 1));
}

gpuml_status gpuml_check_columns(const char *stage, const char *second, int64_t d_second,
                                 const char *first, int64_t d_first) {
  gm_clear_error();
  if (d_second == d_first) return GPUML_OK;
  char id[64];
  snprintf(id, sizeof id, "%s:dimMismatch", stage ? stage : "gpuml");
  return gm_fail(GPUML_ERR_ARG, id, "%s has %lld column%s but %s has %lld: both must hold the same variables",
                 second, (long long)d_second, d_second == 1 ? "" : "s", first, (long long)d_first);
}

/* The index of the first non-finite value of x (count values), or count. */
static int64_t first_non_finite(const gm_matrix *x, int64_t count) {
  int64_t first = count;
  const double *xd = x->dtype == GM_F64 ? x->values : NULL;
  const float *xf = x->dtype == GM_F32 ? x->values : NULL;
#pragma omp parallel for reduction(min : first) schedule(static) if (count > GM_PARALLEL_SCAN)
  for (int64_t i = 0; i < count; i++)
    if (!isfinite(xd ? xd[i] : (double)xf[i]) && i < first) first = i;
  return first;
}

gpuml_status gm_check_values(const gm_matrix *x, const char *what, const char *id) {
  gpuml_status st = check_shape(x->values, x->rows, x->cols, what, id);
  if (st) return st;
  const int64_t count = x->rows * x->cols, first = first_non_finite(x, count);
  if (first == count) return GPUML_OK;
  const double v = x->dtype == GM_F32 ? ((const float *)x->values)[first]
                                      : ((const double *)x->values)[first];
  return non_finite(what, id, first, x->rows, v);
}

gpuml_status gm_check_matrix(const double *x, int64_t n, int64_t d, const char *what,
                             const char *id) {
  const gm_matrix m = {x, n, d, GM_F64};
  return gm_check_values(&m, what, id);
}

void *gm_alloc(size_t count, size_t size) {
  if (count == 0) count = 1;
  if (size && count > SIZE_MAX / size) return NULL;
  return malloc(count * size);
}

/* The finiteness test of gm_pack_rows and gm_rows_non_finite, on the bits: a value is
 * Inf or NaN exactly when its exponent bits are all ones, and then adding the exponent's
 * lowest bit to them carries into the sign bit. OR-ing (bits & exponent) + lowest over
 * a column therefore leaves the sign bit set exactly when one of its values is not
 * finite: integer operations only, exact whatever the floating-point flags (no isfinite
 * for -ffinite-math-only to fold away), one OR per value that the compiler vectorises
 * (omp simd; the AVX-512 and AVX2 clones), checked once per column. The values are moved
 * as bits, so the copy is the plain copy's, NaN payloads (R's NA) included.
 * column_f64, column_f32: n values (words of the type's width, with its exponent mask and
 * the mask's lowest bit) from src to dst (dst NULL: read only); nonzero when one of them
 * is not finite. */
#define GM_COLUMN_PASS(name, word, exponent, lowest)                                   \
  GM_VECTOR_CLONES                                                                     \
  static int name(const char *restrict src, char *restrict dst, int64_t n) {          \
    word seen = 0;                                                                     \
    if (dst) {                                                                         \
      _Pragma("omp simd reduction(| : seen)") for (int64_t i = 0; i < n; i++) {        \
        word u;                                                                        \
        memcpy(&u, src + sizeof u * (size_t)i, sizeof u);                              \
        memcpy(dst + sizeof u * (size_t)i, &u, sizeof u);                              \
        seen |= (word)((u & (exponent)) + (lowest));                                   \
      }                                                                                \
    } else {                                                                           \
      _Pragma("omp simd reduction(| : seen)") for (int64_t i = 0; i < n; i++) {        \
        word u;                                                                        \
        memcpy(&u, src + sizeof u * (size_t)i, sizeof u);                              \
        seen |= (word)((u & (exponent)) + (lowest));                                   \
      }                                                                                \
    }                                                                                  \
    return (int)(seen >> (8 * sizeof seen - 1));                                       \
  }
GM_COLUMN_PASS(column_f64, uint64_t, 0x7ff0000000000000ULL, 0x0010000000000000ULL)
GM_COLUMN_PASS(column_f32, uint32_t, 0x7f800000U, 0x00800000U)
#undef GM_COLUMN_PASS

/* Rows r0 .. r0 + rn - 1 of every column, copied into out (rn x d) when out is given,
 * tested for finiteness when item is 8 or 4 (a plain copy for other sizes). */
static int rows_pass(const void *x, int64_t ld, int64_t r0, int64_t rn, int64_t d,
                     size_t item, void *out) {
  const char *src = x;
  char *dst = out;
  int seen = 0;
#pragma omp parallel for schedule(static) reduction(| : seen) if ((size_t)rn * (size_t)d * item > ((size_t)1 << 20))
  for (int64_t j = 0; j < d; j++) {
    const char *from = src + ((size_t)j * (size_t)ld + (size_t)r0) * item;
    char *to = dst ? dst + (size_t)j * (size_t)rn * item : NULL;
    if (item == 8) seen |= column_f64(from, to, rn);
    else if (item == 4) seen |= column_f32(from, to, rn);
    else if (to) memcpy(to, from, (size_t)rn * item);
  }
  return seen;
}

int gm_pack_rows(const void *x, int64_t ld, int64_t r0, int64_t rn, int64_t d, size_t item,
                 void *out) {
  return rows_pass(x, ld, r0, rn, d, item, out);
}

int gm_rows_non_finite(const void *x, int64_t ld, int64_t r0, int64_t rn, int64_t d,
                       size_t item) {
  return rows_pass(x, ld, r0, rn, d, item, NULL);
}

void gm_copy_parallel(void *dst, const void *src, size_t bytes, int threads) {
  const size_t piece = (size_t)1 << 20;
  const int64_t pieces = (int64_t)((bytes + piece - 1) / piece);
  (void)threads;
#pragma omp parallel for schedule(static) num_threads(threads) if (pieces > 1 && threads > 1)
  for (int64_t p = 0; p < pieces; p++) {
    const size_t at = (size_t)p * piece, len = bytes - at < piece ? bytes - at : piece;
    memcpy((char *)dst + at, (const char *)src + at, len);
  }
}

static void touch_pages(void *p, size_t bytes, int threads) {
  const size_t page = 4096;
  char *c = (char *)p;
  const int64_t pages = (int64_t)((bytes + page - 1) / page);
  (void)threads;
#pragma omp parallel for schedule(static) num_threads(threads) if (pages > 256 && threads > 1)
  for (int64_t i = 0; i < pages; i++) c[(size_t)i * page] = 0;
  if (bytes) c[bytes - 1] = 0; /* the last page, where p does not start one */
}

void gm_pages_init(gm_pages_touched *t) { memset(t, 0, sizeof *t); }

void gm_pages_add(gm_pages_touched *t, void *p, size_t bytes) {
  if (p && bytes && !t->running && t->count < GM_PAGES_RANGES) {
    t->range[t->count].p = p;
    t->range[t->count++].bytes = bytes;
  }
}

static void *pages_thread(void *arg) {
  gm_pages_touched *t = (gm_pages_touched *)arg;
  for (int i = 0; i < t->count; i++) touch_pages(t->range[i].p, t->range[i].bytes, t->threads);
  return NULL;
}

void gm_pages_start(gm_pages_touched *t, int threads) {
  const char *knob = getenv("GPUML_TOUCH_PAGES"); /* 0: none, for measurements */
  if (!t->count || t->running || (knob && strcmp(knob, "0") == 0)) return;
  t->threads = threads > 0 ? threads : 1;
  t->running = pthread_create(&t->thread, NULL, pages_thread, t) == 0;
}

void gm_pages_wait(gm_pages_touched *t) {
  if (t->running) pthread_join(t->thread, NULL);
  t->running = 0;
  t->count = 0;
}

gpuml_status gm_widen(const float *x, int64_t count, double **out) {
  *out = NULL;
  if (!x) return GPUML_OK;
  double *w = gm_alloc((size_t)count, sizeof *w);
  if (!w)
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for a double copy",
                   (double)count * 8 / 1e6);
  for (int64_t i = 0; i < count; i++) w[i] = x[i];
  *out = w;
  return GPUML_OK;
}

void gm_progress(const gpuml_options *opt, const char *stage, int64_t done, int64_t total) {
  if (opt->verbose > 0 && opt->progress) opt->progress(opt->callback_ctx, stage, done, total);
}

int gm_interrupted(const gpuml_options *opt) {
  return opt->interrupted ? opt->interrupted(opt->callback_ctx) != 0 : 0;
}

int gm_threads(const gpuml_options *opt) {
#ifdef _OPENMP
  return opt->threads > 0 ? opt->threads : omp_get_max_threads();
#else
  (void)opt;
  return 1;
#endif
}

double gm_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int gm_trace_on(void) {
  static int on = -1; /* read once; a race writes the same value */
  if (on < 0) {
    const char *v = getenv("GPUML_TRACE");
    on = v && strcmp(v, "1") == 0;
  }
  return on;
}

void gm_trace(const char *step) {
  if (!gm_trace_on()) return;
  static _Thread_local double last = 0;
  const double now = gm_seconds();
  fprintf(stderr, "gpuml trace: %-40s %9.3f ms\n", step, last > 0 ? (now - last) * 1e3 : 0.0);
  last = now;
}

int gm_thread_id(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int gm_is_calling_thread(void) { return gm_thread_id() == 0; }
