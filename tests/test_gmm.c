#define _POSIX_C_SOURCE 200809L /* setenv, strdup */
/* C tests of the Gaussian mixtures through gpuml.h, on every backend of the parity
 * harness (tests/harness.h); on the CUDA backend the fits are also repeated on the CPU
 * backend and compared. The mixtures always compute in fp64, so GPUML_TEST_PRECISION
 * changes nothing here. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "gpuml.h"
#include "gmm.h"

static gpuml_backend test_backend = GPUML_BACKEND_CPU;

/* ---- data ----------------------------------------------------------------------------- */

static uint64_t rng_state = 2024;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) {
  return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform());
}

/* n points from G Gaussian clusters in d dimensions: centres uniform in a cube of side
 * `spread`, covariances A A' with A lower triangular (diagonal in [0.5, 1.5], below it
 * in [-0.5, 0.5]; only the diagonal when `axis_aligned`). Sizes are unequal (1 : 2 : ...).
 * Column-major x (n x d), true labels 0..G-1. */
static double *mixture(int64_t n, int64_t d, int64_t G, double spread, int axis_aligned,
                       uint64_t seed, int64_t *label) {
  rng_state = seed;
  double *x = malloc(sizeof(double) * n * d);
  double *centre = malloc(sizeof(double) * G * d), *A = malloc(sizeof(double) * G * d * d);
  for (int64_t k = 0; k < G; k++) {
    for (int64_t j = 0; j < d; j++) centre[k * d + j] = spread * uniform();
    for (int64_t a = 0; a < d; a++)
      for (int64_t b = 0; b < d; b++)
        A[k * d * d + a + b * d] = a == b ? 0.5 + uniform() : (a > b && !axis_aligned ? uniform() - 0.5 : 0);
  }
  int64_t total_weight = G * (G + 1) / 2;
  double *e = malloc(sizeof(double) * d);
  for (int64_t i = 0; i < n; i++) {
    int64_t k = 0, acc = 1, slot = (i * total_weight) / n;
    while (slot >= acc) acc += ++k + 1;
    label[i] = k;
    for (int64_t j = 0; j < d; j++) e[j] = normal();
    for (int64_t a = 0; a < d; a++) {
      double v = centre[k * d + a];
      for (int64_t b = 0; b <= a; b++) v += A[k * d * d + a + b * d] * e[b];
      x[i + a * n] = v;
    }
  }
  free(e);
  free(centre);
  free(A);
  return x;
}

/* Adjusted Rand index of two labellings with labels in 0..ka-1 and 0..kb-1. */
static double adjusted_rand(const int64_t *a, const int64_t *b, int64_t n, int64_t ka,
                            int64_t kb) {
  double *t = calloc((size_t)(ka * kb), sizeof(double));
  double *ra = calloc((size_t)ka, sizeof(double)), *rb = calloc((size_t)kb, sizeof(double));
  for (int64_t i = 0; i < n; i++) {
    t[a[i] + b[i] * ka] += 1;
    ra[a[i]] += 1;
    rb[b[i]] += 1;
  }
  double sum_t = 0, sum_a = 0, sum_b = 0;
  for (int64_t i = 0; i < ka * kb; i++) sum_t += t[i] * (t[i] - 1) / 2;
  for (int64_t i = 0; i < ka; i++) sum_a += ra[i] * (ra[i] - 1) / 2;
  for (int64_t i = 0; i < kb; i++) sum_b += rb[i] * (rb[i] - 1) / 2;
  const double pairs = (double)n * (double)(n - 1) / 2, expected = sum_a * sum_b / pairs;
  const double top = 0.5 * (sum_a + sum_b);
  free(t);
  free(ra);
  free(rb);
  return top == expected ? 1 : (sum_t - expected) / (top - expected);
}

/* ---- fitting -------------------------------------------------------------------------- */

/* Models by mclust's name, and the three the older tests cover. */
static const char *model_label(gpuml_gmm_covariance m) { return gpuml_gmm_model_name(m, 2); }
static const gpuml_gmm_covariance three_models[] = {GPUML_GMM_VVV, GPUML_GMM_VVI, GPUML_GMM_VII};
/* The form of each model's covariance matrices (the test's own statement of it). */
enum { FULL, DIAGONAL, SPHERICAL };
static int structure_of(gpuml_gmm_covariance m) {
  const char *name = gpuml_gmm_model_name(m, 2);
  return name[2] != 'I' ? FULL : name[1] == 'I' ? SPHERICAL : DIAGONAL;
}

static gpuml_options options(gpuml_backend backend) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = backend;
  return opt;
}

typedef struct {
  gpuml_gmm_model model;
  double *z, *uncertainty, *bic;
  int64_t *cls;
  gpuml_status status;
  gpuml_backend used;
  double seconds; /* the call's */
} fit_t;

static void fit_free(fit_t *f) {
  free(f->model.weights);
  free(f->model.means);
  free(f->model.covariances);
  free(f->z);
  free(f->uncertainty);
  free(f->bic);
  free(f->cls);
}

/* The start the fits of fit_with() use. */
static gpuml_gmm_init test_init = GPUML_GMM_INIT_HC;

static fit_t fit_with(const double *x, int64_t n, int64_t d, const int64_t *G, int64_t nG,
                      gpuml_gmm_covariance cov, int64_t max_iter, double tol, double reg,
                      int64_t n_init, uint64_t seed, gpuml_options *opt) {
  fit_t f;
  memset(&f, 0, sizeof f);
  int64_t gmax = 1;
  for (int64_t g = 0; g < nG; g++)
    if (G[g] > gmax) gmax = G[g];
  f.model.weights = malloc(sizeof(double) * gmax);
  f.model.means = malloc(sizeof(double) * d * gmax);
  f.model.covariances = malloc(sizeof(double) * d * d * gmax);
  f.z = malloc(sizeof(double) * n * gmax);
  f.uncertainty = malloc(sizeof(double) * n);
  f.cls = malloc(sizeof(int64_t) * n);
  f.bic = malloc(sizeof(double) * (nG > 0 ? nG : 1));
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  p.nG = nG;
  for (int64_t g = 0; g < nG && g < GPUML_GMM_MAX_G; g++) p.G[g] = G[g];
  p.models[0] = cov;
  p.n_models = 1;
  p.init = test_init;
  p.max_iter = max_iter;
  p.tol = tol;
  p.reg = reg;
  p.n_init = n_init;
  opt->seed = seed;
  gpuml_gmm_result res;
  f.status = gpuml_gmm_fit(x, n, d, &p, &f.model, f.z, f.cls, f.uncertainty, f.bic, opt, &res);
  f.used = f.status ? GPUML_BACKEND_AUTO : res.run.backend;
  f.seconds = f.status ? 0 : res.run.seconds;
  return f;
}

static fit_t fit(const double *x, int64_t n, int64_t d, const int64_t *G, int64_t nG,
                 gpuml_gmm_covariance cov, uint64_t seed) {
  gpuml_options opt = options(test_backend);
  return fit_with(x, n, d, G, nG, cov, 1000, 1e-8, 1e-6, 1, seed, &opt);
}

static int all_finite(const double *v, int64_t count) {
  for (int64_t i = 0; i < count; i++)
    if (!isfinite(v[i])) return 0;
  return 1;
}

static int fit_finite(const fit_t *f, int64_t n, int64_t d) {
  const int64_t G = f->model.G;
  return all_finite(f->model.weights, G) && all_finite(f->model.means, d * G) &&
         all_finite(f->model.covariances, d * d * G) && all_finite(f->z, n * G) &&
         all_finite(f->uncertainty, n) && isfinite(f->model.loglik);
}

static double rel_diff(double a, double b) {
  return fabs(a - b) / (fabs(b) > 1e-300 ? fabs(b) : 1e-300);
}

static double max_abs_diff(const double *a, const double *b, int64_t count) {
  double m = 0;
  for (int64_t i = 0; i < count; i++)
    if (fabs(a[i] - b[i]) > m) m = fabs(a[i] - b[i]);
  return m;
}

