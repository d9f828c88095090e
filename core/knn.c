/* gpuml_knn_search(): argument checks, then the kNN of the backend the call resolves to. */
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "metric.h"
#include "shards.h"

gpuml_status gpuml_knn_check(int64_t n, int64_t d, int64_t query_rows, int64_t k,
                             const gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = gm_check_options(opt);
  if (st) return st;
  const int self = query_rows < 0;
  if (n < 1) return gm_fail(GPUML_ERR_ARG, "knn:badData", "data has no rows");
  if (d < 1) return gm_fail(GPUML_ERR_ARG, "knn:badData", "data has no columns");
  if (!self && query_rows < 1) return gm_fail(GPUML_ERR_ARG, "knn:badData", "query has no rows");
  const int64_t available = self ? n - 1 : n;
  if (k < 1)
    return gm_fail(GPUML_ERR_ARG, "knn:badK", "k = %lld must be at least 1", (long long)k);
  if (k > available) {
    if (!self)
      return gm_fail(GPUML_ERR_ARG, "knn:badK", "k = %lld exceeds the %lld data points",
                     (long long)k, (long long)n);
    return gm_fail(GPUML_ERR_ARG, "knn:badK",
                   "k = %lld exceeds the %lld other points (n - 1 when the data is searched against itself)",
                   (long long)k, (long long)available);
  }
  if (d > 0x7fffffff)
    return gm_fail(GPUML_ERR_ARG, "knn:badData", "%lld columns is more than supported",
                   (long long)d);
  const int64_t rows = self ? n : query_rows;
  if (rows > INT64_MAX / k || rows * k > (int64_t)(SIZE_MAX / 8))
    return gm_fail(GPUML_ERR_ARG, "knn:tooLarge", "the %lld x %lld result is too large to hold",
                   (long long)rows, (long long)k);
  return GPUML_OK;
}

/* ---- the values' check ---------------------------------------------------------------
 * Every value of data and query must be finite: gm_check_values() scans them and names
 * the first that is not (column-major order, 1-based row and column, "knn:nonFinite").
 * A backend that checks the values as it stages them for the device
 * (gm_neighbour_ops.checks_staged_values: the CUDA backend's page-locked copies) spares
 * the call that scan, a pass over every value (10-40 ms of a 3 s search at 10^6 x 128).
 * The error stays the same: the arguments are checked first, the scan runs after any
 * failure (a non-finite value is reported first, whatever else is wrong, as when the scan
 * came first), and the backend's report (GM_STATUS_NON_FINITE) is turned into the scan's
 * message. */

/* The values of data, then query (either may be NULL), as gm_check_values() checks them. */
static gpuml_status check_knn_values(const gm_matrix *data, const gm_matrix *query) {
  gpuml_status st = data ? gm_check_values(data, "data", "knn") : GPUML_OK;
  if (!st && query) st = gm_check_values(query, "query", "knn");
  return st;
}

/* Whether a search on backend b with resolved options `used` leaves the scan to the
 * backend's staging: the backend checks what it stages, and it stages the caller's values
 * themselves. Not for the cosine metric: the core reads the rows first to scale them
 * (gm_metric_rows, which takes a row of NaN for a row of zeros, "knn:zeroRow"), so the
 * scan stays before it. The sharded search (core/knn_shards.c) qualifies: each shard's
 * search stages its rows of the data and all the queries. */
static int staged_check(const gm_backend *b, const gpuml_options *used) {
  return b && b->neighbours && b->neighbours->checks_staged_values &&
         used->metric == GPUML_METRIC_EUCLIDEAN;
}

/* The scan where the driver still owes it, after the checks of the arguments (status st):
 * on any failure (a non-finite value is reported first, whatever else is wrong), or when
 * backend b does not check what it stages (*staged = 0). Its time is moved out of the
 * call's seconds (*t0, when given). Returns the scan's error, else st. */
