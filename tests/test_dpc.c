/* C tests of density peaks clustering through gpuml.h: rho, delta and nearest against a
 * brute force written from the definitions, ties, the dc estimate, centres, clusters,
 * halo, bad input and callbacks, on every backend of the parity harness (tests/harness.h);
 * on the CUDA backend every result is also compared with the CPU backend's. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "gpuml.h"
#include "rng.h" /* the sample of dc's estimate, drawn here as the library draws it */
#include "dpc.h" /* the index's plan (test_cell_side), the fp32 screen (test_screen_margin) */

static gpuml_backend test_backend = GPUML_BACKEND_CPU;
static gpuml_precision test_precision = GPUML_PRECISION_DOUBLE;

static uint64_t rng_state = 20240607;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double normal(void) {
  double u = uniform(), v = uniform();
  return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static gpuml_options options_for(gpuml_backend backend) {
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = backend;
  opt.precision = test_precision;
  return opt;
}
static gpuml_options options(void) { return options_for(test_backend); }

/* Squared distance summed in dimension order; the distance is its square root. */
static double ref_sq(const double *x, int64_t n, int64_t d, int64_t i, int64_t j) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    double diff = x[i + t * n] - x[j + t * n];
    s += diff * diff;
  }
  return s;
}

typedef struct {
  double *rho, *delta, *gamma;
  int64_t *nearest;
} fit;

static fit fit_alloc(int64_t n) {
  fit f;
  f.rho = malloc(sizeof(double) * n);
  f.delta = malloc(sizeof(double) * n);
  f.gamma = malloc(sizeof(double) * n);
  f.nearest = malloc(sizeof(int64_t) * n);
  return f;
}
static void fit_free(fit *f) {
  free(f->rho);
  free(f->delta);
  free(f->gamma);
  free(f->nearest);
}

/* The definitions, literally: O(n^2) over all pairs; the Gaussian truncated to the
 * points closer than gaussian_cutoff dc when that is > 0. */
static void ref_dpc_truncated(const double *x, int64_t n, int64_t d, double dc, int gaussian,
                              double gaussian_cutoff, fit *f) {
  for (int64_t i = 0; i < n; i++) {
    double r = 0;
    for (int64_t j = 0; j < n; j++) {
      if (j == i) continue;
      double dist = sqrt(ref_sq(x, n, d, i, j));
      if (gaussian && gaussian_cutoff > 0 && !(dist < gaussian_cutoff * dc)) continue;
      r += gaussian ? exp(-(dist / dc) * (dist / dc)) : (dist < dc ? 1 : 0);
    }
    f->rho[i] = r;
  }
  for (int64_t i = 0; i < n; i++) {
    double best = INFINITY, far = 0;
    int64_t best_j = -1;
    for (int64_t j = 0; j < n; j++) {
      double dist = sqrt(ref_sq(x, n, d, i, j));
      if (dist > far) far = dist;
      int above = f->rho[j] > f->rho[i] || (f->rho[j] == f->rho[i] && j < i);
      if (above && dist < best) {
        best = dist;
        best_j = j;
      }
    }
    f->delta[i] = best_j < 0 ? far : best;
    f->nearest[i] = best_j;
    f->gamma[i] = f->rho[i] * f->delta[i];
  }
}
static void ref_dpc(const double *x, int64_t n, int64_t d, double dc, int gaussian, fit *f) {
  ref_dpc_truncated(x, n, d, dc, gaussian, 0, f);
}

static int64_t count_rho_diff(const fit *a, const fit *b, int64_t n, double tol) {
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double r = fabs(a->rho[i] - b->rho[i]) / fabs(b->rho[i]);
    if (r > worst) worst = r;
    if (fabs(a->rho[i] - b->rho[i]) > tol * fabs(b->rho[i])) bad++;
  }
  if (bad) fprintf(stderr, "largest relative rho difference %g\n", worst);
  return bad;
}
/* Whether b's densities of i and j are equal within rho_tol (relative): which of the two
 * is denser is then a matter of the densities' rounding. */
static int rho_tie(const fit *b, int64_t i, int64_t j, double rho_tol) {
  return j >= 0 && fabs(b->rho[i] - b->rho[j]) <= rho_tol * fmax(b->rho[i], b->rho[j]);
}

/* The points whose nearest or delta (tol: relative) differ between a and b, or whose gamma
 * in a is not rho delta. rho_tol > 0 (densities that agree to rounding: the Gaussian
 * kernel): a point is not counted when its density ties, within rho_tol in b, with the
 * nearest that a or b gives it, since rounding may order such a pair either way (seen:
 * two isolated points with equal exact densities near 1e-150). */
static int64_t count_delta_diff(const fit *a, const fit *b, int64_t n, double tol,
                                double rho_tol) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    if (fabs(a->gamma[i] - a->rho[i] * a->delta[i]) > 0) {
      bad++;
      continue;
    }
    if (a->nearest[i] == b->nearest[i] && !(fabs(a->delta[i] - b->delta[i]) > tol * b->delta[i]))
      continue;
    if (rho_tol > 0 &&
        (rho_tie(b, i, a->nearest[i], rho_tol) || rho_tie(b, i, b->nearest[i], rho_tol)))
      continue;
    bad++;
  }
  return bad;
}

static gpuml_status run_dpc_truncated(const double *x, int64_t n, int64_t d, double dc,
                                      int gaussian, double gaussian_cutoff, fit *f,
                                      gpuml_backend backend, double *dc_used) {
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  p.estimate_dc = dc <= 0;
  p.dc = dc;
  p.kernel = gaussian ? GPUML_DPC_GAUSSIAN : GPUML_DPC_CUTOFF;
  p.gaussian_cutoff = gaussian_cutoff;
  gpuml_options opt = options_for(backend);
  gpuml_dpc_result res;
  gpuml_status st = gpuml_dpc_density(x, n, d, &p, f->rho, f->delta, f->nearest, f->gamma, &opt, &res);
  if (dc_used) *dc_used = st ? NAN : res.dc;
  return st;
}
static gpuml_status run_dpc(const double *x, int64_t n, int64_t d, double dc, int gaussian,
                            fit *f, gpuml_backend backend, double *dc_used) {
  return run_dpc_truncated(x, n, d, dc, gaussian, 0, f, backend, dc_used);
}

/* With the CUDA backend, the same call on the CPU must give the same answers: rho
 * exactly for the cutoff kernel (within 1e-10 relative for the Gaussian, whose sums run
 * in another order), delta and nearest exactly with equal rho. */
static void compare_with_cpu_truncated(const char *what, const double *x, int64_t n, int64_t d,
                                       double dc, int gaussian, double gaussian_cutoff,
                                       const fit *got) {
  if (test_backend != GPUML_BACKEND_CUDA) return;
  fit cpu = fit_alloc(n);
  gpuml_status st =
      run_dpc_truncated(x, n, d, dc, gaussian, gaussian_cutoff, &cpu, GPUML_BACKEND_CPU, NULL);
  CHECK(st == GPUML_OK, "%s: cpu run: %s", what, gpuml_last_error());
  if (st == GPUML_OK) {
    int64_t br = count_rho_diff(got, &cpu, n, gaussian ? 1e-10 : 0);
    int64_t bd = count_delta_diff(got, &cpu, n, 0, gaussian ? 1e-10 : 0);
    CHECK(br == 0 && bd == 0, "%s: GPU vs CPU: %lld rho and %lld delta/nearest differ", what,
          (long long)br, (long long)bd);
  }
  fit_free(&cpu);
}
static void compare_with_cpu(const char *what, const double *x, int64_t n, int64_t d, double dc,
                             int gaussian, const fit *got) {
  compare_with_cpu_truncated(what, x, n, d, dc, gaussian, 0, got);
}

/* The points whose halo flag differs from the definition (the border density of a
 * cluster: the largest (rho_i + rho_j) / 2 over its points i and the points j of other
 * clusters within dc; its points below it are its halo), by brute force; *halos counts
 * the flagged points. */
static int64_t halo_wrong(const double *x, int64_t n, int64_t d, double dc, const double *rho,
                          const int64_t *cluster, int64_t ncentres, const int *halo,
                          int64_t *halos) {
  *halos = 0;
  for (int64_t i = 0; i < n; i++)
    if (cluster[i] < 0 || cluster[i] >= ncentres) return n; /* not a cut's clusters */
  double *border = calloc((size_t)ncentres, sizeof *border);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (cluster[i] != cluster[j] && sqrt(ref_sq(x, n, d, i, j)) <= dc) {
        const double avg = (rho[i] + rho[j]) / 2;
        if (avg > border[cluster[i]]) border[cluster[i]] = avg;
      }
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) {
    wrong += halo[i] != (rho[i] < border[cluster[i]]);
    *halos += halo[i];
  }
  free(border);
  return wrong;
}

static double *blobs(int64_t n, int64_t d, int k, double spread, int64_t *label) {
  double *x = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n; i++) {
    int c = (int)(i % k);
    if (label) label[i] = c;
    for (int64_t t = 0; t < d; t++)
      x[i + t * n] = 10.0 * ((c >> (t % 3)) & 1) + 7.0 * (t == 0 ? c : 0) + spread * normal();
  }
  return x;
}

/* rho, delta, nearest, gamma against the brute force, both kernels, grid (d <= 3) and
 * tiles (direct d < 16, GEMM d >= 16). The Gaussian rho of the GEMM form carries the
 * form's rounding (about 1e-12 relative with a small dc); the cutoff rho is exact. */
static void test_against_reference(void) {
  const int64_t dims[] = {1, 2, 3, 5, 20, 50};
  for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++) {
    const int64_t d = dims[a], n = 400 + 37 * (int64_t)a;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n * d; i++) x[i] = normal() + (i % n < n / 3 ? 3 : 0);
    for (int gaussian = 0; gaussian <= 1; gaussian++) {
      /* a dc near the 2% quantile, a large and a small one */
      const double scale = sqrt((double)d);
      const double dcs[] = {0.35 * scale, 1.2 * scale, 0.05 * scale};
      for (int k = 0; k < 3; k++) {
        fit ref = fit_alloc(n), got = fit_alloc(n);
        ref_dpc(x, n, d, dcs[k], gaussian, &ref);
        double used = 0;
        gpuml_status st = run_dpc(x, n, d, dcs[k], gaussian, &got, test_backend, &used);
        CHECK(st == GPUML_OK && used == dcs[k], "d = %lld, %s, dc = %g: status %d (%s)",
              (long long)d, gaussian ? "gaussian" : "cutoff", dcs[k], st, gpuml_last_error());
        if (st == GPUML_OK) {
          int64_t br = count_rho_diff(&got, &ref, n, gaussian ? 1e-10 : 0);
          int64_t bd = count_delta_diff(&got, &ref, n, 1e-14, gaussian ? 1e-10 : 0);
          CHECK(br == 0, "d = %lld, %s, dc = %g: %lld rho differ from the brute force",
                (long long)d, gaussian ? "gaussian" : "cutoff", dcs[k], (long long)br);
          CHECK(bd == 0, "d = %lld, %s, dc = %g: %lld delta/nearest differ from the brute force",
                (long long)d, gaussian ? "gaussian" : "cutoff", dcs[k], (long long)bd);
          compare_with_cpu("reference data", x, n, d, dcs[k], gaussian, &got);
        }
        fit_free(&ref);
        fit_free(&got);
      }
    }
    free(x);
  }
}

/* The truncated Gaussian (gaussian_cutoff c): against the brute force with the same
 * truncation (rho within 1e-10 relative, the rule of the exact Gaussian's sums; delta and
 * nearest as there), on the index (d <= 8, a ball of c dc small next to the data at
 * n = 6000) and on the tiles (d = 9 direct, d = 20 GEMM); and against the exact sum:
 * below it by at most the dropped points times exp(-c^2). */
static void test_gaussian_cutoff(void) {
  const int64_t dims[] = {1, 2, 3, 5, 8, 9, 20, 2};
  for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++) {
    const int64_t d = dims[a], n = a + 1 < sizeof dims / sizeof dims[0] ? 500 + 31 * (int64_t)a : 6000;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n * d; i++) x[i] = normal() + (i % n < n / 3 ? 3 : 0);
    const double scale = sqrt((double)d);
    const double dc = (n > 1000 ? 0.02 : 0.15) * scale;
    const double cutoffs[] = {1, 2.5, 3};
    fit exact = fit_alloc(n);
    ref_dpc(x, n, d, dc, 1, &exact);
    for (int k = 0; k < 3; k++) {
      const double c = cutoffs[k];
      fit ref = fit_alloc(n), got = fit_alloc(n);
      ref_dpc_truncated(x, n, d, dc, 1, c, &ref);
      gpuml_status st = run_dpc_truncated(x, n, d, dc, 1, c, &got, test_backend, NULL);
      CHECK(st == GPUML_OK, "d = %lld, gaussian_cutoff %g: status %d (%s)", (long long)d, c, st,
            gpuml_last_error());
      if (st == GPUML_OK) {
        int64_t br = count_rho_diff(&got, &ref, n, 1e-10);
        int64_t bd = count_delta_diff(&got, &ref, n, 1e-14, 1e-10);
        CHECK(br == 0 && bd == 0,
              "d = %lld, gaussian_cutoff %g: %lld rho and %lld delta/nearest differ from the "
              "truncated brute force",
              (long long)d, c, (long long)br, (long long)bd);
        int64_t outside = 0;
        for (int64_t i = 0; i < n; i++) {
          int64_t dropped = 0;
          for (int64_t j = 0; j < n; j++)
            dropped += j != i && !(sqrt(ref_sq(x, n, d, i, j)) < c * dc);
          const double lost = exact.rho[i] - got.rho[i];
          if (lost < -1e-10 * exact.rho[i] ||
              lost > (double)dropped * exp(-c * c) + 1e-10 * exact.rho[i])
            outside++;
        }
        CHECK(outside == 0, "d = %lld, gaussian_cutoff %g: %lld rho outside the bound of the "
              "dropped mass", (long long)d, c, (long long)outside);
        compare_with_cpu_truncated("truncated Gaussian", x, n, d, dc, 1, c, &got);
      }
      fit_free(&ref);
      fit_free(&got);
    }
    fit_free(&exact);
    free(x);
  }
}

