#define _POSIX_C_SOURCE 200809L /* setenv */
/* C tests of distances and kNN through gpuml.h: every case runs on each backend of the
 * parity harness (tests/harness.h) and is compared with brute force. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

/* The backend and precision of the cases being run (main() loops over the backends). */
static gpuml_backend test_backend = GPUML_BACKEND_CPU;
static gpuml_precision test_precision = GPUML_PRECISION_AUTO;

/* Tolerances: fp64 on any backend is near exact; fp32 on the GPU is not. */
static double rel_tol(void) { return test_precision == GPUML_PRECISION_SINGLE ? 2e-4 : 1e-10; }

static uint64_t rng_state = 12345;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double *random_matrix(int64_t n, int64_t d, double offset, double scale) {
  double *x = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n * d; i++) x[i] = offset + scale * uniform();
  return x;
}

static gpuml_options options(void) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = test_backend;
  opt.precision = test_precision;
  return opt;
}

/* Squared distance summed in dimension order, as the reference. */
static double ref_sqdist(const double *x, int64_t n, int64_t i, const double *y, int64_t m,
                         int64_t j, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    double diff = x[i + t * n] - y[j + t * m];
    s += diff * diff;
  }
  return s;
}

typedef struct {
  double d;
  int64_t i;
} pair;
static int pair_cmp(const void *a, const void *b) {
  const pair *p = a, *q = b;
  if (p->d != q->d) return p->d < q->d ? -1 : 1;
  return p->i < q->i ? -1 : p->i > q->i;
}

/* Brute-force kNN with the documented order (distance, then index). */
static void ref_knn(const double *data, int64_t n, int64_t d, const double *query, int64_t m,
                    int64_t k, int64_t *index, double *dist) {
  int self = query == NULL;
  if (self) {
    query = data;
    m = n;
  }
  pair *all = malloc(sizeof(pair) * n);
  for (int64_t q = 0; q < m; q++) {
    int64_t c = 0;
    for (int64_t j = 0; j < n; j++) {
      if (self && j == q) continue;
      all[c].d = ref_sqdist(data, n, j, query, m, q, d);
      all[c++].i = j;
    }
    qsort(all, c, sizeof(pair), pair_cmp);
    for (int64_t j = 0; j < k; j++) {
      index[q + j * m] = all[j].i;
      dist[q + j * m] = sqrt(all[j].d);
    }
  }
  free(all);
}

/* Checks one search against brute force; returns the queries rechecked in fp64 (-1 when
 * the call failed). */
static int64_t check_knn_case(const char *name, const double *data, int64_t n, int64_t d,
                              const double *query, int64_t m, int64_t k) {
  int64_t rows = query ? m : n;
  int64_t *idx = malloc(sizeof(int64_t) * rows * k), *ridx = malloc(sizeof(int64_t) * rows * k);
  double *dist = malloc(sizeof(double) * rows * k), *rdist = malloc(sizeof(double) * rows * k);
  gpuml_options opt = options();
  gpuml_knn_result res;
  res.rechecked = -1;
  gpuml_status st = gpuml_knn_search(data, n, d, query, m, k, idx, dist, &opt, &res);
  CHECK(st == GPUML_OK, "%s: status %d (%s)", name, st, gpuml_last_error());
  if (st != GPUML_OK) res.rechecked = -1;
  if (st == GPUML_OK) {
    ref_knn(data, n, d, query, m, k, ridx, rdist);
    int64_t bad_index = 0, bad_dist = 0, unsorted = 0;
    for (int64_t i = 0; i < rows * k; i++) {
      if (idx[i] != ridx[i]) bad_index++;
      if (fabs(dist[i] - rdist[i]) > rel_tol() * (1 + rdist[i])) bad_dist++;
    }
    for (int64_t q = 0; q < rows; q++)
      for (int64_t j = 1; j < k; j++) {
        double a = dist[q + (j - 1) * rows], b = dist[q + j * rows];
        if (a > b || (a == b && idx[q + (j - 1) * rows] > idx[q + j * rows])) unsorted++;
      }
    CHECK(bad_index == 0, "%s: %lld of %lld indices differ from brute force", name,
          (long long)bad_index, (long long)(rows * k));
    CHECK(bad_dist == 0, "%s: %lld distances differ from brute force", name, (long long)bad_dist);
    CHECK(unsorted == 0, "%s: %lld neighbours out of order", name, (long long)unsorted);
    CHECK(res.run.backend == (test_backend == GPUML_BACKEND_CUDA ? GPUML_BACKEND_CUDA
                                                                  : GPUML_BACKEND_CPU),
          "%s: ran on %s", name, gpuml_backend_name(res.run.backend));
    CHECK(res.rechecked >= 0 && res.rechecked <= rows, "%s: %lld queries rechecked of %lld",
          name, (long long)res.rechecked, (long long)rows);
  }
  free(idx);
  free(ridx);
  free(dist);
  free(rdist);
  return res.rechecked;
}

