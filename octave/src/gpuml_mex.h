/*
 * gpuml_mex.h: what the Octave MEX gateways share. Type conversion between mxArrays
 * and the C API, error reporting with Octave error ids, and the progress and
 * interrupt callbacks. No argument validation beyond what type conversion needs:
 * the core checks values (NaN/Inf, k, sizes, backend names) and says what is wrong.
 *
 * Everything here is static: each gateway is compiled on its own into one .mex file.
 */
#ifndef GPUML_OCTAVE_MEX_H
#define GPUML_OCTAVE_MEX_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mex.h"
#include "gpuml.h"

/* Octave exports its interrupt state to C (quit.h). MATLAB has no documented
 * equivalent, so there the interrupt callback is left out. */
#if !defined(MATLAB_MEX_FILE)
#include "quit.h"
#define GPUML_MEX_CAN_POLL_INTERRUPT 1
#else
#define GPUML_MEX_CAN_POLL_INTERRUPT 0
#endif

/* Raises the core's last error as an Octave error with id "gpuml:" + its id. When the
 * core stopped because the user pressed Ctrl-C, Octave's own interrupt is raised
 * instead (the core has freed everything by then), as for any interrupted command. */
static inline void gpuml_mex_raise(gpuml_status status) {
#if GPUML_MEX_CAN_POLL_INTERRUPT
  if (status == GPUML_ERR_INTERRUPTED) OCTAVE_QUIT;
#endif
  const char *id = gpuml_last_error_id();
  const char *msg = gpuml_last_error();
  char full_id[96];
  snprintf(full_id, sizeof full_id, "gpuml:%s", id && *id ? id : "error");
  mexErrMsgIdAndTxt(full_id, "%s", msg && *msg ? msg : gpuml_status_string(status));
}

/* A float matrix the core can take: real, full, 2-D, double or single. Anything else
 * is a type error of the glue (integer classes are converted by the .m wrappers). */
static inline void gpuml_mex_check_matrix(const mxArray *a, const char *what, const char *fn) {
  char id[64];
  snprintf(id, sizeof id, "gpuml:%s:badType", fn);
  if (!mxIsDouble(a) && !mxIsSingle(a))
    mexErrMsgIdAndTxt(id, "%s must be a double or single matrix, not %s", what,
                      mxGetClassName(a));
  if (mxIsComplex(a))
    mexErrMsgIdAndTxt(id, "%s must be real: complex values are not supported", what);
  if (mxIsSparse(a))
    mexErrMsgIdAndTxt(id, "%s must be a full matrix: convert it with full() first", what);
  if (mxGetNumberOfDimensions(a) > 2)
    mexErrMsgIdAndTxt(id, "%s must be a 2-D matrix (one row per point), not an N-D array",
                      what);
}

/* The data pointer for the core. An empty matrix may have no storage; a non-NULL
 * pointer lets the core give its own message ("x has no rows"). */
static inline const void *gpuml_mex_data(const mxArray *a) {
  static const double empty_placeholder = 0;
  const void *p = mxGetData(a);
  return p ? p : (const void *)&empty_placeholder;
}

/* A word argument (backend, precision, metric) as a C string to mxFree; `choices`
 * completes the message for something that is not one string. */
static inline char *gpuml_mex_word(const mxArray *a, const char *what, const char *choices) {
  if (!mxIsChar(a) || mxGetM(a) > 1)
    mexErrMsgIdAndTxt("gpuml:badOption", "%s must be a string: %s", what, choices);
  char *name = mxArrayToString(a);
  if (!name) mexErrMsgIdAndTxt("gpuml:noMemory", "cannot read the %s name", what);
  return name;
}

/* "cpu", "cuda", "auto" (any case) -> enum, through the core's parser. */
static inline gpuml_backend gpuml_mex_backend(const mxArray *a) {
  char *name = gpuml_mex_word(a, "backend", "\"auto\", \"cpu\" or \"cuda\"");
  gpuml_backend b = GPUML_BACKEND_AUTO;
  gpuml_status st = gpuml_parse_backend(name, &b);
  mxFree(name);
  if (st) gpuml_mex_raise(st);
  return b;
}

static inline gpuml_precision gpuml_mex_precision(const mxArray *a) {
  char *name = gpuml_mex_word(a, "precision", "\"auto\", \"double\" or \"single\"");
  gpuml_precision p = GPUML_PRECISION_AUTO;
  gpuml_status st = gpuml_parse_precision(name, &p);
  mxFree(name);
  if (st) gpuml_mex_raise(st);
  return p;
}

/* The device list: [] (none), CUDA device numbers, or the string "all"; the core checks
 * the values. */
