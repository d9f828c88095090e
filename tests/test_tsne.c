/* C tests of t-SNE: the public gpuml_tsne_fit() and the internals it is built from (P,
 * PCA, the gradient), on every backend of the parity harness (tests/harness.h); on the
 * CUDA backend the results are also compared with the CPU backend's. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "gpuml.h"
#include "backend.h"
#include "rng.h"

static gpuml_backend test_backend = GPUML_BACKEND_CPU;
static gpuml_precision test_precision = GPUML_PRECISION_DOUBLE;

static gpuml_options options(gpuml_backend backend) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = backend == GPUML_BACKEND_CUDA ? GPUML_BACKEND_CUDA : GPUML_BACKEND_CPU;
  opt.precision = test_precision;
  return opt;
}

/* n points in d dimensions around `clusters` centres 10 apart (clusters = 1: one
 * standard normal cloud); label[i] = i % clusters. */
static double *blobs(int64_t n, int64_t d, int clusters, uint64_t seed, int *label) {
  gm_rng r;
  gm_rng_seed(&r, seed);
  double *x = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n; i++) {
    const int c = (int)(i % clusters);
    if (label) label[i] = c;
    for (int64_t t = 0; t < d; t++)
      x[i + t * n] = (clusters > 1 && t == c % d ? 10.0 * (1 + c / d) : 0) + gm_rng_normal(&r);
  }
  return x;
}

/* P of x through the pipeline of gpuml_tsne_fit (kNN, then the affinities). */
static gpuml_status affinities_of(const double *x, int64_t n, int64_t d, double perplexity,
                                  gm_csr *P, double *entropy, gpuml_backend backend) {
  const int64_t k = (int64_t)floor(3 * perplexity);
  int64_t *idx = malloc(sizeof(int64_t) * n * k);
  double *dist = malloc(sizeof(double) * n * k);
  gpuml_options opt = options(backend);
  gpuml_status st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, &opt, NULL);
  if (!st) st = gm_tsne_affinities(idx, dist, n, k, perplexity, P, entropy, &opt);
  free(idx);
  free(dist);
  return st;
}

static double p_value(const gm_csr *P, int64_t i, int64_t j) {
  for (int64_t e = P->row[i]; e < P->row[i + 1]; e++)
    if (P->col[e] == j) return P->val[e];
  return 0;
}

/* ---- arguments -------------------------------------------------------------------- */

static void expect_error(const char *name, gpuml_status st, const char *id) {
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), id) == 0,
        "%s: status %d, id \"%s\" (%s), expected %s", name, st, gpuml_last_error_id(),
        gpuml_last_error(), id);
}

