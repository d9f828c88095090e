/* The parity harness of the C tests: a test program runs its table of cases on every
 * backend in one process (the CPU always; CUDA when it was built and a device is
 * present) and compares each result with a reference (brute force, or the CPU
 * backend's answer) at the case's stated tolerance. A backend that was built but has no
 * device here counts as skipped, so the final line says what did not run; a backend not
 * compiled in is left out.
 *
 * Environment:
 *   GPUML_TEST_BACKENDS   "cpu", "cuda" or "cpu,cuda" (default: both); a backend named
 *                         here that cannot run is a failure, not a skip (for the GPU
 *                         machine, where CUDA must run)
 *   GPUML_TEST_BACKEND    the older single-backend form, the same as GPUML_TEST_BACKENDS
 *   GPUML_TEST_PRECISION  "auto" (default), "double" or "single" */
#ifndef GPUML_HARNESS_H
#define GPUML_HARNESS_H
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gpuml.h"

typedef struct {
  gpuml_backend id;
  const char *name;
  int wanted;    /* listed (explicitly or by default) */
  int required;  /* listed explicitly: it must run */
  int usable;    /* compiled in, and a device present for CUDA */
  const char *why; /* why not usable */
} harness_backend;

static harness_backend harness_list[2];
static gpuml_precision harness_precision = GPUML_PRECISION_AUTO;
static char harness_why[256];

/* Reads the environment; call once at the start of main(). */
static inline void harness_init(void) {
  const char *list = getenv("GPUML_TEST_BACKENDS");
  if (!list || !*list) list = getenv("GPUML_TEST_BACKEND");
  const int explicit_list = list && *list && strcmp(list, "auto") != 0;
  gpuml_info info;
  gpuml_backend_info(&info);
  snprintf(harness_why, sizeof harness_why, "%s", info.cuda_message);
  harness_list[0] = (harness_backend){GPUML_BACKEND_CPU, "cpu", 1, 0, 1, ""};
  /* a backend not compiled in is not in the list (unless named: then it must run) */
  harness_list[1] = (harness_backend){GPUML_BACKEND_CUDA, "cuda", info.cuda_compiled, 0,
                                      info.cuda_compiled && info.device_count > 0, harness_why};
  if (explicit_list) {
    harness_list[0].wanted = strstr(list, "cpu") != NULL;
    harness_list[1].wanted = strstr(list, "cuda") != NULL;
    harness_list[0].required = harness_list[0].wanted;
    harness_list[1].required = harness_list[1].wanted;
  }
  const char *precision = getenv("GPUML_TEST_PRECISION");
  if (precision && *precision && gpuml_parse_precision(precision, &harness_precision) != GPUML_OK) {
    fprintf(stderr, "GPUML_TEST_PRECISION: %s\n", gpuml_last_error());
    exit(2);
  }
}

/* Options for a run on backend b at the harness precision. */
static inline gpuml_options harness_options(gpuml_backend b) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = b;
  opt.precision = harness_precision;
  return opt;
}

/* Whether case `name` runs on backend b: counts a skip (or a failure, for a required
 * backend) when it cannot. */
static inline int harness_runs(const harness_backend *b, const char *name) {
  if (!b->wanted) return 0;
  if (b->usable) return 1;
  if (b->required)
    CHECK(0, "%s on %s: the backend was asked for but cannot run (%s)", name, b->name, b->why);
  else
    SKIP("%s on %s: %s", name, b->name, b->why);
  return 0;
}

#define HARNESS_FOR_EACH_BACKEND(b) \
  for (const harness_backend *b = harness_list; b < harness_list + 2; b++)

#endif