static gpuml_status scan_unless_staged(gpuml_status st, const gm_backend *b,
                                       const gpuml_options *used, const gm_matrix *data,
                                       const gm_matrix *query, double *t0, int *staged) {
  *staged = !st && staged_check(b, used);
  if (st || !*staged) {
    const double s0 = gm_seconds();
    const gpuml_status v = check_knn_values(data, query);
    if (v) return v;
    if (t0) *t0 += gm_seconds() - s0;
  }
  return st;
}

/* The outcome of steps that ran on values not yet scanned (staged_check): after a
 * failure the scan's error when it finds a non-finite value, else the failure itself;
 * GM_STATUS_NON_FINITE without a non-finite value to report would be the backend's
 * mistake. */
static gpuml_status values_first(gpuml_status st, const gm_matrix *data,
                                 const gm_matrix *query) {
  if (st == GPUML_OK) return GPUML_OK;
  const gpuml_status v = check_knn_values(data, query);
  if (v) return v;
  if (st == GM_STATUS_NON_FINITE)
    return gm_fail(GPUML_ERR_NUMERIC, "knn:internal",
                   "internal: the backend reported a non-finite value that the data and query "
                   "do not hold");
  return st;
}

/* The search of data already in the metric's form (gm_metric_rows) for the caller's
 * queries: the queries put in that form, the backend's search (of the resident copy
 * when there is one, else sharded over the devices or plain), the metric's distances. */
static gpuml_status search_prepared(const gm_backend *b, const void *resident,
                                    const gm_matrix *data, const gm_matrix *query, int64_t k,
                                    int64_t *index, void *dist, const gpuml_options *used,
                                    int64_t *rechecked) {
  gm_matrix Q;
  void *owned_query = NULL;
  gpuml_status st;
  if (query && (st = gm_metric_rows(query, used->metric, "query", "knn", &Q, &owned_query)))
    return st;
  const gm_matrix *q = query ? &Q : NULL;
  if (resident) {
    st = b->neighbours->resident_knn(resident, data, q, k, index, dist, used, rechecked);
  } else {
    gm_shard_plan plan;
    st = gm_shard_plan_make(used, data->rows, &plan);
    if (!st)
      st = plan.count > 1 ? gm_knn_sharded(b, &plan, data, q, k, index, dist, used, rechecked)
                          : b->neighbours->knn(data, q, k, index, dist, used, rechecked);
  }
  free(owned_query);
  if (!st && used->metric != GPUML_METRIC_EUCLIDEAN) {
    const int64_t rows = query ? query->rows : data->rows;
    gm_metric_finish(dist, (size_t)rows * (size_t)k, data->dtype, used->metric, 0);
    gm_knn_order_ties(index, dist, rows, k, data->dtype);
  }
  return st;
}

static gpuml_status knn_run(const gm_matrix *data, const gm_matrix *query, int64_t k,
                            int64_t *index, void *dist, const gpuml_options *opt,
                            gpuml_knn_result *result) {
  gm_trace("knn: start");
  gpuml_status st = gm_check_shape(data, "data", "knn");
  if (!st && query) st = gm_check_shape(query, "query", "knn");
  if (!st) st = gpuml_knn_check(data->rows, data->cols, query ? query->rows : -1, k, opt);
  if (!st && (!index || !dist))
    st = gm_fail(GPUML_ERR_ARG, "knn:badOutput", "the output arrays must not be NULL");
  double t0 = gm_seconds();
  gpuml_options used;
  const gm_backend *b = NULL;
  if (!st)
    st = gm_backend_resolve(opt, GM_ALGO_NEIGHBOURS,
                            (double)(query ? query->rows : data->rows) * (double)data->rows *
                                (double)data->cols,
                            "knn", &used, &b);
  int staged;
  if ((st = scan_unless_staged(st, b, &used, data, query, &t0, &staged))) return st;
  gm_trace(staged ? "knn: arguments checked (the values as they are staged)"
                  : "knn: the values checked");
  gm_matrix D;
  void *owned_data = NULL;
  int64_t rechecked = 0;
  st = gm_metric_rows(data, used.metric, "data", "knn", &D, &owned_data);
  if (!st) st = search_prepared(b, NULL, &D, query, k, index, dist, &used, &rechecked);
  free(owned_data);
  if (staged) st = values_first(st, data, query);
  gm_trace("knn: searched (re-checks included)");
  if (!st && result) {
    gm_run_info_fill(&result->run, &used, data->dtype, t0);
    result->rechecked = rechecked;
  }
  return st;
}

