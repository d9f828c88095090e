/* C tests of the cosine metric and the kNN index through gpuml.h, on every backend of
 * the parity harness: cosine kNN and distances against brute force, the index against
 * the plain search (identical answers), the index's lifetime and its errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

static gpuml_backend test_backend = GPUML_BACKEND_CPU;

static uint64_t rng_state = 987654321;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double *random_matrix(int64_t n, int64_t d, double offset, double scale) {
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n * d; i++) x[i] = offset + scale * uniform();
  return x;
}

static gpuml_options options(gpuml_metric metric) {
  gpuml_options opt = harness_options(test_backend);
  opt.metric = metric;
  return opt;
}

/* 1 - cos(x_i, y_j) in long double, the reference. */
static double ref_cosine(const double *x, int64_t n, int64_t i, const double *y, int64_t m,
                         int64_t j, int64_t d) {
  long double xy = 0, xx = 0, yy = 0;
  for (int64_t t = 0; t < d; t++) {
    const long double a = x[i + t * n], b = y[j + t * m];
    xy += a * b;
    xx += a * a;
    yy += b * b;
  }
  return (double)(1.0L - xy / sqrtl(xx * yy));
}

/* Cosine kNN against brute force: every returned neighbour's distance matches the
 * reference, the lists are sorted by (distance, index), and no point outside a list is
 * nearer than its last member (beyond rounding). */
static void check_cosine_knn(const char *name, const double *data, int64_t n, int64_t d,
                             const double *query, int64_t m, int64_t k) {
  const int self = query == NULL;
  const int64_t rows = self ? n : m;
  const double *q = self ? data : query;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(rows * k));
  double *dist = malloc(sizeof(double) * (size_t)(rows * k));
  gpuml_options opt = options(GPUML_METRIC_COSINE);
  gpuml_status st = gpuml_knn_search(data, n, d, query, m, k, idx, dist, &opt, NULL);
  CHECK(st == GPUML_OK, "%s: status %d (%s)", name, st, gpuml_last_error());
  if (st == GPUML_OK) {
    int64_t bad = 0, unsorted = 0, missed = 0;
    const double tol = harness_precision == GPUML_PRECISION_SINGLE ? 1e-5 : 1e-12;
    char *in_list = calloc((size_t)n, 1);
    for (int64_t i = 0; i < rows; i++) {
      for (int64_t j = 0; j < k; j++) {
        const int64_t nb = idx[i + j * rows];
        if (nb < 0 || nb >= n || (self && nb == i)) {
          bad++;
          continue;
        }
        in_list[nb] = 1;
        if (fabs(dist[i + j * rows] - ref_cosine(q, rows, i, data, n, nb, d)) > tol) bad++;
        if (j > 0) {
          const double a = dist[i + (j - 1) * rows], b = dist[i + j * rows];
          if (a > b || (a == b && idx[i + (j - 1) * rows] > nb)) unsorted++;
        }
      }
      const double last = dist[i + (k - 1) * rows];
      for (int64_t t = 0; t < n; t++) {
        if (!in_list[t] && !(self && t == i) && ref_cosine(q, rows, i, data, n, t, d) < last - tol)
          missed++;
      }
      for (int64_t j = 0; j < k; j++) {
        const int64_t nb = idx[i + j * rows];
        if (nb >= 0 && nb < n) in_list[nb] = 0;
      }
    }
    free(in_list);
    CHECK(bad == 0, "%s: %lld neighbours wrong (index or distance)", name, (long long)bad);
    CHECK(unsorted == 0, "%s: %lld neighbours out of order", name, (long long)unsorted);
    CHECK(missed == 0, "%s: %lld nearer points left out", name, (long long)missed);
  }
  free(idx);
  free(dist);
}

static void test_cosine_knn(void) {
  static const int64_t dims[] = {1, 2, 3, 16, 40};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    const int64_t d = dims[i];
    double *data = random_matrix(700, d, -1, 2), *query = random_matrix(90, d, -1, 2);
    char name[64];
    snprintf(name, sizeof name, "cosine self d=%lld", (long long)d);
    check_cosine_knn(name, data, 700, d, NULL, 0, d == 1 ? 5 : 9);
    snprintf(name, sizeof name, "cosine query d=%lld", (long long)d);
    check_cosine_knn(name, data, 700, d, query, 90, 6);
    free(data);
    free(query);
  }
  /* Scaled copies have cosine distance 0: the smaller index first. */
  const int64_t n = 6, d = 3;
  double x[18];
  for (int64_t t = 0; t < d; t++)
    for (int64_t i = 0; i < n; i++) x[i + t * n] = (double)(t + 1) * (i % 2 ? 1.0 : -1.0) * (double)(i + 1);
  int64_t idx[12];
  double dist[12];
  gpuml_options opt = options(GPUML_METRIC_COSINE);
  gpuml_status st = gpuml_knn_search(x, n, d, NULL, 0, 2, idx, dist, &opt, NULL);
  CHECK(st == GPUML_OK, "cosine scaled copies: %s", gpuml_last_error());
  if (st == GPUML_OK) {
    CHECK(idx[0] == 2 && idx[0 + n] == 4 && dist[0] == 0 && dist[n] == 0,
          "cosine scaled copies: row 1 gets rows 3, 5 at 0 (got %lld %lld at %g %g)",
          (long long)idx[0], (long long)idx[n], dist[0], dist[n]);
    CHECK(fabs(dist[1] - 0) < 1e-15 && idx[1] == 3, "cosine scaled copies: row 2 gets row 4");
  }
}

