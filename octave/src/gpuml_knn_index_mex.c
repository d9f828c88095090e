/*
 * gpuml_knn_index_mex: MEX gateway to the kNN index (gpuml_knn_index_*). Called by
 * gpu_knn_index.m, gpu_knn.m and gpu_knn_free.m.
 *
 *   [id, info] = gpuml_knn_index_mex ("build", X, backend, verbose, precision, metric)
 *   [idx, dist, backend_used, rechecked] = gpuml_knn_index_mex ("search", id, query, k,
 *                                                               verbose)
 *   info = gpuml_knn_index_mex ("info", id)
 *   freed = gpuml_knn_index_mex ("free", id)
 *   ids = gpuml_knn_index_mex ("list")
 *
 * X and query: double matrices; query [] (0 x 0) searches the indexed data against itself.
 * id: uint64 scalar. info: struct (rows, cols, metric, backend, device, precision,
 * host_bytes, device_bytes, build_seconds). idx: m x k double, 1-based. freed: true when
 * the id named a live index. ids: the live ids, a column (for the tests).
 *
 * Octave holds no C pointers, so the indexes live in a table of this MEX file and Octave
 * holds their ids. Clearing the MEX file (clear all, clear functions) frees them all, and
 * their device memory with them; an id used afterwards finds nothing and is an error.
 */
#include <stdlib.h>
#include "gpuml_mex.h"

typedef struct {
  uint64_t id;
  gpuml_knn_index *ix;
} live_index;

static live_index *table = NULL;
static size_t table_count = 0, table_capacity = 0;
/* Ids are never reused, across loads of this file too: the first id of a load is the
 * wall-clock time in microseconds, and each earlier id cost more than a microsecond, so a
 * stale id kept in Octave can only miss, never name another index. Stays below 2^53 (so
 * the id survives a trip through a double) until the year 2255. */
static uint64_t next_id = 0;

static void free_all(void) {
  for (size_t i = 0; i < table_count; i++) gpuml_knn_index_free(table[i].ix);
  free(table);
  table = NULL;
  table_count = table_capacity = 0;
  gpuml_shutdown(); /* what gpuml_mex_options registers elsewhere; after the indexes */
}

/* Options for one call; the exit handler replaces the one gpuml_mex_options registers. */
static void call_options(gpuml_options *opt, const mxArray *backend, const mxArray *verbose,
                         gpuml_mex_progress_state *ps) {
  gpuml_mex_options(opt, backend, verbose, ps);
  mexAtExit(free_all);
}

static uint64_t id_of(const mxArray *a) {
  if (!(mxIsNumeric(a) && !mxIsComplex(a) && mxGetNumberOfElements(a) == 1))
    mexErrMsgIdAndTxt("gpuml:knn:badIndex", "not a kNN index: build one with gpu_knn_index");
  if (mxIsUint64(a)) return *(const uint64_t *)mxGetData(a);
  const double v = mxGetScalar(a);
  return v >= 1 && v < 18446744073709551616.0 ? (uint64_t)v : 0;
}

/* The slot of a live id, or table_count. */
static size_t slot_of(uint64_t id) {
  size_t i = 0;
  while (i < table_count && table[i].id != id) i++;
  return i;
}

static gpuml_knn_index *live(const mxArray *a) {
  const size_t i = slot_of(id_of(a));
  if (i == table_count)
    mexErrMsgIdAndTxt("gpuml:knn:badIndex",
                      "this kNN index no longer exists (freed with gpu_knn_free, or the MEX "
                      "file was cleared): build it again with gpu_knn_index");
  return table[i].ix;
}

static mxArray *id_array(uint64_t id) {
  mxArray *a = mxCreateNumericMatrix(1, 1, mxUINT64_CLASS, mxREAL);
  *(uint64_t *)mxGetData(a) = id;
  return a;
}

