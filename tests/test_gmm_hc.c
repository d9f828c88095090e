/* C tests of the hierarchical start of the mixtures (core/gmm_hc.c, an internal function:
 * no backend, so no harness loop): recovery of separated groups, nesting, labels in
 * order of first appearance, determinism (repeat calls, thread counts, row order), the
 * subset of large data, degenerate data, errors and interrupts, and one small case
 * against mclust's answer.
 *
 * With arguments it is the C side of bench/gmm_hc_check.R:
 *   test_gmm_hc --csv IN.csv OUT.csv GMAX [THREADS]
 * reads an n x d matrix (one row per line, comma-separated, no header), writes the
 * labels (m lines of GMAX comma-separated 1-based labels, column g = the partition into
 * g groups) and prints "rows m seconds s" (the time of gm_gmm_hc alone). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gmm.h"
#include "gpuml.h"

/* ---- data --------------------------------------------------------------------------- */

static uint64_t rng_state = 2024;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) {
  return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform());
}

/* n points in G Gaussian groups in d dimensions, group k of relative size k + 1 (sorted
 * by group), random full covariances of scale about 1; the centres are k `spread` apart
 * along the first axis, with offsets uniform in [0, spread) in the others (so spread 40
 * separates every pair of groups). Column-major x, labels 0..G-1. */
static double *mixture(int64_t n, int64_t d, int64_t G, double spread, uint64_t seed,
                       int64_t *label) {
  rng_state = seed;
  double *x = malloc(sizeof(double) * n * d);
  double *centre = malloc(sizeof(double) * G * d), *A = malloc(sizeof(double) * G * d * d);
  for (int64_t k = 0; k < G; k++) {
    for (int64_t j = 0; j < d; j++) centre[k * d + j] = spread * (j == 0 ? (double)k : uniform());
    for (int64_t a = 0; a < d; a++)
      for (int64_t b = 0; b < d; b++)
        A[k * d * d + a + b * d] = a == b ? 0.5 + uniform() : (a > b ? uniform() - 0.5 : 0);
  }
  const int64_t total_weight = G * (G + 1) / 2;
  double *e = malloc(sizeof(double) * d);
  for (int64_t i = 0; i < n; i++) {
    int64_t k = 0, acc = 1;
    const int64_t slot = (i * total_weight) / n;
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

/* Whether labellings a (0..ka-1) and b of n points are the same partition. */
static int same_partition(const int32_t *a, const int64_t *b64, const int32_t *b32, int64_t n) {
  int64_t *map_ab = malloc(sizeof(int64_t) * n), *map_ba = malloc(sizeof(int64_t) * n);
  for (int64_t i = 0; i < n; i++) map_ab[i] = map_ba[i] = -1;
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++) {
    const int64_t la = a[i], lb = b64 ? b64[i] : b32[i];
    if (la < 0 || la >= n || lb < 0 || lb >= n) {
      ok = 0;
      break;
    }
    if (map_ab[la] < 0 && map_ba[lb] < 0) {
      map_ab[la] = lb;
      map_ba[lb] = la;
    } else if (map_ab[la] != lb || map_ba[lb] != la) {
      ok = 0;
    }
  }
  free(map_ab);
  free(map_ba);
  return ok;
}

/* Labels 0..g-1, numbered in order of first appearance, all g used. */
static int first_appearance(const int32_t *lab, int64_t m, int64_t g) {
  int32_t next = 0;
  for (int64_t i = 0; i < m; i++) {
    if (lab[i] < 0 || lab[i] > next) return 0;
    if (lab[i] == next) next++;
  }
  return next == g;
}

/* Partition g+1 refines partition g: each of its groups lies in one group of g. */
static int refines(const int32_t *fine, const int32_t *coarse, int64_t m, int64_t g) {
  int32_t *parent = malloc(sizeof(int32_t) * (g + 1));
  for (int64_t k = 0; k <= g; k++) parent[k] = -1;
  int ok = 1;
  for (int64_t i = 0; i < m && ok; i++) {
    if (parent[fine[i]] < 0) parent[fine[i]] = coarse[i];
    else if (parent[fine[i]] != coarse[i]) ok = 0;
  }
  free(parent);
  return ok;
}

static gpuml_options options(int threads) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.threads = threads;
  return opt;
}