static void test_knn_random(void) {
  static const int64_t dims[] = {1, 2, 3, 15, 16, 17, 50, 127};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    int64_t d = dims[i];
    double *data = random_matrix(2100, d, -1, 2), *query = random_matrix(333, d, -1, 2);
    char name[64];
    snprintf(name, sizeof name, "knn self d=%lld", (long long)d);
    check_knn_case(name, data, 2100, d, NULL, 0, 10);
    snprintf(name, sizeof name, "knn query d=%lld", (long long)d);
    check_knn_case(name, data, 2100, d, query, 333, 7);
    free(data);
    free(query);
  }
}

/* Wide points (the GEMM form's many dimension stages) and a large k. */
static void test_knn_wide_and_large_k(void) {
  static const int64_t dims[] = {784, 2000};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    int64_t d = dims[i];
    double *data = random_matrix(450, d, 0, 1), *query = random_matrix(70, d, 0, 1);
    char name[64];
    snprintf(name, sizeof name, "knn self d=%lld", (long long)d);
    check_knn_case(name, data, 450, d, NULL, 0, 16);
    snprintf(name, sizeof name, "knn query d=%lld", (long long)d);
    check_knn_case(name, data, 450, d, query, 70, 3);
    free(data);
    free(query);
  }
  double *data = random_matrix(3100, 6, 0, 1);
  check_knn_case("knn k=3000", data, 3100, 6, NULL, 0, 3000);
  free(data);
}

static void test_knn_k_range(void) {
  double *data = random_matrix(600, 20, 0, 1), *query = random_matrix(50, 20, 0, 1);
  check_knn_case("knn k=1", data, 600, 20, NULL, 0, 1);
  check_knn_case("knn k=n-1", data, 600, 20, NULL, 0, 599);
  check_knn_case("knn k=n with query", data, 600, 20, query, 50, 600);
  check_knn_case("knn one point query", data, 600, 20, query, 1, 5);
  free(data);
  free(query);
}

/* Integer grid with every point twice: exact ties everywhere. */
static void test_knn_ties(void) {
  static const int64_t dims[] = {2, 20};
  for (size_t s = 0; s < 2; s++) {
    int64_t d = dims[s], n = 2 * 150;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n / 2; i++)
      for (int64_t t = 0; t < d; t++) {
        double v = (double)((i * (t + 3) + t * t) % 7);
        x[i + t * n] = v;
        x[i + n / 2 + t * n] = v;
      }
    char name[64];
    snprintf(name, sizeof name, "knn ties and duplicates d=%lld", (long long)d);
    check_knn_case(name, x, n, d, NULL, 0, 12);
    /* Each point's first neighbour is its twin, at distance exactly 0. */
    int64_t *idx = malloc(sizeof(int64_t) * n);
    double *dist = malloc(sizeof(double) * n);
    gpuml_options opt = options();
    gpuml_status st = gpuml_knn_search(x, n, d, NULL, 0, 1, idx, dist, &opt, NULL);
    int64_t wrong = 0;
    for (int64_t i = 0; st == GPUML_OK && i < n; i++) {
      int64_t twin = i < n / 2 ? i + n / 2 : i - n / 2;
      /* another exact copy with a smaller index may come first; the distance is 0 */
      if (dist[i] != 0 || (idx[i] != twin && idx[i] > twin)) wrong++;
    }
    CHECK(st == GPUML_OK && wrong == 0, "%s: %lld points miss their twin", name, (long long)wrong);
    free(idx);
    free(dist);
    free(x);
  }
}

static void test_knn_far_from_origin(void) {
  double *data = random_matrix(800, 50, 1e4, 1);
  check_knn_case("knn data near 1e4", data, 800, 50, NULL, 0, 5);
  free(data);
}

/* Whether this run is the GPU's certified search (precision auto, double input). */
static int certified_run(void) {
  return test_backend == GPUML_BACKEND_CUDA && test_precision == GPUML_PRECISION_AUTO;
}