static void test_cosine_dist(void) {
  const int64_t n = 57, m = 31, d = 20;
  double *x = random_matrix(n, d, -1, 2), *y = random_matrix(m, d, 0, 1);
  double *out = malloc(sizeof(double) * (size_t)(n * n));
  gpuml_options opt = options(GPUML_METRIC_COSINE);
  const double tol = harness_precision == GPUML_PRECISION_SINGLE ? 1e-5 : 1e-13;
  gpuml_status st = gpuml_dist_compute(x, n, d, y, m, 0, out, &opt, NULL);
  CHECK(st == GPUML_OK, "cosine dist: %s", gpuml_last_error());
  int64_t bad = 0;
  for (int64_t j = 0; st == GPUML_OK && j < m; j++)
    for (int64_t i = 0; i < n; i++)
      if (fabs(out[i + j * n] - ref_cosine(x, n, i, y, m, j, d)) > tol) bad++;
  CHECK(bad == 0, "cosine dist x, y: %lld entries differ from brute force", (long long)bad);
  st = gpuml_dist_compute(x, n, d, NULL, 0, 0, out, &opt, NULL);
  CHECK(st == GPUML_OK, "cosine dist x: %s", gpuml_last_error());
  bad = 0;
  int64_t asym = 0;
  for (int64_t j = 0; st == GPUML_OK && j < n; j++)
    for (int64_t i = 0; i < n; i++) {
      if (fabs(out[i + j * n] - ref_cosine(x, n, i, x, n, j, d)) > tol) bad++;
      if (out[i + j * n] != out[j + i * n] || (i == j && out[i + j * n] != 0)) asym++;
    }
  CHECK(bad == 0 && asym == 0, "cosine dist x: %lld differ, %lld not symmetric / zero diagonal",
        (long long)bad, (long long)asym);
  /* Errors: a row of zeros (named), squared cosine, an unknown metric. */
  for (int64_t t = 0; t < d; t++) x[4 + t * n] = 0;
  st = gpuml_dist_compute(x, n, d, y, m, 0, out, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "dist:zeroRow") == 0 &&
            strstr(gpuml_last_error(), "row 5 of the x"),
        "a zero row: %s (%s)", gpuml_last_error(), gpuml_last_error_id());
  int64_t idx[4];
  double dd[4];
  st = gpuml_knn_search(y, m, d, x, n, 1, idx, dd, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:zeroRow") == 0,
        "a zero query row: %s", gpuml_last_error_id());
  st = gpuml_dist_compute(y, m, d, NULL, 0, 1, out, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "dist:badSquared") == 0,
        "squared cosine: %s", gpuml_last_error_id());
  opt.metric = (gpuml_metric)7;
  st = gpuml_dist_compute(y, m, d, NULL, 0, 0, out, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "badMetric") == 0,
        "metric code 7: %s", gpuml_last_error_id());
  gpuml_metric parsed = GPUML_METRIC_EUCLIDEAN;
  CHECK(gpuml_parse_metric("Cosine", &parsed) == GPUML_OK && parsed == GPUML_METRIC_COSINE,
        "\"Cosine\" parses");
  CHECK(gpuml_parse_metric("manhattan", &parsed) == GPUML_ERR_ARG &&
            strstr(gpuml_last_error(), "\"euclidean\" or \"cosine\""),
        "an unknown metric name lists the known ones");
  free(x);
  free(y);
  free(out);
}