static int64_t rows_of(int64_t n) { return n < GM_GMM_HC_SUBSET ? n : GM_GMM_HC_SUBSET; }

typedef struct {
  gpuml_status status;
  int64_t m, gmax;
  int64_t *rows;
  int32_t *labels;
} hc_t;

static hc_t run_hc(const double *x, int64_t n, int64_t d, int64_t gmax, const gpuml_options *opt) {
  hc_t r = {0, rows_of(n), gmax, NULL, NULL};
  r.rows = malloc(sizeof(int64_t) * r.m);
  r.labels = malloc(sizeof(int32_t) * r.m * gmax);
  r.status = gm_gmm_hc(x, n, d, gmax, opt, r.rows, r.labels);
  if (r.status) fprintf(stderr, "gm_gmm_hc: %s\n", gpuml_last_error());
  return r;
}

static void hc_free(hc_t *r) {
  free(r->rows);
  free(r->labels);
}

/* ---- tests -------------------------------------------------------------------------- */

/* Separated groups of unequal sizes come back exactly at the true G, for d = 2, 6, 10;
 * every partition is numbered by first appearance and refines the next coarser one. */
static void test_separated_and_nested(void) {
  const int64_t ds[] = {2, 6, 10};
  for (int t = 0; t < 3; t++) {
    const int64_t n = 600, d = ds[t], G = 4, gmax = 9;
    int64_t *truth = malloc(sizeof(int64_t) * n);
    double *x = mixture(n, d, G, 40, 11 + t, truth);
    gpuml_options opt = options(0);
    hc_t r = run_hc(x, n, d, gmax, &opt);
    CHECK(r.status == GPUML_OK, "separated d = %lld: status %d", (long long)d, (int)r.status);
    if (!r.status) {
      CHECK(same_partition(r.labels + (G - 1) * n, truth, NULL, n),
            "separated d = %lld: the %lld groups recovered exactly", (long long)d, (long long)G);
      int ok_first = 1, ok_nested = 1, ok_rows = 1;
      for (int64_t g = 1; g <= gmax; g++) {
        ok_first &= first_appearance(r.labels + (g - 1) * n, n, g);
        if (g < gmax) ok_nested &= refines(r.labels + g * n, r.labels + (g - 1) * n, n, g);
      }
      for (int64_t i = 0; i < n; i++) ok_rows &= r.rows[i] == i;
      CHECK(ok_first, "d = %lld: labels 0..g-1 in order of first appearance", (long long)d);
      CHECK(ok_nested, "d = %lld: partition g+1 refines partition g", (long long)d);
      CHECK(ok_rows, "d = %lld: n <= %d: every row used, in order", (long long)d,
            GM_GMM_HC_SUBSET);
    }
    hc_free(&r);
    free(x);
    free(truth);
  }
}