/* Integer grid points: many equal distances and equal densities, and distances equal
 * to dc (not counted: the cutoff is strict). */
static void test_ties(void) {
  for (int64_t d = 1; d <= 4; d++) {
    const int64_t side = d == 1 ? 60 : d == 2 ? 17 : d == 3 ? 7 : 4;
    int64_t n = 1;
    for (int64_t t = 0; t < d; t++) n *= side;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n; i++) {
      int64_t r = i;
      for (int64_t t = 0; t < d; t++) {
        x[i + t * n] = (double)(r % side);
        r /= side;
      }
    }
    const double dcs[] = {1, 1.5, 2, sqrt(2.0), 3};
    for (int k = 0; k < 5; k++) {
      fit ref = fit_alloc(n), got = fit_alloc(n);
      ref_dpc(x, n, d, dcs[k], 0, &ref);
      gpuml_status st = run_dpc(x, n, d, dcs[k], 0, &got, test_backend, NULL);
      CHECK(st == GPUML_OK, "grid d = %lld: %s", (long long)d, gpuml_last_error());
      if (st == GPUML_OK) {
        CHECK(count_rho_diff(&got, &ref, n, 0) == 0 && count_delta_diff(&got, &ref, n, 0, 0) == 0,
              "integer grid d = %lld, dc = %g: differs from the brute force", (long long)d, dcs[k]);
        compare_with_cpu("integer grid", x, n, d, dcs[k], 0, &got);
      }
      if (k == 0 && st == GPUML_OK && d == 2) {
        /* dc = 1: no other grid point is strictly closer, so rho = 0 everywhere, and
         * the order is the index order: each point's nearest above is at distance 1. */
        int zero = 1, ones = 1;
        for (int64_t i = 0; i < n; i++) {
          zero &= got.rho[i] == 0;
          if (i > 0) ones &= got.delta[i] == 1 && got.nearest[i] < i;
        }
        CHECK(zero && ones && got.nearest[0] == -1,
              "grid with dc = 1: rho 0 everywhere, delta 1, point 0 on top");
      }
      fit_free(&ref);
      fit_free(&got);
    }
    free(x);
  }
  /* Duplicated points: distance 0 to a denser twin. */
  const int64_t n = 300, d = 2;
  double *x = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n; i++) {
    x[i] = floor(5 * uniform());
    x[i + n] = floor(5 * uniform());
  }
  fit ref = fit_alloc(n), got = fit_alloc(n);
  ref_dpc(x, n, d, 1.2, 0, &ref);
  CHECK(run_dpc(x, n, d, 1.2, 0, &got, test_backend, NULL) == GPUML_OK &&
            count_rho_diff(&got, &ref, n, 0) == 0 && count_delta_diff(&got, &ref, n, 0, 0) == 0,
        "duplicated points differ from the brute force");
  compare_with_cpu("duplicates", x, n, d, 1.2, 0, &got);
  fit_free(&ref);
  fit_free(&got);
  free(x);
}

/* A cutoff fit of x at dc: rho, delta and nearest those of the brute force exactly, and
 * with the CUDA backend the CPU's. */
static void check_cutoff_fit(const char *what, const double *x, int64_t n, int64_t d, double dc) {
  fit ref = fit_alloc(n), got = fit_alloc(n);
  ref_dpc(x, n, d, dc, 0, &ref);
  gpuml_status st = run_dpc(x, n, d, dc, 0, &got, test_backend, NULL);
  CHECK(st == GPUML_OK && count_rho_diff(&got, &ref, n, 0) == 0 &&
            count_delta_diff(&got, &ref, n, 0, 0) == 0,
        "%s, d = %lld, dc = %g: differs from the brute force (%s)", what, (long long)d, dc,
        gpuml_last_error());
  if (st == GPUML_OK) compare_with_cpu(what, x, n, d, dc, 0, &got);
  fit_free(&ref);
  fit_free(&got);
}

/* Far-apart blobs and a small dc: the nearest denser point of most local maxima lies
 * many cells away, so the ring search runs far (and over empty cells). */
static void test_far_peaks(void) {
  for (int64_t d = 1; d <= 3; d++) {
    const int64_t n = 2500;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n; i++)
      for (int64_t t = 0; t < d; t++)
        x[i + t * n] = 100.0 * (double)((i * 7 + t) % 5) + (i % 11 == 0 ? 30 * uniform() : normal());
    check_cutoff_fit("far peaks", x, n, d, 0.08);
    free(x);
  }
}

static int cmp_double(const void *a, const void *b);

/* test_fine_cells' data: n points in d dimensions, 90% in 5 tight blobs, and its dc (the
 * 2% quantile of the distances from 50 points to all). */
static double *fine_cells_data(int64_t n, int64_t d, double *dc) {
  double *x = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < d; t++)
      x[i + t * n] = i % 10 == 9 ? 20 * uniform() : 4.0 * (double)((i * 3 + t) % 5) + 0.3 * normal();
  const int64_t m = 50;
  double *sq = malloc(sizeof(double) * (size_t)(m * n));
  for (int64_t a = 0; a < m; a++)
    for (int64_t j = 0; j < n; j++) sq[a * n + j] = ref_sq(x, n, d, a * (n / m), j);
  qsort(sq, (size_t)(m * n), sizeof *sq, cmp_double);
  *dc = sqrt(sq[(m * n) / 50]);
  free(sq);
  return x;
}

/* Whether x takes the cutoff density's own cells with both backends' caps of cells a
 * point (finer than the mean density's, a ball touching few enough rows): the path
 * test_fine_cells and test_shards mean to test. */
static void check_fine_cells(const char *what, const double *x, int64_t n, int64_t d, double dc) {
  for (int k = 0; k < 2; k++) {
    const double cap = k == 0 ? 2 : 4;
    gm_dpc_grid mean, fine;
    gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_MEAN, 0, 1, &mean);
    gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_SEEN, cap, 1, &fine);
    CHECK(fine.geom.h < 0.8 * mean.geom.h && gm_dpc_rows_fit(&fine, dc * dc, n),
          "%s, d = %lld, cap %g: cells of side %g against %g (the path untested)", what,
          (long long)d, cap, fine.geom.h, mean.geom.h);
    /* the fit plans them over the mean cells' box: the same geometry */
    gm_dpc_grid over;
    gm_dpc_grid_replan(x, &mean, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_SEEN, cap, &over);
    CHECK(over.ncells == fine.ncells && !memcmp(&over.geom, &fine.geom, sizeof over.geom) &&
              !memcmp(over.range, fine.range, sizeof over.range),
          "%s, d = %lld, cap %g: cells planned over the mean cells' box differ (side %g "
          "against %g)", what, (long long)d, cap, over.geom.h, fine.geom.h);
    gm_dpc_grid_free(&mean);
    gm_dpc_grid_free(&fine);
  }
}

/* Clustered data (Gaussian blobs, sd 0.3, with 10% uniform noise) whose cutoff density
 * gets cells of its own, at least 1.25 times finer than the mean density's: on the GPU,
 * delta's first rings walk those cells and the points left go on over the mean
 * density's (from ring 0), and a cell's points lie in the Morton order of its sub-cells;
 * every answer is the brute force's, at about 2% neighbours a point. The data are checked
 * to take that path with both backends' caps of cells per point. */
static void test_fine_cells(void) {
  const int64_t dims[] = {2, 3, 5};
  for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++) {
    const int64_t d = dims[a], n = 12000;
    double dc;
    double *x = fine_cells_data(n, d, &dc);
    check_fine_cells("fine cells", x, n, d, dc);
    check_cutoff_fit("fine cells", x, n, d, dc);
    free(x);
  }
}

/* Crowded cells on the index at d = 1 .. 8: integer lattice points (duplicates, and
 * pairs exactly at dc, which the strict cutoff leaves out) in a few cells, alone (40
 * points: a grid of about 3 cells, one cell holding all from d = 2 on) or with two far
 * outliers (140 points in one cell: the points of a cell are counted in groups of 32,
 * the last one partial). */
static void test_crowded_cells(void) {
  for (int64_t d = 1; d <= 8; d++)
    for (int outliers = 0; outliers <= 1; outliers++) {
      const int64_t m = outliers ? 140 : 40, n = m + (outliers ? 2 : 0);
      double *x = malloc(sizeof(double) * n * d);
      for (int64_t i = 0; i < m; i++)
        for (int64_t t = 0; t < d; t++) x[i + t * n] = 400 + floor(3 * uniform());
      for (int64_t i = m; i < n; i++)
        for (int64_t t = 0; t < d; t++) x[i + t * n] = i == m ? 0 : 100000;
      const double dcs[] = {1, sqrt(2.0), 2};
      for (int k = 0; k < 3; k++)
        check_cutoff_fit(outliers ? "crowded cell with outliers" : "crowded cell", x, n, d,
                         dcs[k]);
      free(x);
    }
}

/* Near ties at the cut dc = 1, far from the origin, for the fp32 screen of the cutoff
 * count (core/dpc_shared.h's gm_dpc_screen): a lattice of step dc / 2 (many
 * pairs exactly at dc, which the strict cutoff leaves out) and as many points at
 * dc (1 -+ eps) from lattice points (axis-aligned and random directions), eps mostly
 * between 3e-5 and 1e-3, where the fp32 copies round, else from 1e-2 down to 1e-9; near
 * 1e4, in two copies 3000 apart (copies = 2), so that the copies round by about 1e-4,
 * or one (copies = 1), whose cutoff count cells stay small (the GPU's lanes count then
 * takes the screen's relative form). *n: the points. Drawn from a stream of their own,
 * so that the other tests' data stay as they were. */
static double *near_ties(int64_t d, int copies, int64_t *n_out) {
  const uint64_t other = rng_state;
  rng_state = 20250611 + (uint64_t)d;
  const int64_t side = d == 1 ? 300 : d == 2 ? 18 : d == 3 ? 7 : d == 4 ? 5 : 4;
  int64_t lattice = 1;
  for (int64_t t = 0; t < d; t++) lattice *= side;
  const int64_t per_copy = 2 * lattice, n = copies * per_copy;
  double *x = malloc(sizeof(double) * n * d);
  for (int copy = 0; copy < copies; copy++) {
    const double base = 1e4 + 3000.0 * copy;
    const int64_t first = copy * per_copy;
    for (int64_t k = 0; k < lattice; k++) {
      int64_t r = k;
      for (int64_t t = 0; t < d; t++) {
        x[first + k + t * n] = base + 0.5 * (double)(r % side);
        r /= side;
      }
    }
    for (int64_t m = 0; m < lattice; m++) {
      const int64_t at = first + (int64_t)(uniform() * (double)lattice);
      double dir[GM_DPC_GRID_MAX_DIM] = {0}, norm = 0;
      if (m % 3 == 0) {
        dir[m % d] = m % 2 ? 1 : -1;
      } else {
        for (int64_t t = 0; t < d; t++) dir[t] = normal();
      }
      for (int64_t t = 0; t < d; t++) norm += dir[t] * dir[t];
      const double eps = m % 8 == 0   ? 1e-9
                         : m % 4 == 1 ? pow(10, -2 - 7 * uniform())
                                      : 3e-5 * pow(10, 1.5 * uniform());
      const double r = (1 + (uniform() < 0.5 ? eps : -eps)) / sqrt(norm);
      for (int64_t t = 0; t < d; t++) x[first + lattice + m + t * n] = x[at + t * n] + r * dir[t];
    }
  }
  *n_out = n;
  rng_state = other;
  return x;
}

/* The near ties' counts must be the brute force's exactly; rho runs on the index
 * (checked), where both backends screen the pairs in fp32; with one copy the GPU's
 * count index keeps the relative form on (checked). */