/* One index search against the plain search with the same options: identical. */
static void check_index_case(const char *name, const gpuml_knn_index *ix, const double *data,
                             int64_t n, int64_t d, const double *query, int64_t m, int64_t k,
                             gpuml_metric metric) {
  const int64_t rows = query ? m : n;
  int64_t *i1 = malloc(sizeof(int64_t) * (size_t)(rows * k)), *i2 = malloc(sizeof(int64_t) * (size_t)(rows * k));
  double *d1 = malloc(sizeof(double) * (size_t)(rows * k)), *d2 = malloc(sizeof(double) * (size_t)(rows * k));
  gpuml_options opt = options(metric);
  gpuml_knn_result r1, r2;
  gpuml_status s1 = gpuml_knn_index_search(ix, query, m, k, i1, d1, &opt, &r1);
  CHECK(s1 == GPUML_OK, "%s: index search: %s", name, gpuml_last_error());
  gpuml_status s2 = gpuml_knn_search(data, n, d, query, m, k, i2, d2, &opt, &r2);
  CHECK(s2 == GPUML_OK, "%s: plain search: %s", name, gpuml_last_error());
  if (s1 == GPUML_OK && s2 == GPUML_OK) {
    int64_t diff = 0;
    for (int64_t i = 0; i < rows * k; i++)
      if (i1[i] != i2[i] || d1[i] != d2[i]) diff++;
    CHECK(diff == 0, "%s: %lld of %lld entries differ from the plain search", name,
            (long long)diff, (long long)(rows * k));
    CHECK(r1.run.backend == r2.run.backend, "%s: the index ran on %s", name,
          gpuml_backend_name(r1.run.backend));
  }
  free(i1);
  free(i2);
  free(d1);
  free(d2);
}

static void test_index_matches_search(void) {
  static const int64_t dims[] = {2, 8, 24, 96};
  for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
    const int64_t d = dims[t], n = 1500, m = 123;
    double *data = random_matrix(n, d, -1, 2), *query = random_matrix(m, d, -1, 2);
    for (int metric = 0; metric < 2; metric++) {
      gpuml_options opt = options((gpuml_metric)metric);
      gpuml_knn_index *ix = NULL;
      gpuml_status st = gpuml_knn_index_build(data, n, d, &opt, &ix);
      CHECK(st == GPUML_OK && ix, "index build d=%lld: %s", (long long)d, gpuml_last_error());
      if (st) continue;
      gpuml_knn_index_info info;
      CHECK(gpuml_knn_index_describe(ix, &info) == GPUML_OK && info.rows == n &&
                info.cols == d && info.metric == (gpuml_metric)metric &&
                info.run.backend == (test_backend == GPUML_BACKEND_CUDA ? GPUML_BACKEND_CUDA
                                                                        : GPUML_BACKEND_CPU) &&
                (test_backend == GPUML_BACKEND_CUDA ? info.device_bytes >= (size_t)(n * d * 8)
                                                    : info.device_bytes == 0),
            "index info d=%lld: %lld x %lld on %s, %zu device bytes", (long long)d,
            (long long)info.rows, (long long)info.cols, gpuml_backend_name(info.run.backend),
            info.device_bytes);
      char name[80];
      snprintf(name, sizeof name, "index %s d=%lld self", metric ? "cosine" : "euclidean",
               (long long)d);
      check_index_case(name, ix, data, n, d, NULL, 0, 10, (gpuml_metric)metric);
      snprintf(name, sizeof name, "index %s d=%lld query", metric ? "cosine" : "euclidean",
               (long long)d);
      check_index_case(name, ix, data, n, d, query, m, 7, (gpuml_metric)metric);
      /* searched twice: the resident points are not changed by a search */
      check_index_case(name, ix, data, n, d, query, m, 40, (gpuml_metric)metric);
      snprintf(name, sizeof name, "index %s d=%lld k=n-1", metric ? "cosine" : "euclidean",
               (long long)d);
      if (d == 24) check_index_case(name, ix, data, n, d, NULL, 0, n - 1, (gpuml_metric)metric);
      gpuml_knn_index_free(ix);
    }
    free(data);
    free(query);
  }
}

/* An index that borrows the caller's matrix: the same answers, no host copy counted. */
static void test_index_borrowed(void) {
  const int64_t n = 1100, d = 20, m = 64;
  double *data = random_matrix(n, d, -1, 2), *query = random_matrix(m, d, -1, 2);
  gpuml_options opt = options(GPUML_METRIC_EUCLIDEAN);
  gpuml_knn_index *ix = NULL;
  gpuml_status st = gpuml_knn_index_build_borrowed(data, n, d, &opt, &ix);
  CHECK(st == GPUML_OK, "borrowed index: %s", gpuml_last_error());
  if (st == GPUML_OK) {
    gpuml_knn_index_info info;
    gpuml_knn_index_describe(ix, &info);
    CHECK(info.host_bytes < (size_t)(n * d * 8), "a borrowed index holds no copy (%zu bytes)",
          info.host_bytes);
    check_index_case("borrowed index query", ix, data, n, d, query, m, 9, GPUML_METRIC_EUCLIDEAN);
    check_index_case("borrowed index self", ix, data, n, d, NULL, 0, 9, GPUML_METRIC_EUCLIDEAN);
    gpuml_knn_index_free(ix);
  }
  free(data);
  free(query);
}

/* Queries far from the data (the index's centre is the data's alone), and an index used
 * after the contexts were freed (its memory is its own). */