/* The same call twice, on 1 and 2 threads, and on the rows in another order. */
static void test_deterministic(void) {
  const int64_t n = 700, d = 5, G = 5, gmax = 9;
  int64_t *truth = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, G, 6, 77, truth); /* overlapping groups */
  gpuml_options o1 = options(1), o2 = options(2);
  hc_t a = run_hc(x, n, d, gmax, &o2), b = run_hc(x, n, d, gmax, &o2),
       c = run_hc(x, n, d, gmax, &o1);
  CHECK(!a.status && !b.status && !c.status, "deterministic: status %d %d %d", (int)a.status,
        (int)b.status, (int)c.status);
  if (!a.status && !b.status && !c.status) {
    CHECK(memcmp(a.labels, b.labels, sizeof(int32_t) * n * gmax) == 0,
          "two calls give identical labels");
    CHECK(memcmp(a.labels, c.labels, sizeof(int32_t) * n * gmax) == 0,
          "1 and 2 threads give identical labels");
  }
  /* rows in reverse-interleaved order: the same partitions of the same points */
  int64_t *perm = malloc(sizeof(int64_t) * n);
  for (int64_t i = 0; i < n; i++) perm[i] = (i * 389 + 17) % n; /* 389 prime to 700 */
  double *y = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) y[i + j * n] = x[perm[i] + j * n];
  hc_t p = run_hc(y, n, d, gmax, &o2);
  CHECK(!p.status, "permuted: status %d", (int)p.status);
  if (!p.status && !a.status) {
    int32_t *back = malloc(sizeof(int32_t) * n);
    int ok = 1;
    for (int64_t g = 1; g <= gmax; g++) {
      for (int64_t i = 0; i < n; i++) back[perm[i]] = p.labels[(g - 1) * n + i];
      const int same = same_partition(a.labels + (g - 1) * n, NULL, back, n);
      if (!same) fprintf(stderr, "  permuted rows: G = %lld differs\n", (long long)g);
      ok &= same;
    }
    CHECK(ok, "permuted rows give the same partitions for G = 1..%lld", (long long)gmax);
    free(back);
  }
  hc_free(&a);
  hc_free(&b);
  hc_free(&c);
  hc_free(&p);
  free(perm);
  free(y);
  free(x);
  free(truth);
}

/* n > GM_GMM_HC_SUBSET: the rows are increasing and distinct, sorted groups are sampled in
 * proportion (within one row of it), periodic labels are not aliased, and separated
 * groups are still recovered on the subset. */
static void test_subset(void) {
  const int64_t n = 10007, d = 3, G = 4, gmax = 6, m = GM_GMM_HC_SUBSET;
  int64_t *truth = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, G, 40, 5, truth); /* sorted by group, sizes 1 : 2 : 3 : 4 */
  gpuml_options opt = options(0);
  hc_t r = run_hc(x, n, d, gmax, &opt);
  CHECK(!r.status && r.m == m, "subset: status %d", (int)r.status);
  if (!r.status) {
    int ok = r.rows[0] >= 0 && r.rows[m - 1] < n;
    for (int64_t i = 1; i < m; i++) ok &= r.rows[i] > r.rows[i - 1];
    CHECK(ok, "subset rows increasing, distinct, in 0..n-1");
    int64_t count[4] = {0, 0, 0, 0}, size[4] = {0, 0, 0, 0}, parity[2] = {0, 0};
    for (int64_t i = 0; i < n; i++) size[truth[i]]++;
    for (int64_t i = 0; i < m; i++) {
      count[truth[r.rows[i]]]++;
      parity[r.rows[i] % 2]++;
    }
    int prop = 1;
    for (int k = 0; k < 4; k++) {
      const double expect = (double)size[k] * (double)m / (double)n;
      prop &= fabs((double)count[k] - expect) <= 2;
    }
    CHECK(prop, "sorted groups sampled in proportion: %lld %lld %lld %lld of %lld %lld %lld %lld",
          (long long)count[0], (long long)count[1], (long long)count[2], (long long)count[3],
          (long long)size[0], (long long)size[1], (long long)size[2], (long long)size[3]);
    CHECK(parity[0] > 850 && parity[1] > 850, "odd and even rows both sampled: %lld, %lld",
          (long long)parity[0], (long long)parity[1]);
    int64_t *sub = malloc(sizeof(int64_t) * m);
    for (int64_t i = 0; i < m; i++) sub[i] = truth[r.rows[i]];
    CHECK(same_partition(r.labels + (G - 1) * m, sub, NULL, m),
          "subset: the 4 separated groups recovered");
    free(sub);
    hc_t s = run_hc(x, n, d, gmax, &opt);
    CHECK(!s.status && memcmp(s.rows, r.rows, sizeof(int64_t) * m) == 0 &&
              memcmp(s.labels, r.labels, sizeof(int32_t) * m * gmax) == 0,
          "subset: a second call is identical");
    hc_free(&s);
  }
  hc_free(&r);
  free(x);
  free(truth);
}