static void test_near_ties(void) {
  for (int copies = 2; copies >= 1; copies--)
    for (int64_t d = 1; d <= 5; d++) {
      int64_t n;
      double *x = near_ties(d, copies, &n);
      gm_dpc_grid plan;
      gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_MEAN, 0, 1, &plan);
      CHECK(gm_dpc_rows_fit(&plan, gm_dpc_sq_threshold(1, 1), n),
            "near ties, d = %lld: rho would not run on the index", (long long)d);
      gm_dpc_grid_free(&plan);
      if (copies == 1) {
        gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_SEEN, 4, 1, &plan);
        float reach[GM_DPC_GRID_MAX_DIM];
        for (int64_t t = 0; t < d; t++) {
          reach[t] = 0;
          for (int64_t i = 0; i < n; i++) {
            const float c = fabsf(gm_dpc_screen_coord(x[i + t * n], gm_dpc_screen_origin(&plan.geom, (int)t)));
            reach[t] = c > reach[t] ? c : reach[t];
          }
        }
        CHECK(gm_dpc_screen_rel_for(gm_dpc_sq_threshold(1, 1), (int)d, reach,
                                    gm_dpc_rel_side(&plan.geom)).on,
              "near ties, one copy, d = %lld: the relative form would be off", (long long)d);
        gm_dpc_grid_free(&plan);
      }
      check_cutoff_fit(copies == 2 ? "near ties at 1e4" : "near ties at 1e4, one copy", x, n, d, 1);
      free(x);
    }
}

/* The fp32 screen's margin on the host, with the shared functions the cutoff counts use
 * (the copy less the grid's centre, its reach, the GPU's fp32 square and the CPU's, the
 * thresholds, and the GPU lanes count's relative form with each point's origin the first
 * point of its cell): over every pair of the near ties (and of 6-d blobs far from the
 * origin), a pair the screen places inside or outside must be there by the exact square;
 * and the two far copies' fp32 errors must reach an eighth of the margin, so that they
 * test it. */
static void test_screen_margin(void) {
  for (int64_t run = 0; run < 11; run++) {
    const int64_t d = run < 10 ? run % 5 + 1 : 6;
    const int copies = run < 5 ? 2 : 1;
    int64_t n;
    double *x;
    if (d <= 5) {
      x = near_ties(d, copies, &n);
    } else {
      const uint64_t other = rng_state;
      n = 3000;
      x = blobs(n, d, 5, 0.4, NULL);
      rng_state = other;
      for (int64_t i = 0; i < n * d; i++) x[i] = 1e4 + 100 * x[i];
    }
    const double cut = d <= 5 ? 1 : 1e4;
    gm_dpc_grid plan;
    /* the cells of the cutoff count's own index on the GPU (its cap, 4 a point) */
    gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_SEEN, 4, 1, &plan);
    float *copy = malloc(sizeof(float) * n * d), reach[GM_DPC_GRID_MAX_DIM] = {0};
    for (int64_t t = 0; t < d; t++) {
      const double origin = gm_dpc_screen_origin(&plan.geom, (int)t);
      for (int64_t i = 0; i < n; i++) {
        copy[i * d + t] = gm_dpc_screen_coord(x[i + t * n], origin);
        if (fabsf(copy[i * d + t]) > reach[t]) reach[t] = fabsf(copy[i * d + t]);
      }
    }
    /* the relative form's items lie in one cell: each point's origin is the first point
     * of its cell */
    const gm_dpc_screen_rel rel =
        gm_dpc_screen_rel_for(cut, (int)d, reach, gm_dpc_rel_side(&plan.geom));
    int64_t *first = malloc(sizeof(int64_t) * n), *cell = malloc(sizeof(int64_t) * n);
    for (int64_t i = 0; i < n; i++) {
      cell[i] = gm_dpc_cell_of(&plan.geom, x, n, i);
      first[i] = i;
      for (int64_t j = 0; j < i; j++)
        if (cell[j] == cell[i]) {
          first[i] = j;
          break;
        }
    }
    gm_dpc_grid_free(&plan);
    const gm_dpc_screen screen = gm_dpc_screen_for(cut, (int)d, reach);
    int64_t wrong = 0, band = 0, rel_wrong = 0, rel_band = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
      float q[GM_DPC_GRID_MAX_DIM], m[GM_DPC_GRID_MAX_DIM + 1];
      const float *o = copy + first[i] * d;
      gm_dpc_rel_point((int)d, copy + i * d, o, q);
      gm_dpc_rel_query((int)d, q, rel.in, m);
      for (int64_t j = 0; j < n; j++) {
        const double sq = ref_sq(x, n, d, j, i);
        float t[GM_DPC_GRID_MAX_DIM];
        gm_dpc_rel_point((int)d, copy + j * d, o, t);
        const float r = gm_dpc_rel_value((int)d, t, gm_dpc_rel_square((int)d, t), m);
        if (r < 0) rel_wrong += !(sq < cut);
        else if (r >= rel.band) rel_wrong += sq < cut;
        else rel_band++;
        const float sq32 = gm_dpc_screen_sq((int)d, copy + j * d, copy + i * d);
        if (sq32 < screen.in) wrong += !(sq < cut);
        else if (sq32 >= screen.out) wrong += sq < cut;
        else band++;
        /* the CPU's form: rounded products added in dimension order */
        float plain = 0;
        for (int64_t t = 0; t < d; t++) {
          const float diff = copy[j * d + t] - copy[i * d + t];
          plain += diff * diff;
        }
        if (plain < screen.in) wrong += !(sq < cut);
        else if (plain >= screen.out) wrong += sq < cut;
        if (fabs(sq - cut) < 0.01 * cut && fabs(sq32 - sq) > worst) worst = fabs(sq32 - sq);
      }
    }
    const double margin = ((double)screen.out - (double)screen.in) / 2;
    CHECK(screen.on && wrong == 0 && (d > 5 || (band > 0 && (copies == 1 || worst > margin / 8))),
          "fp32 screen, d = %lld: on %d, %lld pairs wrong, %lld in the band, largest fp32 "
          "error near the cut %g, margin %g",
          (long long)d, screen.on, (long long)wrong, (long long)band, worst, margin);
    /* two far copies make the count's cells coarse, which may turn the relative form off */
    CHECK((copies == 2 && d <= 5 && !rel.on) ||
              (rel.on && rel_wrong == 0 && (d > 5 || rel_band > 0)),
          "fp32 screen's relative form, d = %lld, %d copies: on %d, %lld pairs wrong, %lld in "
          "the band (band %g above %g)",
          (long long)d, copies, rel.on, (long long)rel_wrong, (long long)rel_band,
          (double)rel.band, rel.in);
    free(first);
    free(cell);
    free(copy);
    free(x);
  }
}

/* The rho parts' rule as the device's scan applies it (core/dpc_shared.h's
 * gm_dpc_part_ends, each cell seen once with its running sum): for squared counts with
 * runs of empty cells, and equal counts whose running sums hit the targets exactly, each
 * part's bound is the cell after the first whose running sum reaches the part's target,
 * as a search of the sums finds it; none where the total is 0. */
static void test_part_ends(void) {
  for (int run = 0; run < 40; run++) {
    const int parts = 1 + run % 17;
    const int equal = run % 5 == 1;
    const int64_t nc = equal ? (int64_t)parts * (1 + run % 7) : 1 + run * 37;
    double *incl = malloc(sizeof(double) * (size_t)nc), total = 0;
    for (int64_t c = 0; c < nc; c++) {
      const double count = run % 5 == 0 ? 0
                           : equal       ? 3
                           : uniform() < 0.4 ? 0
                                             : floor(uniform() * 40);
      total += count * count;
      incl[c] = total;
    }
    int64_t wrong = 0, seen = 0;
    for (int p = 1; p < parts; p++) {
      const double target = gm_dpc_part_target(total, parts, p);
      int64_t expect = 0; /* the first c with incl[c] >= target, plus one; 0 without a target */
      if (target > 0) {
        while (incl[expect] < target) expect++;
        expect++;
      }
      int64_t found = 0, times = 0;
      for (int64_t c = 0; c < nc; c++) {
        const double w = incl[c] - (c > 0 ? incl[c - 1] : 0);
        if (gm_dpc_part_ends(total, parts, p, incl[c], w)) {
          found = c + 1;
          times++;
        }
      }
      wrong += found != expect || times != (target > 0);
      seen += times;
    }
    CHECK(wrong == 0 && (total == 0 || parts == 1 || seen == parts - 1),
          "the rho parts' rule, %lld cells in %d parts: %lld bounds wrong", (long long)nc, parts,
          (long long)wrong);
    free(incl);
  }
}

/* The symmetric count's rule for pairs of cells (core/dpc_shared.h's gm_dpc_pair_row, the
 * GPU's one-device cutoff count): on blobs at d = 1 .. 5 and the cells of the count's own
 * index, every pair of points whose cells the rule calls whole is within the cut and
 * every pair it calls apart is not; the boxes' farthest (nearest) corners of every offset
 * within reach too, in long double; offsets beyond reach across the rows apart; and the
 * rule calls some pairs whole, some apart and some crossed. */
static int64_t pair_class(const gm_dpc_geom *geo, const int64_t *delta, double cut) {
  double near_sq, far_sq;
  gm_dpc_pair_cross(geo, geo->dim, delta, &near_sq, &far_sq);
  int64_t k_in, k_out;
  gm_dpc_pair_row(geo, near_sq, far_sq, cut, &k_in, &k_out);
  const int64_t x = delta[0] < 0 ? -delta[0] : delta[0];
  return x <= k_in ? 1 : x <= k_out ? 0 : -1; /* whole, crossed, apart */
}

/* The halo's runs merged as the rule says, one cell at a time from the last (the loop
 * core's maps replace; written out here as the reference). */
static void runs_by_rule(int64_t nc, int64_t *label, int64_t *end, double *top) {
  for (int64_t c = nc - 1; c >= 0; c--) {
    const int64_t own = label[c];
    const int has_next = c + 1 < nc;
    if (own == GM_DPC_EMPTY) {
      if (has_next) {
        label[c] = label[c + 1];
        end[c] = end[c + 1];
        top[c] = top[c + 1];
      } else {
        end[c] = c;
      }
    } else if (own >= 0 && has_next && (label[c + 1] == own || label[c + 1] == GM_DPC_EMPTY)) {
      end[c] = end[c + 1];
      if (top[c + 1] > top[c]) top[c] = top[c + 1];
    } else {
      end[c] = c;
    }
  }
}

/* The halo's runs: core's merge (the maps applied from the last cell) and the maps'
 * suffixes composed in a scan's order (pairs of growing stride, as the GPU's scan groups
 * them) against the rule, on random labels with long runs, empty stretches and cells of
 * several clusters. */
static void test_run_maps(void) {
  const int64_t nc = 700;
  int64_t *label = malloc(nc * sizeof *label), *want_label = malloc(nc * sizeof *want_label),
          *want_end = malloc(nc * sizeof *want_end), *end = malloc(nc * sizeof *end);
  double *top = malloc(nc * sizeof *top), *want_top = malloc(nc * sizeof *want_top);
  gm_dpc_run_map *scan = malloc(nc * sizeof *scan), *next = malloc(nc * sizeof *next);
  int64_t wrong_merge = 0, wrong_scan = 0, mixed = 0, extended = 0;
  for (int trial = 0; trial < 40; trial++) {
    const int clusters = 1 + trial % 4;
    for (int64_t c = 0; c < nc; c++) {
      const double u = uniform();
      /* stretches: a label repeats with probability 0.7; the last cells empty in some trials */
      label[c] = c > 0 && uniform() < 0.7 ? label[c - 1]
                 : u < 0.35             ? GM_DPC_EMPTY
                 : u < 0.45             ? GM_DPC_MIXED
                                        : (int64_t)(uniform() * clusters);
      if (trial % 3 == 0 && c > nc - 20) label[c] = GM_DPC_EMPTY;
      top[c] = label[c] == GM_DPC_EMPTY ? -1 : uniform();
      mixed += label[c] == GM_DPC_MIXED;
      want_label[c] = label[c];
      want_top[c] = top[c];
      scan[c] = gm_dpc_run_map_of(c, label[c], top[c]);
    }
    runs_by_rule(nc, want_label, want_end, want_top);
    /* suffix maps: scan[c] = f_c after f_c+1 after ... after the last */
    for (int64_t stride = 1; stride < nc; stride *= 2) {
      for (int64_t c = 0; c < nc; c++)
        next[c] = c + stride < nc ? gm_dpc_run_compose(scan[c], scan[c + stride]) : scan[c];
      memcpy(scan, next, nc * sizeof *scan);
    }
    const gm_dpc_run start = {GM_DPC_EMPTY, nc - 1, -1};
    for (int64_t c = 0; c < nc; c++) {
      const gm_dpc_run r = gm_dpc_run_apply(scan[c], start);
      wrong_scan += r.label != want_label[c] || r.end != want_end[c] || r.top != want_top[c];
      extended += want_end[c] > c + 1;
    }
    gm_dpc_grid_merge_runs(nc, label, end, top);
    for (int64_t c = 0; c < nc; c++)
      wrong_merge += label[c] != want_label[c] || end[c] != want_end[c] || top[c] != want_top[c];
  }
  CHECK(mixed > 0 && extended > 1000, "the runs' trials hold %lld mixed cells and %lld long runs",
        (long long)mixed, (long long)extended);
  CHECK(wrong_merge == 0, "the runs merged by core's maps: %lld cells differ from the rule",
        (long long)wrong_merge);
  CHECK(wrong_scan == 0, "the runs from the maps composed in a scan's order: %lld cells differ "
        "from the rule", (long long)wrong_scan);
  free(label);
  free(want_label);
  free(want_end);
  free(end);
  free(top);
  free(want_top);
  free(scan);
  free(next);
}