/* log det of a d x d SPD matrix and S^{-1} v products, by a plain Cholesky. */
static double chol_logdet(const double *S, int64_t d) {
  double *L = calloc((size_t)(d * d), sizeof(double)), logdet = 0;
  for (int64_t j = 0; j < d; j++) {
    double s = S[j + j * d];
    for (int64_t p = 0; p < j; p++) s -= L[j + p * d] * L[j + p * d];
    L[j + j * d] = sqrt(s);
    logdet += 2 * log(L[j + j * d]);
    for (int64_t i = j + 1; i < d; i++) {
      double t = S[i + j * d];
      for (int64_t p = 0; p < j; p++) t -= L[i + p * d] * L[j + p * d];
      L[i + j * d] = t / L[j + j * d];
    }
  }
  free(L);
  return logdet;
}

/* ---- tests ---------------------------------------------------------------------------- */

/* One component: the maximum-likelihood answer is known in closed form. */
static void test_one_component(void) {
  const int64_t n = 500, d = 3, G = 1;
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, 1, 10, 0, 11, label);
  double mean[3], S[9];
  for (int64_t j = 0; j < d; j++) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i + j * n];
    mean[j] = s / n;
  }
  for (int64_t a = 0; a < d; a++)
    for (int64_t b = 0; b < d; b++) {
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += (x[i + a * n] - mean[a]) * (x[i + b * n] - mean[b]);
      S[a + b * d] = s / n;
    }
  const double log2pi = log(2 * 3.14159265358979323846);
  for (int t_ = 0; t_ < GPUML_GMM_N_MODELS; t_++) {
    const gpuml_gmm_covariance t = (gpuml_gmm_covariance)t_;
    gpuml_options opt = options(test_backend);
    fit_t f = fit_with(x, n, d, &G, 1, t, 100, 1e-12, 0, 1, 1, &opt);
    CHECK(f.status == GPUML_OK, "G = 1 %s: %s", model_label(t), gpuml_last_error());
    if (f.status) {
      fit_free(&f);
      continue;
    }
    double want[9] = {0}, logdet = 0, var_mean = (S[0] + S[4] + S[8]) / 3;
    for (int64_t a = 0; a < d; a++)
      for (int64_t b = 0; b < d; b++)
        want[a + b * d] = structure_of(t) == FULL ? S[a + b * d]
                          : a != b                 ? 0
                          : structure_of(t) == DIAGONAL ? S[a + a * d]
                                                        : var_mean;
    logdet = chol_logdet(want, d);
    /* sum_i (x_i - m)' Sigma^-1 (x_i - m) = n tr(Sigma^-1 S) = n d for the MLE (full and
     * diagonal); for the spherical MLE too (tr(S) / sigma^2 = d). */
    const double loglik = -0.5 * n * (d * log2pi + logdet + d);
    CHECK(f.model.G == 1 && f.model.d == d, "G = 1 model shape");
    CHECK(fabs(f.model.weights[0] - 1) < 1e-14, "G = 1 weight %g", f.model.weights[0]);
    CHECK(max_abs_diff(f.model.means, mean, d) < 1e-10, "G = 1 %s means",
          model_label(t));
    CHECK(max_abs_diff(f.model.covariances, want, d * d) < 1e-10, "G = 1 %s covariance",
          model_label(t));
    CHECK(rel_diff(f.model.loglik, loglik) < 1e-10, "G = 1 %s loglik %.12g, want %.12g",
          model_label(t), f.model.loglik, loglik);
    CHECK(f.model.converged && f.model.n_iter <= 3, "G = 1 converges at once (%lld)",
          (long long)f.model.n_iter);
    const double bic = 2 * loglik - gpuml_gmm_npar(t, 1, d) * log((double)n);
    CHECK(rel_diff(f.bic[0], bic) < 1e-10, "G = 1 BIC %g, want %g", f.bic[0], bic);
    int ones = 1;
    for (int64_t i = 0; i < n; i++) ones &= f.z[i] == 1 && f.cls[i] == 0 && f.uncertainty[i] == 0;
    CHECK(ones, "G = 1: every z is 1");
    fit_free(&f);
  }
  /* mclust's nMclustParams(model, d = 4, G = 3), in mclust's order */
  const int64_t npar_mclust[GPUML_GMM_N_MODELS] = {15, 17, 18, 20, 24, 26, 24,
                                                   26, 30, 32, 36, 38, 42, 44};
  int npar_ok = 1;
  for (int m = 0; m < GPUML_GMM_N_MODELS; m++)
    npar_ok &= gpuml_gmm_npar((gpuml_gmm_covariance)m, 3, 4) == npar_mclust[m];
  CHECK(npar_ok, "npar as mclust counts it, all 14 models");
  CHECK(gpuml_gmm_npar(GPUML_GMM_VVV, 2, 1) == gpuml_gmm_npar(GPUML_GMM_VII, 2, 1) &&
            gpuml_gmm_npar(GPUML_GMM_EEE, 2, 1) == gpuml_gmm_npar(GPUML_GMM_EII, 2, 1) &&
            gpuml_gmm_npar(GPUML_GMM_EII, 2, 1) == 1 + 2 + 1,
        "npar in one dimension: mclust's E and V");
  free(x);
  free(label);
}

/* Separated clusters are recovered by every covariance structure. */
static void test_separated(void) {
  const int64_t n = 1500, G = 3;
  for (int64_t d = 2; d <= 6; d += 4) {
    for (int t_ = 0; t_ < 3; t_++) {
      const gpuml_gmm_covariance t = three_models[t_];
      const gpuml_gmm_covariance cov = t;
      int64_t *label = malloc(sizeof(int64_t) * n);
      double *x = mixture(n, d, G, 30, cov != GPUML_GMM_FULL, 100 + d + t, label);
      fit_t f = fit(x, n, d, &G, 1, cov, 7);
      CHECK(f.status == GPUML_OK, "separated d = %lld %s: %s", (long long)d,
            model_label(cov), gpuml_last_error());
      if (!f.status) {
        const double ari = adjusted_rand(label, f.cls, n, G, G);
        CHECK(ari >= 0.95, "separated d = %lld %s: ARI %.4f", (long long)d,
              model_label(cov), ari);
        CHECK(f.model.converged, "separated fits converge");
        CHECK(fit_finite(&f, n, d), "separated: all finite");
        double wsum = 0;
        for (int64_t k = 0; k < G; k++) wsum += f.model.weights[k];
        CHECK(fabs(wsum - 1) < 1e-12, "weights sum to 1 (%.15g)", wsum);
        int rows_ok = 1;
        for (int64_t i = 0; i < n; i++) {
          double s = 0;
          for (int64_t k = 0; k < G; k++) s += f.z[i + k * n];
          rows_ok &= fabs(s - 1) < 1e-12;
        }
        CHECK(rows_ok, "every row of z sums to 1");
        if (cov != GPUML_GMM_FULL) {
          int diag_ok = 1;
          for (int64_t k = 0; k < G; k++)
            for (int64_t a = 0; a < d; a++)
              for (int64_t b = 0; b < d; b++) {
                const double v = f.model.covariances[k * d * d + a + b * d];
                if (a != b) diag_ok &= v == 0;
                else if (cov == GPUML_GMM_SPHERICAL) diag_ok &= v == f.model.covariances[k * d * d];
              }
          CHECK(diag_ok, "%s covariances have the documented form", model_label(cov));
        } else {
          int sym = 1;
          for (int64_t k = 0; k < G; k++)
            for (int64_t a = 0; a < d; a++)
              for (int64_t b = 0; b < d; b++)
                sym &= f.model.covariances[k * d * d + a + b * d] ==
                       f.model.covariances[k * d * d + b + a * d];
          CHECK(sym, "full covariances are exactly symmetric");
        }
      }
      fit_free(&f);
      free(x);
      free(label);
    }
  }
}