static void test_bad_input(void) {
  const int64_t n = 40, d = 3;
  double *x = blobs(n, d, 1, 1, NULL), y[40 * 3], costs[40];
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  gpuml_options opt = options(test_backend);
  p.perplexity = 5;
  expect_error("n < 4", gpuml_tsne_fit(x, 3, d, &p, y, NULL, &opt, NULL), "tsne:tooFewPoints");
  p.perplexity = 30;
  expect_error("perplexity too large", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL),
               "tsne:badPerplexity");
  CHECK(strstr(gpuml_last_error(), "perplexity <= 13") != NULL, "message: %s", gpuml_last_error());
  p.perplexity = 13.5;
  expect_error("3 perplexity > n - 1", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL),
               "tsne:badPerplexity");
  p.perplexity = 0;
  expect_error("perplexity 0", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badPerplexity");
  p.perplexity = 5;
  p.dims = 0;
  expect_error("dims 0", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badDims");
  p.dims = 4;
  expect_error("dims 4", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badDims");
  p.dims = 2;
  p.max_iter = 0;
  expect_error("max_iter 0", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badParameter");
  p.max_iter = 100;
  p.learning_rate = -1;
  expect_error("learning rate", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badParameter");
  p.learning_rate = 0;
  p.init = GPUML_TSNE_INIT_USER;
  expect_error("user init missing", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badInit");
  double init[80];
  for (int e = 0; e < 80; e++) init[e] = e * 1e-3;
  init[17] = NAN;
  p.init_y = init;
  expect_error("user init NaN", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badInit");
  p.init = GPUML_TSNE_INIT_PCA;
  const double bad_df[] = {0, -1, NAN, INFINITY};
  for (int b = 0; b < 4; b++) {
    p.df = bad_df[b];
    expect_error("df", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:badDf");
  }
  CHECK(strstr(gpuml_last_error(), "df = inf") != NULL, "message: %s", gpuml_last_error());
  p.df = 1;
  x[5 + 2 * n] = INFINITY;
  expect_error("Inf in data", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:nonFinite");
  CHECK(strstr(gpuml_last_error(), "row 6, column 3") != NULL, "message: %s", gpuml_last_error());
  x[5 + 2 * n] = NAN;
  expect_error("NaN in data", gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL), "tsne:nonFinite");
  CHECK(gpuml_tsne_cost_count(1000) == 20 && gpuml_tsne_cost_count(1001) == 21 &&
            gpuml_tsne_cost_count(49) == 1 && gpuml_tsne_cost_count(0) == 0,
        "cost counts");
  (void)costs;
  free(x);
}

/* ---- P ------------------------------------------------------------------------------ */

static void test_affinities(void) {
  const int64_t n = 700, d = 10;
  const double perplexity = 25;
  double *x = blobs(n, d, 4, 2, NULL), *entropy = malloc(sizeof(double) * n);
  gm_csr P = {0};
  gpuml_status st = affinities_of(x, n, d, perplexity, &P, entropy, GPUML_BACKEND_CPU);
  CHECK(st == GPUML_OK, "affinities: %s", gpuml_last_error());
  if (!st) {
    double worst = 0, sum = 0, asym = 0;
    int sorted = 1, positive = 1;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(entropy[i] - log(perplexity)));
    for (int64_t i = 0; i < n; i++)
      for (int64_t e = P.row[i]; e < P.row[i + 1]; e++) {
        sum += P.val[e];
        positive &= P.val[e] > 0 && P.col[e] != i;
        if (e > P.row[i]) sorted &= P.col[e] > P.col[e - 1];
        asym = fmax(asym, fabs(P.val[e] - p_value(&P, P.col[e], i)));
      }
    CHECK(worst < 1e-5, "rows reach the perplexity: worst |H - log(perp)| = %g", worst);
    CHECK(fabs(sum - 1) < 1e-12, "P sums to %.15g", sum);
    CHECK(asym == 0, "P is symmetric (largest difference %g)", asym);
    CHECK(sorted && positive, "rows sorted by column, positive, no diagonal");
    CHECK(P.nnz >= n * 75 && P.nnz <= 2 * n * 75, "nnz %lld", (long long)P.nnz);
  }
  gm_csr_free(&P);
  if (test_backend == GPUML_BACKEND_CUDA) {
    gm_csr Pc = {0}, Pg = {0};
    double *eg = malloc(sizeof(double) * n);
    gpuml_status s1 = affinities_of(x, n, d, perplexity, &Pc, NULL, GPUML_BACKEND_CPU);
    gpuml_status s2 = affinities_of(x, n, d, perplexity, &Pg, eg, GPUML_BACKEND_CUDA);
    CHECK(!s1 && !s2, "affinities on both backends: %s", gpuml_last_error());
    if (!s1 && !s2) {
      int same_pattern = Pc.nnz == Pg.nnz;
      double worst = 0, worst_h = 0;
      for (int64_t i = 0; same_pattern && i <= n; i++) same_pattern &= Pc.row[i] == Pg.row[i];
      for (int64_t e = 0; same_pattern && e < Pc.nnz; e++) {
        same_pattern &= Pc.col[e] == Pg.col[e];
        worst = fmax(worst, fabs(Pc.val[e] - Pg.val[e]) / Pc.val[e]);
      }
      for (int64_t i = 0; i < n; i++) worst_h = fmax(worst_h, fabs(eg[i] - log(perplexity)));
      /* in single precision the GPU's kNN distances differ in the last float bits, and
       * so may the order of near-ties; in double the neighbours are the CPU's */
      if (test_precision != GPUML_PRECISION_SINGLE) {
        CHECK(same_pattern, "CPU and GPU P have the same sparsity pattern");
        CHECK(worst < 1e-10, "CPU and GPU P agree (largest relative difference %g)", worst);
      }
      CHECK(worst_h < 1e-5, "GPU rows reach the perplexity (worst %g)", worst_h);
    }
    gm_csr_free(&Pc);
    gm_csr_free(&Pg);
    free(eg);
  }
  free(x);
  free(entropy);
}

/* P as gpuml_tsne_fit builds it (gm_tsne_fit_affinities) on the backend under test; on
 * CUDA the kNN lists and P stay on the device (P.resident), and P copied back must be
 * the CPU's: the same pattern and values to 1e-10 (in double precision, where the
 * neighbours are the CPU's). Cases: the default search (d = 20: the certified fp32 GEMM
 * of precision auto), every list re-checked in fp64 (GPUML_CUDA_KNN_RECHECK=all: the
 * re-checked rows replaced on the device), two perplexities, and a 4 MB memory limit
 * under which P is built on the host from lists copied out. */
static void test_fit_affinities(void) {
  const int64_t n = 900, d = 20;
  double *x = blobs(n, d, 5, 8, NULL);
  const double single[1] = {20}, multi[2] = {6, 20};
  const int64_t k = 60;
  int64_t *idx = malloc(sizeof(int64_t) * n * k);
  double *dist = malloc(sizeof(double) * n * k);
  gpuml_options co = options(GPUML_BACKEND_CPU);
  gpuml_status st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, &co, NULL);
  CHECK(!st, "CPU neighbours: %s", gpuml_last_error());
  /* the knobs some cases set, restored after each */
  const char *knobs[3] = {"GPUML_CUDA_KNN_RECHECK", "GPUML_SHARDS", "GPUML_SHARD_THREADS"};
  char saved[3][64] = {"", "", ""};
  for (int v = 0; v < 3; v++)
    if (getenv(knobs[v])) snprintf(saved[v], sizeof saved[v], "%s", getenv(knobs[v]));
  /* a memory limit may send P the host's way */
  const int limited = getenv("GPUML_GPU_MEMORY_LIMIT") != NULL;
  /* cases 4-6: the search split by query blocks over logical shards (on one thread, and
   * on two sharing the device), its lists gathered; case 5 with every list re-checked in
   * fp64 (each block's re-checked rows written back into it) */
  const char *names[7] = {"default",  "all re-checked",           "multiscale",
                          "4 MB",     "3 shards",                 "3 shards, all re-checked",
                          "3 shards on 2 threads"};
  for (int c = 0; !st && c < 7; c++) {
    const double *perplexities = c == 2 ? multi : single;
    const int64_t scales = c == 2 ? 2 : 1;
    const char *what = names[c];
    gpuml_options opt = options(test_backend);
    if (c == 3) opt.gpu_memory_limit = (size_t)4 << 20;
    if (c == 1 || c == 5) setenv("GPUML_CUDA_KNN_RECHECK", "all", 1);
    if (c >= 4) setenv("GPUML_SHARDS", "3", 1);
    if (c == 6) setenv("GPUML_SHARD_THREADS", "2", 1);
    gm_csr Pc = {0}, Pf = {0};
    gpuml_status a = gm_tsne_affinities_multiscale(idx, dist, n, k, perplexities, scales, &Pc,
                                                   NULL, &co);
    gpuml_status b = gm_tsne_fit_affinities(x, n, d, k, perplexities, scales, &Pf, &opt);
    for (int v = 0; v < 3; v++) {
      if (saved[v][0]) setenv(knobs[v], saved[v], 1);
      else unsetenv(knobs[v]);
    }
    CHECK(!a && !b, "fit's P (%s): %s", what, gpuml_last_error());
    if (!a && !b && Pf.resident) {
      const gm_tsne_ops *ops = gm_backend_get(test_backend)->tsne;
      CHECK(ops->resident_to_host && ops->resident_to_host(&Pf, &opt) == GPUML_OK,
            "fit's P (%s) copied from the device: %s", what, gpuml_last_error());
    }
    if (test_backend == GPUML_BACKEND_CUDA && c != 3 && !limited)
      CHECK(Pf.resident != NULL, "fit's P (%s) stays on the device", what);
    if (test_backend == GPUML_BACKEND_CPU)
      CHECK(Pf.resident == NULL, "fit's P on the CPU is on the host");
    if (!a && !b && Pf.row) {
      int same = Pc.nnz == Pf.nnz && Pf.n == n;
      double worst = 0, sum = 0;
      for (int64_t i = 0; same && i <= n; i++) same &= Pc.row[i] == Pf.row[i];
      for (int64_t e = 0; same && e < Pc.nnz; e++) {
        same &= Pc.col[e] == Pf.col[e];
        worst = fmax(worst, fabs(Pc.val[e] - Pf.val[e]) / Pc.val[e]);
        sum += Pf.val[e];
      }
      if (test_precision != GPUML_PRECISION_SINGLE) {
        CHECK(same, "fit's P (%s) has the CPU's pattern (nnz %lld vs %lld)", what,
              (long long)Pf.nnz, (long long)Pc.nnz);
        CHECK(same && worst < 1e-10 && fabs(sum - 1) < 1e-12,
              "fit's P (%s) is the CPU's: largest relative difference %g, sum %.15g", what,
              worst, sum);
      } else {
        double total = 0;
        for (int64_t e = 0; e < Pf.nnz; e++) total += Pf.val[e];
        CHECK(fabs(total - 1) < 1e-12 && Pf.row[n] == Pf.nnz, "fit's P (%s) sums to %.15g",
              what, total);
      }
    }
    gm_csr_free(&Pc);
    gm_csr_free(&Pf);
    CHECK(Pf.resident == NULL && Pf.row == NULL, "gm_csr_free releases P");
  }
  free(x);
  free(idx);
  free(dist);
}

/* Duplicated points: zero distances in the bisection and coincident points in Q. */
static void test_duplicates(void) {
  const int64_t n = 240, d = 4;
  double *x = blobs(n, d, 3, 3, NULL);
  for (int64_t i = 0; i < 60; i++)
    for (int64_t t = 0; t < d; t++) x[i + t * n] = x[t * n];  /* 60 copies of point 0 */
  for (int64_t i = 100; i < 200; i += 2)
    for (int64_t t = 0; t < d; t++) x[i + 1 + t * n] = x[i + t * n];  /* pairs */
  gm_csr P = {0};
  double *entropy = malloc(sizeof(double) * n);
  gpuml_status st = affinities_of(x, n, d, 10, &P, entropy, GPUML_BACKEND_CPU);
  int finite = st == GPUML_OK;
  for (int64_t e = 0; finite && e < P.nnz; e++) finite &= isfinite(P.val[e]) && P.val[e] >= 0;
  CHECK(finite, "P of duplicated points is finite");
  /* 59 twins at distance 0 exceed the perplexity: the weight is spread over them */
  CHECK(st == GPUML_OK && fabs(entropy[0] - log(30)) < 1e-9, "entropy of a 60-fold point %g",
        st ? 0 : entropy[0]);
  gm_csr_free(&P);
  free(entropy);
  static const gpuml_tsne_method methods[] = {GPUML_TSNE_EXACT, GPUML_TSNE_FFT};
  for (int m = 0; m < 2; m++) {
    gpuml_tsne_params p;
    gpuml_tsne_params_init(&p);
    p.perplexity = 10;
    p.max_iter = 200;
    p.method = methods[m];
    double *y = malloc(sizeof(double) * n * 2), costs[4];
    gpuml_options opt = options(test_backend);
    st = gpuml_tsne_fit(x, n, d, &p, y, costs, &opt, NULL);
    int ok = st == GPUML_OK;
    for (int64_t e = 0; ok && e < n * 2; e++) ok &= isfinite(y[e]);
    for (int c = 0; ok && c < 4; c++) ok &= isfinite(costs[c]);
    CHECK(ok, "t-SNE of duplicated points (%s) is finite: %s", m ? "fft" : "exact",
          gpuml_last_error());
    free(y);
  }
  free(x);
}

/* ---- PCA ---------------------------------------------------------------------------- */

/* x = 10 u a^T + 3 v b^T + noise: the first score follows u, the second v. */
static void check_pca(int64_t n, int64_t d) {
  gm_rng r;
  gm_rng_seed(&r, 4);
  double *u = malloc(sizeof(double) * n), *v = malloc(sizeof(double) * n);
  double *a = malloc(sizeof(double) * d), *b = malloc(sizeof(double) * d);
  for (int64_t i = 0; i < n; i++) u[i] = gm_rng_normal(&r), v[i] = gm_rng_normal(&r);
  /* centred and uncorrelated factors, so that the components are exactly u and v */
  double mu = 0, mv0 = 0, uu = 0, uv = 0;
  for (int64_t i = 0; i < n; i++) mu += u[i] / n, mv0 += v[i] / n;
  for (int64_t i = 0; i < n; i++) u[i] -= mu, v[i] -= mv0;
  for (int64_t i = 0; i < n; i++) uu += u[i] * u[i], uv += u[i] * v[i];
  for (int64_t i = 0; i < n; i++) v[i] -= uv / uu * u[i];
  double na = 0, nb = 0, ab = 0;
  for (int64_t t = 0; t < d; t++) a[t] = gm_rng_normal(&r), b[t] = gm_rng_normal(&r);
  for (int64_t t = 0; t < d; t++) na += a[t] * a[t], ab += a[t] * b[t];
  for (int64_t t = 0; t < d; t++) b[t] -= ab / na * a[t];
  for (int64_t t = 0; t < d; t++) nb += b[t] * b[t];
  double *x = malloc(sizeof(double) * n * d), *s = malloc(sizeof(double) * n * 3);
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < d; t++)
      x[i + t * n] = 10 * u[i] * a[t] / sqrt(na) + 3 * v[i] * b[t] / sqrt(nb) + 0.01 * gm_rng_normal(&r);
  gpuml_options opt = options(GPUML_BACKEND_CPU);
  gpuml_status st = gm_tsne_pca_cpu(x, n, d, 3, s, &opt);
  CHECK(st == GPUML_OK, "pca %lldx%lld: %s", (long long)n, (long long)d, gpuml_last_error());
  if (!st) {
    double cu = 0, cv = 0, su = 0, sv = 0, s0 = 0, s1 = 0, mean = 0;
    for (int64_t i = 0; i < n; i++) mean += u[i];
    mean /= n;
    double mv = 0;
    for (int64_t i = 0; i < n; i++) mv += v[i];
    mv /= n;
    for (int64_t i = 0; i < n; i++) {
      cu += s[i] * (u[i] - mean);
      su += (u[i] - mean) * (u[i] - mean);
      s0 += s[i] * s[i];
      cv += s[i + n] * (v[i] - mv);
      sv += (v[i] - mv) * (v[i] - mv);
      s1 += s[i + n] * s[i + n];
    }
    CHECK(fabs(cu) / sqrt(su * s0) > 0.999 && fabs(cv) / sqrt(sv * s1) > 0.999,
          "pca %lldx%lld: scores follow the factors (%g, %g)", (long long)n, (long long)d,
          fabs(cu) / sqrt(su * s0), fabs(cv) / sqrt(sv * s1));
    CHECK(s0 > s1, "pca: variances descend");
    double best = 0;
    for (int64_t i = 0; i < n; i++)
      if (fabs(s[i]) > fabs(best)) best = s[i];
    CHECK(best > 0, "pca: sign fixed (largest |score| positive)");
  }
  if (test_backend == GPUML_BACKEND_CUDA) {
    double *g = malloc(sizeof(double) * n * 3);
    gpuml_options go = options(GPUML_BACKEND_CUDA);
    gpuml_status sg = gm_backend_get(GPUML_BACKEND_CUDA)->tsne->pca(x, n, d, 3, g, &go);
    CHECK(sg == GPUML_OK, "GPU pca: %s", gpuml_last_error());
    double worst = 0, scale = 0;
    for (int64_t e = 0; !sg && e < n * 2; e++) scale = fmax(scale, fabs(s[e]));
    for (int64_t e = 0; !sg && e < n * 2; e++) worst = fmax(worst, fabs(g[e] - s[e]));
    CHECK(!sg && worst < 1e-8 * scale, "GPU and CPU PCA scores agree (%g of %g)", worst, scale);
    free(g);
  }
  free(u);
  free(v);
  free(a);
  free(b);
  free(x);
  free(s);
}

static void test_pca(void) {
  check_pca(300, 40);  /* covariance */
  check_pca(30, 200);  /* Gram matrix */
}

/* ---- gradient ----------------------------------------------------------------------- */

/* The exact Z = sum_{i != j} 1 / (1 + |y_i - y_j|^2), in plain double loops. */
static double reference_z(const double *y, int64_t n, int dims) {
  double z = 0;
  for (int64_t i = 0; i < n; i++) {
    double zi = 0;
    for (int64_t j = i + 1; j < n; j++) {
      double r2 = 0;
      for (int d = 0; d < dims; d++) r2 += (y[i + d * n] - y[j + d * n]) * (y[i + d * n] - y[j + d * n]);
      zi += 1 / (1 + r2);
    }
    z += 2 * zi;
  }
  return z;
}

/* KL(P || Q) of y with the exact Q, in plain double loops. */
static double reference_kl(const gm_csr *P, const double *y, int64_t n, int dims) {
  const double z = reference_z(y, n, dims);
  double kl = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t e = P->row[i]; e < P->row[i + 1]; e++) {
      const int64_t j = P->col[e];
      double r2 = 0;
      for (int d = 0; d < dims; d++) r2 += pow(y[i + d * n] - y[j + d * n], 2);
      if (P->val[e] > 0) kl += P->val[e] * log(P->val[e] * z * (1 + r2));
    }
  return kl;
}

/* The exact gradient is the derivative of the KL divergence (finite differences of
 * the double reference: the CPU's exact tiles compute each pair in single
 * precision, whose rounding finite differences would magnify). */
static void test_gradient_finite_differences(void) {
  for (int dims = 1; dims <= 3; dims++) {
    const int64_t n = 30;
    double *x = blobs(n, 5, 2, 5, NULL);
    gm_csr P = {0};
    gpuml_status st = affinities_of(x, n, 5, 5, &P, NULL, GPUML_BACKEND_CPU);
    gm_rng r;
    gm_rng_seed(&r, 6);
    double *y = malloc(sizeof(double) * n * dims), *g = malloc(sizeof(double) * n * dims);
    for (int64_t e = 0; e < n * dims; e++) y[e] = 2 * gm_rng_normal(&r);
    gpuml_options opt = options(GPUML_BACKEND_CPU);
    double z, kl = 0;
    if (!st) st = gm_tsne_gradient_cpu(&P, y, n, dims, GPUML_TSNE_EXACT, 0, 1.0, 1.0, g, &z, &opt);
    if (!st) st = gm_tsne_kl_cpu(&P, y, n, dims, GPUML_TSNE_EXACT, 0, 1.0, &kl, &opt);
    const double kl_ref = st ? 0 : reference_kl(&P, y, n, dims);
    double worst = 0, scale = 0;
    for (int64_t e = 0; !st && e < n * dims; e++) {
      const double keep = y[e], h = 1e-5;
      y[e] = keep + h;
      const double up = reference_kl(&P, y, n, dims);
      y[e] = keep - h;
      const double down = reference_kl(&P, y, n, dims);
      y[e] = keep;
      const double fd = (up - down) / (2 * h);
      worst = fmax(worst, fabs(4 * g[e] - fd));
      scale = fmax(scale, fabs(fd));
    }
    CHECK(st == GPUML_OK && worst < 1e-6 * scale,
          "dims %d: exact gradient vs finite differences: worst %g of %g (%s)", dims, worst,
          scale, gpuml_last_error());
    CHECK(fabs(kl - kl_ref) < 1e-6 * fabs(kl_ref), "dims %d: exact KL %.12g vs %.12g", dims, kl,
          kl_ref);
    const double zref = reference_z(y, n, dims);
    CHECK(fabs(z - zref) < 1e-6 * zref, "dims %d: exact Z %.15g vs %.15g", dims, z, zref);
    gm_csr_free(&P);
    free(x);
    free(y);
    free(g);
  }
}

/* The exact repulsion (no attraction: P empty) of n points against double loops: Z,
 * and the forces of every `step`-th row. */
static void check_exact_repulsion(int64_t n, int dims, double sd, int step, const char *what) {
  gm_csr P = {0};
  P.n = n;
  P.row = calloc(n + 1, sizeof(int64_t));
  gm_rng r;
  gm_rng_seed(&r, 15 + dims);
  double *y = malloc(sizeof(double) * n * dims), *g = malloc(sizeof(double) * n * dims);
  for (int64_t e = 0; e < n * dims; e++) y[e] = sd * gm_rng_normal(&r);
  gpuml_options opt = options(GPUML_BACKEND_CPU);
  double z = 0, worst = 0, scale = 0;
  gpuml_status st = gm_tsne_gradient_cpu(&P, y, n, dims, GPUML_TSNE_EXACT, 0, 1.0, 1.0, g, &z, &opt);
  const double zref = reference_z(y, n, dims);
  for (int64_t i = 0; i < n; i += step) {
    double rep[3] = {0, 0, 0};
    for (int64_t j = 0; j < n; j++) {
      double r2 = 0;
      for (int d = 0; d < dims; d++) r2 += (y[i + d * n] - y[j + d * n]) * (y[i + d * n] - y[j + d * n]);
      const double w = 1 / (1 + r2);
      for (int d = 0; d < dims; d++) rep[d] += w * w * (y[i + d * n] - y[j + d * n]);
    }
    for (int d = 0; d < dims; d++) {
      worst = fmax(worst, fabs(g[i + d * n] + rep[d] / zref));
      scale = fmax(scale, fabs(rep[d] / zref));
    }
  }
  CHECK(st == GPUML_OK && fabs(z - zref) < 1e-6 * zref && worst < 1e-6 * scale,
        "dims %d, n = %lld: exact repulsion %s: Z %.15g vs %.15g, worst %g of %g", dims,
        (long long)n, what, z, zref, worst, scale);
  free(P.row);
  free(y);
  free(g);
}

/* Larger n: each pair once, tile by tile, in single precision; beyond
 * GM_TSNE_EXACT_PAIRED_MAX points each row runs over all columns. */
static void test_exact_tiles(void) {
  for (int dims = 1; dims <= 3; dims++) check_exact_repulsion(1299, dims, 5, 1, "in paired tiles");
  check_exact_repulsion(GM_TSNE_EXACT_PAIRED_MAX + 1, 2, 20, 997, "row by row");
}

/* The grid FFT (sizes 2^a 3^b, pruned lines) against a direct DFT in double. */
static void test_fft_grid(void) {
  static const int sizes[] = {32, 36, 48, 54, 72, 96, 144};
  for (int dims = 1; dims <= 3; dims++)
    for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++) {
      const int size = sizes[c], keep = size / 2 - 1;
      if (dims == 3 && size > 54) continue;
      gm_fft f;
      gpuml_status st = gm_fft_init(&f, size);
      const int64_t cells = gm_fft_plane(size, dims), row = gm_fft_row(size);
      float *grid = calloc(2 * cells, sizeof(float));
      float *scratch = malloc(sizeof(float) * 2 * gm_fft_scratch(size));
      gm_rng r;
      gm_rng_seed(&r, 40 + c);
      int64_t extent[3] = {1, 1, 1}, at[3];
      for (int d = 0; d < dims; d++) extent[d] = keep;
      /* input only where every coordinate is below keep */
      for (at[2] = 0; at[2] < extent[2]; at[2]++)
        for (at[1] = 0; at[1] < extent[1]; at[1]++)
          for (at[0] = 0; at[0] < extent[0]; at[0]++) {
            const int64_t cell = at[0] + row * (at[1] + size * at[2]);
            grid[cell] = (float)gm_rng_normal(&r);
            grid[cells + cell] = (float)gm_rng_normal(&r);
          }
      /* the forward transform at the outputs a round trip keeps: direct sums */
      double worst = 0, scale = 0, round_trip = 0;
      float *copy = malloc(sizeof(float) * 2 * cells);
      memcpy(copy, grid, sizeof(float) * 2 * cells);
      if (!st) gm_fft_grid(&f, grid, dims, keep, 0, 2, scratch);
      const double two_pi = 6.283185307179586;
      for (int64_t k = 0; !st && k < 40; k++) {  /* 40 spectrum entries */
        int64_t kk[3] = {0, 0, 0};
        for (int d = 0; d < dims; d++) kk[d] = (k * 7 + d * 13) % size;
        double sr = 0, si = 0;
        for (at[2] = 0; at[2] < extent[2]; at[2]++)
          for (at[1] = 0; at[1] < extent[1]; at[1]++)
            for (at[0] = 0; at[0] < extent[0]; at[0]++) {
              const int64_t cell = at[0] + row * (at[1] + size * at[2]);
              double phase = 0;
              for (int d = 0; d < dims; d++) phase -= two_pi * (double)(at[d] * kk[d] % size) / size;
              sr += copy[cell] * cos(phase) - copy[cells + cell] * sin(phase);
              si += copy[cell] * sin(phase) + copy[cells + cell] * cos(phase);
            }
        /* in 2-D the spectrum is held transposed */
        const int64_t cell = dims == 2 ? kk[1] + row * kk[0] : kk[0] + row * (kk[1] + size * kk[2]);
        worst = fmax(worst, fmax(fabs(grid[cell] - sr), fabs(grid[cells + cell] - si)));
        scale = fmax(scale, fmax(fabs(sr), fabs(si)));
      }
      if (!st) gm_fft_grid(&f, grid, dims, keep, 1, 2, scratch);
      const double norm = pow(size, dims);
      for (at[2] = 0; at[2] < extent[2]; at[2]++)
        for (at[1] = 0; at[1] < extent[1]; at[1]++)
          for (at[0] = 0; at[0] < extent[0]; at[0]++) {
            const int64_t cell = at[0] + row * (at[1] + size * at[2]);
            round_trip = fmax(round_trip, fabs(grid[cell] / norm - copy[cell]));
            round_trip = fmax(round_trip, fabs(grid[cells + cell] / norm - copy[cells + cell]));
          }
      CHECK(st == GPUML_OK && worst < 1e-5 * scale && round_trip < 1e-5,
            "FFT of %d^%d: worst %g of %g against the direct DFT, round trip %g (%s)", size,
            dims, worst, scale, round_trip, gpuml_last_error());
      gm_fft_free(&f);
      free(grid);
      free(copy);
      free(scratch);
    }
  gm_fft f;
  CHECK(gm_fft_init(&f, 40) == GPUML_ERR_ARG, "an FFT of 40 points (a factor 5) is refused");
  CHECK(gm_fft_good_size(33) == 36 && gm_fft_good_size(37) == 48 && gm_fft_good_size(1025) == 1152 &&
            gm_fft_good_size(1153) == 1536 && gm_fft_good_size(64) == 64,
        "FFT sizes 2^a 3^b");
}

/* The exact and the FFT gradient of y on the backend of `ops`: Z of each and the FFT's
 * relative error over all coordinates. */
static gpuml_status fft_against_exact(const gm_tsne_ops *ops, const gm_csr *P, const double *y,
                                      int64_t n, int dims, double exaggeration,
                                      const gpuml_options *opt, double *ze, double *zf,
                                      double *rel) {
  double *ge = malloc(sizeof(double) * n * dims), *gf = malloc(sizeof(double) * n * dims);
  gpuml_status st = ops->gradient(P, y, n, dims, GPUML_TSNE_EXACT, 0, exaggeration, 1.0, ge, ze, opt);
  if (!st) st = ops->gradient(P, y, n, dims, GPUML_TSNE_FFT, 0, exaggeration, 1.0, gf, zf, opt);
  double err = 0, norm = 0;
  for (int64_t e = 0; !st && e < n * dims; e++) {
    err += (ge[e] - gf[e]) * (ge[e] - gf[e]);
    norm += ge[e] * ge[e];
  }
  *rel = norm > 0 ? sqrt(err / norm) : 1;
  free(ge);
  free(gf);
  return st;
}

/* The transform of an even real grid (the kernel's) against the general one, and the
 * fused convolution against its three steps one after the other. */
static void test_fft_even_and_convolve(void) {
  static const int sizes[] = {32, 36, 48, 54};
  for (int dims = 1; dims <= 3; dims++)
    for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++) {
      const int size = sizes[c], keep = size / 2 - 1;
      gm_fft f;
      gpuml_status st = gm_fft_init(&f, size);
      const int64_t cells = gm_fft_plane(size, dims), row = gm_fft_row(size);
      float *even = calloc(2 * cells, sizeof(float)), *general = calloc(2 * cells, sizeof(float));
      float *fused = calloc(2 * cells, sizeof(float)), *steps = calloc(2 * cells, sizeof(float));
      float *spectrum = calloc(cells, sizeof(float));
      float *scratch = malloc(sizeof(float) * 2 * gm_fft_scratch(size));
      gm_rng r;
      gm_rng_seed(&r, 70 + c);
      int64_t at[3] = {0, 0, 0}, extent[3] = {1, 1, 1};
      for (int d = 0; d < dims; d++) extent[d] = size;
      for (at[2] = 0; at[2] < extent[2]; at[2]++)
        for (at[1] = 0; at[1] < extent[1]; at[1]++)
          for (at[0] = 0; at[0] < extent[0]; at[0]++) {
            double m[3] = {0, 0, 0}; /* |g| on the circle: an even grid, not separable */
            for (int d = 0; d < dims; d++) m[d] = (double)(at[d] < size - at[d] ? at[d] : size - at[d]);
            const int64_t cell = at[0] + row * (at[1] + size * at[2]);
            even[cell] = general[cell] = (float)(1.0 / (1.0 + 0.3 * m[0] + 0.05 * m[1] * m[1] +
                                                         0.2 * m[2] + 0.01 * m[0] * m[1]));
            even[cells + cell] = 123.0f; /* ignored on entry */
            spectrum[cell] = (float)gm_rng_normal(&r);
            if (at[0] < keep && at[1] < (dims > 1 ? keep : 1) && at[2] < (dims > 2 ? keep : 1)) {
              fused[cell] = steps[cell] = (float)gm_rng_normal(&r);
              fused[cells + cell] = steps[cells + cell] = (float)gm_rng_normal(&r);
            }
          }
      double worst = 0, scale = 0, imag = 0, apart = 0, size_of = 0;
      if (!st) {
        gm_fft_even_spectrum(&f, even, dims, 2, scratch);
        gm_fft_grid(&f, general, dims, size, 0, 2, scratch);
        const float by = 0.25f;
        gm_fft_convolve(&f, fused, spectrum, by, dims, keep, 2, scratch);
        gm_fft_grid(&f, steps, dims, keep, 0, 2, scratch);
        for (int64_t e = 0; e < cells; e++) {
          steps[e] *= spectrum[e] * by;
          steps[cells + e] *= spectrum[e] * by;
        }
        gm_fft_grid(&f, steps, dims, keep, 1, 2, scratch);
      }
      for (at[2] = 0; at[2] < extent[2]; at[2]++)
        for (at[1] = 0; at[1] < extent[1]; at[1]++)
          for (at[0] = 0; at[0] < extent[0]; at[0]++) {
            const int64_t cell = at[0] + row * (at[1] + size * at[2]);
            worst = fmax(worst, fabs(even[cell] - general[cell]));
            scale = fmax(scale, fabs(general[cell]));
            imag = fmax(imag, fabs(even[cells + cell]));
            if (at[0] < keep && at[1] < (dims > 1 ? keep : 1) && at[2] < (dims > 2 ? keep : 1))
              for (int p = 0; p < 2; p++) {
                apart = fmax(apart, fabs(fused[p * cells + cell] - steps[p * cells + cell]));
                size_of = fmax(size_of, fabs(steps[p * cells + cell]));
              }
          }
      CHECK(st == GPUML_OK && worst < 1e-5 * scale && imag == 0 && scale > 1 &&
                apart <= 1e-6 * size_of && size_of > 0,
            "FFT of %d^%d: even grid %g of %g from the general transform (imaginary %g), "
            "fused convolution %g of %g from its steps",
            size, dims, worst, scale, imag, apart, size_of);
      gm_fft_free(&f);
      free(even);
      free(general);
      free(fused);
      free(steps);
      free(spectrum);
      free(scratch);
    }
}

/* The FFT repulsion against the exact one on a spread-out embedding. */
static void test_fft_accuracy(void) {
  for (int dims = 1; dims <= 3; dims++) {
    const int64_t n = 1500;
    double *x = blobs(n, 6, 5, 7, NULL);
    gm_csr P = {0};
    gpuml_status st = affinities_of(x, n, 6, 15, &P, NULL, GPUML_BACKEND_CPU);
    gm_rng r;
    gm_rng_seed(&r, 8);
    double *y = malloc(sizeof(double) * n * dims);
    const double spread = dims == 3 ? 6 : 12;
    for (int64_t e = 0; e < n * dims; e++) y[e] = spread * gm_rng_normal(&r) / 3;
    gpuml_options opt = options(GPUML_BACKEND_CPU);
    double ze = 0, zf = 0, rel = 1;
    if (!st)
      st = fft_against_exact(gm_backend_get(GPUML_BACKEND_CPU)->tsne, &P, y, n, dims, 1.0, &opt,
                             &ze, &zf, &rel);
    /* boxes of width up to 1 with 3 nodes each (FIt-SNE's setting): about 1% */
    CHECK(st == GPUML_OK && fabs(zf - ze) < 2e-3 * ze && rel < 2e-2,
          "dims %d: FFT vs exact: Z %.6g vs %.6g, gradient relative error %.2g (%s)", dims, zf,
          ze, rel, gpuml_last_error());
    if (test_backend == GPUML_BACKEND_CUDA) {
      static const gpuml_tsne_method methods[] = {GPUML_TSNE_EXACT, GPUML_TSNE_FFT};
      for (int m = 0; m < 2; m++) {
        double *gc = malloc(sizeof(double) * n * dims), *gg = malloc(sizeof(double) * n * dims);
        double zc = 0, zg = 0;
        const int boxes = gm_tsne_grid_boxes(2 * spread, dims);
        gpuml_options co = options(GPUML_BACKEND_CPU), go = options(GPUML_BACKEND_CUDA);
        gpuml_status a = gm_tsne_gradient_cpu(&P, y, n, dims, methods[m], boxes, 12.0, 1.0, gc, &zc, &co);
        gpuml_status b = gm_backend_get(GPUML_BACKEND_CUDA)
                             ->tsne->gradient(&P, y, n, dims, methods[m], boxes, 12.0, 1.0, gg, &zg,
                                              &go);
        double worst = 0, scale = 0;
        for (int64_t e = 0; !a && !b && e < n * dims; e++) {
          worst = fmax(worst, fabs(gc[e] - gg[e]));
          scale = fmax(scale, fabs(gc[e]));
        }
        /* the FFT grids are single precision, transformed by different FFTs; the CPU's
         * exact tiles are single precision, the GPU's double */
        const double tol = m ? 1e-4 : 1e-6, ztol = m ? 1e-5 : 1e-6;
        if (b == GPUML_ERR_NOMEM && getenv("GPUML_GPU_MEMORY_LIMIT")) {
          /* a 3-D FFT grid may not fit a small forced budget: then a clear error */
          CHECK(strstr(gpuml_last_error(), "gpu_memory_limit") != NULL,
                "dims %d %s under a memory limit: %s", dims, m ? "fft" : "exact",
                gpuml_last_error());
        } else {
          CHECK(!a && !b && worst < tol * scale && fabs(zc - zg) < ztol * zc,
                "dims %d %s: GPU gradient vs CPU: worst %g of %g, Z %.15g vs %.15g (%s)", dims,
                m ? "fft" : "exact", worst, scale, zc, zg, gpuml_last_error());
        }
        free(gc);
        free(gg);
      }
    }
    gm_csr_free(&P);
    free(x);
    free(y);
  }
}

/* On the GPU the 3-D FFT keeps boxes of width <= 1 beyond the CPU's 128^3 grid: the
 * repulsion alone (exaggeration 0) of points spread over a cube of side 48 (on the CPU's
 * cap, 21 boxes of width 2.3) against the GPU's exact repulsion. */
static void test_fft_3d_wide(void) {
  if (test_backend != GPUML_BACKEND_CUDA) return;
  const int64_t n = 12000, dims = 3;
  double *y = malloc(sizeof(double) * n * dims);
  gm_rng r;
  gm_rng_seed(&r, 10);
  for (int64_t e = 0; e < n * dims; e++) y[e] = 48 * (gm_rng_uniform(&r) - 0.5);
  /* (any P: the attraction is off) */
  double *x = blobs(n, 6, 5, 9, NULL);
  gm_csr P = {0};
  gpuml_status st = affinities_of(x, n, 6, 5, &P, NULL, GPUML_BACKEND_CPU);
  gpuml_options opt = options(GPUML_BACKEND_CUDA);
  double ze = 0, zf = 0, rel = 1;
  if (!st)
    st = fft_against_exact(gm_backend_get(GPUML_BACKEND_CUDA)->tsne, &P, y, n, dims, 0.0, &opt,
                           &ze, &zf, &rel);
  if (getenv("GPUML_GPU_MEMORY_LIMIT")) {
    /* a small forced budget caps the grid (boxes wider than 1): it still runs */
    CHECK(st == GPUML_OK, "3-D FFT of a wide embedding under a memory limit: %s", gpuml_last_error());
  } else {
    /* on the CPU with this y: boxes of width 1 (48) give Z within 0.4% and the
     * repulsion within 2.1%, the CPU's cap (21 boxes) 2.7% and 42% */
    CHECK(st == GPUML_OK && fabs(zf - ze) < 1e-2 * ze && rel < 5e-2,
          "3-D FFT on the GPU, spread 48: Z %.6g vs exact %.6g, repulsion relative error %.2g (%s)",
          zf, ze, rel, gpuml_last_error());
  }
  gm_csr_free(&P);
  free(x);
  free(y);
}

/* ---- whole runs --------------------------------------------------------------------- */

/* Fraction of points whose nearest neighbour in y (n x dims) has their label. */
static double one_nn_accuracy(const double *y, int64_t n, int dims, const int *label) {
  int64_t *idx = malloc(sizeof(int64_t) * n);
  double *dist = malloc(sizeof(double) * n);
  gpuml_options opt = options(GPUML_BACKEND_CPU);
  int64_t hit = 0;
  if (gpuml_knn_search(y, n, dims, NULL, 0, 1, idx, dist, &opt, NULL) == GPUML_OK)
    for (int64_t i = 0; i < n; i++) hit += label[idx[i]] == label[i];
  free(idx);
  free(dist);
  return (double)hit / n;
}

static void test_blobs(void) {
  const int64_t n = 400, d = 20;
  int *label = malloc(sizeof(int) * n);
  double *x = blobs(n, d, 4, 9, label);
  static const gpuml_tsne_method methods[] = {GPUML_TSNE_EXACT, GPUML_TSNE_FFT};
  /* (the 3-D FFT grid is slow on the CPU: test_fft_accuracy covers it) */
  for (int dims = 1; dims <= 3; dims++)
    for (int m = 0; m < (dims < 3 ? 2 : 1); m++) {
      gpuml_tsne_params p;
      gpuml_tsne_params_init(&p);
      p.dims = dims;
      p.perplexity = 20;
      p.max_iter = 300;
      p.method = methods[m];
      double *y = malloc(sizeof(double) * n * dims), costs[6];
      gpuml_tsne_result res;
      gpuml_options opt = options(test_backend);
      gpuml_status st = gpuml_tsne_fit(x, n, d, &p, y, costs, &opt, &res);
      CHECK(st == GPUML_OK, "blobs dims %d %s: %s", dims, m ? "fft" : "exact", gpuml_last_error());
      if (!st) {
        const double acc = one_nn_accuracy(y, n, dims, label);
        CHECK(acc > 0.99, "blobs dims %d %s: 1-NN label accuracy %.3f", dims,
              m ? "fft" : "exact", acc);
        CHECK(costs[5] < costs[4] && costs[5] > 0,
              "blobs dims %d: KL %g after 250, %g after 300", dims, costs[4], costs[5]);
        CHECK(res.method_used == methods[m] && res.neighbours == 60 && res.iterations_done == 300 &&
                  res.kl == costs[5] && res.learning_rate_used == 200,
              "blobs: result fields");
        CHECK(res.run.backend == (test_backend == GPUML_BACKEND_CUDA ? GPUML_BACKEND_CUDA
                                                                      : GPUML_BACKEND_CPU),
              "ran on %s", gpuml_backend_name(res.run.backend));
      }
      free(y);
    }
  free(x);
  free(label);
}

static int run_tsne(const double *x, int64_t n, int64_t d, const gpuml_tsne_params *p,
                    const gpuml_options *opt, double *y, double *costs) {
  return gpuml_tsne_fit(x, n, d, p, y, costs, opt, NULL) == GPUML_OK;
}

static void test_reproducible(void) {
  const int64_t n = 1000, d = 30;
  double *x = blobs(n, d, 6, 10, NULL);
  for (int m = 0; m < 2; m++) {
    gpuml_tsne_params p;
    gpuml_tsne_params_init(&p);
    p.max_iter = 60;
    p.perplexity = 10;
    p.init = GPUML_TSNE_INIT_RANDOM;
    p.method = m ? GPUML_TSNE_FFT : GPUML_TSNE_EXACT;
    const size_t bytes = sizeof(double) * n * 2;
    double *y1 = malloc(bytes), *y2 = malloc(bytes), *y3 = malloc(bytes), c1[2], c2[2];
    gpuml_options o1 = options(test_backend), o2 = options(test_backend), o3 = options(test_backend);
    o1.seed = o2.seed = 99;
    o3.seed = 100;
    o1.threads = 1;
    o2.threads = 2;
    int ok = run_tsne(x, n, d, &p, &o1, y1, c1) && run_tsne(x, n, d, &p, &o2, y2, c2) &&
             run_tsne(x, n, d, &p, &o3, y3, NULL);
    CHECK(ok && memcmp(y1, y2, bytes) == 0 && memcmp(c1, c2, sizeof c1) == 0,
          "%s: same seed gives the same embedding (1 and 2 threads)", m ? "fft" : "exact");
    CHECK(ok && memcmp(y1, y3, bytes) != 0, "another seed gives another embedding");
    free(y1);
    free(y2);
    free(y3);
  }
  free(x);
}

/* The FFT method reaches the exact method's KL. */
static void test_fft_matches_exact(void) {
  const int64_t n = 1200, d = 10;
  double *x = blobs(n, d, 5, 11, NULL);
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.max_iter = 300;
  double *y = malloc(sizeof(double) * n * 2), ce[6], cf[6];
  gpuml_options opt = options(test_backend);
  p.method = GPUML_TSNE_EXACT;
  int ok = run_tsne(x, n, d, &p, &opt, y, ce);
  p.method = GPUML_TSNE_FFT;
  ok = ok && run_tsne(x, n, d, &p, &opt, y, cf);
  double kl_exact = 0;
  if (ok) {
    gm_csr P = {0};
    gpuml_options co = options(GPUML_BACKEND_CPU);
    ok = affinities_of(x, n, d, 30, &P, NULL, GPUML_BACKEND_CPU) == GPUML_OK &&
         gm_tsne_kl_cpu(&P, y, n, 2, GPUML_TSNE_EXACT, 0, 1.0, &kl_exact, &co) == GPUML_OK;
    gm_csr_free(&P);
  }
  CHECK(ok && fabs(cf[5] - ce[5]) < 0.03 * ce[5],
        "final KL: FFT %g vs exact %g (%s)", cf[5], ce[5], gpuml_last_error());
  CHECK(ok && fabs(kl_exact - cf[5]) < 0.01 * kl_exact,
        "the FFT method's KL %g is the exact KL %g of its embedding", cf[5], kl_exact);
  if (test_backend == GPUML_BACKEND_CUDA) {
    /* the same run on the CPU: the two backends reach the same quality */
    gpuml_options co = options(GPUML_BACKEND_CPU);
    double cc[6];
    for (int m = 0; m < 2; m++) {
      p.method = m ? GPUML_TSNE_FFT : GPUML_TSNE_EXACT;
      int both = run_tsne(x, n, d, &p, &co, y, cc);
      const double *gpu = m ? cf : ce;
      CHECK(both && fabs(cc[5] - gpu[5]) < 0.02 * cc[5] && fabs(cc[0] - gpu[0]) < 0.02 * cc[0],
            "%s: KL on CPU %g vs GPU %g (after 50: %g vs %g)", m ? "fft" : "exact", cc[5],
            gpu[5], cc[0], gpu[0]);
    }
  }
  free(y);
  free(x);
}

/* dims 1 and 3, user and PCA initialisation, data with fewer columns than dims. */
static void test_options(void) {
  const int64_t n = 300;
  int *label = malloc(sizeof(int) * n);
  double *x = blobs(n, 3, 3, 12, label);
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.perplexity = 15;
  p.max_iter = 1;
  p.learning_rate = 1e-12;  /* one tiny step: the result is the initialisation */
  double *y = malloc(sizeof(double) * n * 3), *init = malloc(sizeof(double) * n * 3);
  for (int64_t e = 0; e < n * 3; e++) init[e] = (double)(e % 17) - 8;
  p.init = GPUML_TSNE_INIT_USER;
  p.init_y = init;
  p.dims = 3;
  gpuml_options opt = options(test_backend);
  gpuml_status st = gpuml_tsne_fit(x, n, 3, &p, y, NULL, &opt, NULL);
  double worst = 0, mean0 = 0;
  for (int64_t i = 0; i < n; i++) mean0 += init[i];
  mean0 /= n;
  for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(y[i] - (init[i] - mean0)));
  CHECK(st == GPUML_OK && worst < 1e-9, "user init is the start (moved %g)", worst);
  /* PCA init: the first coordinate follows the first principal component */
  p.init = GPUML_TSNE_INIT_PCA;
  p.dims = 2;
  st = gpuml_tsne_fit(x, n, 3, &p, y, NULL, &opt, NULL);
  double pcs[300 * 2];
  gpuml_options co = options(GPUML_BACKEND_CPU);
  gm_tsne_pca_cpu(x, n, 3, 2, pcs, &co);
  double c = 0, a = 0, b = 0, sd = 0;
  for (int64_t i = 0; i < n; i++) c += y[i] * pcs[i], a += y[i] * y[i], b += pcs[i] * pcs[i];
  for (int64_t i = 0; i < n; i++) sd += y[i] * y[i];
  sd = sqrt(sd / (n - 1));
  CHECK(st == GPUML_OK && c / sqrt(a * b) > 0.999999 && fabs(sd - 1e-4) < 1e-6,
        "PCA init: correlation %g with PC1, sd %g", c / sqrt(a * b), sd);
  /* one variable, two output dimensions */
  double *x1 = malloc(sizeof(double) * n);
  for (int64_t i = 0; i < n; i++) x1[i] = (double)label[i] * 20 + sin((double)i);
  p.max_iter = 300;
  p.learning_rate = 0;
  st = gpuml_tsne_fit(x1, n, 1, &p, y, NULL, &opt, NULL);
  CHECK(st == GPUML_OK && one_nn_accuracy(y, n, 2, label) > 0.99,
        "one column into 2-D: %s", gpuml_last_error());
  free(x1);
  free(x);
  free(y);
  free(init);
  free(label);
}