gpuml_status gpuml_knn_search(const double *data, int64_t n, int64_t d, const double *query,
                              int64_t m, int64_t k, int64_t *index, double *dist,
                              const gpuml_options *opt, gpuml_knn_result *result) {
  const gm_matrix D = {data, n, d, GM_F64}, Q = {query, m, d, GM_F64};
  return knn_run(&D, query ? &Q : NULL, k, index, dist, opt, result);
}

gpuml_status gpuml_knn_search_f(const float *data, int64_t n, int64_t d, const float *query,
                                int64_t m, int64_t k, int64_t *index, float *dist,
                                const gpuml_options *opt, gpuml_knn_result *result) {
  const gm_matrix D = {data, n, d, GM_F32}, Q = {query, m, d, GM_F32};
  return knn_run(&D, query ? &Q : NULL, k, index, dist, opt, result);
}

/* ---- the kNN index ------------------------------------------------------------------ */

struct gpuml_knn_index {
  double *owned;            /* the index's own copy of the data (NULL when borrowed) */
  gm_matrix data;           /* the data in the metric's form, n x d, on the host */
  gpuml_options used;       /* backend, device, precision and metric it was built with */
  const gm_backend *backend;
  void *resident;           /* the backend's resident copy, NULL where it keeps none */
  size_t device_bytes;
  double build_seconds;
};

static gpuml_status index_build(const double *data, int64_t n, int64_t d,
                                const gpuml_options *opt, int borrow, gpuml_knn_index **out) {
  gm_clear_error();
  if (!out) return gm_fail(GPUML_ERR_ARG, "knn:badOutput", "the index pointer must not be NULL");
  *out = NULL;
  const gm_matrix D = {data, n, d, GM_F64};
  gpuml_status st = gm_check_shape(&D, "data", "knn");
  /* The search's checks of data and options (one query, k = 1: no limit of its own). */
  if (!st) st = gpuml_knn_check(n, d, 1, 1, opt);
  if (!st && opt->ndevices != 0)
    st = gm_fail(GPUML_ERR_ARG, "knn:badDevice",
                 "an index lives on one device: give `device`, not a device list");
  double t0 = gm_seconds();
  gpuml_options used;
  const gm_backend *backend = NULL;
  /* Sized for searches of the data against itself. */
  if (!st)
    st = gm_backend_resolve(opt, GM_ALGO_NEIGHBOURS, (double)n * (double)n * (double)d, "knn",
                            &used, &backend);
  int staged;
  if ((st = scan_unless_staged(st, backend, &used, &D, NULL, &t0, &staged))) return st;
  gpuml_knn_index *ix = calloc(1, sizeof *ix);
  if (!ix) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the index");
  ix->used = used;
  ix->backend = backend;
  gm_matrix prepared;
  void *owned = NULL;
  if ((st = gm_metric_rows(&D, ix->used.metric, "data", "knn", &prepared, &owned))) {
    free(ix);
    return st;
  }
  /* The metric's own copy, else a copy of the data unless the caller lends it. */
  ix->owned = owned ? owned : borrow ? NULL : gm_alloc((size_t)n * (size_t)d, sizeof(double));
  if (!owned && !borrow) {
    if (!ix->owned) {
      free(ix);
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory",
                   "cannot allocate %.1f MB for the index's copy of the data",
                   (double)n * (double)d * 8 / 1e6);
      return staged ? values_first(st, &D, NULL) : st;
    }
    memcpy(ix->owned, data, (size_t)n * (size_t)d * sizeof(double));
  }
  ix->data = (gm_matrix){ix->owned ? ix->owned : data, n, d, GM_F64};
  const gm_neighbour_ops *ops = ix->backend->neighbours;
  if (ops->resident_build &&
      (st = ops->resident_build(&ix->data, &ix->used, &ix->resident, &ix->device_bytes))) {
    free(ix->owned);
    free(ix);
    return staged ? values_first(st, &D, NULL) : st;
  }
  ix->build_seconds = gm_seconds() - t0;
  *out = ix;
  return GPUML_OK;
}