/* Duplicate rows, a constant column, a repeated column, all rows equal, one row. */
static void test_degenerate(void) {
  const int64_t n = 300, d = 3, G = 3, gmax = 5;
  int64_t *truth = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, G, 40, 9, truth);
  gpuml_options opt = options(0);
  hc_t base = run_hc(x, n, d, gmax, &opt);
  /* a constant column added changes nothing */
  double *xc = malloc(sizeof(double) * n * (d + 1));
  memcpy(xc, x, sizeof(double) * n * d);
  for (int64_t i = 0; i < n; i++) xc[i + d * n] = 3.5;
  hc_t c = run_hc(xc, n, d + 1, gmax, &opt);
  CHECK(!base.status && !c.status &&
            memcmp(base.labels, c.labels, sizeof(int32_t) * n * gmax) == 0,
        "a constant column is dropped: same labels");
  /* a repeated column (a zero singular value) */
  for (int64_t i = 0; i < n; i++) xc[i + d * n] = x[i];
  hc_t rep = run_hc(xc, n, d + 1, gmax, &opt);
  CHECK(!rep.status && same_partition(rep.labels + (G - 1) * n, truth, NULL, n),
        "a repeated column: the groups still recovered");
  /* every row twice: pairs of equal rows */
  double *xd = malloc(sizeof(double) * 2 * n * d);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) xd[2 * i + j * 2 * n] = xd[2 * i + 1 + j * 2 * n] = x[i + j * n];
  int64_t *truth2 = malloc(sizeof(int64_t) * 2 * n);
  for (int64_t i = 0; i < 2 * n; i++) truth2[i] = truth[i / 2];
  hc_t dup = run_hc(xd, 2 * n, d, gmax, &opt);
  int pairs_together = !dup.status;
  for (int64_t i = 0; i < n && pairs_together; i++)
    pairs_together = dup.labels[(gmax - 1) * 2 * n + 2 * i] == dup.labels[(gmax - 1) * 2 * n + 2 * i + 1];
  CHECK(pairs_together && same_partition(dup.labels + (G - 1) * 2 * n, truth2, NULL, 2 * n),
        "duplicated rows: equal rows together, the groups recovered");
  /* all rows equal */
  double same[40];
  for (int i = 0; i < 40; i++) same[i] = 1.25;
  hc_t eq = run_hc(same, 20, 2, 4, &opt);
  int ok = !eq.status;
  for (int64_t g = 1; g <= 4 && ok; g++) ok = first_appearance(eq.labels + (g - 1) * 20, 20, g);
  CHECK(ok, "all rows equal: valid partitions");
  /* one row */
  double one[3] = {1, 2, 3};
  hc_t single = run_hc(one, 1, 3, 1, &opt);
  CHECK(!single.status && single.rows[0] == 0 && single.labels[0] == 0, "one row");
  /* fewer rows than columns */
  double xw[4 * 8];
  rng_state = 3;
  for (int i = 0; i < 32; i++) xw[i] = normal();
  hc_t w = run_hc(xw, 4, 8, 4, &opt);
  ok = !w.status;
  for (int64_t g = 1; g <= 4 && ok; g++) ok = first_appearance(w.labels + (g - 1) * 4, 4, g);
  CHECK(ok, "4 rows, 8 columns: valid partitions");
  hc_free(&base);
  hc_free(&c);
  hc_free(&rep);
  hc_free(&dup);
  hc_free(&eq);
  hc_free(&single);
  hc_free(&w);
  free(xc);
  free(xd);
  free(truth2);
  free(x);
  free(truth);
}

static int stop_after_calls(void *ctx) {
  int *calls = ctx;
  return ++*calls >= 3;
}