/* PCA to initial_dims before the kNN, against running on precomputed scores. */
static void test_pca_reduction(void) {
  const int64_t n = 400, d = 60;
  double *x = blobs(n, d, 4, 13, NULL);
  double *s = malloc(sizeof(double) * n * 12);
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.initial_dims = 12;
  p.perplexity = 20;
  p.max_iter = 100;
  p.init = GPUML_TSNE_INIT_RANDOM;  /* a PCA init would redo the PCA, rounded differently */
  double *y1 = malloc(sizeof(double) * n * 2), *y2 = malloc(sizeof(double) * n * 2);
  gpuml_options opt = options(GPUML_BACKEND_CPU);
  gpuml_status st = gm_tsne_pca_cpu(x, n, d, 12, s, &opt);
  if (!st) st = gpuml_tsne_fit(x, n, d, &p, y1, NULL, &opt, NULL);
  if (!st) st = gpuml_tsne_fit(s, n, 12, &p, y2, NULL, &opt, NULL);
  CHECK(st == GPUML_OK && memcmp(y1, y2, sizeof(double) * n * 2) == 0,
        "pca = TRUE is t-SNE of the first initial_dims scores (%s)", gpuml_last_error());
  free(x);
  free(s);
  free(y1);
  free(y2);
}

typedef struct {
  int calls, stop_after;
  char stages[8][16];
  int nstages;
  const gpuml_tsne_result *res;
  int kl_seen;
} callback_log;

