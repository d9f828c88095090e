/* Shared by the files of core/ (and kernels/): error reporting, argument checks,
 * memory, callbacks, backend choice. Not part of the public API. */
#ifndef GPUML_INTERNAL_H
#define GPUML_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "gpuml.h"

#if defined(__GNUC__)
#define GM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GM_PRINTF(a, b)
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GM_F64 = 0, GM_F32 = 1 } gm_dtype;

/* A caller's column-major matrix: rows points by cols variables, double or float. */
typedef struct {
  const void *values;
  int64_t rows, cols;
  gm_dtype dtype;
} gm_matrix;

/* Returns the status of expr when it is not GPUML_OK: the error path of every step that
 * can fail (C and CUDA sources alike). */
#define GM_TRY(...)                          \
  do {                                       \
    gpuml_status gm_try_ = (__VA_ARGS__);    \
    if (gm_try_) return gm_try_;             \
  } while (0)

/* Records the message and identifier for gpuml_last_error() and returns `status`,
 * so that error paths read `return gm_fail(GPUML_ERR_ARG, "knn:badK", "...", ...)`. */
gpuml_status gm_fail(gpuml_status status, const char *id, const char *fmt, ...) GM_PRINTF(3, 4);
void gm_clear_error(void);

/* Checks a caller's n x d matrix: non-NULL, n >= 1, d >= 1, n * d addressable, every
 * value finite. `what` names it in messages ("data", "query"), `id` prefixes the
 * identifier ("knn" gives "knn:badData"...). */
gpuml_status gm_check_values(const gm_matrix *x, const char *what, const char *id);
gpuml_status gm_check_matrix(const double *x, int64_t n, int64_t d, const char *what,
                             const char *id);
gpuml_status gm_check_options(const gpuml_options *opt);
/* gm_check_values() without the scan of the values: non-NULL, n >= 1, d >= 1, n * d
 * addressable, with the same messages. */
gpuml_status gm_check_shape(const gm_matrix *x, const char *what, const char *id);

/* The status of a backend whose staging saw a non-finite value, stopped before that
 * value reached the device (gm_neighbour_ops.checks_staged_values). Internal: the kNN
 * driver that receives it runs gm_check_values() for the error the user sees, so no
 * entry point returns it (core/include/gpuml.h keeps the code free). */
#define GM_STATUS_NON_FINITE ((gpuml_status)7)

/* malloc of count * size bytes, NULL on overflow or failure (the caller reports it). */
void *gm_alloc(size_t count, size_t size);

/* Rows r0 .. r0 + rn - 1 of a column-major matrix x (leading dimension ld, d columns of
 * `item`-byte values) into out as an rn x d column-major block, by the host's threads
 * (the CUDA backend's page-locked staging), bit for bit. Returns nonzero when one of the
 * values copied is Inf or NaN (double or float, item 8 or 4; other sizes are copied
 * unchecked and give 0): the check rides on the copy, at the plain copy's speed. */
int gm_pack_rows(const void *x, int64_t ld, int64_t r0, int64_t rn, int64_t d, size_t item,
                 void *out);
/* The same rows only read: nonzero when one of them holds Inf or NaN (the staging's test
 * of blocks that go to the device straight from the caller's memory). */
int gm_rows_non_finite(const void *x, int64_t ld, int64_t r0, int64_t rn, int64_t d,
                       size_t item);

/* memcpy on `threads` host threads (above a megabyte): first writes to fresh memory (a
 * large result an R or Octave front end has just allocated) fault their pages in on
 * every thread instead of one. */
void gm_copy_parallel(void *dst, const void *src, size_t bytes, int threads);

/* Results' pages faulted in ahead of their first writes, on a thread of their own while
 * a device works: a result the caller has just allocated (an R vector) is fresh memory,
 * and the fit's copies from the device into it ran at 6-9 GB/s against 31-35 into
 * touched memory (bench/RESULTS.md round 22). gm_pages_add the ranges (up to
 * GM_PAGES_RANGES; NULL or empty ones are left out), gm_pages_start, then gm_pages_wait
 * before the first write into any of them. A zero byte goes into each page: the values
 * are not kept. Without a thread to be had, start does nothing (the first writes fault
 * the pages in as before); GPUML_TOUCH_PAGES=0 likewise, for measurements. */
#define GM_PAGES_RANGES 8
typedef struct gm_pages_touched {
  struct {
    void *p;
    size_t bytes;
  } range[GM_PAGES_RANGES];
  int count, threads, running;
  pthread_t thread;
} gm_pages_touched;
void gm_pages_init(gm_pages_touched *t);
void gm_pages_add(gm_pages_touched *t, void *p, size_t bytes);
void gm_pages_start(gm_pages_touched *t, int threads);
void gm_pages_wait(gm_pages_touched *t);

/* Copies a float matrix into a newly allocated double one (NULL input gives NULL). */
gpuml_status gm_widen(const float *x, int64_t count, double **out);

/* Callbacks: both are no-ops when the glue gave none. */
void gm_progress(const gpuml_options *opt, const char *stage, int64_t done, int64_t total);
int gm_interrupted(const gpuml_options *opt);

/* A monotonic clock in seconds, for the times that results report. */
double gm_seconds(void);

/* GPUML_TRACE=1, a development aid: gm_trace(step) writes the step's name and the wall
 * time since this thread's previous mark to stderr (where a call's time goes; the CUDA
 * backend waits for its stream at each mark while tracing, Context::trace). */
int gm_trace_on(void);
void gm_trace(const char *step);

/* OpenMP threads to use for this call. */
int gm_threads(const gpuml_options *opt);
/* This thread's number in the current OpenMP team (0 outside one), and whether it is
 * the thread that called gpuml (the only one allowed to run the callbacks). */
int gm_thread_id(void);
int gm_is_calling_thread(void);

/* Compiles a vectorised function for AVX-512, AVX2 and plain x86-64, chosen at load
 * time for the machine it runs on (GCC on x86-64; elsewhere one version). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define GM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GM_VECTOR_CLONES
#endif

/* Parses a size: "1073741824", "512M", "2G", "64k" (powers of 1024); 0 when malformed. */
int gm_parse_bytes(const char *s, size_t *out);

/* Device memory budget in bytes: opt->gpu_memory_limit, else GPUML_GPU_MEMORY_LIMIT,
 * else 0 (meaning: the free memory). Sets an error for a malformed variable. */
gpuml_status gm_gpu_memory_limit(const gpuml_options *opt, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif
