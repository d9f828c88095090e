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
#include <string.h>
#include "harness.h"

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
 * must choose the same model and G, with the same classification and the log-likelihood
 * and every BIC within 1e-10 relative (the sums of the shards' statistics are added in
 * another order than one engine's). */
static double normal(void) {
  return sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform());
}

/* n points of G elongated clusters in d dimensions, rows grouped by cluster (so that a
 * shard holds a cluster alone and other components get nearly no weight there) or
 * interleaved. */
static double *clusters(int64_t n, int64_t d, int64_t G, int grouped) {
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n; i++) {
    const int64_t k = grouped ? i * G / n : i % G;
    double e[8];
    for (int64_t j = 0; j < d; j++) e[j] = normal();
    for (int64_t j = 0; j < d; j++) {
      /* cluster k stretched along dimension k % d, tilted by the previous coordinate */
      const double scale = j == k % d ? 2.0 + (double)k : 0.6 + 0.2 * (double)j;
      x[i + j * n] = 6.0 * (double)k * (j == 0 ? 1.0 : 0.5 * (double)(k % 2)) + scale * e[j] +
                     (j > 0 ? 0.4 * e[j - 1] : 0);
    }
  }
  return x;
}

typedef struct {
  gpuml_status status;
  gpuml_gmm_model model;
  int64_t *cls;
  double *z, *bic;
} gmm_run;

static gmm_run gmm_fit_run(const double *x, int64_t n, int64_t d, const gpuml_gmm_params *p,
                           gpuml_options opt) {
  gmm_run r;
  memset(&r, 0, sizeof r);
  int64_t gmax = 0;
  for (int64_t g = 0; g < p->nG; g++) gmax = p->G[g] > gmax ? p->G[g] : gmax;
  r.model.weights = malloc(sizeof(double) * (size_t)gmax);
  r.model.means = malloc(sizeof(double) * (size_t)(d * gmax));
  r.model.covariances = malloc(sizeof(double) * (size_t)(d * d * gmax));
  r.cls = malloc(sizeof(int64_t) * (size_t)n);
  r.z = malloc(sizeof(double) * (size_t)(n * gmax));
  r.bic = malloc(sizeof(double) * (size_t)(p->nG * GPUML_GMM_N_MODELS));
  r.status = gpuml_gmm_fit(x, n, d, p, &r.model, r.z, r.cls, NULL, r.bic, &opt, NULL);
  return r;
}

static void gmm_run_free(gmm_run *r) {
  free(r->model.weights);
  free(r->model.means);
  free(r->model.covariances);
  free(r->cls);
  free(r->z);
  free(r->bic);
}

static double relative(double a, double b) { return fabs(a - b) / (fabs(a) > 1 ? fabs(a) : 1); }

static void check_gmm_case(const harness_backend *b, const char *name, const double *x,
                           int64_t n, int64_t d, const gpuml_gmm_params *p, const char *shards,
                           const char *threads) {
  gpuml_options opt = harness_options(b->id);
  set_knobs(NULL, NULL);
  gmm_run one = gmm_fit_run(x, n, d, p, opt);
  set_knobs(shards, threads);
  gmm_run split = gmm_fit_run(x, n, d, p, opt);
  set_knobs(NULL, NULL);
  const char *how = threads ? threads : "1";
  CHECK(one.status == GPUML_OK && split.status == GPUML_OK, "GMM %s on %s (shards %s, threads %s): %s",
        name, b->name, shards, how, gpuml_last_error());
  if (one.status || split.status) goto done;
  CHECK(one.model.G == split.model.G && one.model.covariance == split.model.covariance,
        "GMM %s on %s (shards %s, threads %s): chose %s G = %lld, one engine %s G = %lld", name,
        b->name, shards, how, gpuml_gmm_model_name(split.model.covariance, d),
        (long long)split.model.G, gpuml_gmm_model_name(one.model.covariance, d),
        (long long)one.model.G);
  if (one.model.G != split.model.G) goto done;
  CHECK(relative(one.model.loglik, split.model.loglik) <= 1e-10,
        "GMM %s on %s (shards %s, threads %s): loglik %.17g, one engine %.17g", name, b->name,
        shards, how, split.model.loglik, one.model.loglik);
  CHECK(!memcmp(one.cls, split.cls, sizeof(int64_t) * (size_t)n),
        "GMM %s on %s (shards %s, threads %s): the classification differs", name, b->name, shards,
        how);
  double worst_z = 0, worst_bic = 0;
  for (int64_t i = 0; i < n * one.model.G; i++) {
    const double e = fabs(one.z[i] - split.z[i]);
    worst_z = e > worst_z ? e : worst_z;
  }
  gpuml_gmm_covariance tried[GPUML_GMM_N_MODELS];
  const int64_t models = gpuml_gmm_models_tried(n, d, p, tried);
  for (int64_t c = 0; c < p->nG * models; c++) {
    if (isnan(one.bic[c]) != isnan(split.bic[c])) worst_bic = INFINITY;
    else if (!isnan(one.bic[c]) && relative(one.bic[c], split.bic[c]) > worst_bic)
      worst_bic = relative(one.bic[c], split.bic[c]);
  }
  CHECK(worst_z <= 1e-8 && worst_bic <= 1e-10,
        "GMM %s on %s (shards %s, threads %s): responsibilities differ by %.3g, BIC by %.3g "
        "relative", name, b->name, shards, how, worst_z, worst_bic);
done:
  gmm_run_free(&one);
  gmm_run_free(&split);
}

static void test_gmm_shards(const harness_backend *b) {
  const int64_t n = 900, d = 3;
  double *grouped = clusters(n, d, 3, 1), *mixed = clusters(n, d, 4, 0);
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
  /* 200 points of one cluster and 3 far ones (two identical) in the last shard:
   * components collapse and are re-seeded at the worst-fitted rows of all shards */
  double *far = malloc(sizeof(double) * 203 * 2);
  for (int64_t i = 0; i < 203; i++)
    for (int64_t j = 0; j < 2; j++) far[i + j * 203] = i < 200 ? normal() : 60.0 + (double)((i == 202) * j);
  gpuml_gmm_params_init(&p);
  p.nG = 1;
  p.G[0] = 4;
  p.init = GPUML_GMM_INIT_KMEANSPP;
  p.reg = 1e-6;
  p.n_models = 1;
  p.models[0] = GPUML_GMM_VVV;
  check_gmm_case(b, "collapsing components, VVV G = 4", far, 203, 2, &p, "3", "2");
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

int main(void) {
  harness_init();
  test_device_list();
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "kNN over shards")) continue;
    test_knn_shards(b);
    if (harness_runs(b, "Gaussian mixtures over shards")) test_gmm_shards(b);
  }
  return check_summary("C");
}