static void log_progress(void *ctx, const char *stage, int64_t done, int64_t total) {
  callback_log *l = ctx;
  (void)total;
  if (l->nstages == 0 || strcmp(l->stages[l->nstages - 1], stage) != 0)
    if (l->nstages < 8) snprintf(l->stages[l->nstages++], 16, "%s", stage);
  if (strcmp(stage, "tsne") == 0 && l->res->iterations_done == done && l->res->kl > 0)
    l->kl_seen++;
}

static int stop_later(void *ctx) {
  callback_log *l = ctx;
  return ++l->calls > l->stop_after;
}

static void test_callbacks(void) {
  const int64_t n = 300;
  double *x = blobs(n, 80, 3, 14, NULL), *y = malloc(sizeof(double) * n * 2);
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.perplexity = 20;
  p.max_iter = 120;
  gpuml_tsne_result res;
  callback_log l;
  memset(&l, 0, sizeof l);
  l.stop_after = 1 << 30;
  l.res = &res;
  gpuml_options opt = options(test_backend);
  opt.verbose = 1;
  opt.progress = log_progress;
  opt.interrupted = stop_later;
  opt.callback_ctx = &l;
  gpuml_status st = gpuml_tsne_fit(x, n, 80, &p, y, NULL, &opt, &res);
  CHECK(st == GPUML_OK && l.nstages == 4 && !strcmp(l.stages[0], "pca") &&
            !strcmp(l.stages[1], "knn") && !strcmp(l.stages[2], "affinities") &&
            !strcmp(l.stages[3], "tsne") && l.kl_seen == 3,
        "progress stages %d (%s %s %s %s), KL seen %d", l.nstages, l.stages[0], l.stages[1],
        l.stages[2], l.stages[3], l.kl_seen);
  const int calls = l.calls;
  for (int at = 1; at < calls; at += calls / 5 + 1) {
    memset(&l, 0, sizeof l);
    l.stop_after = at;
    l.res = &res;
    st = gpuml_tsne_fit(x, n, 80, &p, y, NULL, &opt, &res);
    CHECK(st == GPUML_ERR_INTERRUPTED, "interrupt after %d checks: status %d", at, st);
  }
  free(x);
  free(y);
}