/* Errors leave the outputs untouched; an interrupt stops the merges. */
static void test_errors(void) {
  const int64_t n = 50, d = 2;
  int64_t *truth = malloc(sizeof(int64_t) * n);
  double *x = mixture(n, d, 2, 10, 4, truth);
  gpuml_options opt = options(0);
  int64_t rows[60];
  int32_t labels[60 * 60];
  for (int i = 0; i < 60; i++) rows[i] = -7;
  gpuml_status st = gm_gmm_hc(x, n, d, n + 1, &opt, rows, labels);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badG") == 0 && rows[0] == -7,
        "gmax > n: gmm:badG (%d, %s)", (int)st, gpuml_last_error_id());
  st = gm_gmm_hc(x, 5, d, 6, &opt, rows, labels);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badG") == 0,
        "n = 5 < gmax = 6: gmm:badG");
  st = gm_gmm_hc(x, n, d, 0, &opt, rows, labels);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badG") == 0, "gmax = 0: gmm:badG");
  st = gm_gmm_hc(x, n, d, 3, &opt, NULL, labels);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badOutput") == 0,
        "rows NULL: gmm:badOutput");
  st = gm_gmm_hc(x, n, d, 3, NULL, rows, labels);
  CHECK(st == GPUML_ERR_ARG, "options NULL: an argument error");
  st = gm_gmm_hc(NULL, n, d, 3, &opt, rows, labels);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:badData") == 0, "x NULL: gmm:badData");
  st = gm_gmm_hc(x, 0, d, 1, &opt, rows, labels);
  CHECK(st == GPUML_ERR_ARG, "n = 0: an argument error");
  const double keep = x[7];
  x[7] = NAN;
  st = gm_gmm_hc(x, n, d, 3, &opt, rows, labels);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "gmm:nonFinite") == 0 && rows[0] == -7,
        "NaN: gmm:nonFinite (%s)", gpuml_last_error_id());
  x[7] = keep;
  free(x);
  free(truth);
  /* interrupts: at once, and after a few looks (in the merges of 2,000 rows) */
  const int64_t big = 2000;
  int64_t *t2 = malloc(sizeof(int64_t) * big);
  double *y = mixture(big, 3, 3, 5, 8, t2);
  int64_t *r2 = malloc(sizeof(int64_t) * big);
  int32_t *l2 = malloc(sizeof(int32_t) * big * 3);
  int calls = 0;
  opt.interrupted = stop_after_calls;
  opt.callback_ctx = &calls;
  const double t0 = gm_seconds();
  st = gm_gmm_hc(y, big, 3, 3, &opt, r2, l2);
  CHECK(st == GPUML_ERR_INTERRUPTED && calls == 3 && gm_seconds() - t0 < 5,
        "interrupt: stops at the third look (%d, %d calls)", (int)st, calls);
  free(y);
  free(t2);
  free(r2);
  free(l2);
}

/* 40 points in 2 dimensions and mclust 6.0.0's hclass(hc(X, "VVV", use = "SVD"), 2:6)
 * (1-based labels; the points are x[i] = (i mod 7) + 0.37 i^1.3 / 10, y[i] = sin(1.7 i)
 * + (i mod 3) / 2 for i = 1..40, as R computes them). */