static void test_pair_rule(void) {
  for (int64_t d = 1; d <= 5; d++) {
    const uint64_t other = rng_state;
    const int64_t n = 3000;
    double *x = blobs(n, d, 4, 0.4, NULL);
    rng_state = other;
    gm_dpc_grid plan;
    gm_dpc_grid_plan(x, n, d, gm_dpc_grid_per_cell(d), GM_DPC_CELLS_SEEN, 4, 1, &plan);
    const gm_dpc_geom *geo = &plan.geom;
    const double cut = 36 * geo->h * geo->h; /* dc = 6 cells */
    int64_t wrong = 0, seen[3] = {0, 0, 0}, corner_wrong = 0, crossed = 0, beyond_wrong = 0;
    int64_t *cell = malloc(sizeof(int64_t) * n * GM_DPC_GRID_MAX_DIM);
    for (int64_t i = 0; i < n; i++)
      gm_dpc_cell_coords(geo, (int)d, gm_dpc_cell_of(geo, x, n, i), cell + i * GM_DPC_GRID_MAX_DIM);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        int64_t delta[GM_DPC_GRID_MAX_DIM];
        for (int64_t t = 0; t < d; t++)
          delta[t] = cell[j * GM_DPC_GRID_MAX_DIM + t] - cell[i * GM_DPC_GRID_MAX_DIM + t];
        const int64_t c = pair_class(geo, delta, cut);
        const double sq = ref_sq(x, n, d, j, i);
        seen[c + 1]++;
        if ((c == 1 && !(sq < cut)) || (c == -1 && sq < cut)) wrong++;
      }
    /* every offset within reach, from cell 0: the boxes' extremes */
    int64_t reach = 0, count = 1;
    for (int64_t t = 0; t < d; t++) {
      const int64_t r = gm_dpc_pair_reach(geo, (int)t, cut) + 1;
      reach = r > reach ? r : reach;
      count *= 2 * r + 1;
    }
    for (int64_t k = 0; k < count; k++) {
      int64_t delta[GM_DPC_GRID_MAX_DIM], r = k;
      long double near_sq = 0, far_sq = 0;
      for (int64_t t = 0; t < d; t++) {
        delta[t] = r % (2 * reach + 1) - reach;
        r /= 2 * reach + 1;
        const long double e = (long double)geo->slack[t] * geo->h, h = geo->h;
        const long double a0 = -e, a1 = h + e, b0 = delta[t] * h - e, b1 = (delta[t] + 1) * h + e;
        const long double gap = b0 > a1 ? b0 - a1 : a0 > b1 ? a0 - b1 : 0;
        const long double span = (b1 - a0 > a1 - b0) ? b1 - a0 : a1 - b0;
        near_sq += gap * gap;
        far_sq += span * span;
      }
      const int64_t c = pair_class(geo, delta, cut);
      if ((c == 1 && !(far_sq < cut)) || (c == -1 && !(near_sq >= cut))) corner_wrong++;
      crossed += c == 0;
      /* rows beyond gm_dpc_pair_reach hold no cell within the cut: the GPU's table of
       * the rows' classes skips them (kernels/dpc_grid.cuh's PairRows) */
      int beyond = 0;
      for (int64_t t = 1; t < d; t++)
        beyond |= (delta[t] < 0 ? -delta[t] : delta[t]) > gm_dpc_pair_reach(geo, (int)t, cut);
      beyond_wrong += beyond && c != -1;
    }
    CHECK(wrong == 0 && corner_wrong == 0 && beyond_wrong == 0 && seen[0] > 0 && seen[2] > 0 &&
              crossed > 0,
          "cell pairs' rule, d = %lld: %lld pairs, %lld offsets' corners and %lld offsets "
          "beyond reach wrong; pairs %lld apart, %lld crossed, %lld whole; %lld offsets crossed",
          (long long)d, (long long)wrong, (long long)corner_wrong, (long long)beyond_wrong,
          (long long)seen[0], (long long)seen[1], (long long)seen[2], (long long)crossed);
    free(cell);
    gm_dpc_grid_free(&plan);
    free(x);
  }
}

/* The mean, over points, of the count of their cell, from a built index. */
static double seen_occupancy(const gm_dpc_grid *g) {
  double sum = 0;
  for (int64_t c = 0; c < g->ncells; c++) {
    const double m = (double)(g->start[c + 1] - g->start[c]);
    sum += m * m;
  }
  return sum / (double)g->n;
}

/* The index's cells: uniform data keep the mean density's cells (about per_cell points
 * each); clustered data, where most points sit in cells many times denser than the
 * mean, get cells small enough that a point's cell holds about per_cell points; data on
 * a line in the plane get cells up to the cap; one point repeated still builds. The answers on such indexes are test_index's and test_crowded_cells'. */
static void test_cell_side(void) {
  const int64_t n = 40000;
  const double per_cell = 16;
  double *x = malloc(sizeof(double) * n * 3);
  for (int shape = 0; shape < 4; shape++) {
    const int64_t d = shape == 2 ? 2 : shape == 3 ? 1 + 2 : 2;
    for (int64_t i = 0; i < n; i++)
      for (int64_t t = 0; t < d; t++) {
        double v = uniform();
        if (shape == 1 && i % 20 != 0) v = 0.3 + 0.05 * normal();  /* 95% in a blob */
        if (shape == 2) v = t == 0 ? uniform() : x[i];              /* the line y = x */
        if (shape == 3) v = 0.5;                                   /* one point */
        x[i + t * n] = v;
      }
    gm_dpc_grid g;
    const double cap = shape == 2 ? 4 : 2; /* cells a point at most (the backends' caps) */
    gpuml_status st = gm_dpc_grid_build(x, n, d, per_cell, GM_DPC_CELLS_SEEN, cap, 2, &g);
    CHECK(st == GPUML_OK, "cell side, shape %d: the index did not build (%s)", shape,
          gpuml_last_error());
    if (st) continue;
    const double seen = seen_occupancy(&g);
    CHECK(g.ncells <= (int64_t)cap * n + 1, "cell side, shape %d: %lld cells for %lld points",
          shape, (long long)g.ncells, (long long)n);
    if (shape == 0)
      CHECK(seen < 2 * per_cell && g.ncells > n / (int64_t)(4 * per_cell),
            "cell side, uniform: %.1f points in a point's cell, %lld cells", seen,
            (long long)g.ncells);
    if (shape == 1)
      CHECK(seen < 3 * per_cell, "cell side, a blob: %.1f points in a point's cell", seen);
    /* a line cannot get per_cell points a cell before the cap: the cells grow to it */
    if (shape == 2)
      CHECK(g.ncells > n, "cell side, a line: %lld cells (%.1f points in a point's cell)",
            (long long)g.ncells, seen);
    if (shape == 3) CHECK(seen == (double)n, "cell side, one point: %.1f", seen);
    gm_dpc_grid_free(&g);
  }
  free(x);
}

/* The cell index (d <= 8) against the brute force at sizes where it has many cells:
 * rho, delta and nearest at a small, a 2%-like and a large dc, then centres by k
 * (clusters as the definition assigns them) and the halo against its definition, on
 * clustered data with uniform noise (dense cells, empty cells, ties of density). */
static void test_index(void) {
  const int64_t dims[] = {1, 2, 3, 4, 6, 8};
  for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++) {
    const int64_t d = dims[a], n = d <= 2 ? 4000 : 2500;
    const int k = 6;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n; i++)
      for (int64_t t = 0; t < d; t++)
        x[i + t * n] = i % 7 == 6 ? 12 * uniform() - 1
                                  : 2.0 * (double)((i % 7 + t) % 5) + 0.6 * normal();
    const double scale = sqrt((double)d);
    const double dcs[] = {0.08 * scale, 0.5 * scale, 2.5 * scale};
    for (int c = 0; c < 3; c++) {
      const double dc = dcs[c];
      fit ref = fit_alloc(n), got = fit_alloc(n);
      ref_dpc(x, n, d, dc, 0, &ref);
      gpuml_status st = run_dpc(x, n, d, dc, 0, &got, test_backend, NULL);
      CHECK(st == GPUML_OK && count_rho_diff(&got, &ref, n, 0) == 0 &&
                count_delta_diff(&got, &ref, n, 0, 0) == 0,
            "index, d = %lld, dc = %g: differs from the brute force (%s)", (long long)d, dc,
            gpuml_last_error());
      compare_with_cpu("index", x, n, d, dc, 0, &got);
      /* centres by k and the clusters of the definition (in decreasing density) */
      int64_t *centres = malloc(sizeof(int64_t) * n), *cluster = malloc(sizeof(int64_t) * n);
      int64_t *want = malloc(sizeof(int64_t) * n), nc = 0;
      gpuml_dpc_selection sel;
      gpuml_dpc_selection_init(&sel);
      sel.has_k = 1;
      sel.k = k;
      st = gpuml_dpc_cut(got.rho, got.delta, got.nearest, n, &sel, centres, &nc, cluster);
      int ok = st == GPUML_OK && nc == k;
      for (int64_t i = 0; ok && i < n; i++) want[i] = -1;
      for (int64_t ci = 0; ok && ci < k; ci++) {
        /* the ci-th largest gamma (ties: denser, then smaller index), by brute force */
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++) {
          if (want[i] >= 0) continue;
          if (best < 0 || got.gamma[i] > got.gamma[best] ||
              (got.gamma[i] == got.gamma[best] &&
               (got.rho[i] > got.rho[best] || (got.rho[i] == got.rho[best] && i < best))))
            best = i;
        }
        want[best] = ci;
        ok = centres[ci] == best;
      }
      for (int64_t pass = 0; ok && pass < n; pass++) {
        int64_t changed = 0;
        for (int64_t i = 0; i < n; i++)
          if (want[i] < 0 && want[got.nearest[i]] >= 0) {
            want[i] = want[got.nearest[i]];
            changed++;
          }
        if (!changed) break;
      }
      for (int64_t i = 0; ok && i < n; i++) ok = cluster[i] == want[i];
      CHECK(ok, "index, d = %lld, dc = %g: centres and clusters by k = %d differ from the "
            "definition (%s)", (long long)d, dc, k, gpuml_last_error());
      /* the halo against its definition */
      int *halo = malloc(sizeof(int) * n);
      gpuml_options opt = options();
      st = gpuml_dpc_halo(x, n, d, dc, got.rho, cluster, nc, halo, &opt, NULL);
      int64_t halos = 0;
      const int64_t wrong = halo_wrong(x, n, d, dc, got.rho, cluster, nc, halo, &halos);
      CHECK(st == GPUML_OK && wrong == 0,
            "index, d = %lld, dc = %g: halo %lld wrong of %lld halo points (%s)", (long long)d,
            dc, (long long)wrong, (long long)halos, gpuml_last_error());
      free(halo);
      free(centres);
      free(cluster);
      free(want);
      fit_free(&ref);
      fit_free(&got);
    }
    free(x);
  }
}

/* The halo on uniform data with many clusters (their borders in the density's valleys,
 * each point's ball holding hundreds of points): the index's blocks bound the density
 * of the other clusters within dc of each cell far below the largest, and most points
 * skip their walk; the halo must still be the definition's. */