/* n random points in [0, 1]^d (d <= 32), then points 1..40 moved to distances 1 + j step
 * from point 0 in random directions: near ties around point 0. */
static double *ring_around_first(int64_t n, int64_t d, double step) {
  double *x = random_matrix(n, d, 0, 1);
  for (int64_t j = 1; j <= 40; j++) {
    double u[32], norm = 0;
    for (int64_t t = 0; t < d; t++) {
      u[t] = uniform() - 0.5;
      norm += u[t] * u[t];
    }
    norm = sqrt(norm);
    for (int64_t t = 0; t < d; t++)
      x[j + t * n] = x[0 + t * n] + (1 + (double)j * step) * u[t] / norm;
  }
  return x;
}

/* Precision auto's proof at work: near ties that fp32 cannot separate must be rechecked
 * in fp64 (and still give the brute-force answer); well-separated random data need no
 * recheck; forcing every query through the recheck changes nothing. */
static void test_knn_certified(void) {
  /* GPUML_CUDA_KNN_RECHECK=all set for the whole run (a gpu-run.sh configuration): every
   * query is rechecked, so the counts below do not apply. */
  const char *forced = getenv("GPUML_CUDA_KNN_RECHECK");
  const int counts_apply = certified_run() && !(forced && *forced);
  /* 40 points around point 0, at distances 1 + j 1e-12 in random directions: far below
   * the fp32 rounding of the distances, so point 0's list cannot be certified. */
  const int64_t n = 400, d = 32;
  double *x = ring_around_first(n, d, 1e-12);
  /* Single precision has no proof: it may order such near ties differently (documented),
   * so these cases run in auto and double only. */
  const int exact_ties = test_precision != GPUML_PRECISION_SINGLE;
  int64_t r = exact_ties ? check_knn_case("knn near ties at 1e-12", x, n, d, NULL, 0, 10) : 0;
  if (exact_ties && certified_run())
    CHECK(r >= 1, "knn near ties at 1e-12: %lld queries rechecked, expected at least 1",
          (long long)r);
  double *q = random_matrix(1, d, 0, 1);
  for (int64_t t = 0; t < d; t++) q[t] = x[0 + t * n];
  r = exact_ties ? check_knn_case("knn near ties at 1e-12, a query", x, n, d, q, 1, 10) : 0;
  if (exact_ties && certified_run()) CHECK(r == 1, "knn near-tie query: %lld rechecked, expected 1", (long long)r);
  free(q);
  free(x);

  /* 40 points around point 0 at distances 1 + j 2e-4: their squared distances differ by
   * about 4e-4 a step, below the plain TF32 pass's bound (about 2^-9 |a| |b|, 5e-3 here)
   * but far above the split pass's (about 1e-4): point 0's list fails the plain pass's
   * certificate and passes the split pass's, so nothing goes to fp64. */
  double *mid = ring_around_first(n, d, 2e-4);
  double *mq = random_matrix(1, d, 0, 1);
  for (int64_t t = 0; t < d; t++) mq[t] = mid[0 + t * n];
  r = check_knn_case("knn ties at 2e-4, a query", mid, n, d, mq, 1, 10);
  if (counts_apply)
    CHECK(r == 0, "knn ties at 2e-4: %lld queries rechecked in fp64, expected 0", (long long)r);
  free(mq);
  free(mid);

  /* Random data, well separated at fp32 resolution: nothing to recheck. */
  double *y = random_matrix(3000, 24, 0, 1);
  r = check_knn_case("knn certified random d=24", y, 3000, 24, NULL, 0, 8);
  if (counts_apply)
    CHECK(r >= 0 && r <= 30, "knn certified random: %lld of 3000 rechecked", (long long)r);
  free(y);

  /* Far from the origin and wide. */
  double *far = random_matrix(500, 64, 1e6, 1);
  check_knn_case("knn data near 1e6", far, 500, 64, NULL, 0, 7);
  free(far);
  /* Values near 1e-16 (d above the screen's 128): the fp16 candidate pass's scale 2^s
   * stops at 2^60, so many components fall on the fp16 subnormals' grid, which its bound
   * must cover (or the lists go to the split pass). */
  double *tiny = random_matrix(700, 160, 0, 1e-16), *tq = random_matrix(40, 160, 0, 1e-16);
  check_knn_case("knn values near 1e-16", tiny, 700, 160, NULL, 0, 6);
  check_knn_case("knn values near 1e-16, queries", tiny, 700, 160, tq, 40, 9);
  free(tiny);
  free(tq);
  double *wide = random_matrix(300, 2000, 0, 1), *wq = random_matrix(20, 2000, 0, 1);
  check_knn_case("knn d=2000", wide, 300, 2000, NULL, 0, 5);
  check_knn_case("knn d=2000 queries", wide, 300, 2000, wq, 20, 299);
  free(wide);
  free(wq);

  /* Every query through the fp64 recheck (GPUML_CUDA_KNN_RECHECK=all): the same answers,
   * self-searches (the own index dropped from k + 1) and queries, k up to n - 1. */
  char saved[64] = "";
  if (forced) snprintf(saved, sizeof saved, "%s", forced);
  setenv("GPUML_CUDA_KNN_RECHECK", "all", 1);
  double *z = random_matrix(600, 20, 0, 1), *zq = random_matrix(50, 20, 0, 1);
  const int64_t ks[] = {1, 10, 599};
  for (size_t i = 0; i < 3; i++) {
    char name[64];
    snprintf(name, sizeof name, "knn all rechecked, self k=%lld", (long long)ks[i]);
    r = check_knn_case(name, z, 600, 20, NULL, 0, ks[i]);
    if (certified_run() && ks[i] < 599)
      CHECK(r == 600, "%s: %lld rechecked, expected 600", name, (long long)r);
  }
  r = check_knn_case("knn all rechecked, queries", z, 600, 20, zq, 50, 17);
  if (certified_run()) CHECK(r == 50, "knn all rechecked, queries: %lld", (long long)r);
  /* duplicates with smaller indices push a point's own index beyond k + 1 */
  double *dup = malloc(sizeof(double) * 64 * 20);
  for (int64_t i = 0; i < 64; i++)
    for (int64_t t = 0; t < 20; t++) dup[i + t * 64] = (double)((i % 4) * (t % 3));
  check_knn_case("knn all rechecked, duplicates", dup, 64, 20, NULL, 0, 5);
  if (saved[0]) setenv("GPUML_CUDA_KNN_RECHECK", saved, 1);
  else unsetenv("GPUML_CUDA_KNN_RECHECK");
  free(dup);
  free(z);
  free(zq);
}

