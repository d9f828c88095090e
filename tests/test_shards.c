/* C tests of work split into shards (core/shards.c, core/knn_shards.c, core/gmm_shards.c):
 * with the development knobs GPUML_SHARDS (logical shards) and GPUML_SHARD_THREADS (the
 * runner of several devices, on one device or the CPU), kNN must give the single search's
 * answer bit for bit and the mixtures the single engine's fit to rounding, on every
 * backend of the parity harness; the device list is checked. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include "gmm_compare.h"
#include "harness.h"
#include "shards.h"

static uint64_t state = 977;
static double uniform(void) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(state >> 11) / 9007199254740992.0;
}

/* n x d points; with `grid`, values on a coarse grid so that exact ties and duplicates
 * abound. */
static double *points(int64_t n, int64_t d, int grid) {
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n * d; i++) x[i] = grid ? floor(uniform() * 4) : uniform() * 2 - 1;
  return x;
}

static void set_knobs(const char *shards, const char *threads) {
  if (shards) setenv("GPUML_SHARDS", shards, 1);
  else unsetenv("GPUML_SHARDS");
  if (threads) setenv("GPUML_SHARD_THREADS", threads, 1);
  else unsetenv("GPUML_SHARD_THREADS");
}

static void check_case(const harness_backend *b, const char *name, const double *x, int64_t n,
                       int64_t d, const double *q, int64_t m, int64_t k, const char *shards,
                       const char *threads) {
  const int64_t rows = q ? m : n;
  int64_t *i1 = malloc(sizeof(int64_t) * (size_t)(rows * k)), *i2 = malloc(sizeof(int64_t) * (size_t)(rows * k));
  double *d1 = malloc(sizeof(double) * (size_t)(rows * k)), *d2 = malloc(sizeof(double) * (size_t)(rows * k));
  gpuml_options opt = harness_options(b->id);
  opt.precision = GPUML_PRECISION_DOUBLE;
  set_knobs(NULL, NULL);
  gpuml_status s1 = gpuml_knn_search(x, n, d, q, m, k, i1, d1, &opt, NULL);
  set_knobs(shards, threads);
  gpuml_status s2 = gpuml_knn_search(x, n, d, q, m, k, i2, d2, &opt, NULL);
  set_knobs(NULL, NULL);
  CHECK(s1 == GPUML_OK && s2 == GPUML_OK, "%s on %s (shards %s, threads %s): %s", name, b->name,
        shards, threads ? threads : "1", gpuml_last_error());
  if (!s1 && !s2) {
    const int same = !memcmp(i1, i2, sizeof(int64_t) * (size_t)(rows * k)) &&
                     !memcmp(d1, d2, sizeof(double) * (size_t)(rows * k));
    CHECK(same, "%s on %s (shards %s, threads %s): the merged lists differ from one search",
          name, b->name, shards, threads ? threads : "1");
  }
  free(i1);
  free(i2);
  free(d1);
  free(d2);
}

static void test_knn_shards(const harness_backend *b) {
  double *x = points(1500, 20, 0), *q = points(200, 20, 0), *g = points(600, 3, 1);
  double *tiny = points(9, 2, 1);
  static const char *const shards[] = {"2", "3", "7"};
  for (int s = 0; s < 3; s++) {
    check_case(b, "self d=20 k=10", x, 1500, 20, NULL, 0, 10, shards[s], NULL);
    check_case(b, "query d=20 k=15", x, 1500, 20, q, 200, 15, shards[s], NULL);
    check_case(b, "grid ties and duplicates, self k=25", g, 600, 3, NULL, 0, 25, shards[s], NULL);
  }
  check_case(b, "self k = n - 1", g, 600, 3, NULL, 0, 599, "4", NULL);
  check_case(b, "more shards than rows, self k = n - 1", tiny, 9, 2, NULL, 0, 8, "64", NULL);
  check_case(b, "query, shards smaller than k", x, 1500, 20, q, 200, 300, "9", NULL);
  check_case(b, "threaded runner, self", x, 1500, 20, NULL, 0, 10, "5", "3");
  check_case(b, "threaded runner, query", x, 1500, 20, q, 200, 15, "4", "4");
  free(x);
  free(q);
  free(g);
  free(tiny);
}

/* Gaussian mixtures over shards: the fit with GPUML_SHARDS (and the threaded runner)
 * must be the one engine's up to the order of the sums (gmm_compare.h). */
static void check_gmm_case(const harness_backend *b, const char *name, const double *x,
                           int64_t n, int64_t d, const gpuml_gmm_params *p, const char *shards,
                           const char *threads) {
  gpuml_options opt = harness_options(b->id);
  gmm_fit_t one = gmm_fit_alloc(n, d, p), split = gmm_fit_alloc(n, d, p);
  set_knobs(NULL, NULL);
  gmm_fit_done(&one, gpuml_gmm_fit(x, n, d, p, &one.model, NULL, one.cls, NULL, one.bic, &opt, NULL));
  set_knobs(shards, threads);
  gmm_fit_done(&split, gpuml_gmm_fit(x, n, d, p, &split.model, NULL, split.cls, NULL, split.bic,
                                     &opt, NULL));
  set_knobs(NULL, NULL);
  char what[160];
  snprintf(what, sizeof what, "GMM %s on %s (shards %s, threads %s)", name, b->name, shards,
           threads ? threads : "1");
  gmm_compare(what, &split, &one, 0, n, n, d, p);
  gmm_fit_free(&one);
  gmm_fit_free(&split);
}

static void test_gmm_shards(const harness_backend *b) {
  const int64_t n = 900, d = 3;
  double *grouped = gmm_clusters(n, d, 3, 1), *mixed = gmm_clusters(n, d, 4, 0);
  static const gpuml_gmm_covariance each[] = {GPUML_GMM_VVV, GPUML_GMM_EEE, GPUML_GMM_VEV,
                                              GPUML_GMM_VII};
  for (int m = 0; m < 4; m++) {
    gpuml_gmm_params p;
    gpuml_gmm_params_init(&p);
    p.nG = 4;
    p.n_models = 1;
    p.models[0] = each[m];
    char name[64];
    snprintf(name, sizeof name, "%s G = 1:4, grouped rows", gpuml_gmm_model_name(each[m], d));
    check_gmm_case(b, name, grouped, n, d, &p, "3", NULL);
    check_gmm_case(b, name, grouped, n, d, &p, "3", "2");
    snprintf(name, sizeof name, "%s G = 1:4, interleaved rows", gpuml_gmm_model_name(each[m], d));
    check_gmm_case(b, name, mixed, n, d, &p, "3", "2");
  }
  /* the default sweep (every model, G = 1:9) and k-means++ starts */
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  check_gmm_case(b, "default sweep", mixed, n, d, &p, "3", "2");
  p.init = GPUML_GMM_INIT_KMEANSPP;
  p.nG = 5;
  check_gmm_case(b, "k-means++, G = 1:5, all models", grouped, n, d, &p, "5", NULL);
  /* the far rows in the last shard: re-seeded at the worst-fitted rows of all shards */
  int64_t nc, dc;
  double *far = gmm_collapsing(&nc, &dc);
  gpuml_gmm_params_init(&p);
  p.nG = 1;
  p.G[0] = 4;
  p.init = GPUML_GMM_INIT_KMEANSPP;
  p.reg = 1e-6;
  p.n_models = 1;
  p.models[0] = GPUML_GMM_VVV;
  check_gmm_case(b, "collapsing components, VVV G = 4", far, nc, dc, &p, "3", "2");
  free(far);
  free(grouped);
  free(mixed);
}

static void test_device_list(void) {
  double x[8] = {0, 1, 2, 3, 0, 1, 0, 1};
  int64_t idx[4];
  double dist[4];
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.ndevices = GPUML_MAX_DEVICES + 1;
  CHECK(gpuml_knn_search(x, 4, 2, NULL, 0, 1, idx, dist, &opt, NULL) == GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "badDevice") == 0,
        "too many devices: %s", gpuml_last_error());
  opt.ndevices = 2;
  opt.devices[0] = 0;
  opt.devices[1] = 0;
  CHECK(gpuml_knn_search(x, 4, 2, NULL, 0, 1, idx, dist, &opt, NULL) == GPUML_ERR_ARG &&
            strstr(gpuml_last_error(), "listed twice") != NULL,
        "a device listed twice: %s", gpuml_last_error());
  opt.devices[1] = -3;
  CHECK(gpuml_knn_search(x, 4, 2, NULL, 0, 1, idx, dist, &opt, NULL) == GPUML_ERR_ARG,
        "a negative device: %s", gpuml_last_error());
  /* the CPU backend ignores the list */
  opt.backend = GPUML_BACKEND_CPU;
  opt.devices[1] = 1;
  CHECK(gpuml_knn_search(x, 4, 2, NULL, 0, 1, idx, dist, &opt, NULL) == GPUML_OK,
        "a device list on the CPU backend: %s", gpuml_last_error());
  gpuml_info info;
  gpuml_backend_info(&info);
  if (info.cuda_compiled && info.device_count > 0) {
    opt.backend = GPUML_BACKEND_CUDA;
    opt.devices[1] = info.device_count;  /* one past the last */
    CHECK(gpuml_knn_search(x, 4, 2, NULL, 0, 1, idx, dist, &opt, NULL) == GPUML_ERR_ARG &&
              strstr(gpuml_last_error(), "does not exist") != NULL,
          "a device that does not exist: %s", gpuml_last_error());
    opt.ndevices = GPUML_ALL_DEVICES;
    CHECK(gpuml_knn_search(x, 4, 2, NULL, 0, 1, idx, dist, &opt, NULL) == GPUML_OK,
          "all devices: %s", gpuml_last_error());
  }
}

