/* What the tests of mixtures over parts of the rows share (tests/test_shards.c over
 * shards, tests/mpi/test_gmm_mpi.c over MPI ranks): data of elongated clusters, a fit's
 * outputs, and the comparison of a split fit with the one-engine fit: the same model and
 * G, the same classification, the log-likelihood and every BIC within 1e-10 relative
 * (the parts' sums are added in another order). */
#ifndef GPUML_TEST_GMM_COMPARE_H
#define GPUML_TEST_GMM_COMPARE_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gpuml.h"

static uint64_t gmm_compare_state;
static double gmm_compare_uniform(void) {
  gmm_compare_state = gmm_compare_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return ((double)(gmm_compare_state >> 11) + 0.5) / 9007199254740992.0;
}
static double gmm_compare_normal(void) {
  return sqrt(-2 * log(gmm_compare_uniform())) * cos(6.283185307179586 * gmm_compare_uniform());
}

/* n points of G elongated, tilted clusters in d <= 8 dimensions, the same for the same
 * arguments; rows grouped by cluster (a part then holds some clusters alone, and other
 * components get nearly no weight there) or interleaved. */
static inline double *gmm_clusters(int64_t n, int64_t d, int64_t G, int grouped) {
  gmm_compare_state = 1234 + (uint64_t)(n * 31 + d * 7 + G);
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n; i++) {
    const int64_t k = grouped ? i * G / n : i % G;
    double e[8];
    for (int64_t j = 0; j < d; j++) e[j] = gmm_compare_normal();
    for (int64_t j = 0; j < d; j++)
      x[i + j * n] = 6.0 * (double)k * (j == 0 ? 1.0 : 0.5 * (double)(k % 2)) +
                     (j == k % d ? 2.0 + (double)k : 0.6 + 0.2 * (double)j) * e[j] +
                     (j > 0 ? 0.4 * e[j - 1] : 0);
  }
  return x;
}

/* 200 points of one cluster and 3 far ones (two identical) at the end: with k-means++
 * starts and a small reg, components collapse and are re-seeded. */
static inline double *gmm_collapsing(int64_t *n, int64_t *d) {
  *n = 203;
  *d = 2;
  gmm_compare_state = 31;
  double *x = malloc(sizeof(double) * 203 * 2);
  for (int64_t i = 0; i < 203; i++)
    for (int64_t j = 0; j < 2; j++)
      x[i + j * 203] = i < 200 ? gmm_compare_normal() : 60.0 + (double)((i == 202) * j);
  return x;
}

typedef struct {
  gpuml_status status;
  char message[512];
  gpuml_gmm_model model;
  int64_t *cls; /* the fit's rows */
  double *bic;
} gmm_fit_t;

static inline gmm_fit_t gmm_fit_alloc(int64_t rows, int64_t d, const gpuml_gmm_params *p) {
  gmm_fit_t f;
  memset(&f, 0, sizeof f);
  int64_t gmax = 1;
  for (int64_t g = 0; g < p->nG; g++) gmax = p->G[g] > gmax ? p->G[g] : gmax;
  f.model.weights = malloc(sizeof(double) * (size_t)gmax);
  f.model.means = malloc(sizeof(double) * (size_t)(d * gmax));
  f.model.covariances = malloc(sizeof(double) * (size_t)(d * d * gmax));
  f.cls = malloc(sizeof(int64_t) * (size_t)(rows > 0 ? rows : 1));
  f.bic = malloc(sizeof(double) * (size_t)(p->nG * GPUML_GMM_N_MODELS));
  return f;
}

/* Records the status of a fit just made (and its message). */
static inline void gmm_fit_done(gmm_fit_t *f, gpuml_status st) {
  f->status = st;
  snprintf(f->message, sizeof f->message, "%s", st ? gpuml_last_error() : "");
}

static inline void gmm_fit_free(gmm_fit_t *f) {
  free(f->model.weights);
  free(f->model.means);
  free(f->model.covariances);
  free(f->cls);
  free(f->bic);
}

static inline double gmm_relative(double a, double b) {
  return fabs(a - b) / (fabs(a) > 1 ? fabs(a) : 1);
}

/* `split` (a fit of rows r0 .. r0 + rows - 1 of the n x d data, or all of them) against
 * `one` (the one-engine fit of all n rows); `what` names the case in failures. */
static inline void gmm_compare(const char *what, const gmm_fit_t *split, const gmm_fit_t *one,
                               int64_t r0, int64_t rows, int64_t n, int64_t d,
                               const gpuml_gmm_params *p) {
  CHECK(split->status == GPUML_OK && one->status == GPUML_OK, "%s: %s / %s", what,
        split->message, one->message);
  if (split->status || one->status) return;
  CHECK(split->model.G == one->model.G && split->model.covariance == one->model.covariance,
        "%s: chose %s G = %lld, one engine %s G = %lld", what,
        gpuml_gmm_model_name(split->model.covariance, d), (long long)split->model.G,
        gpuml_gmm_model_name(one->model.covariance, d), (long long)one->model.G);
  CHECK(gmm_relative(split->model.loglik, one->model.loglik) <= 1e-10,
        "%s: loglik %.17g, one engine %.17g", what, split->model.loglik, one->model.loglik);
  CHECK(!memcmp(split->cls, one->cls + r0, sizeof(int64_t) * (size_t)rows),
        "%s: the classification differs", what);
  gpuml_gmm_covariance tried[GPUML_GMM_N_MODELS];
  const int64_t cells = p->nG * gpuml_gmm_models_tried(n, d, p, tried);
  double worst = 0;
  for (int64_t c = 0; c < cells; c++)
    if (isnan(split->bic[c]) != isnan(one->bic[c])) worst = INFINITY;
    else if (!isnan(one->bic[c]) && gmm_relative(split->bic[c], one->bic[c]) > worst)
      worst = gmm_relative(split->bic[c], one->bic[c]);
  CHECK(worst <= 1e-10, "%s: the BIC differs by %.3g relative", what, worst);
}

#endif