/* An environment variable set for a while, and put back as it was. */
typedef struct {
  const char *name;
  char saved[64];
  int was_set;
} env_setting;
static void env_push(env_setting *e, const char *name, const char *value) {
  const char *old = getenv(name);
  e->name = name;
  e->was_set = old != NULL;
  snprintf(e->saved, sizeof e->saved, "%s", old ? old : "");
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}
static void env_pop(env_setting *e) {
  if (e->was_set) setenv(e->name, e->saved, 1);
  else unsetenv(e->name);
}

/* One self-search with the CUDA backend's symmetric schedule off and on
 * (GPUML_CUDA_KNN_SYMMETRIC), each against brute force, and the two answers identical
 * bit for bit. On the CPU backend the switch changes nothing (the check still runs). */
static void check_knn_symmetric(const char *name, const double *x, int64_t n, int64_t d,
                                int64_t k) {
  int64_t *idx[2];
  double *dist[2];
  gpuml_status st[2];
  for (int on = 0; on < 2; on++) {
    env_setting e;
    env_push(&e, "GPUML_CUDA_KNN_SYMMETRIC", on ? "1" : "0");
    char label[128];
    snprintf(label, sizeof label, "%s, symmetric %s", name, on ? "on" : "off");
    check_knn_case(label, x, n, d, NULL, 0, k);
    idx[on] = malloc(sizeof(int64_t) * n * k);
    dist[on] = malloc(sizeof(double) * n * k);
    gpuml_options opt = options();
    st[on] = gpuml_knn_search(x, n, d, NULL, 0, k, idx[on], dist[on], &opt, NULL);
    env_pop(&e);
  }
  int64_t differ = 0;
  for (int64_t i = 0; st[0] == GPUML_OK && st[1] == GPUML_OK && i < n * k; i++)
    if (idx[0][i] != idx[1][i] || dist[0][i] != dist[1][i]) differ++;
  CHECK(st[0] == GPUML_OK && st[1] == GPUML_OK && differ == 0,
        "%s: %lld of %lld results differ between the symmetric schedule and the row-by-row "
        "path", name, (long long)differ, (long long)(n * k));
  for (int on = 0; on < 2; on++) {
    free(idx[on]);
    free(dist[on]);
  }
}