static mxArray *info_struct(const gpuml_knn_index *ix) {
  gpuml_knn_index_info info;
  gpuml_status st = gpuml_knn_index_describe(ix, &info);
  if (st) gpuml_mex_raise(st);
  static const char *fields[] = {"rows",      "cols",       "metric",       "backend",
                                 "device",    "precision",  "host_bytes",   "device_bytes",
                                 "build_seconds"};
  mxArray *s = mxCreateStructMatrix(1, 1, (int)(sizeof fields / sizeof fields[0]), fields);
  mxSetField(s, 0, "rows", mxCreateDoubleScalar((double)info.rows));
  mxSetField(s, 0, "cols", mxCreateDoubleScalar((double)info.cols));
  mxSetField(s, 0, "metric", mxCreateString(gpuml_metric_name(info.metric)));
  mxSetField(s, 0, "backend", mxCreateString(gpuml_backend_name(info.run.backend)));
  mxSetField(s, 0, "device", mxCreateDoubleScalar(info.run.device));
  /* the precision the arithmetic runs in ("auto" gives the double-precision answer) */
  mxSetField(s, 0, "precision", mxCreateString(info.run.precision == GPUML_PRECISION_SINGLE
                                                   ? "single" : "double"));
  mxSetField(s, 0, "host_bytes", mxCreateDoubleScalar((double)info.host_bytes));
  mxSetField(s, 0, "device_bytes", mxCreateDoubleScalar((double)info.device_bytes));
  mxSetField(s, 0, "build_seconds", mxCreateDoubleScalar(info.run.seconds));
  return s;
}

static void build(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 6 || nlhs > 2)
    mexErrMsgIdAndTxt("gpuml:knn:nargs", "usage: [id, info] = gpuml_knn_index_mex (\"build\", "
                      "X, backend, verbose, precision, metric); call gpu_knn_index instead");
  const mxArray *X = prhs[1];
  gpuml_mex_check_matrix(X, "data", "knn");
  if (!mxIsDouble(X))
    mexErrMsgIdAndTxt("gpuml:knn:badType", "data must be a double matrix for an index");
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  call_options(&opt, prhs[2], prhs[3], &ps);
  opt.precision = gpuml_mex_precision(prhs[4]);
  opt.metric = gpuml_mex_metric(prhs[5]);
  /* Room in the table first, so that a built index always finds its slot. */
  if (table_count == table_capacity) {
    const size_t cap = table_capacity ? 2 * table_capacity : 8;
    live_index *grown = (live_index *)realloc(table, cap * sizeof *grown);
    if (!grown) mexErrMsgIdAndTxt("gpuml:noMemory", "cannot grow the table of kNN indexes");
    table = grown;
    table_capacity = cap;
  }
  gpuml_knn_index *ix = NULL;
  gpuml_status st = gpuml_knn_index_build((const double *)gpuml_mex_data(X), (int64_t)mxGetM(X),
                                          (int64_t)mxGetN(X), &opt, &ix);
  if (st) gpuml_mex_raise(st);
  if (next_id == 0) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    next_id = (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
  }
  const uint64_t id = next_id++;
  table[table_count++] = (live_index){id, ix};
  plhs[0] = id_array(id);
  if (nlhs > 1) plhs[1] = info_struct(ix);
}