/* ---- heavy tails (df) ------------------------------------------------------------- */

/* KL(P || Q) with q_ij ~ (1 + |y_i - y_j|^2 / df)^(-df), in plain double loops; Z to *z. */
static double reference_heavy_kl(const gm_csr *P, const double *y, int64_t n, int dims,
                                 double df, double *z_out) {
  double z = 0, kl = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double r2 = 0;
      for (int d = 0; d < dims; d++) r2 += pow(y[i + d * n] - y[j + d * n], 2);
      if (j != i) z += pow(1 + r2 / df, -df);
    }
  for (int64_t i = 0; i < n; i++)
    for (int64_t e = P->row[i]; e < P->row[i + 1]; e++) {
      const int64_t j = P->col[e];
      double r2 = 0;
      for (int d = 0; d < dims; d++) r2 += pow(y[i + d * n] - y[j + d * n], 2);
      if (P->val[e] > 0) kl += P->val[e] * (log(P->val[e] * z) + df * log1p(r2 / df));
    }
  if (z_out) *z_out = z;
  return kl;
}

/* The exact gradient of the heavy-tailed KL on the backend under test against finite
 * differences of the double reference; the KL and Z of the CPU against the reference. */
static void test_heavy_tails_gradient(void) {
  static const double dfs[] = {0.3, 0.5, 2.5};
  for (int f = 0; f < 3; f++)
    for (int dims = 1; dims <= 3; dims++) {
      const double df = dfs[f];
      const int64_t n = 30;
      double *x = blobs(n, 5, 2, 5, NULL);
      gm_csr P = {0};
      gpuml_status st = affinities_of(x, n, 5, 5, &P, NULL, GPUML_BACKEND_CPU);
      gm_rng r;
      gm_rng_seed(&r, 6 + f);
      double *y = malloc(sizeof(double) * n * dims), *g = malloc(sizeof(double) * n * dims);
      for (int64_t e = 0; e < n * dims; e++) y[e] = 2 * gm_rng_normal(&r);
      gpuml_options opt = options(test_backend), co = options(GPUML_BACKEND_CPU);
      double z = 0, kl = 0, zref = 0;
      if (!st)
        st = gm_backend_get(test_backend)
                 ->tsne->gradient(&P, y, n, dims, GPUML_TSNE_EXACT, 0, 1.0, df, g, &z, &opt);
      if (!st) st = gm_tsne_kl_cpu(&P, y, n, dims, GPUML_TSNE_EXACT, 0, df, &kl, &co);
      const double kl_ref = st ? 0 : reference_heavy_kl(&P, y, n, dims, df, &zref);
      double worst = 0, scale = 0;
      for (int64_t e = 0; !st && e < n * dims; e++) {
        const double keep = y[e], h = 1e-5;
        y[e] = keep + h;
        const double up = reference_heavy_kl(&P, y, n, dims, df, NULL);
        y[e] = keep - h;
        const double down = reference_heavy_kl(&P, y, n, dims, df, NULL);
        y[e] = keep;
        const double fd = (up - down) / (2 * h);
        worst = fmax(worst, fabs(4 * g[e] - fd));
        scale = fmax(scale, fabs(fd));
      }
      CHECK(st == GPUML_OK && worst < 2e-6 * scale,
            "df %g, dims %d: heavy-tailed gradient vs finite differences: worst %g of %g (%s)",
            df, dims, worst, scale, gpuml_last_error());
      CHECK(fabs(kl - kl_ref) < 1e-6 * fabs(kl_ref), "df %g, dims %d: KL %.12g vs %.12g", df,
            dims, kl, kl_ref);
      CHECK(fabs(z - zref) < 1e-6 * zref, "df %g, dims %d: Z %.15g vs %.15g", df, dims, z, zref);
      gm_csr_free(&P);
      free(x);
      free(y);
      free(g);
    }
}