/* The symmetric schedule of the self-search (kernels/knn.cu, run_symmetric) on data that
 * stress it, with tiles small enough for many blocks: query blocks of 256 (the smallest
 * that keeps the data resident, which the schedule needs) and reference tiles of 384, n
 * not a multiple of either; near ties, duplicates (a block's column queues overflow when
 * most points are one point), k = 1, k = n - 1 (complete lists), K near the warp
 * selection's largest (256) and beyond it (the radix selection: row by row again). */
static void test_knn_symmetric(void) {
  env_setting qt, rt;
  env_push(&qt, "GPUML_CUDA_QUERY_TILE", "256");
  env_push(&rt, "GPUML_CUDA_REF_TILE", "384");
  const int64_t n = 1500, d = 20;
  double *x = random_matrix(n, d, -1, 2);
  check_knn_symmetric("knn symmetric random", x, n, d, 10);
  check_knn_symmetric("knn symmetric k=1", x, n, d, 1);
  check_knn_symmetric("knn symmetric k=240", x, n, d, 240);
  check_knn_symmetric("knn symmetric k=300 (radix)", x, n, d, 300);
  /* most points one point, the others on an integer grid with twins: exact ties at 0
   * and elsewhere, and more than the queue's 64 values for a reference in one tile */
  double *dup = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < d; t++)
      dup[i + t * n] = i % 5 != 0 ? 1.0 : (double)(((i / 10) * (t + 3) + t * t) % 7);
  check_knn_symmetric("knn symmetric duplicates", dup, n, d, 12);
  check_knn_symmetric("knn symmetric duplicates k=1", dup, n, d, 1);
  /* k = n - 1 with K <= 256 over two blocks: complete lists */
  check_knn_symmetric("knn symmetric k=n-1", x, 257, d, 256);
  /* n just past one block, and one block only */
  check_knn_symmetric("knn symmetric n=257", x, 257, d, 16);
  check_knn_symmetric("knn symmetric n=200", x, 200, d, 16);
  /* wider points (the vector loads and the split GEMM's padding) */
  double *w = random_matrix(900, 50, 1e4, 1);
  check_knn_symmetric("knn symmetric d=50 near 1e4", w, 900, 50, 7);
  free(w);
  /* near ties at 1e-12 around point 700 (a later block: its list is fed column-wise by
   * the earlier blocks); precision auto re-checks it, double has no proof but its
   * rounding separates 1e-12 steps at this scale, single cannot (skipped, as in
   * test_knn_certified) */
  if (test_precision != GPUML_PRECISION_SINGLE) {
    double *y = random_matrix(n, 32, 0, 1);
    for (int64_t j = 1; j <= 40; j++) {
      const int64_t at = j * 37; /* spread over the blocks (never 700) */
      double u[32], norm = 0;
      for (int64_t t = 0; t < 32; t++) {
        u[t] = uniform() - 0.5;
        norm += u[t] * u[t];
      }
      norm = sqrt(norm);
      for (int64_t t = 0; t < 32; t++)
        y[at + t * n] = y[700 + t * n] + (1 + (double)j * 1e-12) * u[t] / norm;
    }
    check_knn_symmetric("knn symmetric near ties", y, n, 32, 10);
    free(y);
  }
  free(dup);
  free(x);
  env_pop(&rt);
  env_pop(&qt);
  /* the default tiles (one block at these sizes: the diagonal tile only) */
  double *z = random_matrix(3000, 24, 0, 1);
  check_knn_symmetric("knn symmetric default tiles", z, 3000, 24, 8);
  free(z);
}

static void test_knn_deterministic(void) {
  int64_t n = 1500, d = 30, k = 9;
  double *data = random_matrix(n, d, 0, 1);
  int64_t *i1 = malloc(sizeof(int64_t) * n * k), *i2 = malloc(sizeof(int64_t) * n * k);
  double *d1 = malloc(sizeof(double) * n * k), *d2 = malloc(sizeof(double) * n * k);
  gpuml_options a = options(), b = options();
  a.threads = 1;
  b.threads = 2;
  gpuml_status s1 = gpuml_knn_search(data, n, d, NULL, 0, k, i1, d1, &a, NULL);
  gpuml_status s2 = gpuml_knn_search(data, n, d, NULL, 0, k, i2, d2, &b, NULL);
  CHECK(s1 == GPUML_OK && s2 == GPUML_OK && !memcmp(i1, i2, sizeof(int64_t) * n * k) &&
            !memcmp(d1, d2, sizeof(double) * n * k),
        "knn differs between 1 and 2 threads");
  free(data);
  free(i1);
  free(i2);
  free(d1);
  free(d2);
}

