/* GPU benchmark of gpuml_dpc_density() (backend cuda, host arrays in and out, so transfers, the
 * NaN scan, the dc estimate, the grid's geometry on the host and its sort on the device are
 * all included), each case checked against the CPU backend: the cutoff rho and the nearest denser points must be
 * identical, delta equal; with the Gaussian kernel rho within 1e-10 (relative).
 *
 *   build/bench/dpc_gpu             all cases
 *   build/bench/dpc_gpu --no-check  timings only (the CPU check of n = 1e6 takes a while)
 *   build/bench/dpc_gpu --sanitize  small runs of every path, for compute-sanitizer
 *   build/bench/dpc_gpu --fit       issue 16's rows: gpuml_dpc_fit (density, and with k the
 *                                   centres, clusters and halo) on the cell index, each
 *                                   compared with the CPU backend (add --no-check to skip;
 *                                   --only N: the row N only, from 0; --reps R: best of R,
 *                                   not 3)
 *
 * Build (as tools/gpu-run.sh builds bench/knn_gpu.c):
 *   gcc -O2 -std=c11 -fopenmp -Icore/include bench/dpc_gpu.c build/libgpuml.a $LIBS -lm
 * Prints "RESULT <case> <ms>" lines (best of 3) and a table. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpuml.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t rng = 88172645463325252ULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}
static double normal(void) {
  double u = uniform(), v = uniform();
  return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* Gaussian blobs: 8 centres in the unit cube (first 3 coordinates), sd 0.05, plus 10%
 * uniform noise: clustered, as DPC data are, with dense and empty regions. */
static double *make_data(int64_t n, int64_t d) {
  double *x = malloc(sizeof(double) * (size_t)n * (size_t)d);
  if (!x) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  double centre[8][3];
  for (int c = 0; c < 8; c++)
    for (int t = 0; t < 3; t++) centre[c][t] = 0.15 + 0.7 * uniform();
  for (int64_t i = 0; i < n; i++) {
    const int c = (int)(i % 8), noise = i % 10 == 9;
    for (int64_t t = 0; t < d; t++)
      x[i + t * n] = noise ? uniform() : (t < 3 ? centre[c][t] : 0.5) + 0.05 * normal();
  }
  return x;
}

typedef struct {
  double *rho, *delta;
  int64_t *nearest;
  double dc;
} result;

static int run(const double *x, int64_t n, int64_t d, int gaussian, double dc,
               gpuml_backend backend, result *r, double *ms) {
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  if (dc > 0) {
    p.estimate_dc = 0;
    p.dc = dc;
  }
  p.kernel = gaussian ? GPUML_DPC_GAUSSIAN : GPUML_DPC_CUTOFF;
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = backend;
  double t0 = now_ms();
  gpuml_dpc_result res;
  gpuml_status st = gpuml_dpc_density(x, n, d, &p, r->rho, r->delta, r->nearest, NULL, &o, &res);
  *ms = now_ms() - t0;
  r->dc = st ? NAN : res.dc;
  if (st) fprintf(stderr, "gpuml_dpc_density (%s): %s\n", gpuml_backend_name(backend), gpuml_last_error());
  return st == GPUML_OK;
}

static int alloc_result(result *r, int64_t n) {
  r->rho = malloc(sizeof(double) * n);
  r->delta = malloc(sizeof(double) * n);
  r->nearest = malloc(sizeof(int64_t) * n);
  return r->rho && r->delta && r->nearest;
}
static void free_result(result *r) {
  free(r->rho);
  free(r->delta);
  free(r->nearest);
}

/* Compares with the CPU backend; returns the number of points that differ. */
static int64_t check(const double *x, int64_t n, int64_t d, int gaussian, const result *g) {
  result c;
  double ms;
  if (!alloc_result(&c, n) || !run(x, n, d, gaussian, g->dc, GPUML_BACKEND_CPU, &c, &ms)) {
    free_result(&c);
    return n;
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    int ok = g->nearest[i] == c.nearest[i] &&
             fabs(g->delta[i] - c.delta[i]) <= 1e-14 * c.delta[i] &&
             (gaussian ? fabs(g->rho[i] - c.rho[i]) <= 1e-10 * c.rho[i] : g->rho[i] == c.rho[i]);
    bad += !ok;
  }
  printf("  check against the CPU backend (%.0f ms): %lld of %lld points differ\n", ms,
         (long long)bad, (long long)n);
  free_result(&c);
  return bad;
}