/* The FFT method with heavy tails (a kernel of its own for Z) against the exact one, on
 * the backend under test; on CUDA also against the CPU. */
static void test_heavy_tails_fft(void) {
  for (int dims = 1; dims <= 3; dims++) {
    const int64_t n = 1500;
    const double df = dims == 2 ? 0.5 : 0.7;
    double *x = blobs(n, 6, 5, 7, NULL);
    gm_csr P = {0};
    gpuml_status st = affinities_of(x, n, 6, 15, &P, NULL, GPUML_BACKEND_CPU);
    gm_rng r;
    gm_rng_seed(&r, 8);
    double *y = malloc(sizeof(double) * n * dims);
    double *ge = malloc(sizeof(double) * n * dims), *gf = malloc(sizeof(double) * n * dims);
    double *gc = malloc(sizeof(double) * n * dims);
    const double spread = dims == 3 ? 6 : 12;
    for (int64_t e = 0; e < n * dims; e++) y[e] = spread * gm_rng_normal(&r) / 3;
    gpuml_options opt = options(test_backend), co = options(GPUML_BACKEND_CPU);
    const gm_tsne_ops *ops = gm_backend_get(test_backend)->tsne;
    double ze = 0, zf = 0, zc = 0;
    if (!st) st = ops->gradient(&P, y, n, dims, GPUML_TSNE_EXACT, 0, 1.0, df, ge, &ze, &opt);
    if (!st) st = ops->gradient(&P, y, n, dims, GPUML_TSNE_FFT, 0, 1.0, df, gf, &zf, &opt);
    double err = 0, norm = 0;
    for (int64_t e = 0; !st && e < n * dims; e++) {
      err += (ge[e] - gf[e]) * (ge[e] - gf[e]);
      norm += ge[e] * ge[e];
    }
    const double rel = st ? 1 : sqrt(err / norm);
    CHECK(st == GPUML_OK && fabs(zf - ze) < 2e-3 * ze && rel < 2e-2,
          "df %g, dims %d: FFT vs exact: Z %.6g vs %.6g, gradient relative error %.2g (%s)", df,
          dims, zf, ze, rel, gpuml_last_error());
    if (test_backend == GPUML_BACKEND_CUDA && !st) {
      for (int m = 0; m < 2; m++) {
        const gpuml_tsne_method method = m ? GPUML_TSNE_FFT : GPUML_TSNE_EXACT;
        const int boxes = gm_tsne_grid_boxes(2 * spread, dims);
        double *gg = m ? gf : ge, zg = 0;
        gpuml_status a = gm_tsne_gradient_cpu(&P, y, n, dims, method, boxes, 12.0, df, gc, &zc, &co);
        gpuml_status b = ops->gradient(&P, y, n, dims, method, boxes, 12.0, df, gg, &zg, &opt);
        double worst = 0, scale = 0;
        for (int64_t e = 0; !a && !b && e < n * dims; e++) {
          worst = fmax(worst, fabs(gc[e] - gg[e]));
          scale = fmax(scale, fabs(gc[e]));
        }
        const double tol = m ? 1e-4 : 1e-5, ztol = m ? 1e-5 : 1e-6;
        CHECK(!a && !b && worst < tol * scale && fabs(zc - zg) < ztol * zc,
              "df %g, dims %d %s: GPU gradient vs CPU: worst %g of %g, Z %.15g vs %.15g (%s)", df,
              dims, m ? "fft" : "exact", worst, scale, zc, zg, gpuml_last_error());
      }
    }
    gm_csr_free(&P);
    free(x);
    free(y);
    free(ge);
    free(gf);
    free(gc);
  }
}

/* Whole runs: df = 1 is today's t-SNE bit for bit (the default); heavy tails change the
 * embedding, the exact and FFT methods reach the same KL, and the reported KL is the
 * exact heavy-tailed KL of the embedding. */
static void test_heavy_tails_fit(void) {
  const int64_t n = 1200, d = 10;
  double *x = blobs(n, d, 5, 11, NULL);
  const size_t bytes = sizeof(double) * n * 2;
  double *y1 = malloc(bytes), *y2 = malloc(bytes), *yh = malloc(bytes), c1[6], c2[6], ce[6],
         cf[6];
  gpuml_options opt = options(test_backend);
  for (int m = 0; m < 2; m++) {
    gpuml_tsne_params p;
    gpuml_tsne_params_init(&p);
    p.max_iter = 300;
    p.method = m ? GPUML_TSNE_FFT : GPUML_TSNE_EXACT;
    int ok = run_tsne(x, n, d, &p, &opt, y1, c1);
    p.df = 1.0;
    ok = ok && run_tsne(x, n, d, &p, &opt, y2, c2);
    CHECK(ok && memcmp(y1, y2, bytes) == 0 && memcmp(c1, c2, sizeof c1) == 0,
          "%s: df = 1 gives the default embedding bit for bit", m ? "fft" : "exact");
    p.df = 0.5;
    ok = ok && run_tsne(x, n, d, &p, &opt, yh, m ? cf : ce);
    CHECK(ok && memcmp(y1, yh, bytes) != 0, "%s: df = 0.5 gives another embedding (%s)",
          m ? "fft" : "exact", gpuml_last_error());
    if (ok) {
      gm_csr P = {0};
      gpuml_options co = options(GPUML_BACKEND_CPU);
      double kl = 0;
      ok = affinities_of(x, n, d, 30, &P, NULL, GPUML_BACKEND_CPU) == GPUML_OK &&
           gm_tsne_kl_cpu(&P, yh, n, 2, GPUML_TSNE_EXACT, 0, 0.5, &kl, &co) == GPUML_OK;
      const double reported = m ? cf[5] : ce[5];
      CHECK(ok && fabs(kl - reported) < 0.01 * kl,
            "%s, df = 0.5: reported KL %g is the exact heavy-tailed KL %g of the embedding",
            m ? "fft" : "exact", reported, kl);
      gm_csr_free(&P);
    }
  }
  CHECK(fabs(cf[5] - ce[5]) < 0.03 * ce[5], "df = 0.5: final KL FFT %g vs exact %g", cf[5],
        ce[5]);
  free(x);
  free(y1);
  free(y2);
  free(yh);
}