static void test_knn_float(void) {
  int64_t n = 900, d = 24, m = 100, k = 6;
  double *data = random_matrix(n, d, 0, 1), *query = random_matrix(m, d, 0, 1);
  float *fdata = malloc(sizeof(float) * n * d), *fquery = malloc(sizeof(float) * m * d);
  for (int64_t i = 0; i < n * d; i++) data[i] = fdata[i] = (float)data[i];
  for (int64_t i = 0; i < m * d; i++) query[i] = fquery[i] = (float)query[i];
  int64_t *idx = malloc(sizeof(int64_t) * m * k), *ridx = malloc(sizeof(int64_t) * m * k);
  float *dist = malloc(sizeof(float) * m * k);
  double *rdist = malloc(sizeof(double) * m * k);
  gpuml_options opt = options();
  gpuml_status st = gpuml_knn_search_f(fdata, n, d, fquery, m, k, idx, dist, &opt, NULL);
  CHECK(st == GPUML_OK, "knn_f: %s", gpuml_last_error());
  ref_knn(data, n, d, query, m, k, ridx, rdist);
  int64_t bad = 0;
  for (int64_t i = 0; st == GPUML_OK && i < m * k; i++)
    if (idx[i] != ridx[i] || fabs(dist[i] - rdist[i]) > 1e-5 * (1 + rdist[i])) bad++;
  CHECK(bad == 0, "knn_f: %lld results differ", (long long)bad);
  free(data); free(query); free(fdata); free(fquery); free(idx); free(ridx); free(dist); free(rdist);
}

static void check_dist_case(const char *name, const double *x, int64_t n, const double *y,
                            int64_t m, int64_t d, int squared) {
  int self = y == NULL;
  int64_t cols = self ? n : m;
  double *out = malloc(sizeof(double) * n * cols);
  gpuml_options opt = options();
  gpuml_status st = gpuml_dist_compute(x, n, d, y, m, squared, out, &opt, NULL);
  CHECK(st == GPUML_OK, "%s: %s", name, gpuml_last_error());
  if (st == GPUML_OK) {
    int64_t bad = 0, asym = 0, negative = 0;
    for (int64_t j = 0; j < cols; j++)
      for (int64_t i = 0; i < n; i++) {
        double r = ref_sqdist(x, n, i, self ? x : y, cols, j, d), v = out[i + j * n];
        if (!squared) r = sqrt(r);
        if (!(v >= 0)) negative++;
        if (fabs(v - r) > rel_tol() * r + 1e-300) bad++;
        if (self && v != out[j + i * n]) asym++;
      }
    CHECK(bad == 0, "%s: %lld of %lld entries differ from brute force", name, (long long)bad,
          (long long)(n * cols));
    CHECK(negative == 0, "%s: %lld negative or NaN entries", name, (long long)negative);
    CHECK(asym == 0, "%s: %lld asymmetric entries", name, (long long)asym);
  }
  free(out);
}

static void test_dist(void) {
  static const int64_t dims[] = {1, 3, 16, 50};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    int64_t d = dims[i];
    double *x = random_matrix(1100, d, -3, 6), *y = random_matrix(77, d, -3, 6);
    char name[64];
    snprintf(name, sizeof name, "dist self d=%lld", (long long)d);
    check_dist_case(name, x, 1100, NULL, 0, d, 0);
    snprintf(name, sizeof name, "dist x,y squared d=%lld", (long long)d);
    check_dist_case(name, x, 1100, y, 77, d, 1);
    free(x);
    free(y);
  }
  /* Far from the origin: the GEMM form must not lose the unit-scale differences. */
  double *far = random_matrix(300, 40, 1e4, 1);
  check_dist_case("dist data near 1e4", far, 300, NULL, 0, 40, 0);
  double *far_y = random_matrix(120, 40, 1e4, 1);
  check_dist_case("dist data near 1e4 squared", far, 300, far_y, 120, 40, 1);
  free(far_y);
  /* Duplicated rows give exactly 0. */
  for (int64_t t = 0; t < 40; t++) far[5 + t * 300] = far[9 + t * 300];
  double *out = malloc(sizeof(double) * 300 * 300);
  gpuml_options opt = options();
  CHECK(gpuml_dist_compute(far, 300, 40, NULL, 0, 0, out, &opt, NULL) == GPUML_OK &&
            out[5 + 9 * 300] == 0 && out[9 + 5 * 300] == 0 && out[7 + 7 * 300] == 0,
        "dist: duplicates and the diagonal must be exactly 0");
  free(out);
  free(far);
}