gpuml_status gpuml_knn_index_build(const double *data, int64_t n, int64_t d,
                                   const gpuml_options *opt, gpuml_knn_index **out) {
  return index_build(data, n, d, opt, 0, out);
}

gpuml_status gpuml_knn_index_build_borrowed(const double *data, int64_t n, int64_t d,
                                            const gpuml_options *opt, gpuml_knn_index **out) {
  return index_build(data, n, d, opt, 1, out);
}

static gpuml_status check_index(const gpuml_knn_index *ix) {
  return ix ? GPUML_OK
            : gm_fail(GPUML_ERR_ARG, "knn:badIndex",
                    "the kNN index no longer exists (it was freed, or restored from a saved "
                    "session): build it again");
}

gpuml_status gpuml_knn_index_check(const gpuml_knn_index *ix, int64_t query_rows, int64_t k,
                                   const gpuml_options *opt) {
  gm_clear_error();
  gpuml_status st = check_index(ix);
  return st ? st : gpuml_knn_check(ix->data.rows, ix->data.cols, query_rows, k, opt);
}

gpuml_status gpuml_knn_index_search(const gpuml_knn_index *ix, const double *query, int64_t m,
                                    int64_t k, int64_t *index, double *dist,
                                    const gpuml_options *opt, gpuml_knn_result *result) {
  gm_clear_error();
  gpuml_status st = check_index(ix);
  if (st) return st;
  const gm_matrix Q = {query, m, ix->data.cols, GM_F64};
  const gm_matrix *q = query ? &Q : NULL;
  if (q) st = gm_check_shape(q, "query", "knn");
  if (!st) st = gpuml_knn_index_check(ix, query ? m : -1, k, opt);
  if (!st && (!index || !dist))
    st = gm_fail(GPUML_ERR_ARG, "knn:badOutput", "the output arrays must not be NULL");
  /* The queries' values (the index's data were checked when it was built). */
  int staged;
  if ((st = scan_unless_staged(st, ix->backend, &ix->used, NULL, q, NULL, &staged))) return st;
  const double t0 = gm_seconds();
  /* The index's backend, device, precision and metric; the call's threads, memory
   * limit, verbosity and callbacks. */
  gpuml_options used = *opt;
  used.backend = ix->used.backend;
  used.device = ix->used.device;
  used.ndevices = 0;
  used.precision = ix->used.precision;
  used.metric = ix->used.metric;
  int64_t rechecked = 0;
  st = search_prepared(ix->backend, ix->resident, &ix->data, q, k, index, dist, &used,
                       &rechecked);
  if (staged) st = values_first(st, NULL, q);
  if (!st && result) {
    gm_run_info_fill(&result->run, &used, GM_F64, t0);
    result->rechecked = rechecked;
  }
  return st;
}

gpuml_status gpuml_knn_index_describe(const gpuml_knn_index *ix, gpuml_knn_index_info *info) {
  gm_clear_error();
  gpuml_status st = check_index(ix);
  if (st) return st;
  if (!info) return gm_fail(GPUML_ERR_ARG, "knn:badOutput", "info must not be NULL");
  memset(info, 0, sizeof *info);
  gm_run_info_fill(&info->run, &ix->used, GM_F64, 0);
  info->run.seconds = ix->build_seconds;
  info->rows = ix->data.rows;
  info->cols = ix->data.cols;
  info->metric = ix->used.metric;
  info->host_bytes =
      (ix->owned ? (size_t)ix->data.rows * (size_t)ix->data.cols * sizeof(double) : 0) + sizeof *ix;
  info->device_bytes = ix->device_bytes;
  return GPUML_OK;
}

void gpuml_knn_index_free(gpuml_knn_index *ix) {
  if (!ix) return;
  if (ix->resident) ix->backend->neighbours->resident_free(ix->resident);
  free(ix->owned);
  free(ix);
}