/* ---- placing new points (gpuml_tsne_transform) ------------------------------------- */

/* n points around `clusters` centres drawn N(0, spread^2) in d dimensions (overlapping
 * a little for small spreads); label[i] = i % clusters. The same seed for the centres
 * (centre_seed) and another for the points give held-out data of the same clusters. */
static double *labelled_clouds(int64_t n, int64_t d, int clusters, double spread,
                               uint64_t centre_seed, uint64_t seed, int *label) {
  gm_rng r;
  gm_rng_seed(&r, centre_seed);
  double *centre = malloc(sizeof(double) * clusters * d), *x = malloc(sizeof(double) * n * d);
  for (int64_t e = 0; e < clusters * d; e++) centre[e] = spread * gm_rng_normal(&r);
  gm_rng_seed(&r, seed);
  for (int64_t i = 0; i < n; i++) {
    const int c = (int)(i % clusters);
    label[i] = c;
    for (int64_t t = 0; t < d; t++) x[i + t * n] = centre[c + t * clusters] + gm_rng_normal(&r);
  }
  free(centre);
  return x;
}

/* Fraction of the points q (m x dims) whose k nearest points of y (n x dims, labels ly)
 * hold a majority of q's label lq; `self` skips the nearest one (q = y). */
static double knn_label_accuracy(const double *y, int64_t n, const int *ly, const double *q,
                                 int64_t m, const int *lq, int dims, int k, int self,
                                 int clusters) {
  int64_t *idx = malloc(sizeof(int64_t) * m * (k + 1));
  double *dist = malloc(sizeof(double) * m * (k + 1));
  gpuml_options opt = options(GPUML_BACKEND_CPU);
  double good = 0;
  if (gpuml_knn_search(y, n, dims, self ? NULL : q, self ? 0 : m, k, idx, dist, &opt, NULL) == GPUML_OK)
    for (int64_t i = 0; i < m; i++) {
      int votes[16] = {0}, best = 0;
      for (int t = 0; t < k; t++) votes[ly[idx[i + t * m]]]++;
      for (int c = 1; c < clusters; c++)
        if (votes[c] > votes[best]) best = c;
      good += best == lq[i];
    }
  free(idx);
  free(dist);
  return good / (double)m;
}

static int by_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void test_transform(void) {
  const int64_t n = 1000, m = 300, d = 20;
  const int clusters = 10, k = 10;
  int *ln = malloc(sizeof(int) * n), *lm = malloc(sizeof(int) * m);
  double *x = labelled_clouds(n, d, clusters, 0.8, 21, 22, ln);
  double *xn = labelled_clouds(m, d, clusters, 0.8, 21, 23, lm);
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.max_iter = 400;
  gpuml_options opt = options(test_backend);
  double *y = malloc(sizeof(double) * n * 2), *yn = malloc(sizeof(double) * m * 2);
  double *ys = malloc(sizeof(double) * 100 * 2), *yt = malloc(sizeof(double) * 200 * 2);
  gpuml_status st = gpuml_tsne_fit(x, n, d, &p, y, NULL, &opt, NULL);
  const double own = st ? 0 : knn_label_accuracy(y, n, ln, y, n, ln, 2, k, 1, clusters);
  CHECK(st == GPUML_OK && own > 0.7 && own < 1, "transform: the fit's own 10-NN accuracy %g (%s)",
        own, gpuml_last_error());
  double lo = 0, hi = 0;
  for (int64_t e = 0; e < n; e++) {
    lo = fmin(lo, y[e]);
    hi = fmax(hi, y[e]);
  }
  for (int mth = 0; mth < 2 && !st; mth++) {
    const char *name = mth ? "fft" : "exact";
    gpuml_tsne_transform_params tp;
    gpuml_tsne_transform_params_init(&tp);
    tp.method = mth ? GPUML_TSNE_FFT : GPUML_TSNE_EXACT;
    gpuml_tsne_result res;
    gpuml_status a = gpuml_tsne_transform(x, n, d, y, 2, xn, m, d, &tp, yn, &opt, &res);
    const double acc = a ? 0 : knn_label_accuracy(y, n, ln, yn, m, lm, 2, k, 0, clusters);
    CHECK(a == GPUML_OK && acc > own - 0.05 && res.method_used == tp.method && res.neighbours == 15,
          "transform %s: new points' 10-NN accuracy %g vs the fit's own %g (%s)", name, acc, own,
          gpuml_last_error());
    /* training points placed again land where they are (within 2% of the spread) */
    double *xt = malloc(sizeof(double) * 200 * d);
    for (int64_t i = 0; i < 200; i++)
      for (int64_t t = 0; t < d; t++) xt[i + t * 200] = x[i * 4 + t * n];
    a = gpuml_tsne_transform(x, n, d, y, 2, xt, 200, d, &tp, yt, &opt, NULL);
    /* (a point the fit left among another cluster's points goes to its neighbours) */
    double moved[200];
    for (int64_t i = 0; i < 200; i++)
      moved[i] = a ? INFINITY : hypot(yt[i] - y[i * 4], yt[i + 200] - y[i * 4 + n]);
    qsort(moved, 200, sizeof *moved, by_double);
    CHECK(a == GPUML_OK && moved[100] < 0.01 * (hi - lo) && moved[190] < 0.05 * (hi - lo),
          "transform %s: training points land near themselves: median %g, 95%% %g, spread %g (%s)",
          name, moved[100], moved[190], hi - lo, gpuml_last_error());
    free(xt);
    if (mth == 0 && !a) {
      /* exact: a point's place does not depend on the others placed with it */
      double *xs = malloc(sizeof(double) * 100 * d);
      for (int64_t i = 0; i < 100; i++)
        for (int64_t t = 0; t < d; t++) xs[i + t * 100] = xn[i + 50 + t * m];
      a = gpuml_tsne_transform(x, n, d, y, 2, xs, 100, d, &tp, ys, &opt, NULL);
      int same = !a;
      for (int64_t i = 0; same && i < 100; i++)
        same = ys[i] == yn[i + 50] && ys[i + 100] == yn[i + 50 + m];
      CHECK(same, "transform exact: 100 points alone land where they land among 300 (%s)",
            gpuml_last_error());
      /* max_iter = 0: the starts, the median of the neighbours' places, near the result */
      tp.max_iter = 0;
      a = gpuml_tsne_transform(x, n, d, y, 2, xs, 100, d, &tp, ys, &opt, NULL);
      double shift[100];
      for (int64_t i = 0; i < 100; i++)
        shift[i] = a ? INFINITY : hypot(ys[i] - yn[i + 50], ys[i + 100] - yn[i + 50 + m]);
      free(xs);
      qsort(shift, 100, sizeof *shift, by_double);
      CHECK(a == GPUML_OK && shift[50] < 0.05 * (hi - lo) && shift[50] > 0,
            "transform: the optimisation refines the starts (median move %g of spread %g)",
            shift[50], hi - lo);
    }
  }
  /* bad input */
  gpuml_tsne_transform_params tp;
  gpuml_tsne_transform_params_init(&tp);
  expect_error("transform without training data",
               gpuml_tsne_transform(NULL, 0, d, y, 2, xn, m, d, &tp, yn, &opt, NULL),
               "tsne:noTrainingData");
  expect_error("transform with other columns",
               gpuml_tsne_transform(x, n, d, y, 2, xn, m, d - 1, &tp, yn, &opt, NULL),
               "tsne:badColumns");
  CHECK(strstr(gpuml_last_error(), "19 columns but the training data 20") != NULL, "message: %s",
        gpuml_last_error());
  tp.perplexity = 334;
  expect_error("transform perplexity",
               gpuml_tsne_transform(x, n, d, y, 2, xn, m, d, &tp, yn, &opt, NULL),
               "tsne:badPerplexity");
  tp.perplexity = 5;
  tp.df = 0;
  expect_error("transform df", gpuml_tsne_transform(x, n, d, y, 2, xn, m, d, &tp, yn, &opt, NULL),
               "tsne:badDf");
  tp.df = 1;
  y[3] = NAN;
  expect_error("transform bad embedding",
               gpuml_tsne_transform(x, n, d, y, 2, xn, m, d, &tp, yn, &opt, NULL),
               "tsne:badEmbedding");
  xn[5] = INFINITY;
  expect_error("transform Inf", gpuml_tsne_transform(x, n, d, y - 0, 2, xn, m, d, &tp, yn, &opt, NULL),
               "tsne:badEmbedding");
  y[3] = 0;
  expect_error("transform Inf", gpuml_tsne_transform(x, n, d, y, 2, xn, m, d, &tp, yn, &opt, NULL),
               "tsne:nonFinite");
  free(x);
  free(xn);
  free(y);
  free(yn);
  free(ys);
  free(yt);
  free(ln);
  free(lm);
}

/* ---- other inputs: neighbour lists, distance matrices ----------------------------- */