static void test_dist_float(void) {
  int64_t n = 200, d = 33;
  double *x = random_matrix(n, d, 0, 1);
  float *xf = malloc(sizeof(float) * n * d), *out = malloc(sizeof(float) * n * n);
  for (int64_t i = 0; i < n * d; i++) x[i] = xf[i] = (float)x[i];
  gpuml_options opt = options();
  gpuml_status st = gpuml_dist_compute_f(xf, n, d, NULL, 0, 0, out, &opt, NULL);
  int64_t bad = 0;
  for (int64_t j = 0; st == GPUML_OK && j < n; j++)
    for (int64_t i = 0; i < n; i++) {
      double r = sqrt(ref_sqdist(x, n, i, x, n, j, d));
      if (fabs(out[i + j * n] - r) > 1e-5 * (1 + r)) bad++;
    }
  CHECK(st == GPUML_OK && bad == 0, "dist_f: status %d, %lld bad", st, (long long)bad);
  free(x);
  free(xf);
  free(out);
}

static int calls_before_stop;
static int stop_after(void *ctx) {
  (void)ctx;
  return --calls_before_stop < 0;
}
static int64_t last_done, last_total, progress_calls;
static void record_progress(void *ctx, const char *stage, int64_t done, int64_t total) {
  (void)ctx;
  (void)stage;
  if (done < last_done) progress_calls = -1000000;
  last_done = done;
  last_total = total;
  progress_calls++;
}

static void test_callbacks(void) {
  int64_t n = 5000, d = 8, k = 3;
  double *data = random_matrix(n, d, 0, 1);
  int64_t *idx = malloc(sizeof(int64_t) * n * k);
  double *dist = malloc(sizeof(double) * n * k);
  gpuml_options opt = options();
  opt.verbose = 1;
  opt.progress = record_progress;
  gpuml_status st = gpuml_knn_search(data, n, d, NULL, 0, k, idx, dist, &opt, NULL);
  CHECK(st == GPUML_OK && progress_calls > 1 && last_done == n && last_total == n,
        "progress: status %d, %lld calls, last %lld/%lld", st, (long long)progress_calls,
        (long long)last_done, (long long)last_total);
  opt = options();
  opt.interrupted = stop_after;
  calls_before_stop = 1;
  st = gpuml_knn_search(data, n, d, NULL, 0, k, idx, dist, &opt, NULL);
  CHECK(st == GPUML_ERR_INTERRUPTED && strcmp(gpuml_last_error_id(), "interrupted") == 0,
        "interrupted knn: status %d", st);
  double *out = malloc(sizeof(double) * n * n);
  calls_before_stop = 0;
  st = gpuml_dist_compute(data, n, d, NULL, 0, 0, out, &opt, NULL);
  CHECK(st == GPUML_ERR_INTERRUPTED, "interrupted dist: status %d", st);
  free(out);
  free(data);
  free(idx);
  free(dist);
}

static int error_is(gpuml_status st, gpuml_status want, const char *id, const char *text) {
  return st == want && strcmp(gpuml_last_error_id(), id) == 0 &&
         strstr(gpuml_last_error(), text) != NULL;
}