static void test_halo_many_clusters(void) {
  const int64_t n = 20000, d = 2, k = 10;
  const double dc = 0.05;
  double *x = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n * d; i++) x[i] = uniform();
  fit f = fit_alloc(n);
  gpuml_status st = run_dpc(x, n, d, dc, 0, &f, test_backend, NULL);
  int64_t *centres = malloc(sizeof(int64_t) * n), *cluster = malloc(sizeof(int64_t) * n), nc = 0;
  int *halo = malloc(sizeof(int) * n);
  gpuml_dpc_selection sel;
  gpuml_dpc_selection_init(&sel);
  sel.has_k = 1;
  sel.k = k;
  if (!st) st = gpuml_dpc_cut(f.rho, f.delta, f.nearest, n, &sel, centres, &nc, cluster);
  gpuml_options opt = options();
  if (!st) st = gpuml_dpc_halo(x, n, d, dc, f.rho, cluster, nc, halo, &opt, NULL);
  CHECK(st == GPUML_OK, "many clusters: status %d (%s)", st, gpuml_last_error());
  if (st == GPUML_OK) {
    int64_t halos = 0;
    const int64_t wrong = halo_wrong(x, n, d, dc, f.rho, cluster, nc, halo, &halos);
    CHECK(wrong == 0 && halos > 0 && halos < n,
          "many clusters: halo %lld wrong of %lld halo points", (long long)wrong,
          (long long)halos);
  }
  free(halo);
  free(centres);
  free(cluster);
  fit_free(&f);
  free(x);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void test_dc_estimate(void) {
  /* Small n: exactly the 2% quantile of all pairwise distances. */
  const int64_t n = 500, d = 3;
  double *x = malloc(sizeof(double) * n * d);
  for (int64_t i = 0; i < n * d; i++) x[i] = normal();
  const int64_t pairs = n * (n - 1) / 2;
  double *all = malloc(sizeof(double) * pairs);
  int64_t p = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < i; j++) all[p++] = sqrt(ref_sq(x, n, d, i, j));
  qsort(all, pairs, sizeof(double), cmp_double);
  double dc = 0;
  gpuml_options opt = options();
  gpuml_status st = gpuml_dpc_estimate_dc(x, n, d, 0.02, &dc, &opt);
  const int64_t q = (int64_t)ceil(0.02 * pairs) - 1;
  CHECK(st == GPUML_OK && dc == all[q], "dc estimate %g, the 2%% quantile is %g (%s)", dc, all[q],
        gpuml_last_error());
  fit f = fit_alloc(n);
  double used = 0;
  st = run_dpc(x, n, d, 0, 0, &f, test_backend, &used);
  double mean = 0;
  for (int64_t i = 0; i < n; i++) mean += f.rho[i];
  mean /= n;
  CHECK(st == GPUML_OK && used == dc && fabs(mean / (n - 1) - 0.02) < 0.001,
        "estimated dc %g used %g: mean neighbour rate %g", dc, used, mean / (n - 1));
  fit_free(&f);
  free(all);
  free(x);

  /* Large n: a seeded sample; the same seed gives the same dc, the rate is about 2%. */
  const int64_t m = 12000;
  double *y = malloc(sizeof(double) * m * 2);
  for (int64_t i = 0; i < m * 2; i++) y[i] = uniform();
  double dc1 = 0, dc2 = 0, dc3 = 0;
  opt = options();
  CHECK(gpuml_dpc_estimate_dc(y, m, 2, 0.02, &dc1, &opt) == GPUML_OK &&
            gpuml_dpc_estimate_dc(y, m, 2, 0.02, &dc2, &opt) == GPUML_OK && dc1 == dc2,
        "the same seed gives the same dc (%g, %g)", dc1, dc2);
  opt.seed = 7;
  CHECK(gpuml_dpc_estimate_dc(y, m, 2, 0.02, &dc3, &opt) == GPUML_OK && dc3 != dc1 &&
            fabs(dc3 / dc1 - 1) < 0.05,
        "another seed gives a close but different dc (%g, %g)", dc1, dc3);
  fit g = fit_alloc(m);
  st = run_dpc(y, m, 2, dc1, 0, &g, test_backend, NULL);
  mean = 0;
  for (int64_t i = 0; i < m; i++) mean += g.rho[i];
  mean /= m;
  CHECK(st == GPUML_OK && fabs(mean / (m - 1) - 0.02) < 0.002,
        "sampled dc gives a neighbour rate of %g", mean / (m - 1));
  fit_free(&g);
  free(y);

  /* The sample of a large n: the first GPUML_DPC_DC_SAMPLE of a Fisher-Yates shuffle
   * seeded with opt.seed (drawn here over the whole array), and dc the quantile of the
   * sample's pairs, at several rates, on clustered and on tied (rounded) data. */
  for (int kind = 0; kind < 2; kind++) {
    const int64_t nn = 50000, dd = 2, ms = GPUML_DPC_DC_SAMPLE, sp = ms * (ms - 1) / 2;
    double *z = malloc(sizeof(double) * nn * dd);
    for (int64_t i = 0; i < nn; i++)
      for (int64_t t = 0; t < dd; t++) {
        const double v = (double)(i % 5) * 10 + normal();
        z[i + t * nn] = kind ? round(v * 4) / 4 : v;
      }
    int64_t *perm = malloc(sizeof(int64_t) * nn);
    for (int64_t i = 0; i < nn; i++) perm[i] = i;
    gm_rng r;
    gm_rng_seed(&r, 11);
    for (int64_t i = 0; i < ms; i++) {
      const int64_t j = i + gm_rng_below(&r, nn - i), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    double *ps = malloc(sizeof(double) * sp);
    int64_t e = 0;
    for (int64_t i = 0; i < ms; i++)
      for (int64_t j = 0; j < i; j++) ps[e++] = sqrt(ref_sq(z, nn, dd, perm[i], perm[j]));
    qsort(ps, sp, sizeof(double), cmp_double);
    const double rates[3] = {0.001, 0.02, 0.3};
    for (int ri = 0; ri < 3; ri++) {
      opt = options();
      opt.seed = 11;
      int64_t q = (int64_t)ceil(rates[ri] * sp) - 1;
      double want = ps[q];
      for (int64_t a = 0; want == 0 && a < sp; a++) want = ps[a]; /* the smallest positive */
      double got = -1;
      st = gpuml_dpc_estimate_dc(z, nn, dd, rates[ri], &got, &opt);
      CHECK(st == GPUML_OK && got == want,
            "dc of the seeded sample (%s data, rate %g): %.17g, the sample's quantile %.17g",
            kind ? "tied" : "clustered", rates[ri], got, want);
    }
    free(ps);
    free(perm);
    free(z);
  }

  /* Duplicates fill the quantile: the smallest positive distance is taken. */
  double dup[20] = {0};
  dup[9] = 3;
  dup[19] = 4;
  opt = options();
  CHECK(gpuml_dpc_estimate_dc(dup, 10, 2, 0.02, &dc, &opt) == GPUML_OK && dc == 5,
        "dc with duplicates %g, expected 5", dc);
}

static int64_t agreement(const int64_t *a, const int64_t *label, int64_t n, int k) {
  /* the largest number of points whose cluster matches their label under one mapping
   * of clusters to labels given by the majority of each cluster */
  int64_t total = 0;
  for (int c = 0; c < k; c++) {
    int64_t counts[16] = {0};
    for (int64_t i = 0; i < n; i++)
      if (a[i] == c) counts[label[i]]++;
    int64_t best = 0;
    for (int l = 0; l < k; l++)
      if (counts[l] > best) best = counts[l];
    total += best;
  }
  return total;
}

static void test_clusters(void) {
  for (int64_t d = 2; d <= 30; d += 28) {
    const int64_t n = 1500;
    const int k = 4;
    int64_t *label = malloc(sizeof(int64_t) * n);
    double *x = blobs(n, d, k, 1.0, label);
    fit f = fit_alloc(n);
    CHECK(run_dpc(x, n, d, 0, 0, &f, test_backend, NULL) == GPUML_OK, "blobs: %s",
          gpuml_last_error());
    int64_t *centres = malloc(sizeof(int64_t) * n), *cluster = malloc(sizeof(int64_t) * n);
    int64_t nc = 0;
    gpuml_dpc_selection sel;
    gpuml_dpc_selection_init(&sel);
    sel.has_k = 1;
    sel.k = k;
    gpuml_status st = gpuml_dpc_cut(f.rho, f.delta, f.nearest, n, &sel, centres, &nc, cluster);
    CHECK(st == GPUML_OK && nc == k, "clusters by k: %s", gpuml_last_error());
    CHECK(agreement(cluster, label, n, k) == n, "d = %lld: the %d blobs are recovered exactly",
          (long long)d, k);
    int ordered = 1, consistent = 1;
    for (int c = 1; c < nc; c++) ordered &= f.gamma[centres[c - 1]] >= f.gamma[centres[c]];
    for (int64_t i = 0; i < n; i++)
      if (centres[cluster[i]] != i) consistent &= cluster[i] == cluster[f.nearest[i]];
    CHECK(ordered && consistent && cluster[centres[0]] == 0 && f.nearest[centres[0]] == -1,
          "centres ordered by gamma, the top point first, clusters follow nearest");
    /* thresholds just below the k-th centre give the same centres */
    double rmin = INFINITY, dmin = INFINITY;
    for (int c = 0; c < k; c++) {
      if (f.rho[centres[c]] < rmin) rmin = f.rho[centres[c]];
      if (f.delta[centres[c]] < dmin) dmin = f.delta[centres[c]];
    }
    gpuml_dpc_selection thr;
    gpuml_dpc_selection_init(&thr);
    thr.has_rho = thr.has_delta = 1;
    thr.rho_min = rmin * 0.999 - 1e-9;
    thr.delta_min = dmin * 0.999;
    int64_t *centres2 = malloc(sizeof(int64_t) * n), *cluster2 = malloc(sizeof(int64_t) * n);
    int64_t nc2 = 0;
    st = gpuml_dpc_cut(f.rho, f.delta, f.nearest, n, &thr, centres2, &nc2, cluster2);
    int same = st == GPUML_OK && nc2 == nc;
    for (int64_t i = 0; same && i < n; i++) same = cluster[i] == cluster2[i];
    CHECK(same, "thresholds select the same %d clusters (%lld; %s)", k, (long long)nc2,
          gpuml_last_error());
    /* halo: against the definition */
    int *halo = malloc(sizeof(int) * n);
    double dc = 0;
    gpuml_options opt = options();
    gpuml_dpc_estimate_dc(x, n, d, 0.02, &dc, &opt);
    opt = options();
    st = gpuml_dpc_halo(x, n, d, dc, f.rho, cluster, nc, halo, &opt, NULL);
    int64_t halos = 0;
    const int64_t wrong = halo_wrong(x, n, d, dc, f.rho, cluster, nc, halo, &halos);
    CHECK(st == GPUML_OK && wrong == 0, "d = %lld halo: %lld wrong, %lld halo points (%s)",
          (long long)d, (long long)wrong, (long long)halos, gpuml_last_error());
    free(halo);
    free(centres2);
    free(cluster2);
    free(centres);
    free(cluster);
    fit_free(&f);
    free(label);
    free(x);
  }
  /* Touching blobs: the halo is not empty, and matches the definition on the grid
   * (d = 2) and by tiles (d = 4). */
  for (int64_t d = 2; d <= 4; d += 2) {
    const int64_t n = 900;
    const double dc = d == 2 ? 2.5 : 5;
    double *x = blobs(n, d, 3, 4.0, NULL);
    fit f = fit_alloc(n);
    run_dpc(x, n, d, dc, 0, &f, test_backend, NULL);
    int64_t centres[900], cluster[900], nc = 0;
    gpuml_dpc_selection sel;
    gpuml_dpc_selection_init(&sel);
    sel.has_k = 1;
    sel.k = 3;
    gpuml_dpc_cut(f.rho, f.delta, f.nearest, n, &sel, centres, &nc, cluster);
    int halo[900];
    gpuml_options opt = options();
    gpuml_status st = gpuml_dpc_halo(x, n, d, dc, f.rho, cluster, nc, halo, &opt, NULL);
    int64_t halos = 0;
    const int64_t wrong = halo_wrong(x, n, d, dc, f.rho, cluster, nc, halo, &halos);
    CHECK(st == GPUML_OK && wrong == 0 && halos > 0 && halos < n,
          "touching blobs d = %lld: %lld wrong, %lld halo points", (long long)d, (long long)wrong,
          (long long)halos);
    if (test_backend == GPUML_BACKEND_CUDA) {
      int cpu_halo[900];
      gpuml_options cpu = options_for(GPUML_BACKEND_CPU);
      int same = gpuml_dpc_halo(x, n, d, dc, f.rho, cluster, nc, cpu_halo, &cpu, NULL) == GPUML_OK;
      for (int64_t i = 0; same && i < n; i++) same = cpu_halo[i] == halo[i];
      CHECK(same, "halo: GPU vs CPU");
    }
    fit_free(&f);
    free(x);
  }
}

static int error_is(gpuml_status st, gpuml_status want, const char *id, const char *text) {
  return st == want && strcmp(gpuml_last_error_id(), id) == 0 &&
         strstr(gpuml_last_error(), text) != NULL;
}