static int halo_check(const double *x, int64_t n, int64_t d, const result *g) {
  gpuml_dpc_selection sel;
  gpuml_dpc_selection_init(&sel);
  sel.has_k = 1;
  sel.k = 8;
  int64_t *centres = malloc(sizeof(int64_t) * n), *cluster = malloc(sizeof(int64_t) * n), nc = 0;
  int *h1 = malloc(sizeof(int) * n), *h2 = malloc(sizeof(int) * n);
  int ok = gpuml_dpc_cut(g->rho, g->delta, g->nearest, n, &sel, centres, &nc, cluster) == 0;
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = GPUML_BACKEND_CUDA;
  double t0 = now_ms();
  ok = ok && gpuml_dpc_halo(x, n, d, g->dc, g->rho, cluster, nc, h1, &o, NULL) == 0;
  double ms = now_ms() - t0;
  o.backend = GPUML_BACKEND_CPU;
  ok = ok && gpuml_dpc_halo(x, n, d, g->dc, g->rho, cluster, nc, h2, &o, NULL) == 0;
  int64_t bad = 0, halo = 0;
  for (int64_t i = 0; ok && i < n; i++) {
    bad += h1[i] != h2[i];
    halo += h1[i];
  }
  printf("  halo (k = 8): %lld halo points, GPU %.1f ms, %lld differ from the CPU%s\n",
         (long long)halo, ms, (long long)bad, ok ? "" : " (FAILED)");
  free(centres);
  free(cluster);
  free(h1);
  free(h2);
  return ok && bad == 0;
}

static double *make_uniform(int64_t n, int64_t d) {
  double *x = malloc(sizeof(double) * (size_t)n * (size_t)d);
  if (!x) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  for (int64_t i = 0; i < n * d; i++) x[i] = uniform();
  return x;
}

/* gpuml_dpc_fit on one backend; *ms the time of the call. */
static int fit_once(const double *x, int64_t n, int64_t d, int64_t k, gpuml_backend backend,
                    result *r, int64_t *cluster, int *halo, double *ms) {
  gpuml_dpc_params p;
  gpuml_dpc_params_init(&p);
  if (k > 0) {
    p.select.has_k = 1;
    p.select.k = k;
  }
  gpuml_options o;
  gpuml_options_init(&o);
  o.backend = backend;
  int64_t *centres = k > 0 ? malloc(sizeof(int64_t) * (size_t)k) : NULL, nc = 0;
  gpuml_dpc_result res;
  double t0 = now_ms();
  gpuml_status st = gpuml_dpc_fit(x, n, d, &p, r->rho, r->delta, r->nearest, NULL, NULL, centres, &nc,
                                  k > 0 ? cluster : NULL, k > 0 ? halo : NULL, &o, &res);
  *ms = now_ms() - t0;
  free(centres);
  r->dc = st ? NAN : res.dc;
  if (st) fprintf(stderr, "gpuml_dpc_fit (%s): %s\n", gpuml_backend_name(backend), gpuml_last_error());
  return st == GPUML_OK;
}

/* gpuml_dpc_fit with k = 8 on the GPU (its cut and halo on what the density pass kept
 * there) against the CPU's: the points whose rho, cluster or halo flag differ. */