static void test_bad_input(void) {
  double data[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; /* 4 x 3 */
  int64_t idx[16];
  double dist[16];
  gpuml_options opt = options();
  CHECK(error_is(gpuml_knn_search(data, 4, 3, NULL, 0, 4, idx, dist, &opt, NULL), GPUML_ERR_ARG, "knn:badK",
                 "k = 4 exceeds the 3 other points"),
        "k = n in self-search: %s", gpuml_last_error());
  CHECK(error_is(gpuml_knn_search(data, 4, 3, data, 2, 5, idx, dist, &opt, NULL), GPUML_ERR_ARG, "knn:badK",
                 "k = 5 exceeds the 4 data points"),
        "k > n with a query: %s", gpuml_last_error());
  CHECK(error_is(gpuml_knn_search(data, 4, 3, NULL, 0, 0, idx, dist, &opt, NULL), GPUML_ERR_ARG, "knn:badK",
                 "at least 1"),
        "k = 0: %s", gpuml_last_error());
  CHECK(error_is(gpuml_knn_search(data, 0, 3, NULL, 0, 1, idx, dist, &opt, NULL), GPUML_ERR_ARG,
                 "knn:badData", "no rows"),
        "empty data: %s", gpuml_last_error());
  CHECK(error_is(gpuml_knn_search(data, 4, 3, NULL, 0, 1, NULL, dist, &opt, NULL), GPUML_ERR_ARG,
                 "knn:badOutput", "NULL"),
        "NULL output: %s", gpuml_last_error());
  data[6] = NAN;
  CHECK(error_is(gpuml_knn_search(data, 4, 3, NULL, 0, 1, idx, dist, &opt, NULL), GPUML_ERR_ARG,
                 "knn:nonFinite", "data contains NA/NaN at row 3, column 2"),
        "NaN: %s", gpuml_last_error());
  data[6] = INFINITY;
  CHECK(error_is(gpuml_dist_compute(data, 4, 3, NULL, 0, 0, dist, &opt, NULL), GPUML_ERR_ARG,
                 "dist:nonFinite", "Inf at row 3, column 2"),
        "Inf: %s", gpuml_last_error());
  data[6] = 7;
  CHECK(error_is(gpuml_check_columns("knn", "query", 2, "data", 3), GPUML_ERR_ARG,
                 "knn:dimMismatch", "query has 2 columns but data has 3"),
        "column mismatch: %s", gpuml_last_error());
  CHECK(gpuml_check_columns("dist", "y", 4, "x", 4) == GPUML_OK, "equal columns rejected");
  gpuml_backend b;
  CHECK(error_is(gpuml_parse_backend("gpu", &b), GPUML_ERR_ARG, "badBackend",
                 "use \"auto\", \"cpu\" or \"cuda\""),
        "unknown backend: %s", gpuml_last_error());
  CHECK(gpuml_parse_backend("CUDA", &b) == GPUML_OK && b == GPUML_BACKEND_CUDA,
        "backend names are case-insensitive");
  gpuml_precision p;
  CHECK(gpuml_parse_precision("half", &p) == GPUML_ERR_ARG, "unknown precision accepted");
  opt.threads = -1;
  CHECK(error_is(gpuml_knn_search(data, 4, 3, NULL, 0, 1, idx, dist, &opt, NULL), GPUML_ERR_ARG,
                 "badThreads", "threads"),
        "negative threads: %s", gpuml_last_error());
}

static void test_backend_info(void) {
  gpuml_info info;
  CHECK(gpuml_backend_info(&info) == GPUML_OK && strcmp(info.version, GPUML_VERSION) == 0 &&
            info.max_threads >= 1,
        "backend info");
  if (info.device_count == 0) {
    /* Without a usable GPU, "cuda" is a clear error and "auto" runs on the CPU. */
    double data[6] = {0, 1, 2, 0, 1, 2};
    int64_t idx[3];
    double dist[3];
    gpuml_options opt;
    gpuml_options_init(&opt);
    opt.backend = GPUML_BACKEND_CUDA;
    gpuml_status st = gpuml_knn_search(data, 3, 2, NULL, 0, 1, idx, dist, &opt, NULL);
    CHECK(st == GPUML_ERR_NO_CUDA && strstr(gpuml_last_error(), "cuda") != NULL,
          "cuda without a device: status %d (%s)", st, gpuml_last_error());
    opt.backend = GPUML_BACKEND_AUTO;
    gpuml_knn_result res;
    st = gpuml_knn_search(data, 3, 2, NULL, 0, 1, idx, dist, &opt, &res);
    CHECK(st == GPUML_OK && res.run.backend == GPUML_BACKEND_CPU && res.run.device == -1,
          "auto without a device");
  }
}

int main(void) {
  harness_init();
  test_precision = harness_precision;
  test_backend_info();
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "distances and kNN")) continue;
    test_backend = b->id;
    test_bad_input();
    test_dist();
    test_dist_float();
    test_knn_random();
    test_knn_k_range();
    test_knn_wide_and_large_k();
    test_knn_ties();
    test_knn_far_from_origin();
    test_knn_certified();
    test_knn_symmetric();
    test_knn_deterministic();
    test_knn_float();
    test_callbacks();
  }
  gpuml_shutdown(); /* the contexts' own memory, so that a leak check sees only leaks */
  return check_summary("C");
}