/* EM never lowers the log-likelihood, iteration after iteration. */
static void test_monotone(void) {
  const int64_t n = 800, d = 3, G = 4;
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, G, 4, 0, 55, label);
  for (int t_ = 0; t_ < GPUML_GMM_N_MODELS; t_++) {
    const gpuml_gmm_covariance t = (gpuml_gmm_covariance)t_;
    double prev = -INFINITY;
    int monotone = 1, ok = 1, timed = 1;
    for (int64_t it = 1; it <= 25; it++) {
      gpuml_options opt = options(test_backend);
      fit_t f = fit_with(x, n, d, &G, 1, (gpuml_gmm_covariance)t, it, 0, 1e-6, 1, 3, &opt);
      ok &= f.status == GPUML_OK && f.model.n_iter == it && !f.model.converged;
      /* the iterations' own clock: positive, and within the call's */
      timed &= f.model.seconds_em > 0 && f.model.seconds_em <= f.seconds;
      if (f.model.loglik < prev - 1e-10 * fabs(prev)) monotone = 0;
      prev = f.model.loglik;
      fit_free(&f);
    }
    CHECK(ok, "%s: max_iter iterations run with tol = 0", model_label(t));
    CHECK(monotone, "%s: the log-likelihood never decreases", model_label(t));
    CHECK(timed, "%s: the EM iterations' seconds are within the call's", model_label(t));
  }
  free(x);
  free(label);
}

/* BIC picks the true G; fitting one G gives the same fit as within a list. */
static void test_bic(void) {
  const int64_t n = 900, d = 3, Gs[] = {1, 2, 3, 4, 5, 6};
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, 3, 25, 0, 77, label);
  fit_t f = fit(x, n, d, Gs, 6, GPUML_GMM_FULL, 5);
  CHECK(f.status == GPUML_OK, "BIC fit: %s", gpuml_last_error());
  if (!f.status) {
    CHECK(f.model.G == 3, "BIC picks G = 3, not %lld", (long long)f.model.G);
    int finite = all_finite(f.bic, 6), best = 1;
    for (int g = 0; g < 6; g++) best &= f.bic[g] <= f.bic[2];
    CHECK(finite && best, "BIC per G finite, largest at G = 3");
    CHECK(adjusted_rand(label, f.cls, n, 3, f.model.G) >= 0.95, "BIC fit classes");
    const double want = 2 * f.model.loglik - gpuml_gmm_npar(GPUML_GMM_FULL, 3, d) * log((double)n);
    CHECK(rel_diff(f.bic[2], want) < 1e-12, "BIC of the chosen model matches its loglik");
    const int64_t three = 3;
    fit_t one = fit(x, n, d, &three, 1, GPUML_GMM_FULL, 5);
    if (test_backend == GPUML_BACKEND_CPU) {
      CHECK(one.status == GPUML_OK && one.model.loglik == f.model.loglik &&
                memcmp(one.model.means, f.model.means, sizeof(double) * d * 3) == 0 &&
                memcmp(one.z, f.z, sizeof(double) * n * 3) == 0,
            "G = 3 alone gives the same fit as within 1:6");
    } else {
      /* On the GPU the work buffers are sized for the largest G of the call, and cuBLAS
       * may pick other kernels for other shapes: the same fit, up to rounding. */
      int same_classes = one.status == GPUML_OK;
      for (int64_t i = 0; same_classes && i < n; i++) same_classes = one.cls[i] == f.cls[i];
      CHECK(one.status == GPUML_OK && rel_diff(one.model.loglik, f.model.loglik) < 1e-10 &&
                same_classes,
            "G = 3 alone gives the same fit as within 1:6 (to rounding on the GPU)");
    }
    fit_free(&one);
  }
  fit_free(&f);
  free(x);
  free(label);
}

/* Same seed: identical results, whatever the number of threads; n_init keeps the best. */
static void test_reproducible(void) {
  const int64_t n = 2500, d = 5, G = 4;
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, G, 6, 0, 91, label);
  for (int t_ = 0; t_ < 3; t_++) {
    const gpuml_gmm_covariance t = three_models[t_];
    gpuml_options o1 = options(test_backend), o2 = options(test_backend);
    o2.threads = 1;
    fit_t a = fit_with(x, n, d, &G, 1, t, 1000, 1e-8, 1e-6, 1, 99, &o1);
    fit_t b = fit_with(x, n, d, &G, 1, t, 1000, 1e-8, 1e-6, 1, 99, &o1);
    fit_t c = fit_with(x, n, d, &G, 1, t, 1000, 1e-8, 1e-6, 1, 99, &o2);
    CHECK(!a.status && !b.status && !c.status, "reproducibility fits run");
    if (!a.status && !b.status && !c.status) {
      CHECK(a.model.loglik == b.model.loglik && a.model.n_iter == b.model.n_iter &&
                memcmp(a.model.means, b.model.means, sizeof(double) * d * G) == 0 &&
                memcmp(a.model.covariances, b.model.covariances, sizeof(double) * d * d * G) == 0 &&
                memcmp(a.z, b.z, sizeof(double) * n * G) == 0,
            "%s: the same seed gives identical fits", model_label(t));
      CHECK(a.model.loglik == c.model.loglik &&
                memcmp(a.model.means, c.model.means, sizeof(double) * d * G) == 0 &&
                memcmp(a.z, c.z, sizeof(double) * n * G) == 0,
            "%s: one thread gives the same fit as several", model_label(t));
    }
    /* Large enough for the threaded passes (small ones run on one thread anyway). */
    const int64_t nb = 90000, db = 6;
    int64_t *lb = malloc(sizeof(int64_t) * nb);
    double *xb = mixture(nb, db, G, 6, 0, 93, lb);
    gpuml_options o3 = options(test_backend), o4 = options(test_backend);
    o3.threads = 2;
    o4.threads = 1;
    fit_t p2 = fit_with(xb, nb, db, &G, 1, t, 15, 0, 1e-6, 1, 5, &o3);
    fit_t p1 = fit_with(xb, nb, db, &G, 1, t, 15, 0, 1e-6, 1, 5, &o4);
    CHECK(!p1.status && !p2.status && p1.model.loglik == p2.model.loglik &&
              memcmp(p1.model.covariances, p2.model.covariances, sizeof(double) * db * db * G) == 0 &&
              memcmp(p1.z, p2.z, sizeof(double) * nb * G) == 0,
          "%s: 90000 rows, one thread and two give identical fits", model_label(t));
    fit_free(&p1);
    fit_free(&p2);
    free(xb);
    free(lb);
    fit_t m = fit_with(x, n, d, &G, 1, t, 1000, 1e-8, 1e-6, 6, 99, &o1);
    CHECK(!m.status && m.model.loglik >= a.model.loglik,
          "%s: n_init = 6 keeps a fit at least as good as the first start (%.10g vs %.10g)",
          model_label(t), m.model.loglik, a.model.loglik);
    fit_free(&a);
    fit_free(&b);
    fit_free(&c);
    fit_free(&m);
  }
  free(x);
  free(label);
}

/* predict on the training data gives the fit's z and classes; new points near a centre
 * go to its component. */
static void test_predict(void) {
  const int64_t n = 1200, d = 4, G = 3;
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, G, 20, 0, 123, label);
  for (int t_ = 0; t_ < 3; t_++) {
    const gpuml_gmm_covariance t = three_models[t_];
    fit_t f = fit(x, n, d, &G, 1, t, 8);
    CHECK(!f.status, "predict: fit");
    if (f.status) {
      fit_free(&f);
      continue;
    }
    double *z = malloc(sizeof(double) * n * G), *u = malloc(sizeof(double) * n);
    int64_t *cls = malloc(sizeof(int64_t) * n);
    gpuml_options opt = options(test_backend);
    gpuml_status st = gpuml_gmm_predict(&f.model, x, n, z, cls, u, &opt, NULL);
    CHECK(st == GPUML_OK, "predict: %s", gpuml_last_error());
    CHECK(memcmp(cls, f.cls, sizeof(int64_t) * n) == 0, "%s: predict on the training data gives the fitted classes",
          model_label(t));
    CHECK(max_abs_diff(z, f.z, n * G) < 1e-10, "%s: predict gives the fitted z",
          model_label(t));
    /* the component means themselves */
    double *q = malloc(sizeof(double) * G * d);
    for (int64_t k = 0; k < G; k++)
      for (int64_t j = 0; j < d; j++) q[k + j * G] = f.model.means[j + k * d];
    st = gpuml_gmm_predict(&f.model, q, G, NULL, cls, NULL, &opt, NULL);
    int own = st == GPUML_OK;
    for (int64_t k = 0; k < G && own; k++) own &= cls[k] == k;
    CHECK(own, "each mean is classified to its own component");
    free(q);
    free(z);
    free(u);
    free(cls);
    fit_free(&f);
  }
  free(x);
  free(label);
}