static void test_bad_input(void) {
  double x[8] = {0, 1, 2, 3, 0, 1, 0, 1}; /* 4 x 2 */
  double rho[4], delta[4], gamma[4];
  int64_t nearest[4];
  gpuml_dpc_params p;
  gpuml_options opt = options();
  gpuml_dpc_params_init(&p);
  p.estimate_dc = 0;
  p.dc = 0;
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badDc", "dc = 0 must be a positive"),
        "dc = 0: %s", gpuml_last_error());
  p.dc = -1;
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badDc", "dc = -1"),
        "dc < 0: %s", gpuml_last_error());
  p.dc = NAN;
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badDc", "positive finite"),
        "dc NaN: %s", gpuml_last_error());
  p.dc = INFINITY;
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badDc", "positive finite"),
        "dc Inf: %s", gpuml_last_error());
  gpuml_dpc_params_init(&p);
  p.kernel = GPUML_DPC_GAUSSIAN;
  const double bad_cutoffs[] = {-1, INFINITY};
  for (int k = 0; k < 2; k++) {
    p.gaussian_cutoff = bad_cutoffs[k];
    CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL),
                   GPUML_ERR_ARG, "dpc:badGaussianCutoff", "must be a finite number >= 0"),
          "gaussian_cutoff %g: %s", bad_cutoffs[k], gpuml_last_error());
  }
  CHECK(strstr(gpuml_last_error(), "gaussian_cutoff = inf must") != NULL, "the value is named: %s",
        gpuml_last_error());
  const double nan_cutoff = NAN;
  CHECK(gpuml_params_set_numbers(GPUML_PARAMS_DPC, &p, "gaussian_cutoff", &nan_cutoff, 1) ==
                GPUML_OK &&
            error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL),
                     GPUML_ERR_ARG, "dpc:badGaussianCutoff", "in units of dc"),
        "gaussian_cutoff NaN by name: %s", gpuml_last_error());
  gpuml_dpc_params_init(&p);
  p.neighbor_rate = 1;
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badRate", "between 0 and 1"),
        "rate 1: %s", gpuml_last_error());
  gpuml_dpc_params_init(&p);
  p.kernel = (gpuml_dpc_kernel)7;
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badKernel", "kernel"),
        "bad kernel: %s", gpuml_last_error());
  gpuml_dpc_params_init(&p);
  CHECK(error_is(gpuml_dpc_density(x, 1, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badData", "at least 2 points"),
        "one point: %s", gpuml_last_error());
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, NULL, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badOutput", "NULL"),
        "NULL output: %s", gpuml_last_error());
  x[5] = NAN;
  CHECK(error_is(gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:nonFinite", "x contains NA/NaN at row 2, column 2"),
        "NaN: %s", gpuml_last_error());
  x[5] = 1;
  double same[8] = {1, 1, 1, 1, 2, 2, 2, 2};
  CHECK(error_is(gpuml_dpc_density(same, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badData", "identical"),
        "identical points: %s", gpuml_last_error());
  p.estimate_dc = 0;
  p.dc = 1;
  CHECK(gpuml_dpc_density(same, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL) == GPUML_OK &&
            rho[0] == 3 && nearest[0] == -1 && delta[0] == 0 && nearest[3] == 0,
        "identical points with a given dc");

  /* selections */
  gpuml_dpc_params_init(&p);
  p.estimate_dc = 0;
  p.dc = 1.5;
  gpuml_dpc_density(x, 4, 2, &p, rho, delta, nearest, gamma, &opt, NULL);
  int64_t centres[4], cluster[4], nc = 0;
  gpuml_dpc_selection sel;
  gpuml_dpc_selection_init(&sel);
  CHECK(error_is(gpuml_dpc_cut(rho, delta, nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:badSelection", "no selection"),
        "no selection: %s", gpuml_last_error());
  sel.has_k = 1;
  sel.k = 5;
  CHECK(error_is(gpuml_dpc_cut(rho, delta, nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:badK", "k = 5 exceeds the 4 points"),
        "k > n: %s", gpuml_last_error());
  sel.k = 0;
  CHECK(error_is(gpuml_dpc_check_selection(&sel, 4), GPUML_ERR_ARG, "dpc:badK",
                 "k = 0 must be at least 1"),
        "k = 0: %s", gpuml_last_error());
  sel.k = -1;
  CHECK(error_is(gpuml_dpc_cut(rho, delta, nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:badK", "at least 1"),
        "k < 0: %s", gpuml_last_error());
  sel.k = 2;
  sel.has_rho = 1;
  sel.rho_min = 1;
  CHECK(error_is(gpuml_dpc_check_selection(&sel, 4), GPUML_ERR_ARG, "dpc:badSelection",
                 "not both"),
        "k and thresholds: %s", gpuml_last_error());
  sel.has_k = 0;
  CHECK(error_is(gpuml_dpc_cut(rho, delta, nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:badSelection", "only rho"),
        "rho threshold alone: %s", gpuml_last_error());
  sel.has_delta = 1;
  sel.delta_min = 1e9;
  CHECK(gpuml_dpc_check_selection(&sel, 4) == GPUML_OK, "valid thresholds refused");
  CHECK(error_is(gpuml_dpc_cut(rho, delta, nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:noCentres", "lower the thresholds"),
        "thresholds too high: %s", gpuml_last_error());
  sel.delta_min = INFINITY;
  CHECK(error_is(gpuml_dpc_cut(rho, delta, nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:badSelection", "finite"),
        "infinite threshold: %s", gpuml_last_error());
  gpuml_dpc_selection_init(&sel);
  sel.has_k = 1;
  sel.k = 4;
  CHECK(gpuml_dpc_cut(rho, delta, nearest, 4, &sel, centres, &nc, cluster) == GPUML_OK &&
            nc == 4,
        "k = n: every point its own cluster");
  int64_t bad_nearest[4];
  memcpy(bad_nearest, nearest, sizeof bad_nearest);
  bad_nearest[nearest[0] == -1 ? 1 : 0] = -1;
  CHECK(error_is(gpuml_dpc_cut(rho, delta, bad_nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:badInput", "exactly one point"),
        "two tops: %s", gpuml_last_error());
  double bad_rho[4] = {rho[0], rho[1], -1, rho[3]};
  CHECK(error_is(gpuml_dpc_cut(bad_rho, delta, nearest, 4, &sel, centres, &nc, cluster),
                 GPUML_ERR_ARG, "dpc:badInput", "non-negative"),
        "negative rho: %s", gpuml_last_error());
  int halo[4];
  int64_t bad_cluster[4] = {0, 1, 2, 0};
  CHECK(error_is(gpuml_dpc_halo(x, 4, 2, 1.5, rho, bad_cluster, 2, halo, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badInput", "point 3 has cluster 3, outside 1 .. 2"),
        "halo with a bad cluster: %s", gpuml_last_error());
  CHECK(error_is(gpuml_dpc_halo(x, 4, 2, -2, rho, bad_cluster, 3, halo, &opt, NULL), GPUML_ERR_ARG,
                 "dpc:badDc", "dc = -2"),
        "halo with dc < 0: %s", gpuml_last_error());
}

static int64_t last_done, progress_calls, stop_after;
static int monotone;
static void record_progress(void *ctx, const char *stage, int64_t done, int64_t total) {
  (void)ctx;
  (void)total;
  if (strncmp(stage, "dpc", 3) != 0) monotone = 0;
  if (progress_calls > 0 && done <= last_done && strcmp(stage, "dpc rho") == 0 &&
      last_done != total)
    monotone = 0;
  last_done = done;
  progress_calls++;
}
static int interrupt_later(void *ctx) {
  (void)ctx;
  return stop_after-- <= 0;
}

static void test_callbacks(void) {
  for (int64_t d = 2; d <= 20; d += 18) {
    const int64_t n = 6000;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n * d; i++) x[i] = uniform();
    fit f = fit_alloc(n);
    gpuml_dpc_params p;
    gpuml_dpc_params_init(&p);
    gpuml_options opt = options();
    opt.verbose = 1;
    opt.progress = record_progress;
    monotone = 1;
    progress_calls = 0;
    gpuml_status st = gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL);
    CHECK(st == GPUML_OK && progress_calls >= 2 && monotone && last_done == n,
          "d = %lld progress: %lld calls, last %lld (%s)", (long long)d, (long long)progress_calls,
          (long long)last_done, gpuml_last_error());
    opt = options();
    opt.interrupted = interrupt_later;
    stop_after = 1;
    st = gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL);
    CHECK(st == GPUML_ERR_INTERRUPTED && strcmp(gpuml_last_error_id(), "interrupted") == 0,
          "d = %lld interrupted: status %d", (long long)d, st);
    fit_free(&f);
    free(x);
  }
}

/* gpuml_dpc_fit: the densities, centres, clusters and halo of one call are those of the
 * three calls it replaces; a bad selection is refused before anything is written. */
static void test_fit_one_call(void) {
  const int64_t n = 3000, d = 2;
  double *x = blobs(n, d, 3, 0.5, NULL);
  fit a = fit_alloc(n), b = fit_alloc(n);
  int64_t *ca = malloc(sizeof(int64_t) * n), *cb = malloc(sizeof(int64_t) * n);
  int64_t *la = malloc(sizeof(int64_t) * n), *lb = malloc(sizeof(int64_t) * n);
  int64_t *oa = malloc(sizeof(int64_t) * n), *ob = malloc(sizeof(int64_t) * n);
  int *ha = malloc(sizeof(int) * n), *hb = malloc(sizeof(int) * n);
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  const double k = 3;
  CHECK(gpuml_params_set_numbers(GPUML_PARAMS_DPC, &p, "k", &k, 1) == GPUML_OK, "k by name");
  gpuml_options opt = options();
  gpuml_dpc_result ra, rb;
  int64_t na = 0, nb = 0;
  gpuml_status sa = gpuml_dpc_fit(x, n, d, &p, a.rho, a.delta, a.nearest, a.gamma, oa, ca, &na,
                                  la, ha, &opt, &ra);
  gpuml_status sb = gpuml_dpc_density(x, n, d, &p, b.rho, b.delta, b.nearest, b.gamma, &opt, &rb);
  if (!sb) sb = gpuml_dpc_cut(b.rho, b.delta, b.nearest, n, &p.select, cb, &nb, lb);
  if (!sb) sb = gpuml_dpc_halo(x, n, d, rb.dc, b.rho, lb, nb, hb, &opt, NULL);
  if (!sb) sb = gpuml_dpc_order(b.rho, n, ob);
  CHECK(sa == GPUML_OK && sb == GPUML_OK, "fit in one call and in three: %s", gpuml_last_error());
  if (!sa && !sb)
    CHECK(na == 3 && nb == 3 && ra.dc == rb.dc && !memcmp(a.rho, b.rho, sizeof(double) * n) &&
              !memcmp(oa, ob, sizeof(int64_t) * n) &&
              !memcmp(a.delta, b.delta, sizeof(double) * n) &&
              !memcmp(a.nearest, b.nearest, sizeof(int64_t) * n) &&
              !memcmp(ca, cb, sizeof(int64_t) * 3) && !memcmp(la, lb, sizeof(int64_t) * n) &&
              !memcmp(ha, hb, sizeof(int) * n) && ra.run.backend == test_backend,
          "one call gives the three calls' answer");
  /* without a selection: the densities only */
  gpuml_dpc_params_init(&p);
  na = -1;
  for (int64_t s = 0; s < n; s++) oa[s] = -1;
  CHECK(gpuml_dpc_fit(x, n, d, &p, a.rho, a.delta, a.nearest, NULL, oa, NULL, &na, NULL, NULL,
                      &opt, NULL) == GPUML_OK && na == 0 && !memcmp(oa, ob, sizeof(int64_t) * n),
        "no selection: densities and their order only (%s)", gpuml_last_error());
  /* a bad k is refused before the densities are computed */
  const double too_many = (double)n + 1;
  gpuml_params_set_numbers(GPUML_PARAMS_DPC, &p, "k", &too_many, 1);
  a.rho[0] = -7;
  CHECK(gpuml_dpc_fit(x, n, d, &p, a.rho, a.delta, a.nearest, NULL, NULL, ca, &na, la, ha, &opt,
                      NULL) ==
                GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "dpc:badK") == 0 && a.rho[0] == -7,
        "k > n refused first: %s", gpuml_last_error());
  fit_free(&a);
  fit_free(&b);
  free(ca);
  free(cb);
  free(la);
  free(lb);
  free(oa);
  free(ob);
  free(ha);
  free(hb);
  free(x);
}

/* The clusters of a cut of many points, labelled in blocks of the density order on
 * several threads (1, 3 and 8 asked for), against a walk of that order in the test: the
 * same clusters; a nearest that is not denser is found at its place in the order. */
static void test_cut_threads(void) {
  const int64_t n = 300000;
  double *rho = malloc(sizeof(double) * n), *delta = malloc(sizeof(double) * n);
  int64_t *nearest = malloc(sizeof(int64_t) * n), *order = malloc(sizeof(int64_t) * n);
  int64_t *want = malloc(sizeof(int64_t) * n), *got = malloc(sizeof(int64_t) * n);
  int64_t *centres = malloc(sizeof(int64_t) * n);
  uint64_t z = 777;
  for (int64_t i = 0; i < n; i++) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    rho[i] = (double)((z >> 33) % 5000); /* ties */
  }
  gpuml_status st = gpuml_dpc_order(rho, n, order);
  CHECK(st == GPUML_OK, "the order: %s", gpuml_last_error());
  /* each point's nearest: a denser point a short or a long way up the order, so that
   * chains cross the threads' blocks many times; delta large at a few points (centres) */
  for (int64_t s = 0; s < n; s++) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t r = z >> 33;
    const int64_t i = order[s];
    nearest[i] = s == 0 ? -1 : order[r % 2 ? s - 1 - (int64_t)(r % (s < 50 ? s : 50)) : (int64_t)(r % s)];
    delta[i] = s == 0 ? 1e6 : r % 20000 == 0 ? 1e4 : 1;
  }
  gpuml_dpc_selection sel;
  gpuml_dpc_selection_init(&sel);
  sel.has_k = 1;
  sel.k = 25;
  int64_t nc = 0;
#ifdef _OPENMP
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  st = gpuml_dpc_cut(rho, delta, nearest, n, &sel, centres, &nc, got);
  CHECK(st == GPUML_OK && nc == 25, "the cut on one thread: %s", gpuml_last_error());
  /* the reference: in the density order, each point takes its nearest's cluster */
  for (int64_t i = 0; i < n; i++) want[i] = -1;
  for (int64_t c = 0; c < nc; c++) want[centres[c]] = c;
  for (int64_t s = 0; s < n; s++)
    if (want[order[s]] < 0) want[order[s]] = want[nearest[order[s]]];
  CHECK(!memcmp(got, want, sizeof(int64_t) * n), "the cut on one thread follows the order");
  const int asks[2] = {3, 8};
  for (int a = 0; a < 2; a++) {
#ifdef _OPENMP
    omp_set_num_threads(asks[a]);
#endif
    for (int64_t i = 0; i < n; i++) got[i] = -7;
    st = gpuml_dpc_cut(rho, delta, nearest, n, &sel, centres, &nc, got);
    CHECK(st == GPUML_OK && !memcmp(got, want, sizeof(int64_t) * n),
          "the cut on %d threads gives one thread's clusters (%s)", asks[a], gpuml_last_error());
  }
  /* two points late in the order whose nearest lies below them: the first is named */
  const int64_t late = order[n - 1000], later = order[n - 10];
  nearest[late] = order[n - 5];
  nearest[later] = order[n - 1];
  st = gpuml_dpc_cut(rho, delta, nearest, n, &sel, centres, &nc, got);
  char expect[96];
  snprintf(expect, sizeof expect, "point %lld is not", (long long)(late + 1));
  CHECK(st == GPUML_ERR_ARG && strstr(gpuml_last_error(), expect),
        "a nearest below its point is refused at its first place: %s", gpuml_last_error());
#ifdef _OPENMP
  omp_set_num_threads(before);
#endif
  free(rho);
  free(delta);
  free(nearest);
  free(order);
  free(want);
  free(got);
  free(centres);
}

/* The density order of many points with many ties, sorted by runs of the array on
 * several threads (1, 3 and 8 asked for): densest first, equal densities by index, the
 * same order every time. */
static void test_order_threads(void) {
  const int64_t n = 600000;
  double *rho = malloc(sizeof(double) * n);
  int64_t *order = malloc(sizeof(int64_t) * n), *first = malloc(sizeof(int64_t) * n);
  uint64_t z = 12345;
  for (int64_t i = 0; i < n; i++) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t r = z >> 33;
    /* counts with heavy ties, some Gaussian-like fractions, a few zeros */
    rho[i] = r % 7 == 0   ? 0
             : r % 3 == 0 ? (double)(r % 50) + (double)(r % 1000) / 1024
                          : (double)(r % 300);
  }
#ifdef _OPENMP
  const int before = omp_get_max_threads();
#endif
  const int asks[3] = {1, 3, 8};
  for (int a = 0; a < 3; a++) {
#ifdef _OPENMP
    omp_set_num_threads(asks[a]);
#endif
    gpuml_status st = gpuml_dpc_order(rho, n, a ? order : first);
    const int64_t *o = a ? order : first;
    int ok = st == GPUML_OK;
    for (int64_t s = 1; ok && s < n; s++) {
      const int64_t h = o[s - 1], i = o[s];
      ok = rho[h] > rho[i] || (rho[h] == rho[i] && h < i);
    }
    CHECK(ok, "gpuml_dpc_order on %d thread(s): densest first, ties by index (%s)", asks[a],
          gpuml_last_error());
    if (a) CHECK(memcmp(order, first, sizeof(int64_t) * n) == 0,
                 "gpuml_dpc_order on %d threads is the order on one", asks[a]);
  }
#ifdef _OPENMP
  omp_set_num_threads(before);
#endif
  free(rho);
  free(order);
  free(first);
}

/* The density order (gpuml_dpc_order) and the recut that follows it: a recut with the
 * kept order, without one, and with a wrong one gives the fit's answer with the same k or
 * thresholds. */
static void test_recut_order(void) {
  const int64_t n = 4000, d = 2;
  double *x = blobs(n, d, 4, 0.5, NULL);
  fit a = fit_alloc(n);
  int64_t *order = malloc(sizeof(int64_t) * n), *bad = malloc(sizeof(int64_t) * n);
  int64_t *ca = malloc(sizeof(int64_t) * n), *cb = malloc(sizeof(int64_t) * n);
  int64_t *la = malloc(sizeof(int64_t) * n), *lb = malloc(sizeof(int64_t) * n);
  int *ha = malloc(sizeof(int) * n), *hb = malloc(sizeof(int) * n);
  gpuml_options opt = options();
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  gpuml_dpc_result r;
  gpuml_status st = gpuml_dpc_density(x, n, d, &p, a.rho, a.delta, a.nearest, a.gamma, &opt, &r);
  if (!st) st = gpuml_dpc_order(a.rho, n, order);
  int ok = st == GPUML_OK;
  for (int64_t s = 1; ok && s < n; s++) {
    const int64_t h = order[s - 1], i = order[s];
    ok = a.rho[h] > a.rho[i] || (a.rho[h] == a.rho[i] && h < i);
  }
  CHECK(ok, "gpuml_dpc_order: densest first, equal densities by index (%s)", gpuml_last_error());
  /* the index kept with the fit, reused by every recut below (its runs renewed each time) */
  gpuml_dpc_index *ix = NULL;
  CHECK(gpuml_dpc_index_build(x, n, d, r.dc, &opt, &ix) == GPUML_OK && ix,
        "gpuml_dpc_index_build: %s", gpuml_last_error());
  /* selections: k, and thresholds from the fit's own values */
  double rho_sorted_mid = a.rho[order[n / 20]];
  for (int sel_case = 0; sel_case < 3; sel_case++) {
    gpuml_dpc_params fresh;
    gpuml_dpc_params_init(&fresh);
    fresh.estimate_dc = 0;
    fresh.dc = r.dc;
    if (sel_case < 2) {
      fresh.select.has_k = 1;
      fresh.select.k = sel_case == 0 ? 4 : 9;
    } else {
      fresh.select.has_rho = fresh.select.has_delta = 1;
      fresh.select.rho_min = rho_sorted_mid;
      fresh.select.delta_min = 0.5;
    }
    int64_t na = 0, nb = 0;
    fit f = fit_alloc(n);
    st = gpuml_dpc_fit(x, n, d, &fresh, f.rho, f.delta, f.nearest, NULL, NULL, ca, &na, la, ha,
                       &opt, NULL);
    for (int with = 0; !st && with < 3; with++) {
      /* 0: the kept order, 1: none, 2: a wrong one (reversed), which the recut replaces */
      for (int64_t s = 0; s < n; s++) bad[s] = order[n - 1 - s];
      const int64_t *given = with == 0 ? order : with == 1 ? NULL : bad;
      gpuml_status sb = gpuml_dpc_recut(x, n, d, r.dc, a.rho, a.delta, a.nearest, given,
                                        with == 1 ? NULL : ix, &fresh, cb, &nb, lb, hb, &opt,
                                        NULL);
      CHECK(sb == GPUML_OK && na == nb && !memcmp(ca, cb, sizeof(int64_t) * na) &&
                !memcmp(la, lb, sizeof(int64_t) * n) && !memcmp(ha, hb, sizeof(int) * n),
            "recut (selection %d, order %d) equals a fresh fit with the same selection (%s)",
            sel_case, with, gpuml_last_error());
    }
    CHECK(st == GPUML_OK, "fresh fit: %s", gpuml_last_error());
    fit_free(&f);
  }
  /* a nearest that is not denser is refused, whatever the order given: the densest point
   * that the cut does not make a centre (a centre's nearest is never followed) is given
   * the least dense point as its nearest */
  const int64_t low = order[n - 1];
  gpuml_dpc_params_init(&p);
  p.select.has_k = 1;
  p.select.k = 2;
  int64_t nb = 0;
  st = gpuml_dpc_recut(x, n, d, r.dc, a.rho, a.delta, a.nearest, order, NULL, &p, cb, &nb, lb,
                       hb, &opt, NULL);
  CHECK(st == GPUML_OK, "the cut with k = 2: %s", gpuml_last_error());
  int64_t victim = -1;
  for (int64_t s = 1; victim < 0 && s < n - 1; s++) {
    int centre = 0;
    for (int64_t c = 0; c < nb; c++) centre |= cb[c] == order[s];
    if (!centre) victim = order[s];
  }
  CHECK(victim >= 0, "a point that is not a centre");
  if (victim >= 0) {
    const int64_t keep = a.nearest[victim];
    a.nearest[victim] = low;
    st = gpuml_dpc_recut(x, n, d, r.dc, a.rho, a.delta, a.nearest, order, NULL, &p, cb, &nb,
                         lb, hb, &opt, NULL);
    CHECK(st == GPUML_ERR_ARG && strstr(gpuml_last_error(), "is not a denser point"),
          "a nearest that is not denser is refused (%s)", gpuml_last_error());
    a.nearest[victim] = keep;
  }
  /* the cut without an order follows the chains of nearest points: the clusters of the
   * walk in the density order (done here), and of two points whose nearest is not
   * denser, the one named is the first in that order (not the smaller index) */
  {
    gpuml_dpc_selection sel;
    gpuml_dpc_selection_init(&sel);
    sel.has_k = 1;
    sel.k = 4;
    int64_t nc = 0;
    st = gpuml_dpc_cut(a.rho, a.delta, a.nearest, n, &sel, ca, &nc, la);
    for (int64_t i = 0; i < n; i++) lb[i] = -1;
    for (int64_t c = 0; c < nc; c++) lb[ca[c]] = c;
    for (int64_t s = 0; s < n; s++)
      if (lb[order[s]] < 0) lb[order[s]] = lb[a.nearest[order[s]]];
    CHECK(st == GPUML_OK && nc == 4 && !memcmp(la, lb, sizeof(int64_t) * n),
          "the cut's clusters are the walk's in the density order (%s)", gpuml_last_error());
    int64_t s1 = -1, s2 = -1;
    for (int64_t s = n / 4; s < n / 2 && s2 < 0; s++) {
      if (lb[order[s]] < 0 || a.nearest[order[s]] < 0) continue;
      int centre = 0;
      for (int64_t c = 0; c < nc; c++) centre |= ca[c] == order[s];
      if (centre) continue;
      if (s1 < 0) s1 = s;
      else if (order[s] < order[s1]) s2 = s;
    }
    if (s1 >= 0 && s2 >= 0) {
      const int64_t i1 = order[s1], i2 = order[s2], k1 = a.nearest[i1], k2 = a.nearest[i2];
      a.nearest[i1] = a.nearest[i2] = low;
      st = gpuml_dpc_cut(a.rho, a.delta, a.nearest, n, &sel, ca, &nc, la);
      char want[64];
      snprintf(want, sizeof want, "point %lld is not", (long long)(i1 + 1));
      CHECK(st == GPUML_ERR_ARG && strstr(gpuml_last_error(), want),
            "two nearest points not denser: the first in the density order (%lld, not %lld) is "
            "named (%s)", (long long)(i1 + 1), (long long)(i2 + 1), gpuml_last_error());
      a.nearest[i1] = k1;
      a.nearest[i2] = k2;
    }
    CHECK(s1 >= 0 && s2 >= 0, "the test found two points to break");
  }
  /* an index of other data is refused */
  st = gpuml_dpc_recut(x, n - 1, d, r.dc, a.rho, a.delta, a.nearest, NULL, ix, &p, cb, &nb, lb,
                       hb, &opt, NULL);
  CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "dpc:badIndex") == 0,
        "an index of other data is refused (%s)", gpuml_last_error());
  gpuml_dpc_index_free(ix);
  gpuml_dpc_index_free(NULL);
  CHECK(gpuml_dpc_order(NULL, n, order) == GPUML_ERR_ARG && gpuml_dpc_order(a.rho, 0, order) ==
            GPUML_ERR_ARG, "gpuml_dpc_order refuses NULL and no points");
  a.rho[5] = -1;
  CHECK(gpuml_dpc_order(a.rho, n, order) == GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "dpc:badInput") == 0,
        "gpuml_dpc_order refuses a negative rho");
  fit_free(&a);
  free(order);
  free(bad);
  free(ca);
  free(cb);
  free(la);
  free(lb);
  free(ha);
  free(hb);
  free(x);
}

static void test_backend_choice(void) {
  gpuml_info info;
  gpuml_backend_info(&info);
  if (info.device_count > 0) return;
  double x[6] = {0, 1, 3, 0, 1, 1};
  double rho[3], delta[3];
  int64_t nearest[3];
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  gpuml_options opt;
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CUDA;
  gpuml_status st = gpuml_dpc_density(x, 3, 2, &p, rho, delta, nearest, NULL, &opt, NULL);
  CHECK(st == GPUML_ERR_NO_CUDA && strcmp(gpuml_last_error_id(), "dpc:noCuda") == 0,
        "cuda without a device: %d (%s)", st, gpuml_last_error());
  opt.backend = GPUML_BACKEND_AUTO;
  gpuml_dpc_result res;
  CHECK(gpuml_dpc_density(x, 3, 2, &p, rho, delta, nearest, NULL, &opt, &res) == GPUML_OK &&
            res.run.backend == GPUML_BACKEND_CPU,
        "auto without a device runs on the CPU");
}

/* ---- over shards: GPUML_SHARDS (logical shards) and GPUML_SHARD_THREADS (the runner of
 *      several devices) split rho and delta by blocks of rows over the devices; the fit
 *      must be one device's bit for bit (rho, delta, nearest, gamma, centres, clusters,
 *      halo). ---- */

static void set_shard_knobs(const char *shards, const char *threads) {
  if (shards) setenv("GPUML_SHARDS", shards, 1);
  else unsetenv("GPUML_SHARDS");
  if (threads) setenv("GPUML_SHARD_THREADS", threads, 1);
  else unsetenv("GPUML_SHARD_THREADS");
}

typedef struct {
  fit f;
  int64_t *order, *centres, *cluster, ncentres;
  int *halo;
  gpuml_status st;
} full_fit;

static full_fit full_fit_run(const double *x, int64_t n, int64_t d, const gpuml_dpc_params *p,
                             const char *shards, const char *threads) {
  full_fit r;
  r.f = fit_alloc(n);
  r.order = malloc(sizeof(int64_t) * n);
  r.centres = malloc(sizeof(int64_t) * n);
  r.cluster = malloc(sizeof(int64_t) * n);
  r.halo = malloc(sizeof(int) * n);
  r.ncentres = 0;
  gpuml_options opt = options();
  set_shard_knobs(shards, threads);
  r.st = gpuml_dpc_fit(x, n, d, p, r.f.rho, r.f.delta, r.f.nearest, r.f.gamma, r.order,
                       r.centres, &r.ncentres, r.cluster, r.halo, &opt, NULL);
  set_shard_knobs(NULL, NULL);
  return r;
}

static void full_fit_free(full_fit *r) {
  fit_free(&r->f);
  free(r->order);
  free(r->centres);
  free(r->cluster);
  free(r->halo);
}

/* The fit of x on shards (and threads) against one device's: bitwise. */
static void check_sharded(const char *what, const double *x, int64_t n, int64_t d, double dc,
                          int gaussian, double gaussian_cutoff, int64_t k, const char *shards,
                          const char *threads) {
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  p.dc = dc;
  p.kernel = gaussian ? GPUML_DPC_GAUSSIAN : GPUML_DPC_CUTOFF;
  p.gaussian_cutoff = gaussian_cutoff;
  const double kk = (double)k;
  gpuml_params_set_numbers(GPUML_PARAMS_DPC, &p, "k", &kk, 1);
  full_fit one = full_fit_run(x, n, d, &p, NULL, NULL);
  full_fit split = full_fit_run(x, n, d, &p, shards, threads);
  CHECK(one.st == GPUML_OK && split.st == GPUML_OK, "%s, n = %lld, d = %lld (shards %s, threads %s): %s",
        what, (long long)n, (long long)d, shards, threads ? threads : "1", gpuml_last_error());
  if (!one.st && !split.st) {
    const size_t nd = sizeof(double) * (size_t)n, ni = sizeof(int64_t) * (size_t)n;
    CHECK(!memcmp(one.f.rho, split.f.rho, nd) && !memcmp(one.f.delta, split.f.delta, nd) &&
              !memcmp(one.f.nearest, split.f.nearest, ni) &&
              !memcmp(one.f.gamma, split.f.gamma, nd) && !memcmp(one.order, split.order, ni),
          "%s, n = %lld, d = %lld (shards %s, threads %s): rho, delta, nearest, gamma or the "
          "density order differ from one device's",
          what, (long long)n, (long long)d, shards, threads ? threads : "1");
    CHECK(one.ncentres == split.ncentres &&
              !memcmp(one.centres, split.centres, sizeof(int64_t) * (size_t)one.ncentres) &&
              !memcmp(one.cluster, split.cluster, ni) &&
              !memcmp(one.halo, split.halo, sizeof(int) * (size_t)n),
          "%s, n = %lld, d = %lld (shards %s, threads %s): centres, clusters or halo differ "
          "from one device's",
          what, (long long)n, (long long)d, shards, threads ? threads : "1");
  }
  full_fit_free(&one);
  full_fit_free(&split);
}

static void test_shards(void) {
  /* rho on its own cells (test_fine_cells' data, checked to take them there), delta's
   * first rings over them; from a stream of its own, so that the other data stay as they
   * were */
  {
    const uint64_t other = rng_state;
    rng_state = 20261127;
    for (int64_t d = 2; d <= 3; d++) {
      double dc;
      double *y = fine_cells_data(12000, d, &dc);
      check_fine_cells("fine cells on shards", y, 12000, d, dc);
      check_sharded("fine cells, cutoff", y, 12000, d, dc, 0, 0, 4, "3", NULL);
      check_sharded("fine cells, threaded runner", y, 12000, d, dc, 0, 0, 4, "4", "2");
      free(y);
    }
    rng_state = other;
  }
  /* the cell index (rho and delta on it; rho on the tiles with a large dc), blobs */
  for (int64_t d = 1; d <= 3; d++) {
    const int64_t n = 3001;
    double *x = blobs(n, d, 4, 0.6, NULL);
    check_sharded("blobs, cutoff", x, n, d, 0.3, 0, 0, 4, "3", NULL);
    check_sharded("blobs, cutoff, 7 shards", x, n, d, 0.3, 0, 0, 4, "7", NULL);
    check_sharded("blobs, truncated Gaussian", x, n, d, 0.2, 1, 3, 4, "3", NULL);
    check_sharded("blobs, large dc (rho on the tiles)", x, n, d, 6, 0, 0, 4, "3", NULL);
    check_sharded("blobs, exact Gaussian", x, n, d, 0.3, 1, 0, 4, "2", NULL);
    check_sharded("blobs, threaded runner", x, n, d, 0.3, 0, 0, 4, "5", "2");
    check_sharded("blobs, large dc (rho on the tiles), threads", x, n, d, 6, 0, 0, 4, "5", "2");
    check_sharded("blobs, exact Gaussian, threads", x, n, d, 0.3, 1, 0, 4, "3", "3");
    free(x);
  }
  /* uneven work: a dense blob (in one cell), a wider one and a sparse field, so that the
   * rho parts (runs of whole cells) are uneven, some empty, and each device's session
   * runs several parts */
  {
    const int64_t n = 4000, d = 2;
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n; i++)
      for (int64_t t = 0; t < d; t++)
        x[i + t * n] = i < 2000 ? 5 + 0.05 * normal() : i < 3000 ? 3 + normal() : 10 * uniform();
    check_sharded("dense blobs in a sparse field", x, n, d, 0.3, 0, 0, 3, "16", NULL);
    check_sharded("dense blobs in a sparse field, threads", x, n, d, 0.3, 0, 0, 3, "16", "3");
    check_sharded("dense blobs in a sparse field, truncated Gaussian", x, n, d, 0.1, 1, 3, 3, "9",
                  "4");
    free(x);
  }
  /* ties: an integer lattice (every density tied, pairs exactly at dc) and duplicates */
  {
    const int64_t side = 17, n = side * side, d = 2;  /* 289 = 3 * 96 + 1 */
    double *x = malloc(sizeof(double) * n * d);
    for (int64_t i = 0; i < n; i++) {
      x[i] = (double)(i % side);
      x[i + n] = (double)(i / side);
    }
    const double dcs[] = {1, 1.5, 2, 3};
    for (int k = 0; k < 4; k++) {
      check_sharded("integer lattice", x, n, d, dcs[k], 0, 0, 3, "3", NULL);
      check_sharded("integer lattice", x, n, d, dcs[k], 0, 0, 3, "4", "3");
    }
    free(x);
    const int64_t m = 301;
    for (int64_t dd = 3; dd <= 8; dd += 5) {
      double *dup = malloc(sizeof(double) * m * dd);
      for (int64_t i = 0; i < m * dd; i++) dup[i] = floor(4 * uniform());
      check_sharded("duplicates", dup, m, dd, 1.2, 0, 0, 2, "3", NULL);
      check_sharded("duplicates", dup, m, dd, 2.5, 0, 0, 2, "2", "2");
      free(dup);
    }
  }
  /* the tiles: direct (d < 16) and GEMM (d >= 16) forms, beyond the index's dimensions */
  {
    const int64_t n = 1000;
    double *x12 = blobs(n, 12, 3, 1.0, NULL), *x20 = blobs(n, 20, 3, 1.0, NULL);
    check_sharded("tiles, d = 12", x12, n, 12, 3, 0, 0, 3, "3", NULL);
    check_sharded("tiles, d = 12, Gaussian", x12, n, 12, 3, 1, 0, 3, "3", "3");
    check_sharded("tiles (GEMM), d = 20", x20, n, 20, 4, 0, 0, 3, "3", NULL);
    check_sharded("tiles (GEMM), d = 20, Gaussian", x20, n, 20, 4, 1, 0, 3, "7", NULL);
    free(x12);
    free(x20);
    /* the Gaussian splits at multiples of 4096 rows (its GEMM tiles fall alike): parts
     * [0, 4096), [4096, 8192), [8192, n) */
    const int64_t big = 8500;
    double *xb = blobs(big, 16, 3, 1.0, NULL);
    check_sharded("tiles (GEMM), d = 16, Gaussian, parts of 4096 rows", xb, big, 16, 4, 1, 0, 3,
                  "3", "2");
    free(xb);
  }
  /* more shards than rows */
  {
    double tiny[10] = {0, 1, 1, 3, 7, 0, 0, 2, 2, 5};
    check_sharded("5 points on 64 shards", tiny, 5, 2, 1.5, 0, 0, 2, "64", NULL);
    check_sharded("5 points on 64 shards, threads", tiny, 5, 2, 1.5, 0, 0, 2, "64", "4");
  }
}

/* An interrupted fit over shards stops with its status and leaves nothing held: the next
 * fit over shards is one device's. */
static void test_shards_interrupted(void) {
  const int64_t n = 20000, d = 2;
  double *x = blobs(n, d, 4, 0.6, NULL);
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  p.dc = 0.3;
  fit f = fit_alloc(n);
  const char *threads[] = {NULL, "2"};
  for (int t = 0; t < 2; t++) {
    gpuml_options opt = options();
    opt.interrupted = interrupt_later;
    stop_after = 0;
    set_shard_knobs("3", threads[t]);
    const gpuml_status st =
        gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL);
    set_shard_knobs(NULL, NULL);
    /* on the calling thread the first check stops it; with threads the calling thread
     * looks every few ms, and the passes may be done before */
    CHECK((st == GPUML_ERR_INTERRUPTED && strcmp(gpuml_last_error_id(), "interrupted") == 0) ||
              (threads[t] && st == GPUML_OK),
          "dpc over shards (threads %s) interrupted: status %d (%s)",
          threads[t] ? threads[t] : "1", st, gpuml_last_error());
    check_sharded("blobs after an interrupted fit", x, n, d, 0.3, 0, 0, 4, "3", threads[t]);
  }
  fit_free(&f);
  free(x);
}

/* The device list of a fit: checked on every backend (ignored on the CPU when valid). */
static void test_device_list(void) {
  double x[12] = {0, 1, 2, 3, 4, 5, 0, 1, 0, 1, 0, 1};
  const int64_t n = 6, d = 2;
  fit f = fit_alloc(n);
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  p.dc = 1.5;
  gpuml_options opt = options();
  opt.ndevices = 2;
  opt.devices[0] = 0;
  opt.devices[1] = 0;
  f.rho[0] = -7;
  CHECK(gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL) ==
                GPUML_ERR_ARG &&
            strstr(gpuml_last_error(), "listed twice") != NULL && f.rho[0] == -7,
        "dpc, a device listed twice: %s", gpuml_last_error());
  opt.devices[1] = -1;
  CHECK(gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL) ==
            GPUML_ERR_ARG,
        "dpc, a negative device: %s", gpuml_last_error());
  opt.ndevices = GPUML_MAX_DEVICES + 1;
  CHECK(gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL) ==
                GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "badDevice") == 0,
        "dpc, too many devices: %s", gpuml_last_error());
  gpuml_info info;
  gpuml_backend_info(&info);
  opt.ndevices = 2;
  opt.devices[1] = 1;
  if (test_backend == GPUML_BACKEND_CPU) {
    CHECK(gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL) ==
              GPUML_OK,
          "dpc, a device list on the CPU backend: %s", gpuml_last_error());
  } else if (info.device_count > 0) {
    opt.devices[1] = info.device_count;  /* one past the last */
    CHECK(gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL) ==
                  GPUML_ERR_ARG &&
              strstr(gpuml_last_error(), "does not exist") != NULL,
          "dpc, a device that does not exist: %s", gpuml_last_error());
    opt.ndevices = GPUML_ALL_DEVICES;
    CHECK(gpuml_dpc_density(x, n, d, &p, f.rho, f.delta, f.nearest, NULL, &opt, NULL) ==
              GPUML_OK,
          "dpc, all devices: %s", gpuml_last_error());
  }
  fit_free(&f);
}

int main(void) {
  harness_init();
  test_precision = harness_precision;
  test_screen_margin(); /* no backend: the screen's arithmetic on the host */
  test_pair_rule();
  test_run_maps(); /* no backend: the halo's runs, merged and scanned, on the host */
  test_part_ends(); /* no backend: the rho parts' rule on the host */
  HARNESS_FOR_EACH_BACKEND(b) {
    if (!harness_runs(b, "density peaks")) continue;
    test_backend = b->id;
    test_backend_choice();
    test_bad_input();
    test_against_reference();
    test_gaussian_cutoff();
    test_ties();
    test_far_peaks();
    test_fine_cells();
    test_crowded_cells();
    test_near_ties();
    test_cell_side();
    test_index();
    test_halo_many_clusters();
    test_dc_estimate();
    test_clusters();
    test_callbacks();
    test_fit_one_call();
    test_recut_order();
    test_order_threads();
    test_cut_threads();
    test_shards();
    test_shards_interrupted();
    test_device_list();
  }
  gpuml_shutdown(); /* the contexts' own memory, so that a leak check sees only leaks */
  return check_summary("C");
}