static int fit_check(const double *x, int64_t n, int64_t d) {
  result g = {0}, c = {0};
  int64_t *cl_g = malloc(sizeof(int64_t) * (size_t)n), *cl_c = malloc(sizeof(int64_t) * (size_t)n);
  int *h_g = malloc(sizeof(int) * (size_t)n), *h_c = malloc(sizeof(int) * (size_t)n);
  double ms_g = 0, ms_c = 0;
  int ok = cl_g && cl_c && h_g && h_c && alloc_result(&g, n) && alloc_result(&c, n) &&
           fit_once(x, n, d, 8, GPUML_BACKEND_CUDA, &g, cl_g, h_g, &ms_g) &&
           fit_once(x, n, d, 8, GPUML_BACKEND_CPU, &c, cl_c, h_c, &ms_c);
  int64_t bad = 0, halo = 0;
  for (int64_t i = 0; ok && i < n; i++) {
    bad += g.rho[i] != c.rho[i] || cl_g[i] != cl_c[i] || h_g[i] != h_c[i];
    halo += h_g[i];
  }
  printf("  fit (k = 8): %lld halo points, GPU %.1f ms, %lld differ from the CPU%s\n",
         (long long)halo, ms_g, (long long)bad, ok ? "" : " (FAILED)");
  free_result(&g);
  free_result(&c);
  free(cl_g);
  free(cl_c);
  free(h_g);
  free(h_c);
  return ok && bad == 0;
}