/* The device list as front ends set it from numbers and words. */
static void test_set_devices(void) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  const double two[] = {1, 0}, twice[] = {2, 2}, negative[] = {-1}, fraction[] = {0.5};
  CHECK(gpuml_options_set_devices(&opt, two, 2) == GPUML_OK && opt.ndevices == 2 &&
            opt.devices[0] == 1 && opt.devices[1] == 0,
        "devices {1, 0}: %s", gpuml_last_error());
  CHECK(gpuml_options_set_devices(&opt, twice, 2) == GPUML_ERR_ARG &&
            strstr(gpuml_last_error(), "listed twice") && opt.ndevices == 2,
        "a device listed twice: %s", gpuml_last_error());
  CHECK(gpuml_options_set_devices(&opt, negative, 1) == GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "badDevice") == 0,
        "a negative device: %s", gpuml_last_error());
  CHECK(gpuml_options_set_devices(&opt, fraction, 1) == GPUML_ERR_ARG, "device 0.5: %s",
        gpuml_last_error());
  const double nan_id[] = {NAN};
  CHECK(gpuml_options_set_devices(&opt, nan_id, 1) == GPUML_ERR_ARG, "device NaN: %s",
        gpuml_last_error());
  double many[GPUML_MAX_DEVICES + 1];
  for (int i = 0; i <= GPUML_MAX_DEVICES; i++) many[i] = i;
  CHECK(gpuml_options_set_devices(&opt, many, GPUML_MAX_DEVICES + 1) == GPUML_ERR_ARG,
        "too many devices: %s", gpuml_last_error());
  CHECK(gpuml_options_set_devices_word(&opt, "ALL") == GPUML_OK &&
            opt.ndevices == GPUML_ALL_DEVICES,
        "devices \"ALL\": %s", gpuml_last_error());
  CHECK(gpuml_options_set_devices_word(&opt, "every") == GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "badDevice") == 0,
        "devices \"every\": %s", gpuml_last_error());
  CHECK(gpuml_options_set_devices(&opt, NULL, 0) == GPUML_OK && opt.ndevices == 0,
        "no device list: %s", gpuml_last_error());
}

static atomic_int pool_calls;

static gpuml_status count_shard(void *ctx, int s, const gpuml_options *opt) {
  (void)ctx;
  (void)opt;
  atomic_fetch_add(&pool_calls, 1);
  return s == 1 ? gm_fail(GPUML_ERR_CUDA, "test:shard", "shard 1 fails") : GPUML_OK;
}

static int always_interrupted(void *ctx) {
  (void)ctx;
  return 1;
}

/* The job that closes what the shards hold runs on every shard although the caller asks
 * to stop and a shard fails (an engine left open keeps its device's lock): on the
 * calling thread and on 3 threads. */
static void test_pool_run_all(void) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CPU;
  opt.verbose = 1;
  opt.interrupted = always_interrupted;
  for (int threads = 1; threads <= 3; threads += 2) {
    gm_shard_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.rows = 100;
    plan.count = 6;
    plan.ndevices = threads;
    gm_shard_pool *pool = NULL;
    gpuml_status st = gm_shard_pool_open(&plan, &opt, &pool);
    CHECK(!st, "a pool of %d thread(s): %s", threads, gpuml_last_error());
    if (st) continue;
    atomic_store(&pool_calls, 0);
    st = gm_shard_pool_run_all(pool, count_shard, NULL);
    CHECK(st == GPUML_ERR_CUDA && atomic_load(&pool_calls) == 6 &&
              strcmp(gpuml_last_error_id(), "test:shard") == 0,
          "run_all on %d thread(s), interrupted, shard 1 failing: every shard ran (%d of 6), "
          "the failure returned (%s)", threads, atomic_load(&pool_calls), gpuml_last_error());
    gm_shard_pool_close(pool);
  }
}

int main(void) {
  harness_init();
  test_device_list();
  test_set_devices();
  test_pool_run_all();
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "kNN over shards")) continue;
    test_knn_shards(b);
    if (harness_runs(b, "Gaussian mixtures over shards")) test_gmm_shards(b);
  }
  gpuml_shutdown(); /* the contexts' own memory, so that a leak check sees only leaks */
  return check_summary("C");
}