static void test_index_far_queries_and_context_free(void) {
  const int64_t n = 900, d = 32, m = 50;
  double *data = random_matrix(n, d, 1e3, 1), *query = random_matrix(m, d, 1e3 + 40, 1);
  gpuml_options opt = options(GPUML_METRIC_EUCLIDEAN);
  gpuml_knn_index *ix = NULL;
  gpuml_status st = gpuml_knn_index_build(data, n, d, &opt, &ix);
  CHECK(st == GPUML_OK, "far queries: build: %s", gpuml_last_error());
  if (st == GPUML_OK) {
    check_index_case("far queries", ix, data, n, d, query, m, 5, GPUML_METRIC_EUCLIDEAN);
    gpuml_shutdown();
    check_index_case("after gpuml_shutdown", ix, data, n, d, query, m, 5, GPUML_METRIC_EUCLIDEAN);
    gpuml_knn_index_free(ix);
  }
  free(data);
  free(query);
}

static void test_index_errors_and_lifetime(void) {
  const int64_t n = 200, d = 5;
  double *data = random_matrix(n, d, 0, 1), *query = random_matrix(10, d, 0, 1);
  gpuml_options opt = options(GPUML_METRIC_EUCLIDEAN);
  gpuml_knn_index *ix = (gpuml_knn_index *)&opt;  /* must be reset to NULL on failure */
  data[7 + 2 * n] = NAN;
  gpuml_status st = gpuml_knn_index_build(data, n, d, &opt, &ix);
  CHECK(st == GPUML_ERR_ARG && ix == NULL && strcmp(gpuml_last_error_id(), "knn:nonFinite") == 0,
        "index of NaN data: %s", gpuml_last_error_id());
  data[7 + 2 * n] = 0.5;
  opt.ndevices = 2;
  opt.devices[0] = 0;
  opt.devices[1] = 1;
  st = gpuml_knn_index_build(data, n, d, &opt, &ix);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:badDevice") == 0,
        "index on a device list: %s", gpuml_last_error_id());
  opt.ndevices = 0;
  int64_t idx[400];
  double dist[400];
  st = gpuml_knn_index_search(NULL, query, 10, 3, idx, dist, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:badIndex") == 0,
        "search of a NULL index: %s", gpuml_last_error_id());
  /* Many indexes alive at once, then freed (the sanitizer and the GPU's memory see leaks). */
  gpuml_knn_index *many[12] = {0};
  for (int i = 0; i < 12; i++) {
    st = gpuml_knn_index_build(data, n, d, &opt, &many[i]);
    CHECK(st == GPUML_OK, "index %d of 12: %s", i, gpuml_last_error());
  }
  for (int i = 0; many[0] && i < 12; i++) {
    st = gpuml_knn_index_search(many[i], query, 10, 3, idx, dist, &opt, NULL);
    CHECK(st == GPUML_OK && idx[0] >= 0 && idx[0] < n, "search of index %d: %s", i,
          gpuml_last_error());
  }
  for (int i = 0; i < 12; i++) gpuml_knn_index_free(many[i]);
  gpuml_knn_index_free(NULL);
  st = gpuml_knn_index_build(data, n, d, &opt, &ix);
  if (st == GPUML_OK) {
    st = gpuml_knn_index_search(ix, query, 10, n + 1, idx, dist, &opt, NULL);
    CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:badK") == 0,
          "k beyond n: %s", gpuml_last_error_id());
    CHECK(gpuml_knn_index_check(ix, -1, n, &opt) == GPUML_ERR_ARG &&
              gpuml_knn_index_check(ix, -1, n - 1, &opt) == GPUML_OK,
          "index check: k <= n - 1 against itself");
    query[3] = INFINITY;
    st = gpuml_knn_index_search(ix, query, 10, 3, idx, dist, &opt, NULL);
    CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:nonFinite") == 0,
          "an Inf query: %s", gpuml_last_error_id());
    gpuml_knn_index_free(ix);
  }
  /* cosine: a zero row in the data is refused by the build */
  opt.metric = GPUML_METRIC_COSINE;
  for (int64_t t = 0; t < d; t++) data[11 + t * n] = 0;
  st = gpuml_knn_index_build(data, n, d, &opt, &ix);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "knn:zeroRow") == 0 &&
            strstr(gpuml_last_error(), "row 12"),
        "cosine index of a zero row: %s", gpuml_last_error());
  free(data);
  free(query);
}

int main(void) {
  harness_init();
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "cosine and the kNN index")) continue;
    test_backend = b->id;
    test_cosine_knn();
    test_cosine_dist();
    test_index_matches_search();
    test_index_borrowed();
    test_index_far_queries_and_context_free();
    test_index_errors_and_lifetime();
  }
  gpuml_shutdown();  /* the contexts' own memory, so that a leak check sees only leaks */
  return check_summary("C");
}