static void search(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 5 || nlhs > 4)
    mexErrMsgIdAndTxt("gpuml:knn:nargs", "usage: [idx, dist, backend, rechecked] = "
                      "gpuml_knn_index_mex (\"search\", id, query, k, verbose); call gpu_knn "
                      "instead");
  const gpuml_knn_index *ix = live(prhs[1]);
  const mxArray *query = prhs[2];
  const int self = mxGetM(query) == 0 && mxGetN(query) == 0 && mxIsNumeric(query);
  gpuml_knn_index_info info;
  gpuml_status st = gpuml_knn_index_describe(ix, &info);
  if (st) gpuml_mex_raise(st);
  if (!self) {
    gpuml_mex_check_matrix(query, "query", "knn");
    if (!mxIsDouble(query))
      mexErrMsgIdAndTxt("gpuml:knn:badType", "query must be a double matrix for an index");
    if ((st = gpuml_check_columns("knn", "query", (int64_t)mxGetN(query), "the index",
                                  info.cols)))
      gpuml_mex_raise(st);
  }
  const int64_t k = gpuml_mex_k(prhs[3]);
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  /* the index's backend, precision and metric; the call's verbosity and callbacks */
  call_options(&opt, NULL, prhs[4], &ps);

  const int64_t m = self ? info.rows : (int64_t)mxGetM(query);
  /* The core refuses a bad k before the m x k outputs are allocated. */
  if ((st = gpuml_knn_index_check(ix, self ? -1 : m, k, &opt))) gpuml_mex_raise(st);
  mxArray *dist = mxCreateDoubleMatrix((mwSize)m, (mwSize)k, mxREAL);
  int64_t *index = (int64_t *)mxMalloc((size_t)(m * k) * sizeof *index);
  gpuml_knn_result result;
  st = gpuml_knn_index_search(ix, self ? NULL : (const double *)gpuml_mex_data(query), m, k,
                              index, mxGetPr(dist), &opt, &result);
  if (st) {
    mxDestroyArray(dist);
    gpuml_mex_raise(st); /* index is mxMalloc'ed: Octave frees it */
  }
  mxArray *idx = gpuml_mex_indices(index, m, k);
  mxFree(index);
  plhs[0] = idx;
  if (nlhs > 1) plhs[1] = dist;
  else mxDestroyArray(dist);
  if (nlhs > 2) plhs[2] = mxCreateString(gpuml_backend_name(result.run.backend));
  if (nlhs > 3) plhs[3] = mxCreateDoubleScalar((double)result.rechecked);
}

static void free_one(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  if (nrhs != 2 || nlhs > 1)
    mexErrMsgIdAndTxt("gpuml:knn:nargs", "usage: freed = gpuml_knn_index_mex (\"free\", id); "
                      "call gpu_knn_free instead");
  const size_t i = slot_of(id_of(prhs[1]));
  const int alive = i < table_count;
  if (alive) {
    gpuml_knn_index_free(table[i].ix);
    table[i] = table[--table_count];
  }
  plhs[0] = mxCreateLogicalScalar(alive);
}

static void list(int nlhs, mxArray *plhs[], int nrhs) {
  if (nrhs != 1 || nlhs > 1)
    mexErrMsgIdAndTxt("gpuml:knn:nargs", "usage: ids = gpuml_knn_index_mex (\"list\")");
  mxArray *ids = mxCreateNumericMatrix((mwSize)table_count, 1, mxUINT64_CLASS, mxREAL);
  uint64_t *p = (uint64_t *)mxGetData(ids);
  for (size_t i = 0; i < table_count; i++) p[i] = table[i].id;
  plhs[0] = ids;
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  mexAtExit(free_all);
  char *command = nrhs >= 1 && mxIsChar(prhs[0]) ? mxArrayToString(prhs[0]) : NULL;
  if (!command)
    mexErrMsgIdAndTxt("gpuml:knn:nargs", "usage: gpuml_knn_index_mex (\"build\" | \"search\" | "
                      "\"info\" | \"free\" | \"list\", ...)");
  if (!strcmp(command, "build")) {
    build(nlhs, plhs, nrhs, prhs);
  } else if (!strcmp(command, "search")) {
    search(nlhs, plhs, nrhs, prhs);
  } else if (!strcmp(command, "info")) {
    if (nrhs != 2 || nlhs > 1)
      mexErrMsgIdAndTxt("gpuml:knn:nargs", "usage: info = gpuml_knn_index_mex (\"info\", id)");
    plhs[0] = info_struct(live(prhs[1]));
  } else if (!strcmp(command, "free")) {
    free_one(nlhs, plhs, nrhs, prhs);
  } else if (!strcmp(command, "list")) {
    list(nlhs, plhs, nrhs);
  } else {
    mexErrMsgIdAndTxt("gpuml:knn:nargs", "gpuml_knn_index_mex: unknown command \"%s\"", command);
  }
  mxFree(command);
}