static inline void gpuml_mex_devices(gpuml_options *opt, const mxArray *a) {
  gpuml_status st = GPUML_OK;
  if (mxIsChar(a)) {
    char *word = gpuml_mex_word(a, "devices", "device numbers or \"all\"");
    st = gpuml_options_set_devices_word(opt, word);
    mxFree(word);
  } else if (mxIsDouble(a) && !mxIsComplex(a)) {
    if (!mxIsEmpty(a))
      st = gpuml_options_set_devices(opt, mxGetPr(a), (int64_t)mxGetNumberOfElements(a));
  } else {
    mexErrMsgIdAndTxt("gpuml:badOption", "devices must be [], device numbers or \"all\"");
  }
  if (st) gpuml_mex_raise(st);
}

/* "euclidean", "cosine" (any case) -> enum, through the core's parser. */
static inline gpuml_metric gpuml_mex_metric(const mxArray *a) {
  char *name = gpuml_mex_word(a, "metric", "\"euclidean\" or \"cosine\"");
  gpuml_metric m = GPUML_METRIC_EUCLIDEAN;
  gpuml_status st = gpuml_parse_metric(name, &m);
  mxFree(name);
  if (st) gpuml_mex_raise(st);
  return m;
}

/* The core's 0-based m x k neighbour indices as Octave's 1-based double matrix. */
static inline mxArray *gpuml_mex_indices(const int64_t *index, int64_t m, int64_t k) {
  mxArray *idx = mxCreateDoubleMatrix((mwSize)m, (mwSize)k, mxREAL);
  double *ip = mxGetPr(idx);
  for (int64_t i = 0; i < m * k; i++) ip[i] = (double)(index[i] + 1);
  return idx;
}

/* k as the core's int64_t. Only type conversion happens here: a value that is not a
 * whole number cannot be converted; range checks (k >= 1, k <= n) are the core's. */
static inline int64_t gpuml_mex_k(const mxArray *a) {
  if (!(mxIsNumeric(a) || mxIsLogical(a)) || mxIsComplex(a) || mxGetNumberOfElements(a) != 1)
    mexErrMsgIdAndTxt("gpuml:knn:badK", "k must be a single whole number");
  double k = mxGetScalar(a);
  if (isnan(k) || k != floor(k))
    mexErrMsgIdAndTxt("gpuml:knn:badK", "k = %g must be a whole number", k);
  if (k >= 9.2e18) return INT64_MAX;
  if (k <= -9.2e18) return INT64_MIN;
  return (int64_t)k;
}

static inline int gpuml_mex_flag(const mxArray *a, const char *what) {
  if (!(mxIsNumeric(a) || mxIsLogical(a)) || mxGetNumberOfElements(a) != 1 || mxIsComplex(a))
    mexErrMsgIdAndTxt("gpuml:badOption", "%s must be a logical scalar (true or false)", what);
  return mxGetScalar(a) != 0;
}

/* The seed of a call (gpuml_seed.m gives one): a number the core checks. */
static inline void gpuml_mex_seed(gpuml_options *opt, const mxArray *a) {
  if (!(mxIsNumeric(a) || mxIsLogical(a)) || mxGetNumberOfElements(a) != 1)
    mexErrMsgIdAndTxt("gpuml:badSeed", "seed must be a single whole number");
  gpuml_status st = gpuml_options_set_seed(opt, mxGetScalar(a));
  if (st) gpuml_mex_raise(st);
}

/* ---- Callbacks ---------------------------------------------------------------- */

typedef struct {
  double last_print; /* seconds, monotonic */
} gpuml_mex_progress_state;

static inline double gpuml_mex_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int gpuml_mex_interrupted(void *ctx) {
  (void)ctx;
#if GPUML_MEX_CAN_POLL_INTERRUPT
  /* Octave's SIGINT handler (run in its signal-watcher thread) increments
   * octave_interrupt_state; other signals only set octave_signal_caught. Reading
   * it is all we do here: nothing may throw through the core. */
  return *(volatile sig_atomic_t *)&octave_interrupt_state > 0;
#else
  return 0;
#endif
}

/* Prints at most once a second, and always the last step. */
static inline void gpuml_mex_progress(void *ctx, const char *stage, int64_t done, int64_t total) {
  gpuml_mex_progress_state *s = (gpuml_mex_progress_state *)ctx;
  double now = gpuml_mex_now();
  if (done < total && now - s->last_print < 1.0) return;
  s->last_print = now;
  mexPrintf("gpuml %s: %lld / %lld (%.0f%%)\n", stage, (long long)done, (long long)total,
            total > 0 ? 100.0 * (double)done / (double)total : 100.0);
  /* Flushing evaluates Octave code; with an interrupt pending that could throw
   * through the core, so it is skipped then (the core stops at its next check). */
  if (!gpuml_mex_interrupted(NULL)) {
    mxArray *fid = mxCreateDoubleScalar(1);
    mexCallMATLAB(0, NULL, 1, &fid, "fflush");
    mxDestroyArray(fid);
  }
}