static void test_other_inputs(void) {
  const int64_t n = 300, d = 10, k = 30;
  double *x = blobs(n, d, 3, 31, NULL);
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.perplexity = 10;
  p.max_iter = 150;
  p.init = GPUML_TSNE_INIT_RANDOM;
  gpuml_options opt = options(test_backend);
  opt.seed = 5;
  const size_t bytes = sizeof(double) * n * 2;
  double *y = malloc(bytes), *yn = malloc(bytes), *yd = malloc(bytes), c[3], cn[3], cd[3];
  int64_t *idx = malloc(sizeof(int64_t) * n * k);
  double *dist = malloc(sizeof(double) * n * k), *D = malloc(sizeof(double) * n * n);
  gpuml_options co = options(GPUML_BACKEND_CPU);
  gpuml_status st = gpuml_tsne_fit(x, n, d, &p, y, c, &opt, NULL);
  if (!st) st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, &co, NULL);
  /* the lists in another order within each row: sorted again by distance */
  for (int64_t i = 0; !st && i < n; i += 3) {
    int64_t ti = idx[i];
    double td = dist[i];
    idx[i] = idx[i + (k - 1) * n];
    dist[i] = dist[i + (k - 1) * n];
    idx[i + (k - 1) * n] = ti;
    dist[i + (k - 1) * n] = td;
  }
  gpuml_tsne_result res;
  gpuml_status a = st ? st : gpuml_tsne_fit_neighbours(idx, dist, n, k, &p, yn, cn, &opt, &res);
  CHECK(!st && !a && memcmp(y, yn, bytes) == 0 && memcmp(c, cn, sizeof c) == 0 && res.neighbours == k,
        "precomputed neighbours give the data path's embedding bit for bit (%s)", gpuml_last_error());
  /* distances: the same neighbours, distances equal to rounding */
  if (!st) st = gpuml_dist_compute(x, n, d, NULL, 0, 0, D, &co, NULL);
  a = st ? st : gpuml_tsne_fit_distance(D, n, n, &p, yd, cd, &opt, NULL);
  double worst = 0, spread = 0;
  for (int64_t e = 0; !a && e < n * 2; e++) {
    worst = fmax(worst, fabs(yd[e] - y[e]));
    spread = fmax(spread, fabs(y[e]));
  }
  CHECK(!st && !a && worst < 1e-6 * spread && fabs(cd[2] - c[2]) < 1e-8 * c[2],
        "a distance matrix gives the data path's embedding: worst %g of %g, KL %.12g vs %.12g (%s)",
        worst, spread, cd[2], c[2], gpuml_last_error());
  /* bad input */
  expect_error("distance not square", gpuml_tsne_fit_distance(D, n, n - 1, &p, yd, NULL, &opt, NULL),
               "tsne:badDistance");
  D[7 + 3 * n] = -1;
  expect_error("negative distance", gpuml_tsne_fit_distance(D, n, n, &p, yd, NULL, &opt, NULL),
               "tsne:badDistance");
  CHECK(strstr(gpuml_last_error(), "row 8, column 4") != NULL, "message: %s", gpuml_last_error());
  D[7 + 3 * n] = NAN;
  expect_error("NaN distance", gpuml_tsne_fit_distance(D, n, n, &p, yd, NULL, &opt, NULL),
               "tsne:badDistance");
  expect_error("too few neighbours", gpuml_tsne_fit_neighbours(idx, dist, n, 20, &p, yn, NULL, &opt, NULL),
               "tsne:badPerplexity");
  const int64_t keep = idx[4];
  idx[4] = 4;
  expect_error("self as neighbour", gpuml_tsne_fit_neighbours(idx, dist, n, k, &p, yn, NULL, &opt, NULL),
               "tsne:badNeighbours");
  idx[4] = n;
  expect_error("index out of range", gpuml_tsne_fit_neighbours(idx, dist, n, k, &p, yn, NULL, &opt, NULL),
               "tsne:badNeighbours");
  idx[4] = idx[4 + n];
  expect_error("neighbour twice", gpuml_tsne_fit_neighbours(idx, dist, n, k, &p, yn, NULL, &opt, NULL),
               "tsne:badNeighbours");
  idx[4] = keep;
  dist[9] = -0.5;
  expect_error("negative neighbour distance",
               gpuml_tsne_fit_neighbours(idx, dist, n, k, &p, yn, NULL, &opt, NULL), "tsne:badNeighbours");
  free(x);
  free(y);
  free(yn);
  free(yd);
  free(idx);
  free(dist);
  free(D);
}

/* Multiscale: P of several perplexities is the mean of their P over the same neighbours;
 * a list of one is the single perplexity bit for bit. */
static void test_multiscale(void) {
  const int64_t n = 400, d = 8, k = 45;
  double *x = blobs(n, d, 4, 41, NULL);
  int64_t *idx = malloc(sizeof(int64_t) * n * k);
  double *dist = malloc(sizeof(double) * n * k);
  gpuml_options opt = options(test_backend), co = options(GPUML_BACKEND_CPU);
  gpuml_status st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, &co, NULL);
  const double scales[2] = {5, 15};
  gm_csr P = {0}, P5 = {0}, P15 = {0};
  if (!st) st = gm_tsne_affinities_multiscale(idx, dist, n, k, scales, 2, &P, NULL, &opt);
  if (!st) st = gm_tsne_affinities(idx, dist, n, k, 5, &P5, NULL, &opt);
  if (!st) st = gm_tsne_affinities(idx, dist, n, k, 15, &P15, NULL, &opt);
  double worst = st ? 1 : 0, sum = 0;
  for (int64_t i = 0; !st && i < n; i++)
    for (int64_t e = P.row[i]; e < P.row[i + 1]; e++) {
      const double mean = 0.5 * (p_value(&P5, i, P.col[e]) + p_value(&P15, i, P.col[e]));
      worst = fmax(worst, fabs(P.val[e] - mean) / mean);
      sum += P.val[e];
    }
  CHECK(!st && worst < 1e-12 && fabs(sum - 1) < 1e-12 && P.nnz == P5.nnz,
        "multiscale P is the mean of the single-scale P: worst relative gap %g, sum %.15g (%s)",
        worst, sum, gpuml_last_error());
  gpuml_tsne_params p;
  gpuml_tsne_params_init(&p);
  p.perplexity = 10;
  p.max_iter = 100;
  const size_t bytes = sizeof(double) * n * 2;
  double *y1 = malloc(bytes), *y2 = malloc(bytes), *y3 = malloc(bytes), c3[2];
  gpuml_tsne_result res;
  int ok = gpuml_tsne_fit(x, n, d, &p, y1, NULL, &opt, NULL) == GPUML_OK;
  p.perplexity = 30;  /* the list replaces it */
  const double one = 10;
  ok = ok && gpuml_params_set_numbers(GPUML_PARAMS_TSNE, &p, "perplexities", &one, 1) == GPUML_OK;
  ok = ok && gpuml_tsne_fit(x, n, d, &p, y2, NULL, &opt, NULL) == GPUML_OK;
  CHECK(ok && memcmp(y1, y2, bytes) == 0, "perplexities = {10} is perplexity 10 (%s)",
        gpuml_last_error());
  ok = gpuml_params_set_numbers(GPUML_PARAMS_TSNE, &p, "perplexities", scales, 2) == GPUML_OK &&
       gpuml_tsne_fit(x, n, d, &p, y3, c3, &opt, &res) == GPUML_OK;
  CHECK(ok && res.neighbours == 45 && c3[1] > 0 && memcmp(y1, y3, bytes) != 0,
        "multiscale fit: %lld neighbours, KL %g (%s)", (long long)res.neighbours, c3[1],
        gpuml_last_error());
  p.perplexities[1] = 200;
  expect_error("multiscale too large", gpuml_tsne_fit(x, n, d, &p, y3, NULL, &opt, NULL),
               "tsne:badPerplexity");
  p.perplexities[1] = -1;
  expect_error("multiscale negative", gpuml_tsne_fit(x, n, d, &p, y3, NULL, &opt, NULL),
               "tsne:badPerplexity");
  gm_csr_free(&P);
  gm_csr_free(&P5);
  gm_csr_free(&P15);
  free(x);
  free(idx);
  free(dist);
  free(y1);
  free(y2);
  free(y3);
}

/* A fit split over logical shards (GPUML_SHARDS: the code of several devices, on one):
 * every shard sends its rows of the normaliser's terms and of the places to the others,
 * so each sum runs over the same array in the same order as on one device: the
 * embedding and the KL values must be the single device's bit for bit (exact and FFT,
 * 1 to 3 dimensions, heavy tails; shards of unequal sizes). The CPU's optimiser is not
 * split (its threads share one memory). */
static void test_shards(void) {
  if (test_backend != GPUML_BACKEND_CUDA) {
    SKIP("t-SNE over shards: the CUDA backend's (the CPU's optimiser is not split)");
    return;
  }
  const int64_t n = 701, d = 12, k = 30;
  double *x = blobs(n, d, 4, 17, NULL);
  int64_t *idx = malloc(sizeof(int64_t) * n * k);
  double *dist = malloc(sizeof(double) * n * k);
  gpuml_options co = options(GPUML_BACKEND_CPU);
  gpuml_status st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, &co, NULL);
  CHECK(!st, "neighbours for the shards' test: %s", gpuml_last_error());
  const char *knob = getenv("GPUML_SHARDS");
  char saved[32] = "";
  if (knob) snprintf(saved, sizeof saved, "%s", knob);
  const struct {
    gpuml_tsne_method method;
    int dims;
    double df;
  } cases[] = {{GPUML_TSNE_EXACT, 2, 1}, {GPUML_TSNE_FFT, 2, 1}, {GPUML_TSNE_FFT, 1, 1},
               {GPUML_TSNE_FFT, 3, 1}, {GPUML_TSNE_EXACT, 3, 1}, {GPUML_TSNE_FFT, 2, 0.6}};
  for (size_t c = 0; !st && c < sizeof cases / sizeof cases[0]; c++) {
    gpuml_tsne_params p;
    gpuml_tsne_params_init(&p);
    p.perplexity = 10;
    p.max_iter = 120;
    p.stop_lying_iter = 40;
    p.dims = cases[c].dims;
    p.method = cases[c].method;
    p.df = cases[c].df;
    p.init = GPUML_TSNE_INIT_RANDOM;
    gpuml_options opt = options(test_backend);
    opt.seed = 3;
    const size_t bytes = sizeof(double) * n * p.dims;
    double *y1 = malloc(bytes), *ys = malloc(bytes), c1[3], cs[3];
    unsetenv("GPUML_SHARDS");
    gpuml_status a = gpuml_tsne_fit_neighbours(idx, dist, n, k, &p, y1, c1, &opt, NULL);
    for (int shards = 2; !a && shards <= 5; shards += 3) {
      char v[8];
      snprintf(v, sizeof v, "%d", shards);
      setenv("GPUML_SHARDS", v, 1);
      const gpuml_status b = gpuml_tsne_fit_neighbours(idx, dist, n, k, &p, ys, cs, &opt, NULL);
      CHECK(!b && memcmp(y1, ys, bytes) == 0 && memcmp(c1, cs, sizeof c1) == 0,
            "t-SNE (%s, %d-D, df %g) on %d shards: one device's embedding and KL bit for bit "
            "(%s)", gpuml_tsne_method_name(p.method), (int)p.dims, p.df, shards,
            b ? gpuml_last_error() : "");
    }
    CHECK(!a, "t-SNE on one shard: %s", a ? gpuml_last_error() : "");
    free(y1);
    free(ys);
  }
  if (saved[0]) setenv("GPUML_SHARDS", saved, 1);
  else unsetenv("GPUML_SHARDS");
  free(idx);
  free(dist);
  free(x);
}

int main(void) {
  harness_init();
  test_precision = harness_precision;
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "t-SNE")) continue;
    test_backend = b->id;
    test_bad_input();
    test_affinities();
    test_fit_affinities();
    test_duplicates();
    test_pca();
    test_gradient_finite_differences();
    test_exact_tiles();
    test_fft_grid();
    test_fft_even_and_convolve();
    test_fft_accuracy();
    test_fft_3d_wide();
    test_blobs();
    test_reproducible();
    test_fft_matches_exact();
    test_options();
    test_pca_reduction();
    test_callbacks();
    test_heavy_tails_gradient();
    test_heavy_tails_fft();
    test_heavy_tails_fit();
    test_transform();
    test_other_inputs();
    test_multiscale();
    test_shards();
  }
  gpuml_shutdown(); /* the contexts' own memory, so that a leak check sees only leaks */
  return check_summary("C");
}