static void test_against_mclust(void) {
  static const int mclust_labels[5][40] = {
      {1, 2, 2, 1, 1, 2, 2, 1, 2, 2, 1, 1, 1, 2, 2, 1, 1, 2, 1, 1,
       2, 2, 1, 1, 2, 1, 1, 2, 2, 1, 1, 1, 2, 1, 1, 2, 1, 1, 2, 2},
      {1, 2, 3, 1, 1, 3, 2, 1, 2, 3, 1, 1, 1, 2, 2, 1, 1, 3, 1, 1,
       3, 2, 1, 1, 3, 1, 1, 2, 2, 1, 1, 1, 3, 1, 1, 3, 1, 1, 3, 3},
      {1, 2, 3, 4, 1, 3, 2, 1, 2, 3, 4, 4, 4, 2, 2, 1, 4, 3, 4, 4,
       3, 2, 1, 4, 3, 4, 4, 2, 2, 4, 4, 4, 3, 4, 1, 3, 4, 4, 3, 3},
      {1, 2, 3, 4, 1, 3, 2, 1, 2, 3, 4, 5, 4, 2, 2, 1, 4, 3, 5, 5,
       3, 2, 1, 4, 3, 5, 5, 2, 2, 4, 5, 4, 3, 5, 1, 3, 4, 5, 3, 3},
      {1, 2, 3, 4, 1, 3, 2, 1, 2, 3, 4, 5, 4, 2, 2, 1, 4, 3, 5, 5,
       3, 2, 1, 4, 3, 5, 5, 2, 2, 4, 5, 4, 6, 5, 1, 3, 4, 5, 6, 6},
  };
  const int64_t n = 40, d = 2, gmax = 6;
  double x[80];
  for (int64_t i = 0; i < n; i++) {
    const double t = (double)(i + 1);
    x[i] = fmod(t, 7) + 0.37 * pow(t, 1.3) / 10;
    x[i + n] = sin(1.7 * t) + fmod(t, 3) / 2;
  }
  gpuml_options opt = options(0);
  hc_t r = run_hc(x, n, d, gmax, &opt);
  int ok = !r.status;
  for (int64_t g = 2; g <= gmax && ok; g++) {
    int32_t ref[40];
    for (int64_t i = 0; i < n; i++) ref[i] = mclust_labels[g - 2][i] - 1;
    ok = same_partition(r.labels + (g - 1) * n, NULL, ref, n);
    if (!ok) fprintf(stderr, "  against mclust: G = %lld differs\n", (long long)g);
  }
  CHECK(ok, "40 points: mclust's partitions for G = 2..6");
  hc_free(&r);
}

/* ---- the CSV mode of bench/gmm_hc_check.R ------------------------------------------- */

static int csv_mode(const char *in, const char *out, int64_t gmax, int threads) {
  FILE *f = fopen(in, "r");
  if (!f) {
    fprintf(stderr, "cannot read %s\n", in);
    return 2;
  }
  size_t cap = 1 << 16, len = 0;
  double *v = malloc(sizeof(double) * cap);
  int64_t n = 0, d = 0, cols = 0;
  int c;
  char buf[64];
  size_t b = 0;
  while ((c = fgetc(f)) != EOF || b > 0) {
    if (c == ',' || c == '\n' || c == EOF) {
      if (b > 0) {
        buf[b] = 0;
        if (len == cap) v = realloc(v, sizeof(double) * (cap *= 2));
        v[len++] = strtod(buf, NULL);
        cols++;
        b = 0;
      }
      if ((c == '\n' || c == EOF) && cols > 0) {
        if (d == 0) d = cols;
        if (cols != d) {
          fprintf(stderr, "%s: row %lld has %lld values, not %lld\n", in, (long long)n + 1,
                  (long long)cols, (long long)d);
          return 2;
        }
        n++;
        cols = 0;
      }
      if (c == EOF) break;
    } else if (c != '\r' && c != ' ' && b < sizeof buf - 1) {
      buf[b++] = (char)c;
    }
  }
  fclose(f);
  double *x = malloc(sizeof(double) * n * d); /* to column-major */
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) x[i + j * n] = v[i * d + j];
  free(v);
  gpuml_options opt = options(threads);
  const double t0 = gm_seconds();
  hc_t r = run_hc(x, n, d, gmax, &opt);
  const double t1 = gm_seconds();
  if (r.status) return 1;
  FILE *o = fopen(out, "w");
  if (!o) {
    fprintf(stderr, "cannot write %s\n", out);
    return 2;
  }
  for (int64_t i = 0; i < r.m; i++)
    for (int64_t g = 0; g < gmax; g++)
      fprintf(o, "%d%c", r.labels[g * r.m + i] + 1, g + 1 < gmax ? ',' : '\n');
  fclose(o);
  printf("rows %lld seconds %.6f\n", (long long)r.m, t1 - t0);
  hc_free(&r);
  free(x);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "--csv") == 0)
    return csv_mode(argv[2], argv[3], atoll(argv[4]), argc >= 6 ? atoi(argv[5]) : 0);
  test_separated_and_nested();
  test_deterministic();
  test_subset();
  test_degenerate();
  test_errors();
  test_against_mclust();
  return check_summary("C");
}