/* Sets the parameters of a cell {name, value, name, value, ...} (the options the user
 * gave) by name: numbers and logicals as numbers, strings (or a cell of strings) as
 * words. Raises the core's error for an unknown name or a value of the wrong kind. */
static inline void gpuml_mex_set_params(gpuml_params_kind kind, void *params,
                                        const mxArray *pairs) {
  if (!mxIsCell(pairs) || mxGetNumberOfElements(pairs) % 2)
    mexErrMsgIdAndTxt("gpuml:internal", "the parameters must come as name/value pairs");
  const size_t count = mxGetNumberOfElements(pairs);
  for (size_t i = 0; i < count; i += 2) {
    char *name = mxArrayToString(mxGetCell(pairs, i));
    const mxArray *v = mxGetCell(pairs, i + 1);
    if (!name) mexErrMsgIdAndTxt("gpuml:internal", "a parameter name must be a string");
    gpuml_status st;
    if (mxIsChar(v) || mxIsCell(v)) {
      const size_t nv = mxIsChar(v) ? 1 : mxGetNumberOfElements(v);
      const char **words = (const char **)mxMalloc((nv ? nv : 1) * sizeof(char *));
      for (size_t j = 0; j < nv; j++) {
        const mxArray *w = mxIsChar(v) ? v : mxGetCell(v, j);
        words[j] = w && mxIsChar(w) ? mxArrayToString(w) : NULL;
        if (!words[j]) mexErrMsgIdAndTxt("gpuml:badOption", "%s must hold strings", name);
      }
      st = gpuml_params_set_strings(kind, params, name, words, (int64_t)nv);
    } else if ((mxIsNumeric(v) || mxIsLogical(v)) && !mxIsComplex(v)) {
      const size_t nv = mxGetNumberOfElements(v);
      mxArray *as_double = NULL;  /* integer classes through Octave's own conversion */
      if (!mxIsDouble(v) && !mxIsLogical(v)) {
        mxArray *arg = (mxArray *)v;
        mexCallMATLAB(1, &as_double, 1, &arg, "double");
      }
      double *d = (double *)mxMalloc((nv ? nv : 1) * sizeof(double));
      for (size_t j = 0; j < nv; j++)
        d[j] = as_double ? mxGetPr(as_double)[j]
               : mxIsLogical(v) ? (mxGetLogicals(v)[j] ? 1 : 0) : mxGetPr(v)[j];
      if (as_double) mxDestroyArray(as_double);
      st = gpuml_params_set_numbers(kind, params, name, d, (int64_t)nv);
    } else {
      mexErrMsgIdAndTxt("gpuml:badOption", "%s must be a number, a logical or a string", name);
      return;
    }
    if (st) gpuml_mex_raise(st);
  }
}

/* Options for one call: backend from args (NULL: the default), progress when verbose,
 * Ctrl-C polling. */
static inline void gpuml_mex_options(gpuml_options *opt, const mxArray *backend,
                              const mxArray *verbose, gpuml_mex_progress_state *ps) {
  gpuml_options_init(opt);
  mexAtExit(gpuml_shutdown); /* the GPU contexts this MEX file kept go when it is cleared */
  if (backend) opt->backend = gpuml_mex_backend(backend);
  opt->verbose = gpuml_mex_flag(verbose, "verbose");
  ps->last_print = gpuml_mex_now();
  opt->progress = gpuml_mex_progress;
  opt->interrupted = GPUML_MEX_CAN_POLL_INTERRUPT ? gpuml_mex_interrupted : NULL;
  opt->callback_ctx = ps;
}

/* The arguments of a kNN gateway, args[0..6] = data, query, k, backend, verbose,
 * precision, metric: data and query float matrices of one class with the same columns
 * (query [] (0 x 0): the data against itself; 1 is returned then, else 0), *k, and *opt
 * for the call (gpuml_mex_options). */
static inline int gpuml_mex_knn_args(const mxArray *const args[], int64_t *k, gpuml_options *opt,
                                     gpuml_mex_progress_state *ps) {
  const mxArray *data = args[0], *query = args[1];
  gpuml_mex_check_matrix(data, "data", "knn");
  const int self = mxGetM(query) == 0 && mxGetN(query) == 0 && mxIsNumeric(query);
  if (!self) {
    gpuml_mex_check_matrix(query, "query", "knn");
    if (mxIsSingle(data) != mxIsSingle(query))
      mexErrMsgIdAndTxt("gpuml:knn:badType", "data and query must both be double or both single");
    gpuml_status st = gpuml_check_columns("knn", "query", (int64_t)mxGetN(query), "data",
                                          (int64_t)mxGetN(data));
    if (st) gpuml_mex_raise(st);
  }
  *k = gpuml_mex_k(args[2]);
  gpuml_mex_options(opt, args[3], args[4], ps);
  opt->precision = gpuml_mex_precision(args[5]);
  opt->metric = gpuml_mex_metric(args[6]);
  return self;
}

#endif