static int expect_error(gpuml_status st, gpuml_status want, const char *id, const char *what) {
  int ok = st == want && strcmp(gpuml_last_error_id(), id) == 0 && gpuml_last_error()[0];
  CHECK(ok, "%s: status %d id \"%s\" (%s), want %d \"%s\"", what, (int)st,
        gpuml_last_error_id(), gpuml_last_error(), (int)want, id);
  return ok;
}

static void test_bad_input(void) {
  const int64_t n = 40, d = 3;
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, 2, 10, 0, 5, label);
  gpuml_options opt = options(test_backend);
  const int64_t G2 = 2, G0 = 0, G41 = 41, Gs[] = {1, 2, 50};
  fit_t f;
  f = fit_with(x, n, d, &G41, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badG", "G > n");
  CHECK(strstr(gpuml_last_error(), "G = 41 exceeds the 40 rows") != NULL, "G > n message: %s",
        gpuml_last_error());
  fit_free(&f);
  f = fit_with(x, n, d, Gs, 3, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badG", "G > n in a list");
  fit_free(&f);
  f = fit_with(x, n, d, &G0, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badG", "G = 0");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 0, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badG", "no G");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 1, (gpuml_gmm_covariance)14, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badModel", "model code 14");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 1, GPUML_GMM_FULL, 0, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badMaxIter", "max_iter = 0");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 1, GPUML_GMM_FULL, 10, -1, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badTol", "tol < 0");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 1, GPUML_GMM_FULL, 10, NAN, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badTol", "tol NaN");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 1, GPUML_GMM_FULL, 10, 1e-8, -1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badReg", "reg < 0");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 1, GPUML_GMM_FULL, 10, 1e-8, INFINITY, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badReg", "reg Inf");
  fit_free(&f);
  f = fit_with(x, n, d, &G2, 1, GPUML_GMM_FULL, 10, 1e-8, 1e-6, 0, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badNInit", "n_init = 0");
  fit_free(&f);

  /* outputs are left alone by a failed check */
  f = fit_with(x, n, d, &G41, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  fit_free(&f);
  {
    double w[2] = {-7, -7}, mu[6], cov[18], z[80], bic = -7;
    gpuml_gmm_model model = {GPUML_GMM_FULL, 0, 0, w, mu, cov, 0, 0, 0, 0};
    gpuml_gmm_params p;
    gpuml_gmm_params_init(&p);
    p.G[0] = G2;
    p.nG = 1;
    p.reg = -1;
    gpuml_status st = gpuml_gmm_fit(x, n, d, &p, &model, z, NULL, NULL, &bic, &opt, NULL);
    CHECK(st == GPUML_ERR_ARG && w[0] == -7 && bic == -7 && model.G == 0,
          "a failed check writes nothing");
    model.weights = NULL;
    p.reg = 1e-6;
    st = gpuml_gmm_fit(x, n, d, &p, &model, z, NULL, NULL, &bic, &opt, NULL);
    expect_error(st, GPUML_ERR_ARG, "gmm:badOutput", "NULL weights");
    st = gpuml_gmm_fit(x, n, d, NULL, &model, z, NULL, NULL, &bic, &opt, NULL);
    expect_error(st, GPUML_ERR_ARG, "gmm:badParams", "NULL params");
  }

  double *bad = malloc(sizeof(double) * n * d);
  memcpy(bad, x, sizeof(double) * n * d);
  bad[7 + 2 * n] = NAN;
  f = fit_with(bad, n, d, &G2, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:nonFinite", "NaN data");
  CHECK(strstr(gpuml_last_error(), "row 8, column 3") != NULL, "NaN position: %s", gpuml_last_error());
  fit_free(&f);
  bad[7 + 2 * n] = -INFINITY;
  f = fit_with(bad, n, d, &G2, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:nonFinite", "-Inf data");
  fit_free(&f);
  f = fit_with(NULL, n, d, &G2, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badData", "NULL data");
  fit_free(&f);
  f = fit_with(x, 0, d, &G2, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badData", "no rows");
  fit_free(&f);

  /* fewer rows than columns: full needs a real reg; diag and spherical do not */
  const int64_t nw = 6, dw = 10, G1 = 1;
  double *wide = malloc(sizeof(double) * nw * dw);
  for (int64_t i = 0; i < nw * dw; i++) wide[i] = normal();
  f = fit_with(wide, nw, dw, &G1, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:tooFewRows", "n <= d, full");
  CHECK(strstr(gpuml_last_error(), "diag") != NULL, "tooFewRows suggests diag: %s", gpuml_last_error());
  fit_free(&f);
  f = fit_with(wide, nw, dw, &G1, 1, GPUML_GMM_FULL, 100, 1e-8, 0.1, 1, 1, &opt);
  CHECK(f.status == GPUML_OK && fit_finite(&f, nw, dw), "n <= d, full with reg = 0.1: %s",
        gpuml_last_error());
  fit_free(&f);
  f = fit_with(wide, nw, dw, &G1, 1, GPUML_GMM_DIAG, 100, 1e-8, 1e-6, 1, 1, &opt);
  CHECK(f.status == GPUML_OK && fit_finite(&f, nw, dw), "n <= d, diag: %s", gpuml_last_error());
  fit_free(&f);
  /* two groups of three rows in ten dimensions: the hierarchical start's groups are
   * singular for VVI (as in mclust), k-means++'s pooled start is not */
  f = fit_with(wide, nw, dw, &G2, 1, GPUML_GMM_EII, 100, 1e-8, 1e-6, 1, 1, &opt);
  CHECK(f.status == GPUML_OK && fit_finite(&f, nw, dw), "n <= d, EII, G = 2: %s",
        gpuml_last_error());
  fit_free(&f);
  test_init = GPUML_GMM_INIT_KMEANSPP;
  f = fit_with(wide, nw, dw, &G2, 1, GPUML_GMM_DIAG, 100, 1e-8, 1e-6, 1, 1, &opt);
  CHECK(f.status == GPUML_OK && fit_finite(&f, nw, dw), "n <= d, diag, k-means++: %s",
        gpuml_last_error());
  fit_free(&f);
  test_init = GPUML_GMM_INIT_HC;

  /* fewer distinct rows than G */
  double *dup = malloc(sizeof(double) * 30 * 2);
  for (int64_t i = 0; i < 30; i++) {
    dup[i] = (double)(i % 2);
    dup[i + 30] = 5.0 * (i % 2);
  }
  const int64_t G3 = 3;
  test_init = GPUML_GMM_INIT_KMEANSPP;
  f = fit_with(dup, 30, 2, &G3, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_ARG, "gmm:badG", "k-means++: 3 components for 2 distinct rows");
  CHECK(strstr(gpuml_last_error(), "2 distinct rows") != NULL, "distinct rows message: %s",
        gpuml_last_error());
  fit_free(&f);
  const int64_t G123[] = {1, 2, 3};
  f = fit_with(dup, 30, 2, G123, 3, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  CHECK(f.status == GPUML_OK && f.model.G == 2 && isnan(f.bic[2]) && isfinite(f.bic[0]) &&
            isfinite(f.bic[1]),
        "k-means++, G = 1:3 on 2 distinct rows: G = 3 gets a NaN BIC, G = 2 is chosen (%s)",
        gpuml_last_error());
  fit_free(&f);
  test_init = GPUML_GMM_INIT_HC;
  /* the hierarchical start, as mclust: groups of identical rows cannot be fitted */
  f = fit_with(dup, 30, 2, &G3, 1, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_NUMERIC, "gmm:singular", "hc: 3 components for 2 distinct rows");
  fit_free(&f);
  /* two distinct rows span a line: even one VVV component is singular */
  f = fit_with(dup, 30, 2, G123, 3, GPUML_GMM_FULL, 100, 1e-8, 1e-6, 1, 1, &opt);
  expect_error(f.status, GPUML_ERR_NUMERIC, "gmm:singular", "hc, G = 1:3 on 2 distinct rows");
  fit_free(&f);
  /* EII: G = 1 can be fitted; 2 and 3 start from groups of identical rows */
  f = fit_with(dup, 30, 2, G123, 3, GPUML_GMM_EII, 100, 1e-8, 1e-6, 1, 1, &opt);
  CHECK(f.status == GPUML_OK && f.model.G == 1 && isfinite(f.bic[0]) && isnan(f.bic[1]) &&
            isnan(f.bic[2]),
        "hc, EII, G = 1:3 on 2 distinct rows: G = 2, 3 get a NaN BIC (%s)", gpuml_last_error());
  fit_free(&f);

  /* names */
  gpuml_gmm_covariance c = GPUML_GMM_FULL;
  CHECK(gpuml_gmm_parse_covariance("Diag", &c) == GPUML_OK && c == GPUML_GMM_VVI, "parse Diag");
  CHECK(gpuml_gmm_parse_covariance("SPHERICAL", &c) == GPUML_OK && c == GPUML_GMM_VII,
        "parse SPHERICAL");
  CHECK(gpuml_gmm_parse_covariance("vev", &c) == GPUML_OK && c == GPUML_GMM_VEV, "parse vev");
  CHECK(gpuml_gmm_parse_covariance("E", &c) == GPUML_OK && c == GPUML_GMM_EII, "parse E");
  expect_error(gpuml_gmm_parse_covariance("VVX", &c), GPUML_ERR_ARG, "gmm:badModel",
               "unknown model name");
  CHECK(strstr(gpuml_last_error(), "EII, VII, EEI, VEI, EVI, VVI, EEE, VEE, EVE, VVE, EEV, VEV, "
                                   "EVV, VVV") != NULL,
        "the 14 names listed: %s", gpuml_last_error());
  int names_ok = 1;
  for (int m = 0; m < GPUML_GMM_N_MODELS; m++) {
    gpuml_gmm_covariance back = GPUML_GMM_VVV;
    names_ok &= gpuml_gmm_parse_covariance(gpuml_gmm_model_name((gpuml_gmm_covariance)m, 3),
                                           &back) == GPUML_OK &&
                back == (gpuml_gmm_covariance)m;
  }
  CHECK(names_ok, "every name parses back to its model");
  CHECK(strcmp(gpuml_gmm_model_name(GPUML_GMM_EVE, 1), "E") == 0 &&
            strcmp(gpuml_gmm_model_name(GPUML_GMM_VEE, 1), "V") == 0,
        "one dimension: mclust's E and V");
  /* mclust's default lists */
  gpuml_gmm_params dp;
  gpuml_gmm_params_init(&dp);
  gpuml_gmm_covariance tried[GPUML_GMM_N_MODELS];
  CHECK(gpuml_gmm_models_tried(100, 5, &dp, tried) == 14 && tried[0] == GPUML_GMM_EII &&
            tried[13] == GPUML_GMM_VVV,
        "n > d: all 14 models, in mclust's order");
  CHECK(gpuml_gmm_models_tried(5, 5, &dp, tried) == 6 && tried[5] == GPUML_GMM_VVI,
        "n <= d: the six spherical and diagonal models");
  CHECK(gpuml_gmm_models_tried(100, 1, &dp, tried) == 2 && tried[0] == GPUML_GMM_EII &&
            tried[1] == GPUML_GMM_VII,
        "d = 1: E and V");
  dp.n_models = 2;
  dp.models[0] = GPUML_GMM_EVE;
  dp.models[1] = GPUML_GMM_EEI;
  CHECK(gpuml_gmm_models_tried(5, 5, &dp, tried) == 2 && tried[0] == GPUML_GMM_EVE,
        "a given list is tried as given");

  /* predict with a bad model or data */
  fit_t good = fit(x, n, d, &G2, 1, GPUML_GMM_FULL, 1);
  if (!good.status) {
    int64_t cls[40];
    gpuml_gmm_model m = good.model;
    gpuml_status st = gpuml_gmm_predict(&m, bad, n, NULL, cls, NULL, &opt, NULL);
    expect_error(st, GPUML_ERR_ARG, "gmm:nonFinite", "predict on -Inf data");
    double w0 = m.weights[0];
    m.weights[0] = 0;
    expect_error(gpuml_gmm_predict(&m, x, n, NULL, cls, NULL, &opt, NULL), GPUML_ERR_ARG,
                 "gmm:badModel", "predict with a zero weight");
    m.weights[0] = w0;
    double c00 = m.covariances[0];
    m.covariances[0] = -1;
    expect_error(gpuml_gmm_predict(&m, x, n, NULL, cls, NULL, &opt, NULL), GPUML_ERR_ARG,
                 "gmm:badModel", "predict with a covariance that is not positive definite");
    m.covariances[0] = c00;
    m.G = 0;
    expect_error(gpuml_gmm_predict(&m, x, n, NULL, cls, NULL, &opt, NULL), GPUML_ERR_ARG,
                 "gmm:badModel", "predict with G = 0");
    m.G = 2;
    expect_error(gpuml_gmm_predict(NULL, x, n, NULL, cls, NULL, &opt, NULL), GPUML_ERR_ARG,
                 "gmm:badModel", "predict with no model");
    CHECK(gpuml_gmm_predict(&m, x, n, NULL, cls, NULL, &opt, NULL) == GPUML_OK, "the model still works");
  }
  fit_free(&good);
  free(dup);
  free(wide);
  free(bad);
  free(x);
  free(label);
}

/* Components that collapse (an isolated point, reg = 0) are re-seeded or reported;
 * nothing is ever NaN. */
static void test_collapse(void) {
  const int64_t n = 203, d = 2;
  double *x = malloc(sizeof(double) * n * d);
  rng_state = 31;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) x[i + j * n] = i < 200 ? normal() : 60.0 + (i == 202) * j;
  for (int64_t G = 2; G <= 4; G++) {
    for (int t_ = 0; t_ < 3; t_++) {
      const gpuml_gmm_covariance t = three_models[t_];
      gpuml_options opt = options(test_backend);
      fit_t f = fit_with(x, n, d, &G, 1, t, 300, 1e-8, 0, 1, 4, &opt);
      const int ok = f.status == GPUML_OK && fit_finite(&f, n, d);
      const int reported = f.status == GPUML_ERR_NUMERIC &&
                           (strcmp(gpuml_last_error_id(), "gmm:collapse") == 0 ||
                            strcmp(gpuml_last_error_id(), "gmm:singular") == 0);
      CHECK(ok || reported, "reg = 0, G = %lld %s: finite result or a clear error (%d: %s)",
            (long long)G, model_label(t), (int)f.status, gpuml_last_error());
      fit_free(&f);
      /* k-means++ starts (the hierarchical one isolates the two identical rows, a
       * start it reports as singular): components that collapse are re-seeded */
      opt = options(test_backend);
      test_init = GPUML_GMM_INIT_KMEANSPP;
      f = fit_with(x, n, d, &G, 1, t, 300, 1e-8, 1e-6, 1, 4, &opt);
      test_init = GPUML_GMM_INIT_HC;
      CHECK(f.status == GPUML_OK && fit_finite(&f, n, d), "reg = 1e-6, G = %lld %s: %s",
            (long long)G, model_label(t), gpuml_last_error());
      fit_free(&f);
      opt = options(test_backend);
      f = fit_with(x, n, d, &G, 1, t, 300, 1e-8, 1e-6, 1, 4, &opt);
      CHECK((f.status == GPUML_OK && fit_finite(&f, n, d)) ||
                (f.status == GPUML_ERR_NUMERIC && strcmp(gpuml_last_error_id(), "gmm:singular") == 0),
            "hc, reg = 1e-6, G = %lld %s: a finite fit or a singular start (%s)", (long long)G,
            model_label(t), gpuml_last_error());
      fit_free(&f);
    }
  }
  const int64_t Gs[] = {1, 2, 3, 4};
  gpuml_options opt = options(test_backend);
  fit_t f = fit_with(x, n, d, Gs, 4, GPUML_GMM_FULL, 300, 1e-8, 0, 1, 4, &opt);
  CHECK(f.status == GPUML_OK && fit_finite(&f, n, d) && isfinite(f.bic[0]),
        "reg = 0, G = 1:4: a finite best model (%s)", gpuml_last_error());
  fit_free(&f);
  free(x);
}

typedef struct {
  int calls, stop_at;
  int64_t last_done, last_total;
  int monotone, stage_ok;
} callback_state;

static void on_progress(void *ctx, const char *stage, int64_t done, int64_t total) {
  callback_state *s = ctx;
  if (strcmp(stage, "gmm") == 0) {
    if (done <= s->last_done || done > total) s->monotone = 0;
    s->last_done = done;
    s->last_total = total;
  } else if (strcmp(stage, "em") != 0) {
    s->stage_ok = 0;
  }
}

static int on_interrupt(void *ctx) {
  callback_state *s = ctx;
  return ++s->calls >= s->stop_at;
}

static void test_callbacks(void) {
  const int64_t n = 600, d = 2, Gs[] = {1, 2, 3};
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, 3, 5, 0, 9, label);
  callback_state s = {0, 1 << 30, 0, 0, 1, 1};
  gpuml_options opt = options(test_backend);
  opt.verbose = 1;
  opt.progress = on_progress;
  opt.interrupted = on_interrupt;
  opt.callback_ctx = &s;
  fit_t f = fit_with(x, n, d, Gs, 3, GPUML_GMM_FULL, 200, 1e-8, 1e-6, 2, 1, &opt);
  CHECK(f.status == GPUML_OK, "fit with callbacks: %s", gpuml_last_error());
  CHECK(s.monotone && s.stage_ok && s.last_done == 6 && s.last_total == 6,
        "progress: fits 1..6 of 6 (last %lld/%lld)", (long long)s.last_done, (long long)s.last_total);
  CHECK(s.calls > 10, "the interrupt callback is polled (%d calls)", s.calls);
  fit_free(&f);
  const int stops[] = {1, 5, 40};
  for (int i = 0; i < 3; i++) {
    callback_state t = {0, stops[i], 0, 0, 1, 1};
    opt.callback_ctx = &t;
    f = fit_with(x, n, d, Gs, 3, GPUML_GMM_FULL, 200, 1e-8, 1e-6, 2, 1, &opt);
    expect_error(f.status, GPUML_ERR_INTERRUPTED, "interrupted", "interrupted fit");
    fit_free(&f);
  }
  free(x);
  free(label);
}

/* The default sweep (all models, G = 1:9) runs its cells side by side on two threads:
 * the BIC table, the model and z as on one thread, to the bit; progress ends at the total;
 * an interrupt stops it wherever it comes. */
static void test_side_by_side(void) {
  const int64_t n = 700, d = 3;
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, 3, 5, 0, 17, label);
  gpuml_gmm_params p;
  gpuml_gmm_params_init(&p);
  gpuml_gmm_covariance models[GPUML_GMM_N_MODELS];
  const int64_t nm = gpuml_gmm_models_tried(n, d, &p, models), cells = p.nG * nm;
  fit_t f[2];
  for (int t = 0; t < 2; t++) {
    memset(f + t, 0, sizeof f[t]);
    f[t].model.weights = malloc(sizeof(double) * 9);
    f[t].model.means = malloc(sizeof(double) * d * 9);
    f[t].model.covariances = malloc(sizeof(double) * d * d * 9);
    f[t].z = malloc(sizeof(double) * n * 9);
    f[t].bic = malloc(sizeof(double) * cells);
    gpuml_options opt = options(test_backend);
    opt.threads = 2 - t;
    f[t].status = gpuml_gmm_fit(x, n, d, &p, &f[t].model, f[t].z, NULL, NULL, f[t].bic, &opt, NULL);
  }
  CHECK(!f[0].status && !f[1].status, "default sweep on two threads and on one: %s",
        gpuml_last_error());
  if (!f[0].status && !f[1].status) {
    const int64_t G = f[0].model.G;
    CHECK(memcmp(f[0].bic, f[1].bic, sizeof(double) * cells) == 0 &&
              f[0].model.covariance == f[1].model.covariance && G == f[1].model.G &&
              f[0].model.loglik == f[1].model.loglik && f[0].model.n_iter == f[1].model.n_iter &&
              memcmp(f[0].model.covariances, f[1].model.covariances, sizeof(double) * d * d * G) == 0 &&
              memcmp(f[0].z, f[1].z, sizeof(double) * n * G) == 0,
          "default sweep: two threads give one thread's BIC table, model and z to the bit");
  }
  for (int t = 0; t < 2; t++) fit_free(f + t);
  callback_state s = {0, 1 << 30, 0, 0, 1, 1};
  gpuml_options opt = options(test_backend);
  opt.threads = 2;
  opt.verbose = 1;
  opt.progress = on_progress;
  opt.interrupted = on_interrupt;
  opt.callback_ctx = &s;
  fit_t g;
  memset(&g, 0, sizeof g);
  g.model.weights = malloc(sizeof(double) * 9);
  g.model.means = malloc(sizeof(double) * d * 9);
  g.model.covariances = malloc(sizeof(double) * d * d * 9);
  g.status = gpuml_gmm_fit(x, n, d, &p, &g.model, NULL, NULL, NULL, NULL, &opt, NULL);
  CHECK(g.status == GPUML_OK && s.monotone && s.stage_ok && s.last_done == cells &&
            s.last_total == cells && s.calls > 10,
        "default sweep with callbacks: progress up to %lld of %lld (%lld), polled %d times",
        (long long)s.last_done, (long long)s.last_total, (long long)cells, s.calls);
  const int stops[] = {1, 5, 40, 400};
  for (int i = 0; i < 4; i++) {
    callback_state u = {0, stops[i], 0, 0, 1, 1};
    opt.callback_ctx = &u;
    g.status = gpuml_gmm_fit(x, n, d, &p, &g.model, NULL, NULL, NULL, NULL, &opt, NULL);
    expect_error(g.status, GPUML_ERR_INTERRUPTED, "interrupted", "interrupted default sweep");
  }
  fit_free(&g);
  free(x);
  free(label);
}

/* With the CUDA backend: the GPU and the CPU agree from the same start. The first four
 * cases also compare a converged sweep over G; the others probe the edges of the fused
 * full-covariance kernels (kernels/gmm.cu): fewer rows than a block's 32, K = 1, d = 1,
 * d = 64 (their limit) and d = 65 (the GEMM path). */
/* fused: the second pass, with the fused full-covariance kernels on (GPUML_GMM_FUSED=1,
 * a development knob); it covers the models whose steps those kernels take (the others
 * run the same code in both passes) and leaves out the G-list sweeps, which the first
 * pass has checked. */
static void agree_cases(int fused) {
  struct {
    int64_t n, d, G;
    double spread;
  } cases[] = {{3000, 2, 4, 6},  {4000, 20, 5, 8}, {2500, 7, 3, 3},   {1000, 40, 2, 10},
               {24, 3, 1, 4},    {600, 1, 2, 6},   {3000, 64, 2, 10}, {1500, 65, 2, 10}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int64_t n = cases[c].n, d = cases[c].d, G = cases[c].G;
    int64_t *label = malloc(sizeof(int64_t) * n);
    double *x = mixture(n, d, G, cases[c].spread, 0, 300 + c, label);
    for (int t_ = 0; t_ < GPUML_GMM_N_MODELS; t_++) {
      const gpuml_gmm_covariance t = (gpuml_gmm_covariance)t_;
      /* the edge cases: the full-covariance models whose steps the fused kernels take */
      if (c >= 4 && t != GPUML_GMM_VVV && t != GPUML_GMM_EEE) continue;
      if (fused && gm_gmm_model_structure(t) != GM_GMM_FULL_STRUCTURE) continue;
      gpuml_options og = options(GPUML_BACKEND_CUDA), oc = options(GPUML_BACKEND_CPU);
      /* At d = 64 and 65 the hierarchical start (like mclust's on its 2,000-row subset)
       * leaves a group too small for a full covariance; the kernels' edges are the point
       * there, so those cases start from k-means++. */
      test_init = d >= 64 ? GPUML_GMM_INIT_KMEANSPP : GPUML_GMM_INIT_HC;
      /* a fixed number of iterations, so that both stop at the same place */
      fit_t g = fit_with(x, n, d, &G, 1, t, 40, 0, 1e-6, 1, 21, &og);
      fit_t h = fit_with(x, n, d, &G, 1, t, 40, 0, 1e-6, 1, 21, &oc);
      CHECK(g.status == GPUML_OK && g.used == GPUML_BACKEND_CUDA, "cuda fit n = %lld d = %lld %s: %s",
            (long long)n, (long long)d, model_label(t), gpuml_last_error());
      CHECK(h.status == GPUML_OK, "cpu fit: %s", gpuml_last_error());
      if (!g.status && !h.status) {
        const double r = rel_diff(g.model.loglik, h.model.loglik);
        CHECK(r < 1e-8, "n = %lld d = %lld %s: loglik cuda %.15g cpu %.15g (rel %.2e)",
              (long long)n, (long long)d, model_label(t), g.model.loglik,
              h.model.loglik, r);
        CHECK(max_abs_diff(g.model.means, h.model.means, d * G) < 1e-6 * cases[c].spread,
              "means agree (%g)", max_abs_diff(g.model.means, h.model.means, d * G));
        CHECK(max_abs_diff(g.model.weights, h.model.weights, G) < 1e-7, "weights agree");
        CHECK(max_abs_diff(g.z, h.z, n * G) < 1e-5, "z agree (%g)", max_abs_diff(g.z, h.z, n * G));
        /* predict on the GPU reproduces the GPU fit's classes */
        int64_t *cls = malloc(sizeof(int64_t) * n);
        gpuml_gmm_result pres;
        gpuml_status st = gpuml_gmm_predict(&g.model, x, n, NULL, cls, NULL, &og, &pres);
        CHECK(st == GPUML_OK && pres.run.backend == GPUML_BACKEND_CUDA &&
                  memcmp(cls, g.cls, sizeof(int64_t) * n) == 0,
              "cuda predict gives the fitted classes (%s)", gpuml_last_error());
        free(cls);
        /* reproducible on the GPU */
        fit_t g2 = fit_with(x, n, d, &G, 1, t, 40, 0, 1e-6, 1, 21, &og);
        CHECK(!g2.status && g2.model.loglik == g.model.loglik &&
                  memcmp(g2.model.means, g.model.means, sizeof(double) * d * G) == 0 &&
                  memcmp(g2.z, g.z, sizeof(double) * n * G) == 0,
              "cuda: the same seed gives identical fits");
        fit_free(&g2);
      }
      fit_free(&g);
      fit_free(&h);
    }
    test_init = GPUML_GMM_INIT_HC;
    /* the sweep (every model, G = 1:6, up to 1,000 iterations each) on the cases of
     * d <= 20; at d = 40 with 1,000 rows most cells are degenerate fits */
    if (c >= 3 || fused) {
      free(x);
      free(label);
      continue;
    }
    /* converged fits with a G list choose the same model */
    const int64_t Gs[] = {1, 2, 3, 4, 5, 6};
    gpuml_options og = options(GPUML_BACKEND_CUDA), oc = options(GPUML_BACKEND_CPU);
    fit_t g = fit_with(x, n, d, Gs, 6, GPUML_GMM_FULL, 1000, 1e-10, 1e-6, 1, 3, &og);
    fit_t h = fit_with(x, n, d, Gs, 6, GPUML_GMM_FULL, 1000, 1e-10, 1e-6, 1, 3, &oc);
    CHECK(!g.status && !h.status && g.model.G == h.model.G &&
              rel_diff(g.model.loglik, h.model.loglik) < 1e-8,
          "G = 1:6: same G (%lld, %lld) and loglik (%.12g, %.12g)", (long long)g.model.G,
          (long long)h.model.G, g.model.loglik, h.model.loglik);
    fit_free(&g);
    fit_free(&h);
    free(x);
    free(label);
  }
}

static void test_backends_agree(void) {
  if (test_backend == GPUML_BACKEND_CUDA) agree_cases(0);
}

/* Sets the environment variable `name` to `value` (NULL: unsets it) and returns its
 * earlier value (malloc'ed, or NULL), for restore_env(). */
static char *set_env(const char *name, const char *value) {
  const char *old = getenv(name);
  char *saved = old ? strdup(old) : NULL;
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  return saved;
}
static void restore_env(const char *name, char *saved) {
  if (saved) setenv(name, saved, 1);
  else unsetenv(name);
  free(saved);
}

/* agree_cases(fused) with the tensor-core kernels (the default where they apply) off and
 * GPUML_GMM_FUSED set to `fused`: the fused kernels' path or the GEMM path. */
static void agree_without_tensor_cores(int fused) {
  if (test_backend != GPUML_BACKEND_CUDA) return;
  char *was_fused = set_env("GPUML_GMM_FUSED", fused ? "1" : "0");
  char *was_dmma = set_env("GPUML_GMM_DMMA", "0");
  agree_cases(fused);
  restore_env("GPUML_GMM_FUSED", was_fused);
  restore_env("GPUML_GMM_DMMA", was_dmma);
}

static void test_backends_agree_fused(void) { agree_without_tensor_cores(1); }
static void test_backends_agree_gemm(void) { agree_without_tensor_cores(0); }

/* With the tensor-core full-covariance kernels (GPUML_GMM_DMMA=1, kernels/gmm.cu; on a
 * GPU below sm_80 or a build without sm_80 code they fall back to the GEMM path, and
 * these cases check that path instead): the GPU and the CPU from the same start, for the
 * models whose steps they take. d at and between their 8-column blocks and at their
 * limit (64), then past it (65: the GEMM path); G from 1 to more than two groups of 8
 * components (a block's warps); rows fewer than a block's 128, and not a multiple of a
 * block's, a stage's 32 or a chunk's 4,096 (the scatter's partial sums in several
 * chunks). */
static void test_backends_agree_dmma(void) {
  if (test_backend != GPUML_BACKEND_CUDA) return;
  char *dmma = set_env("GPUML_GMM_DMMA", "1");
  struct {
    int64_t n, d, G;
    double spread;
  } cases[] = {{37, 5, 1, 4},      {1001, 1, 2, 6},   {2999, 3, 4, 6},   {3001, 8, 3, 8},
               {5003, 13, 9, 10},  {12007, 20, 17, 10}, {20001, 50, 16, 14}, {4097, 64, 3, 12},
               {1500, 65, 2, 10}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int64_t n = cases[c].n, d = cases[c].d, G = cases[c].G;
    int64_t *label = malloc(sizeof(int64_t) * n);
    double *x = mixture(n, d, G, cases[c].spread, 0, 700 + c, label);
    const gpuml_gmm_covariance models[] = {GPUML_GMM_VVV, GPUML_GMM_EEE};
    for (int t_ = 0; t_ < 2; t_++) {
      const gpuml_gmm_covariance t = models[t_];
      gpuml_options og = options(GPUML_BACKEND_CUDA), oc = options(GPUML_BACKEND_CPU);
      /* the hierarchical start leaves groups too small for a full covariance in high
       * dimensions (see agree_cases) */
      test_init = d >= 20 ? GPUML_GMM_INIT_KMEANSPP : GPUML_GMM_INIT_HC;
      fit_t g = fit_with(x, n, d, &G, 1, t, 20, 0, 1e-6, 1, 23, &og);
      fit_t h = fit_with(x, n, d, &G, 1, t, 20, 0, 1e-6, 1, 23, &oc);
      CHECK(g.status == GPUML_OK && g.used == GPUML_BACKEND_CUDA,
            "dmma: cuda fit n = %lld d = %lld G = %lld %s: %s", (long long)n, (long long)d,
            (long long)G, model_label(t), gpuml_last_error());
      CHECK(h.status == GPUML_OK, "dmma: cpu fit: %s", gpuml_last_error());
      if (!g.status && !h.status) {
        const double r = rel_diff(g.model.loglik, h.model.loglik);
        CHECK(r < 1e-8, "dmma: n = %lld d = %lld G = %lld %s: loglik cuda %.15g cpu %.15g (rel %.2e)",
              (long long)n, (long long)d, (long long)G, model_label(t), g.model.loglik,
              h.model.loglik, r);
        CHECK(max_abs_diff(g.model.means, h.model.means, d * G) < 1e-6 * cases[c].spread,
              "dmma: means agree (%g)", max_abs_diff(g.model.means, h.model.means, d * G));
        CHECK(max_abs_diff(g.model.covariances, h.model.covariances, d * d * G) < 1e-5,
              "dmma: covariances agree (%g)",
              max_abs_diff(g.model.covariances, h.model.covariances, d * d * G));
        CHECK(max_abs_diff(g.model.weights, h.model.weights, G) < 1e-7, "dmma: weights agree");
        CHECK(max_abs_diff(g.z, h.z, n * G) < 1e-5, "dmma: z agree (%g)",
              max_abs_diff(g.z, h.z, n * G));
        /* the partial sums are added in a fixed order: the same bits every run */
        fit_t g2 = fit_with(x, n, d, &G, 1, t, 20, 0, 1e-6, 1, 23, &og);
        CHECK(!g2.status && g2.model.loglik == g.model.loglik &&
                  memcmp(g2.model.means, g.model.means, sizeof(double) * d * G) == 0 &&
                  memcmp(g2.model.covariances, g.model.covariances,
                         sizeof(double) * d * d * G) == 0 &&
                  memcmp(g2.z, g.z, sizeof(double) * n * G) == 0,
              "dmma: the same seed gives identical fits (n = %lld d = %lld)", (long long)n,
              (long long)d);
        fit_free(&g2);
      }
      fit_free(&g);
      fit_free(&h);
    }
    test_init = GPUML_GMM_INIT_HC;
    free(x);
    free(label);
  }
  restore_env("GPUML_GMM_DMMA", dmma);
}

/* Eigenvalues (descending) of a symmetric d x d matrix, d <= 8, by cyclic Jacobi
 * rotations (the test's own, independent of LAPACK); vec: NULL or d x d eigenvectors. */
static void jacobi_eigen(const double *S, int64_t d, double *val, double *vec) {
  double a[64], v[64];
  memcpy(a, S, sizeof(double) * d * d);
  for (int64_t i = 0; i < d * d; i++) v[i] = (i % (d + 1)) == 0;
  for (int sweep = 0; sweep < 100; sweep++) {
    double off = 0;
    for (int64_t p = 0; p < d; p++)
      for (int64_t q = p + 1; q < d; q++) off += a[p + q * d] * a[p + q * d];
    if (off < 1e-30) break;
    for (int64_t p = 0; p < d; p++)
      for (int64_t q = p + 1; q < d; q++) {
        if (a[p + q * d] == 0) continue;
        const double theta = (a[q + q * d] - a[p + p * d]) / (2 * a[p + q * d]);
        const double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
        const double c = 1 / sqrt(t * t + 1), sn = t * c;
        for (int64_t k = 0; k < d; k++) {
          const double akp = a[k + p * d], akq = a[k + q * d];
          a[k + p * d] = c * akp - sn * akq;
          a[k + q * d] = sn * akp + c * akq;
        }
        for (int64_t k = 0; k < d; k++) {
          const double apk = a[p + k * d], aqk = a[q + k * d];
          a[p + k * d] = c * apk - sn * aqk;
          a[q + k * d] = sn * apk + c * aqk;
        }
        for (int64_t k = 0; k < d; k++) {
          const double vkp = v[k + p * d], vkq = v[k + q * d];
          v[k + p * d] = c * vkp - sn * vkq;
          v[k + q * d] = sn * vkp + c * vkq;
        }
      }
  }
  int64_t order[8];
  for (int64_t j = 0; j < d; j++) order[j] = j;
  for (int64_t i = 0; i < d; i++)
    for (int64_t j = i + 1; j < d; j++)
      if (a[order[j] * (d + 1)] > a[order[i] * (d + 1)]) {
        const int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  for (int64_t j = 0; j < d; j++) {
    val[j] = a[order[j] * (d + 1)];
    if (vec)
      for (int64_t i = 0; i < d; i++) vec[i + j * d] = v[i + order[j] * d];
  }
}

/* Every model's fitted covariances have its form: equal volumes (det) where the first
 * letter is E, equal shapes (eigenvalues over det^(1/d)) where the second is, common
 * eigenvectors (the matrices commute) for orientation E, diagonal for I, and lambda I
 * for the spherical models. */
static void test_model_forms(void) {
  const int64_t n = 900, d = 3, G = 3;
  int64_t *label = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, G, 5, 0, 77, label);
  for (int m = 0; m < GPUML_GMM_N_MODELS; m++) {
    const gpuml_gmm_covariance model = (gpuml_gmm_covariance)m;
    const char *name = model_label(model);
    gpuml_options opt = options(test_backend);
    fit_t f = fit_with(x, n, d, &G, 1, model, 2000, 1e-12, 0, 1, 3, &opt);
    CHECK(f.status == GPUML_OK && f.model.covariance == model, "%s fit: %s", name,
          gpuml_last_error());
    if (f.status) {
      fit_free(&f);
      continue;
    }
    double val[3][3], vec[3][9], det[3];
    const double *S[3];
    for (int64_t k = 0; k < G; k++) {
      S[k] = f.model.covariances + k * d * d;
      jacobi_eigen(S[k], d, val[k], vec[k]);
      det[k] = val[k][0] * val[k][1] * val[k][2];
    }
    int vol = 1, shape = 1, orient = 1, form = 1;
    for (int64_t k = 1; k < G; k++) {
      vol &= rel_diff(det[k], det[0]) < 1e-8;
      for (int64_t j = 0; j < d; j++)
        shape &= rel_diff(val[k][j] / cbrt(det[k]), val[0][j] / cbrt(det[0])) < 1e-6;
      /* common eigenvectors: S_0 S_k = S_k S_0 */
      double scale = 0;
      for (int64_t j = 0; j < d; j++) scale = fmax(scale, val[0][j] * val[k][j]);
      for (int64_t a = 0; a < d; a++)
        for (int64_t b = 0; b < d; b++) {
          double ab = 0, ba = 0;
          for (int64_t q = 0; q < d; q++) {
            ab += S[0][a + q * d] * S[k][q + b * d];
            ba += S[k][a + q * d] * S[0][q + b * d];
          }
          orient &= fabs(ab - ba) < 1e-7 * scale;
        }
    }
    for (int64_t k = 0; k < G; k++)
      for (int64_t a = 0; a < d; a++)
        for (int64_t b = 0; b < d; b++) {
          const double v = S[k][a + b * d];
          if (name[2] == 'I' && a != b) form &= v == 0;
          if (name[1] == 'I' && a == b) form &= rel_diff(v, S[k][0]) < 1e-12;
        }
    if (name[0] == 'E') CHECK(vol, "%s: equal volumes (det %g %g %g)", name, det[0], det[1], det[2]);
    if (name[1] == 'E' || name[1] == 'I')
      CHECK(shape, "%s: equal shapes", name);
    if (name[2] == 'E' || name[2] == 'I') CHECK(orient, "%s: common orientation", name);
    CHECK(form, "%s: diagonal or spherical as the name says", name);
    if (name[0] == 'V' && name[1] == 'V' && name[2] == 'V')
      CHECK(!vol && !shape && !orient, "VVV: unconstrained on these data");
    fit_free(&f);
  }
  free(x);
  free(label);
}

int main(void) {
  harness_init();
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "Gaussian mixtures")) continue;
    test_backend = b->id;
    RUN(test_one_component);
    RUN(test_separated);
    RUN(test_monotone);
    RUN(test_model_forms);
    RUN(test_bic);
    RUN(test_reproducible);
    RUN(test_predict);
    RUN(test_bad_input);
    RUN(test_collapse);
    RUN(test_callbacks);
    RUN(test_side_by_side);
    RUN(test_backends_agree);
    RUN(test_backends_agree_gemm);
    RUN(test_backends_agree_fused);
    RUN(test_backends_agree_dmma);
  }
  gpuml_shutdown(); /* the contexts' own memory, so that a leak check sees only leaks */
  return check_summary("C");
}
