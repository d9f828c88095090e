/* A small assertion counter for the C tests: each CHECK counts as one test, each SKIP as
 * one skipped test. The program ends with "C: N passed, N failed" (", N skipped" when
 * anything was skipped) and exits non-zero on any failure. */
#ifndef GPUML_CHECK_H
#define GPUML_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int check_passed, check_failed, check_skipped;

#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (cond) {                                                        \
      check_passed++;                                                  \
    } else {                                                           \
      check_failed++;                                                  \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
      fprintf(stderr, __VA_ARGS__);                                    \
      fprintf(stderr, "\n");                                           \
    }                                                                  \
  } while (0)

/* A test that could not run here (say, no GPU): counted and reported, never silent. */
#define SKIP(...)                                                      \
  do {                                                                 \
    check_skipped++;                                                   \
    fprintf(stderr, "SKIP %s:%d: ", __FILE__, __LINE__);               \
    fprintf(stderr, __VA_ARGS__);                                      \
    fprintf(stderr, "\n");                                             \
  } while (0)

/* RUN(f): calls the test function f; with GPUML_TEST_TRACE set, says on stderr when it
 * starts and how long it took, so that a run stopped by a time limit shows where. */
static inline double check_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
#define RUN(f)                                                                         \
  do {                                                                                 \
    const int trace_ = getenv("GPUML_TEST_TRACE") != NULL;                             \
    const double t0_ = check_seconds();                                                \
    if (trace_) fprintf(stderr, "run %s\n", #f);                                       \
    f();                                                                               \
    if (trace_) fprintf(stderr, "done %s %.2f s\n", #f, check_seconds() - t0_);        \
  } while (0)

static inline int check_summary(const char *suite) {
  if (check_skipped)
    printf("%s: %d passed, %d failed, %d skipped\n", suite, check_passed, check_failed,
           check_skipped);
  else
    printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