/* Issue 16's GPU rows: best of `reps` (3) on the GPU, then one CPU run for the check. */
static int fit_cases(int do_check, int only, int reps) {
  struct {
    int64_t n, d, k;
    int uniform;
    double target_ms;
  } cases[] = {{1000000, 2, 0, 0, 60},  {1000000, 2, 5, 0, 100}, {10000000, 2, 10, 0, 500},
               {24000000, 3, 10, 0, 1500}, {1000000, 5, 10, 1, 2000}};
  int failures = 0;
  printf("| case | gpuml_dpc_fit cuda ms (best of %d) | target (ms) | dc | CPU backend ms | differ |\n"
         "|---|---|---|---|---|---|\n", reps);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    if (only >= 0 && (size_t)only != c) continue;
    const int64_t n = cases[c].n, d = cases[c].d, k = cases[c].k;
    double *x = cases[c].uniform ? make_uniform(n, d) : make_data(n, d);
    result g, h;
    int64_t *cl_g = malloc(sizeof(int64_t) * (size_t)n), *cl_h = malloc(sizeof(int64_t) * (size_t)n);
    int *halo_g = malloc(sizeof(int) * (size_t)n), *halo_h = malloc(sizeof(int) * (size_t)n);
    if (!alloc_result(&g, n) || !alloc_result(&h, n) || !cl_g || !cl_h || !halo_g || !halo_h) return 2;
    double best = INFINITY, ms = 0, cpu_ms = NAN;
    int ok = 1;
    for (int rep = 0; rep < reps && ok; rep++) {
      ok = fit_once(x, n, d, k, GPUML_BACKEND_CUDA, &g, cl_g, halo_g, &ms);
      if (ms < best) best = ms;
    }
    int64_t bad = -1;
    if (ok && do_check && fit_once(x, n, d, k, GPUML_BACKEND_CPU, &h, cl_h, halo_h, &cpu_ms)) {
      bad = 0;
      for (int64_t i = 0; i < n; i++)
        bad += !(g.rho[i] == h.rho[i] && g.nearest[i] == h.nearest[i] && g.delta[i] == h.delta[i] &&
                 (k == 0 || (cl_g[i] == cl_h[i] && halo_g[i] == halo_h[i])));
    }
    printf("RESULT dpc_fit_n=%lld_d=%lld_k=%lld%s %.1f\n", (long long)n, (long long)d,
           (long long)k, cases[c].uniform ? "_uniform" : "", ok ? best : NAN);
    printf("| n = %lld, d = %lld, %s, k = %lld | %.1f | %.0f (%s) | %.4g | %.0f | %lld |\n",
           (long long)n, (long long)d, cases[c].uniform ? "uniform" : "blobs", (long long)k,
           ok ? best : NAN, cases[c].target_ms, ok && best <= cases[c].target_ms ? "met" : "missed",
           g.dc, cpu_ms, (long long)bad);
    failures += !ok || bad > 0;
    free_result(&g);
    free_result(&h);
    free(cl_g);
    free(cl_h);
    free(halo_g);
    free(halo_h);
    free(x);
  }
  printf("fit runs: %d failed\n", failures);
  return failures;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each row as it comes, when a run is cut short */
  int do_check = 1, sanitize = 0, fit = 0, only = -1, reps = 3;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--no-check")) do_check = 0;
    else if (!strcmp(argv[a], "--sanitize")) sanitize = 1;
    else if (!strcmp(argv[a], "--fit")) fit = 1;
    else if (!strcmp(argv[a], "--only") && a + 1 < argc) only = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
  }
  if (reps < 1) reps = 3;
  gpuml_info info;
  gpuml_backend_info(&info);
  printf("device: %s; CPU threads for the checks: %d\n",
         info.device_count ? info.device_name : "none", info.max_threads);
  if (!info.device_count) {
    printf("no CUDA device: %s\n", info.cuda_message);
    return 2;
  }
  struct {
    int64_t n, d;
    int gaussian;
    double target_ms;
  } cases[] = {{1000000, 2, 0, 2000}, {100000, 50, 0, 500}, {100000, 2, 0, 0},
               {100000, 3, 0, 0},     {100000, 8, 0, 0},   {100000, 50, 1, 0},
               {200000, 2, 1, 0}},
    small[] = {{3000, 2, 0, 0}, {3000, 3, 1, 0}, {2000, 7, 0, 0}, {2000, 7, 1, 0},
               {1500, 40, 0, 0}, {1500, 40, 1, 0}, {4000, 1, 0, 0}};
  const int ncases = sanitize ? (int)(sizeof small / sizeof small[0]) : (int)(sizeof cases / sizeof cases[0]);
  int failures = 0;
  /* warm-up: the CUDA context and cuBLAS */
  {
    double *w = make_data(5000, 20);
    result r;
    double ms;
    alloc_result(&r, 5000);
    run(w, 5000, 20, 0, 0, GPUML_BACKEND_CUDA, &r, &ms);
    printf("warm-up %.0f ms\n", ms);
    free_result(&r);
    free(w);
  }
  if (fit) return fit_cases(do_check, only, reps) ? 1 : 0;
  printf("| case | gpuml cuda ms (best of 3) | target | dc |\n|---|---|---|---|\n");
  char lines[16][160];
  for (int c = 0; c < ncases; c++) {
    const int64_t n = sanitize ? small[c].n : cases[c].n, d = sanitize ? small[c].d : cases[c].d;
    const int gaussian = sanitize ? small[c].gaussian : cases[c].gaussian;
    const double target = sanitize ? 0 : cases[c].target_ms;
    lines[c][0] = '\0';
    double *x = make_data(n, d);
    result r;
    if (!alloc_result(&r, n)) return 2;
    double best = INFINITY, ms;
    const int reps = sanitize ? 1 : 3;
    int ok = 1;
    for (int rep = 0; rep < reps && ok; rep++) {
      ok = run(x, n, d, gaussian, 0, GPUML_BACKEND_CUDA, &r, &ms);
      if (ms < best) best = ms;
    }
    char name[64];
    snprintf(name, sizeof name, "dpc_n=%lld_d=%lld%s", (long long)n, (long long)d,
             gaussian ? "_gaussian" : "");
    if (!ok) {
      printf("%s: FAILED\n", name);
      failures++;
    } else {
      printf("RESULT %s %.1f\n", name, best);
      snprintf(lines[c], sizeof lines[c], "| n = %lld, d = %lld, %s | %.1f | %s | %.4g |",
               (long long)n, (long long)d, gaussian ? "Gaussian" : "cutoff", best,
               target > 0 ? (best <= target ? "met" : "missed") : "-", r.dc);
      if (do_check) {
        if (check(x, n, d, gaussian, &r)) failures++;
        if (!halo_check(x, n, d, &r)) failures++;
        if (!gaussian && !fit_check(x, n, d)) failures++;
      }
    }
    free_result(&r);
    free(x);
  }
  printf("\n| case | gpuml cuda ms | target (<= ms) | dc |\n|---|---|---|---|\n");
  for (int c = 0; c < ncases; c++)
    if (lines[c][0]) printf("%s\n", lines[c]);
  printf("%s runs: %d failed\n", sanitize ? "sanitize" : "benchmark", failures);
  gpuml_shutdown(); /* the contexts' pools: a leak check sees only leaks */
  return failures ? 1 : 0;
}
