/* gpuml_tsne_fit(): argument checks, then PCA, kNN, the affinities P and the initial
 * embedding (shared by both backends), then the optimiser of the chosen backend
 * (core/tsne_cpu.c or kernels/tsne.cu). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stddef.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend.h"
#include "params.h"
#include "rng.h"
#include "shards.h"

/* Standard deviation of the PCA or random initial embedding (first component). */
#define GM_TSNE_INIT_SD 1e-4
/* Rows of P computed between interrupt checks. */
#define GM_TSNE_ROW_BLOCK 8192


void gpuml_tsne_params_init(gpuml_tsne_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->dims = 2;
  p->perplexity = 30;
  p->max_iter = 1000;
  p->pca = 1;
  p->initial_dims = 50;
  p->init = GPUML_TSNE_INIT_PCA;
  p->learning_rate = 0;
  p->exaggeration = 12;
  p->stop_lying_iter = 250;
  p->momentum = 0.5;
  p->final_momentum = 0.8;
  p->mom_switch_iter = 250;
  p->max_step_norm = 5;
  p->method = GPUML_TSNE_AUTO;
  p->df = 1;
}

/* The parameters by name (gpuml_params_set_*): the choices in the enums' order. */
static const char *const tsne_methods[] = {"auto", "exact", "fft", NULL};
static const char *const tsne_inits[] = {"pca", "random", NULL};
const gm_param_spec gm_tsne_param_specs[] = {
    {GM_PARAM(gpuml_tsne_params, dims, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_tsne_params, perplexity, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_params, max_iter, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_tsne_params, pca, GM_PARAM_BOOL)},
    {GM_PARAM(gpuml_tsne_params, initial_dims, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_tsne_params, init, GM_PARAM_CHOICE), .choices = tsne_inits},
    {GM_PARAM(gpuml_tsne_params, learning_rate, GM_PARAM_REAL), .auto_name = "auto",
     .auto_value = 0},
    {GM_PARAM(gpuml_tsne_params, exaggeration, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_params, stop_lying_iter, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_tsne_params, momentum, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_params, final_momentum, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_params, mom_switch_iter, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_tsne_params, max_step_norm, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_params, method, GM_PARAM_CHOICE), .choices = tsne_methods},
    {GM_PARAM(gpuml_tsne_params, df, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_params, perplexities, GM_PARAM_REAL_LIST),
     .count_offset = offsetof(gpuml_tsne_params, n_perplexities),
     .capacity = GPUML_TSNE_MAX_PERPLEXITIES},
    {.name = NULL}};

const char *gpuml_tsne_method_name(gpuml_tsne_method method) {
  switch (method) {
    case GPUML_TSNE_AUTO: return "auto";
    case GPUML_TSNE_EXACT: return "exact";
    case GPUML_TSNE_FFT: return "fft";
  }
  return "unknown";
}

gpuml_status gpuml_tsne_parse_method(const char *name, gpuml_tsne_method *out) {
  gm_clear_error();
  static const gpuml_tsne_method all[] = {GPUML_TSNE_AUTO, GPUML_TSNE_EXACT, GPUML_TSNE_FFT};
  for (int i = 0; name && i < 3; i++)
    if (gm_same_name(name, gpuml_tsne_method_name(all[i]))) {
      *out = all[i];
      return GPUML_OK;
    }
  return gm_fail(GPUML_ERR_ARG, "tsne:badMethod",
                 "method \"%s\" is not one of \"auto\", \"exact\", \"fft\"", name ? name : "");
}

gpuml_status gpuml_tsne_parse_init(const char *name, gpuml_tsne_init *out) {
  gm_clear_error();
  if (name && gm_same_name(name, "pca")) *out = GPUML_TSNE_INIT_PCA;
  else if (name && gm_same_name(name, "random")) *out = GPUML_TSNE_INIT_RANDOM;
  else
    return gm_fail(GPUML_ERR_ARG, "tsne:badInit",
                   "init \"%s\" is not one of \"pca\", \"random\" (or an n x dims matrix)",
                   name ? name : "");
  return GPUML_OK;
}

int64_t gpuml_tsne_cost_iteration(int64_t max_iter, int64_t i) {
  const int64_t at = (i + 1) * GM_TSNE_COST_EVERY;
  return at < max_iter ? at : max_iter;
}

int64_t gpuml_tsne_cost_count(int64_t max_iter) {
  return max_iter < 1 ? 0 : (max_iter + GM_TSNE_COST_EVERY - 1) / GM_TSNE_COST_EVERY;
}

void gm_csr_free(gm_csr *P) {
  free(P->row);
  free(P->col);
  free(P->val);
  P->row = P->col = NULL;
  P->val = NULL;
  if (P->resident && P->resident_free) P->resident_free(P->resident);
  P->resident = NULL;
  P->resident_free = NULL;
}

int gm_tsne_grid_boxes(double spread, int dims) {
  return gm_tsne_grid_boxes_within(spread, 1 << (dims == 1 ? 16 : (dims == 2 ? 11 : 7)));
}

int gm_tsne_grid_boxes_within(double spread, int max_size) {
  int boxes = 0;
  for (int size = 32; size <= max_size; size = gm_fft_good_size(size + 1)) {
    boxes = size / (2 * GM_TSNE_NODES);
    if ((double)boxes >= spread) break;
  }
  return boxes;
}

int gm_tsne_fft_size(int boxes) { return gm_fft_good_size(2 * boxes * GM_TSNE_NODES); }

/* ---- affinities ------------------------------------------------------------------ */

typedef struct {
  int64_t col;
  double val;
} gm_entry;

static int by_column(const void *a, const void *b) {
  const gm_entry *x = a, *y = b;
  return (x->col > y->col) - (x->col < y->col);
}

/* p (n x k, row-major, with columns c) -> P = (p + p^T) / (2n), CSR with sorted rows. */
static gpuml_status symmetrise(const int64_t *c, const double *p, int64_t n, int64_t k,
                               gm_csr *P, int threads) {
  const int64_t nk = n * k;
  int64_t *tptr = gm_alloc((size_t)n + 1, sizeof *tptr);
  int64_t *tcol = gm_alloc((size_t)nk, sizeof *tcol);
  double *tval = gm_alloc((size_t)nk, sizeof *tval);
  int64_t *fill = gm_alloc((size_t)n, sizeof *fill);
  P->row = gm_alloc((size_t)n + 1, sizeof *P->row);
  gpuml_status st = GPUML_OK;
  if (!tptr || !tcol || !tval || !fill || !P->row) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the affinities",
                 (double)nk * 32 / 1e6);
    goto done;
  }
  /* The transpose, filled in row order so that each of its rows is sorted. */
  memset(tptr, 0, sizeof *tptr * ((size_t)n + 1));
  for (int64_t e = 0; e < nk; e++) tptr[c[e] + 1]++;
  for (int64_t i = 0; i < n; i++) tptr[i + 1] += tptr[i];
  memcpy(fill, tptr, sizeof *fill * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < k; t++) {
      const int64_t j = c[i * k + t], at = fill[j]++;
      tcol[at] = i;
      tval[at] = p[i * k + t];
    }
  /* Row lengths of the union, then the merged rows. */
  P->row[0] = 0;
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= 1024)
  for (int64_t i = 0; i < n; i++) {
    int64_t a = 0, b = tptr[i], count = 0;
    const int64_t *ca = c + i * k;
    while (a < k || b < tptr[i + 1]) {
      if (b == tptr[i + 1] || (a < k && ca[a] < tcol[b])) a++;
      else if (a == k || tcol[b] < ca[a]) b++;
      else a++, b++;
      count++;
    }
    P->row[i + 1] = count;
  }
  for (int64_t i = 0; i < n; i++) P->row[i + 1] += P->row[i];
  P->n = n;
  P->nnz = P->row[n];
  P->col = gm_alloc((size_t)P->nnz, sizeof *P->col);
  P->val = gm_alloc((size_t)P->nnz, sizeof *P->val);
  if (!P->col || !P->val) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for P",
                 (double)P->nnz * 16 / 1e6);
    goto done;
  }
  const double scale = 1.0 / (2.0 * (double)n);
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= 1024)
  for (int64_t i = 0; i < n; i++) {
    int64_t a = 0, b = tptr[i], out = P->row[i];
    const int64_t *ca = c + i * k;
    const double *pa = p + i * k;
    while (a < k || b < tptr[i + 1]) {
      if (b == tptr[i + 1] || (a < k && ca[a] < tcol[b])) {
        P->col[out] = ca[a];
        P->val[out++] = pa[a++] * scale;
      } else if (a == k || tcol[b] < ca[a]) {
        P->col[out] = tcol[b];
        P->val[out++] = tval[b++] * scale;
      } else {
        P->col[out] = ca[a];
        P->val[out++] = (pa[a++] + tval[b++]) * scale;
      }
    }
  }
done:
  free(tptr);
  free(tcol);
  free(tval);
  free(fill);
  if (st) gm_csr_free(P);
  return st;
}

gpuml_status gm_tsne_affinities(const int64_t *idx, const double *dist, int64_t n, int64_t k,
                                double perplexity, gm_csr *P, double *entropy,
                                const gpuml_options *opt) {
  return gm_tsne_affinities_multiscale(idx, dist, n, k, &perplexity, 1, P, entropy, opt);
}

gpuml_status gm_tsne_affinities_multiscale(const int64_t *idx, const double *dist, int64_t n,
                                           int64_t k, const double *perplexities, int64_t scales,
                                           gm_csr *P, double *entropy,
                                           const gpuml_options *opt) {
  memset(P, 0, sizeof *P);
  const gpuml_status st = gm_backend_used(opt)->tsne->affinities(idx, dist, n, k, perplexities,
                                                                 scales, P, entropy, opt);
  if (!st) gm_progress(opt, "affinities", n, n);
  return st;
}

gpuml_status gm_tsne_affinities_host(const int64_t *idx, const double *dist, int64_t n, int64_t k,
                                     const double *perplexities, int64_t scales, gm_csr *P,
                                     double *entropy, const gpuml_options *opt) {
  memset(P, 0, sizeof *P);
  const int threads = gm_threads(opt);
  const size_t nk = (size_t)n * (size_t)k;
  gm_entry *rows = gm_alloc(nk, sizeof *rows);
  int64_t *c = gm_alloc(nk, sizeof *c);
  double *p = gm_alloc(nk, sizeof *p);
  double *pcol = gm_alloc(nk, sizeof *pcol);
  gpuml_status st = GPUML_OK;
  if (!rows || !c || !p || !pcol) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the affinities",
                 (double)nk * 40 / 1e6);
    goto done;
  }
  if ((st = gm_backend_used(opt)->tsne->conditional(dist, n, k, perplexities[0], pcol,
                                                     scales == 1 ? entropy : NULL, opt)))
    goto done;
  /* several perplexities: the mean of their conditional affinities (p is free here) */
  for (int64_t s = 1; s < scales; s++) {
    if ((st = gm_backend_used(opt)->tsne->conditional(dist, n, k, perplexities[s], p, NULL, opt)))
      goto done;
    for (size_t e = 0; e < nk; e++) pcol[e] += p[e];
  }
  if (scales > 1)
    for (size_t e = 0; e < nk; e++) pcol[e] /= (double)scales;
  for (int64_t r0 = 0; r0 < n; r0 += GM_TSNE_ROW_BLOCK) {
    const int64_t r1 = r0 + GM_TSNE_ROW_BLOCK < n ? r0 + GM_TSNE_ROW_BLOCK : n;
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= 1024)
    for (int64_t i = r0; i < r1; i++) {
      gm_entry *row = rows + (size_t)i * (size_t)k;
      for (int64_t t = 0; t < k; t++) row[t].val = pcol[i + t * n];
      for (int64_t t = 0; t < k; t++) row[t].col = idx[i + t * n];
      qsort(row, (size_t)k, sizeof *row, by_column);
      for (int64_t t = 0; t < k; t++) {
        c[(size_t)i * (size_t)k + t] = row[t].col;
        p[(size_t)i * (size_t)k + t] = row[t].val;
      }
    }
    if (gm_interrupted(opt)) {
      st = gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "t-SNE interrupted");
      goto done;
    }
  }
  free(rows);
  rows = NULL;
  st = symmetrise(c, p, n, k, P, threads);
done:
  free(rows);
  free(c);
  free(p);
  free(pcol);
  return st;
}

/* ---- PCA ------------------------------------------------------------------------- */

void gm_tsne_sign_fix(double *scores, int64_t n, int64_t ncomp) {
  for (int64_t c = 0; c < ncomp; c++) {
    double *s = scores + c * n, best = 0;
    for (int64_t i = 0; i < n; i++)
      if (fabs(s[i]) > fabs(best)) best = s[i];
    if (best < 0)
      for (int64_t i = 0; i < n; i++) s[i] = -s[i];
  }
}

static gpuml_status pca(const double *x, int64_t n, int64_t d, int64_t ncomp, double *scores,
                        const gpuml_options *opt) {
  return gm_backend_used(opt)->tsne->pca(x, n, d, ncomp, scores, opt);
}

/* ---- checks and the entry point ---------------------------------------------------- */

/* The perplexity that sets the neighbours: the largest of a multiscale list. */
static double neighbour_perplexity(const gpuml_tsne_params *p) {
  double v = p->perplexity;
  if (p->n_perplexities > 0 && p->n_perplexities <= GPUML_TSNE_MAX_PERPLEXITIES) {
    v = p->perplexities[0];
    for (int64_t s = 1; s < p->n_perplexities; s++) v = fmax(v, p->perplexities[s]);
  }
  return v;
}

static gpuml_status check_params(const gpuml_tsne_params *p, int64_t n) {
  if (!p) return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "params must not be NULL");
  if (p->n_perplexities < 0 || p->n_perplexities > GPUML_TSNE_MAX_PERPLEXITIES)
    return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity",
                   "%lld perplexities: a multiscale P takes 1 .. %d", (long long)p->n_perplexities,
                   GPUML_TSNE_MAX_PERPLEXITIES);
  for (int64_t s = 0; s < p->n_perplexities; s++)
    if (!(p->perplexities[s] > 0) || !isfinite(p->perplexities[s]))
      return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity", "perplexity %g must be positive",
                     p->perplexities[s]);
  if (p->n_perplexities > 0 && 3 * neighbour_perplexity(p) > (double)(n - 1))
    return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity",
                   "the largest perplexity, %g, is too large for %lld points: 3 * perplexity must be at most n - 1 = %lld (use perplexity <= %g)",
                   neighbour_perplexity(p), (long long)n, (long long)(n - 1),
                   floor((double)(n - 1) / 3));
  if (p->dims < 1 || p->dims > 3)
    return gm_fail(GPUML_ERR_ARG, "tsne:badDims", "dims = %lld must be 1, 2 or 3",
                   (long long)p->dims);
  if (p->n_perplexities == 0 && (!(p->perplexity > 0) || !isfinite(p->perplexity)))
    return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity", "perplexity = %g must be positive",
                   p->perplexity);
  if (p->n_perplexities == 0 && 3 * p->perplexity > (double)(n - 1)) {
    return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity",
                   "perplexity = %g is too large for %lld points: 3 * perplexity must be at most n - 1 = %lld (use perplexity <= %g)",
                   p->perplexity, (long long)n, (long long)(n - 1), floor((double)(n - 1) / 3));
  }
  if (p->max_iter < 1 || p->max_iter > INT32_MAX)
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "max_iter = %lld must lie in 1 .. 2^31 - 1", (long long)p->max_iter);
  if (p->initial_dims < 1)
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "initial_dims = %lld must be at least 1",
                   (long long)p->initial_dims);
  if (!(p->learning_rate >= 0) || !isfinite(p->learning_rate))
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "learning_rate = %g must be positive (or 0 for \"auto\")", p->learning_rate);
  if (!(p->exaggeration > 0) || !isfinite(p->exaggeration))
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "exaggeration = %g must be positive",
                   p->exaggeration);
  if (p->stop_lying_iter < 0 || p->mom_switch_iter < 0 || p->stop_lying_iter > INT32_MAX ||
      p->mom_switch_iter > INT32_MAX)
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "stop_lying_iter and mom_switch_iter must lie in 0 .. 2^31 - 1");
  if (!(p->momentum >= 0 && p->momentum < 1) || !(p->final_momentum >= 0 && p->final_momentum < 1))
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "momentum = %g and final_momentum = %g must lie in [0, 1)", p->momentum,
                   p->final_momentum);
  if (!(p->max_step_norm >= 0) || isnan(p->max_step_norm))
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "max_step_norm = %g must be positive (or 0 for no limit)", p->max_step_norm);
  if (!(p->df > 0) || !isfinite(p->df))
    return gm_fail(GPUML_ERR_ARG, "tsne:badDf",
                   "df = %g must be a positive, finite number of degrees of freedom (1 is the usual t-SNE kernel, smaller values give heavier tails)",
                   p->df);
  if (p->method != GPUML_TSNE_AUTO && p->method != GPUML_TSNE_EXACT && p->method != GPUML_TSNE_FFT)
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "unknown method code %d", (int)p->method);
  if (p->init != GPUML_TSNE_INIT_PCA && p->init != GPUML_TSNE_INIT_RANDOM &&
      p->init != GPUML_TSNE_INIT_USER)
    return gm_fail(GPUML_ERR_ARG, "tsne:badInit", "unknown init code %d", (int)p->init);
  if (p->init == GPUML_TSNE_INIT_USER) {
    if (!p->init_y)
      return gm_fail(GPUML_ERR_ARG, "tsne:badInit", "init = user needs an n x dims matrix init_y");
    for (int64_t e = 0; e < n * p->dims; e++)
      if (!isfinite(p->init_y[e]))
        return gm_fail(GPUML_ERR_ARG, "tsne:badInit",
                       "the initial embedding contains a non-finite value at row %lld, column %lld",
                       (long long)(e % n + 1), (long long)(e / n + 1));
  }
  return GPUML_OK;
}

/* sd of a column, summed in order. */
static double column_sd(const double *v, int64_t n) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s += v[i];
  const double mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) s2 += (v[i] - mean) * (v[i] - mean);
  return sqrt(s2 / (double)(n > 1 ? n - 1 : 1));
}

/* y from the principal components pcs (n x have): scaled so that the first has sd
 * 1e-4; columns beyond `have` (data with fewer variables than dims), or all of them
 * when the data has no spread, are drawn at random. */
static void initial_embedding(const gpuml_tsne_params *p, int64_t n, const double *pcs,
                              int64_t have, double *y, uint64_t seed) {
  const int dims = p->dims;
  gm_rng rng;
  gm_rng_seed(&rng, seed);
  int64_t from_pca = 0;
  if (p->init == GPUML_TSNE_INIT_USER) {
    memcpy(y, p->init_y, sizeof *y * (size_t)n * (size_t)dims);
    return;
  }
  if (p->init == GPUML_TSNE_INIT_PCA && pcs && have > 0) {
    const double sd = column_sd(pcs, n);
    if (sd > 0) {
      from_pca = have < dims ? have : dims;
      const double scale = GM_TSNE_INIT_SD / sd;
      for (int64_t e = 0; e < n * from_pca; e++) y[e] = pcs[e] * scale;
    }
  }
  for (int64_t e = n * from_pca; e < n * dims; e++) y[e] = GM_TSNE_INIT_SD * gm_rng_normal(&rng);
}

/* The resolved settings of a fit of n points on backend b. */
static void make_run(const gpuml_tsne_params *params, int64_t n, const gm_backend *b,
                     gm_tsne_run *run) {
  run->n = n;
  run->dims = (int)params->dims;
  run->max_iter = (int)params->max_iter;
  run->method = params->method;
  if (run->method == GPUML_TSNE_AUTO)
    run->method = n <= b->tsne->exact_max_n(run->dims, params->df) ? GPUML_TSNE_EXACT
                                                                   : GPUML_TSNE_FFT;
  run->learning_rate = params->learning_rate > 0 ? params->learning_rate
                                                 : fmax(200.0, (double)n / 12.0);
  run->exaggeration = params->exaggeration;
  run->momentum = params->momentum;
  run->final_momentum = params->final_momentum;
  run->max_step_norm = params->max_step_norm;
  run->stop_lying_iter = (int)params->stop_lying_iter;
  run->mom_switch_iter = (int)params->mom_switch_iter;
  run->df = params->df;
}

/* The perplexities of a fit: its list (multiscale), else the one perplexity. */
static int64_t fit_scales(const gpuml_tsne_params *params, const double **perplexities) {
  *perplexities = params->n_perplexities > 0 ? params->perplexities : &params->perplexity;
  return params->n_perplexities > 0 ? params->n_perplexities : 1;
}

/* The steps after P, shared by every input: the start (from the principal components
 * pcs, n x have, when there are any), the optimiser. */
static gpuml_status fit_from_affinities(const gm_csr *P, int64_t n,
                                        const gpuml_tsne_params *params, const double *pcs,
                                        int64_t have, double *y, double *itercosts,
                                        const gpuml_options *used, const gm_backend *b,
                                        double t_start, gpuml_tsne_result *result) {
  result->nnz = P->nnz;
  gm_tsne_run run;
  make_run(params, n, b, &run);
  double *y0 = gm_alloc((size_t)n * (size_t)params->dims, sizeof *y0);
  if (!y0) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the embedding");
  initial_embedding(params, n, pcs, have, y0, used->seed);
  const double t_opt = gm_seconds();
  result->seconds_affinities = t_opt - t_start;
  const gpuml_status st = b->tsne->optimize(P, &run, y0, itercosts, result, used);
  result->seconds_optimisation = gm_seconds() - t_opt;
  gm_run_info_fill(&result->run, used, GM_F64, t_start);
  if (!st) memcpy(y, y0, sizeof *y * (size_t)n * (size_t)params->dims);
  free(y0);
  return st;
}

/* The steps after the neighbours (idx, dist: n x k): P, then fit_from_affinities. */
static gpuml_status fit_from_neighbours(const int64_t *idx, const double *dist, int64_t n,
                                       int64_t k, const gpuml_tsne_params *params,
                                       const double *pcs, int64_t have, double *y,
                                       double *itercosts, const gpuml_options *used,
                                       const gm_backend *b, double t_start,
                                       gpuml_tsne_result *result) {
  gm_csr P = {0};
  const double *perplexities;
  const int64_t scales = fit_scales(params, &perplexities);
  gpuml_status st = gm_tsne_affinities_multiscale(idx, dist, n, k, perplexities, scales, &P,
                                                  NULL, used);
  if (!st)
    st = fit_from_affinities(&P, n, params, pcs, have, y, itercosts, used, b, t_start, result);
  gm_csr_free(&P);
  return st;
}

gpuml_status gm_tsne_fit_affinities(const double *x, int64_t n, int64_t d, int64_t k,
                                    const double *perplexities, int64_t scales, gm_csr *P,
                                    const gpuml_options *opt) {
  memset(P, 0, sizeof *P);
  const gm_backend *b = gm_backend_used(opt);
  gpuml_status st = GPUML_OK;
  /* The backend's own path (the plain Euclidean distance) keeps the lists and P on the
   * device: the search split by query blocks over the devices, its lists gathered on the
   * first by peer copies, P built there. (A search split by references, merged through
   * the host with P built there, cost more than the split saved: 10^6 x 50 on 4 H200s,
   * 10.2 s to P against 4.3 s on one.) The optimiser splits P's rows. */
  if (b->tsne->fit_affinities && opt->metric == GPUML_METRIC_EUCLIDEAN) {
    st = b->tsne->fit_affinities(x, n, d, k, perplexities, scales, P, opt);
    if (!st) gm_progress(opt, "affinities", n, n);
    return st;
  }
  int64_t *idx = gm_alloc((size_t)n * (size_t)k, sizeof *idx);
  double *dist = gm_alloc((size_t)n * (size_t)k, sizeof *dist);
  if (!idx || !dist)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the neighbours",
                 (double)n * k * 16 / 1e6);
  if (!st) st = gpuml_knn_search(x, n, d, NULL, 0, k, idx, dist, opt, NULL);
  if (!st) st = gm_tsne_affinities_multiscale(idx, dist, n, k, perplexities, scales, P, NULL, opt);
  free(idx);
  free(dist);
  return st;
}

/* The checks and settings every fit shares; *k_out the neighbours P is built from. */
static gpuml_status fit_setup(int64_t n, const gpuml_tsne_params *params, const double *y,
                              const gpuml_options *opt, double work, gpuml_options *used,
                              const gm_backend **b, gpuml_tsne_result **result,
                              gpuml_tsne_result *local) {
  gpuml_status st;
  if ((st = gm_check_options(opt))) return st;
  if (n < 4)
    return gm_fail(GPUML_ERR_ARG, "tsne:tooFewPoints",
                   "t-SNE needs at least 4 points; the data has %lld", (long long)n);
  if ((st = check_params(params, n))) return st;
  if (!y) return gm_fail(GPUML_ERR_ARG, "tsne:badOutput", "the output y must not be NULL");
  if (n > INT32_MAX)
    return gm_fail(GPUML_ERR_ARG, "tsne:tooLarge", "%lld points is more than supported",
                   (long long)n);
  if ((st = gm_backend_resolve(opt, GM_ALGO_TSNE, work, "tsne", used, b))) return st;
  if (!*result) *result = local;
  memset(*result, 0, sizeof **result);
  gm_tsne_run run;
  make_run(params, n, *b, &run);
  (*result)->method_used = run.method;
  (*result)->learning_rate_used = run.learning_rate;
  return GPUML_OK;
}

gpuml_status gpuml_tsne_fit(const double *x, int64_t n, int64_t d,
                           const gpuml_tsne_params *params, double *y, double *itercosts,
                           const gpuml_options *opt, gpuml_tsne_result *result) {
  gm_clear_error();
  gpuml_status st = gm_check_matrix(x, n, d, "data", "tsne");
  if (st) return st;
  const double t_start = gm_seconds();
  gpuml_options used;
  const gm_backend *b;
  gpuml_tsne_result local;
  const double work = params ? (double)n * (double)n * ((double)d + params->max_iter) : 0;
  if ((st = fit_setup(n, params, y, opt, work, &used, &b, &result, &local))) return st;
  const int64_t reduce_to = params->pca && d > params->initial_dims ? params->initial_dims : 0;
  const int64_t d_used = reduce_to ? reduce_to : d;
  int64_t k = (int64_t)floor(3 * neighbour_perplexity(params));
  if (k < 1) k = 1;
  if (k > n - 1) k = n - 1;
  result->neighbours = k;

  double *reduced = NULL, *init_pcs = NULL;
  gm_csr P = {0};
  const double *data = x;
  int64_t init_have = 0;
  const int want_pca_init = params->init == GPUML_TSNE_INIT_PCA;
  if (reduce_to) {
    reduced = gm_alloc((size_t)n * (size_t)reduce_to, sizeof *reduced);
    if (!reduced) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the PCA scores",
                   (double)n * reduce_to * 8 / 1e6);
      goto done;
    }
    const int64_t ncomp = reduce_to < n ? reduce_to : n;
    if (ncomp < reduce_to) memset(reduced, 0, sizeof *reduced * (size_t)n * (size_t)reduce_to);
    if ((st = pca(x, n, d, ncomp, reduced, &used))) goto done;
    data = reduced;
    init_have = ncomp < params->dims ? ncomp : params->dims;
  } else if (want_pca_init) {
    int64_t ncomp = params->dims;
    if (ncomp > d) ncomp = d;
    if (ncomp > n) ncomp = n;
    init_pcs = gm_alloc((size_t)n * (size_t)ncomp, sizeof *init_pcs);
    if (!init_pcs) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the initial embedding");
      goto done;
    }
    if ((st = pca(x, n, d, ncomp, init_pcs, &used))) goto done;
    init_have = ncomp;
  }

  const double *perplexities;
  const int64_t scales = fit_scales(params, &perplexities);
  if ((st = gm_tsne_fit_affinities(data, n, d_used, k, perplexities, scales, &P, &used)))
    goto done;
  st = fit_from_affinities(&P, n, params, reduce_to ? reduced : init_pcs, init_have, y,
                           itercosts, &used, b, t_start, result);
done:
  free(reduced);
  free(init_pcs);
  gm_csr_free(&P);
  return st;
}

/* The neighbour lists of a fit without coordinates: checked, then sorted by distance
 * (ties by index) into idx/dist, as gpuml_knn_search() gives them. */
static gpuml_status check_neighbours(const int64_t *nn_index, const double *nn_dist, int64_t n,
                                     int64_t k, const gpuml_tsne_params *params) {
  if (!nn_index || !nn_dist)
    return gm_fail(GPUML_ERR_ARG, "tsne:badNeighbours", "nn_index and nn_dist must both be given");
  if (k < 1 || k > n - 1)
    return gm_fail(GPUML_ERR_ARG, "tsne:badNeighbours",
                   "%lld neighbours per point: there must be 1 .. n - 1 = %lld", (long long)k,
                   (long long)(n - 1));
  const double perplexity = params ? neighbour_perplexity(params) : 0;
  if (perplexity > 0 && (int64_t)floor(3 * perplexity) > k)
    return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity",
                   "perplexity = %g needs 3 * perplexity = %lld neighbours per point but %lld are given (use perplexity <= %g)",
                   perplexity, (long long)floor(3 * perplexity), (long long)k,
                   floor((double)k / 3));
  for (int64_t e = 0; e < n * k; e++) {
    const int64_t i = e % n, j = nn_index[e];
    if (j < 0 || j >= n)
      return gm_fail(GPUML_ERR_ARG, "tsne:badNeighbours",
                     "neighbour %lld of point %lld is %lld: indices must lie in 0 .. n - 1 (1 .. n in R and Octave)",
                     (long long)(e / n + 1), (long long)(i + 1), (long long)j);
    if (j == i)
      return gm_fail(GPUML_ERR_ARG, "tsne:badNeighbours",
                     "point %lld is listed as its own neighbour: leave each point out of its list",
                     (long long)(i + 1));
    if (!isfinite(nn_dist[e]) || nn_dist[e] < 0)
      return gm_fail(GPUML_ERR_ARG, "tsne:badNeighbours",
                     "the distance to neighbour %lld of point %lld is %g: distances must be finite and non-negative",
                     (long long)(e / n + 1), (long long)(i + 1), nn_dist[e]);
  }
  return GPUML_OK;
}

static int by_distance_then_index(const void *a, const void *b) {
  const gm_entry *x = a, *y = b;
  if (x->val != y->val) return x->val < y->val ? -1 : 1;
  return (x->col > y->col) - (x->col < y->col);
}

gpuml_status gpuml_tsne_fit_neighbours(const int64_t *nn_index, const double *nn_dist, int64_t n,
                                       int64_t k, const gpuml_tsne_params *params, double *y,
                                       double *itercosts, const gpuml_options *opt,
                                       gpuml_tsne_result *result) {
  gm_clear_error();
  const double t_start = gm_seconds();
  gpuml_options used;
  const gm_backend *b;
  gpuml_tsne_result local;
  gpuml_status st;
  if (n < 4)
    return gm_fail(GPUML_ERR_ARG, "tsne:tooFewPoints",
                   "t-SNE needs at least 4 points; the data has %lld", (long long)n);
  if ((st = check_neighbours(nn_index, nn_dist, n, k, params))) return st;
  const double work = params ? (double)n * (double)n * params->max_iter : 0;
  if ((st = fit_setup(n, params, y, opt, work, &used, &b, &result, &local))) return st;
  result->neighbours = k;
  int64_t *idx = gm_alloc((size_t)n * (size_t)k, sizeof *idx);
  double *dist = gm_alloc((size_t)n * (size_t)k, sizeof *dist);
  gm_entry *row = gm_alloc((size_t)k, sizeof *row);
  if (!idx || !dist || !row) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the neighbours",
                 (double)n * k * 16 / 1e6);
    goto done;
  }
  for (int64_t i = 0; i < n && !st; i++) {
    for (int64_t t = 0; t < k; t++) {
      row[t].col = nn_index[i + t * n];
      row[t].val = nn_dist[i + t * n];
    }
    qsort(row, (size_t)k, sizeof *row, by_distance_then_index);
    for (int64_t t = 0; t < k; t++) {
      idx[i + t * n] = row[t].col;
      dist[i + t * n] = row[t].val;
    }
    for (int64_t t = 1; t < k; t++)
      for (int64_t u = 0; u < t; u++)
        if (idx[i + t * n] == idx[i + u * n]) {
          st = gm_fail(GPUML_ERR_ARG, "tsne:badNeighbours",
                       "point %lld lists neighbour %lld twice", (long long)(i + 1),
                       (long long)(idx[i + t * n] + 1));
          break;
        }
  }
  if (!st)
    st = fit_from_neighbours(idx, dist, n, k, params, NULL, 0, y, itercosts, &used, b, t_start,
                             result);
done:
  free(idx);
  free(dist);
  free(row);
  return st;
}

gpuml_status gpuml_tsne_fit_distance(const double *dist, int64_t n, int64_t n_cols,
                                     const gpuml_tsne_params *params, double *y,
                                     double *itercosts, const gpuml_options *opt,
                                     gpuml_tsne_result *result) {
  gm_clear_error();
  if (n != n_cols)
    return gm_fail(GPUML_ERR_ARG, "tsne:badDistance",
                   "the distance matrix is %lld x %lld: it must be square (one row and one column per point)",
                   (long long)n, (long long)n_cols);
  if (!dist) return gm_fail(GPUML_ERR_ARG, "tsne:badDistance", "the distance matrix must not be NULL");
  for (int64_t e = 0; e < n * n; e++)
    if (!isfinite(dist[e]) || dist[e] < 0)
      return gm_fail(GPUML_ERR_ARG, "tsne:badDistance",
                     "the distance at row %lld, column %lld is %g: distances must be finite and non-negative",
                     (long long)(e % n + 1), (long long)(e / n + 1), dist[e]);
  if (n < 4)
    return gm_fail(GPUML_ERR_ARG, "tsne:tooFewPoints",
                   "t-SNE needs at least 4 points; the data has %lld", (long long)n);
  if (!params) return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "params must not be NULL");
  gpuml_status st = check_params(params, n);
  if (st) return st;
  /* each row's k = 3 * perplexity smallest off-diagonal entries, ties by index */
  int64_t k = (int64_t)floor(3 * neighbour_perplexity(params));
  if (k < 1) k = 1;
  if (k > n - 1) k = n - 1;
  int64_t *idx = gm_alloc((size_t)n * (size_t)k, sizeof *idx);
  double *nd = gm_alloc((size_t)n * (size_t)k, sizeof *nd);
  gm_entry *row = gm_alloc((size_t)n, sizeof *row);
  if (!idx || !nd || !row) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the neighbours",
                 ((double)n * k * 16 + (double)n * 16) / 1e6);
    goto done;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t c = 0;
    for (int64_t j = 0; j < n; j++)
      if (j != i) {
        row[c].col = j;
        row[c++].val = dist[i + j * n];
      }
    qsort(row, (size_t)c, sizeof *row, by_distance_then_index);
    for (int64_t t = 0; t < k; t++) {
      idx[i + t * n] = row[t].col;
      nd[i + t * n] = row[t].val;
    }
  }
  st = gpuml_tsne_fit_neighbours(idx, nd, n, k, params, y, itercosts, opt, result);
done:
  free(idx);
  free(nd);
  free(row);
  return st;
}

/* ---- placing new points (gpuml_tsne_transform) ------------------------------------- */

/* method = auto in a transform: exact while a pass over all (new, training) pairs costs
 * no more than this many pairs. */
#define GM_TSNE_PLACE_EXACT_MAX_PAIRS 2.5e7

void gpuml_tsne_transform_params_init(gpuml_tsne_transform_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->perplexity = 5;
  p->max_iter = 250;
  p->learning_rate = 0;
  p->momentum = 0.8;
  p->max_step_norm = 5;
  p->df = 1;
  p->method = GPUML_TSNE_AUTO;
  p->init = GPUML_TSNE_PLACE_MEDIAN;
}

static const char *const tsne_place_inits[] = {"median", "weighted", NULL};
const gm_param_spec gm_tsne_transform_param_specs[] = {
    {GM_PARAM(gpuml_tsne_transform_params, perplexity, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_transform_params, max_iter, GM_PARAM_INT64)},
    {GM_PARAM(gpuml_tsne_transform_params, learning_rate, GM_PARAM_REAL), .auto_name = "auto",
     .auto_value = 0},
    {GM_PARAM(gpuml_tsne_transform_params, momentum, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_transform_params, max_step_norm, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_transform_params, df, GM_PARAM_REAL)},
    {GM_PARAM(gpuml_tsne_transform_params, method, GM_PARAM_CHOICE), .choices = tsne_methods},
    {GM_PARAM(gpuml_tsne_transform_params, init, GM_PARAM_CHOICE), .choices = tsne_place_inits},
    {.name = NULL}};

static gpuml_status check_transform_params(const gpuml_tsne_transform_params *p, int64_t n) {
  if (!p) return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "params must not be NULL");
  if (!(p->perplexity > 0) || !isfinite(p->perplexity))
    return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity", "perplexity = %g must be positive",
                   p->perplexity);
  if (3 * p->perplexity > (double)n)
    return gm_fail(GPUML_ERR_ARG, "tsne:badPerplexity",
                   "perplexity = %g is too large for %lld training points: 3 * perplexity must be at most n = %lld (use perplexity <= %g)",
                   p->perplexity, (long long)n, (long long)n, floor((double)n / 3));
  if (p->max_iter < 0 || p->max_iter > INT32_MAX)
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "max_iter = %lld must lie in 0 .. 2^31 - 1", (long long)p->max_iter);
  if (!(p->learning_rate >= 0) || !isfinite(p->learning_rate))
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "learning_rate = %g must be positive (or 0 for \"auto\")", p->learning_rate);
  if (!(p->momentum >= 0 && p->momentum < 1))
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "momentum = %g must lie in [0, 1)",
                   p->momentum);
  if (!(p->max_step_norm >= 0) || isnan(p->max_step_norm))
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter",
                   "max_step_norm = %g must be positive (or 0 for no limit)", p->max_step_norm);
  if (!(p->df > 0) || !isfinite(p->df))
    return gm_fail(GPUML_ERR_ARG, "tsne:badDf",
                   "df = %g must be a positive, finite number of degrees of freedom (the fit's)",
                   p->df);
  if (p->method != GPUML_TSNE_AUTO && p->method != GPUML_TSNE_EXACT && p->method != GPUML_TSNE_FFT)
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "unknown method code %d", (int)p->method);
  if (p->init != GPUML_TSNE_PLACE_MEDIAN && p->init != GPUML_TSNE_PLACE_WEIGHTED)
    return gm_fail(GPUML_ERR_ARG, "tsne:badParameter", "unknown init code %d", (int)p->init);
  return GPUML_OK;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Each new point's start from its neighbours' places (idx, p: m x k column-major). */
static void place_starts(const double *y, int64_t n, int dims, const int64_t *idx,
                         const double *p, int64_t m, int64_t k, gpuml_tsne_place_init init,
                         double *start, int64_t stride, double *scratch) {
  for (int64_t i = 0; i < m; i++)
    for (int d = 0; d < dims; d++) {
      double v = 0;
      if (init == GPUML_TSNE_PLACE_WEIGHTED) {
        for (int64_t t = 0; t < k; t++) v += p[i + t * m] * y[idx[i + t * m] + d * n];
      } else {
        for (int64_t t = 0; t < k; t++) scratch[t] = y[idx[i + t * m] + d * n];
        qsort(scratch, (size_t)k, sizeof *scratch, by_value);
        v = k % 2 ? scratch[k / 2] : 0.5 * (scratch[k / 2 - 1] + scratch[k / 2]);
      }
      start[i + d * stride] = v;
    }
}

gpuml_status gpuml_tsne_transform(const double *x, int64_t n, int64_t d, const double *y,
                                  int64_t dims, const double *x_new, int64_t m, int64_t d_new,
                                  const gpuml_tsne_transform_params *params, double *y_new,
                                  const gpuml_options *opt, gpuml_tsne_result *result) {
  gm_clear_error();
  if (!x || n < 1)
    return gm_fail(GPUML_ERR_ARG, "tsne:noTrainingData",
                   "the fit kept no training data: fit again keeping the data to place new points");
  gpuml_status st = gm_check_matrix(x, n, d, "training data", "tsne");
  if (st) return st;
  if (dims < 1 || dims > 3)
    return gm_fail(GPUML_ERR_ARG, "tsne:badDims", "dims = %lld must be 1, 2 or 3", (long long)dims);
  if (!y)
    return gm_fail(GPUML_ERR_ARG, "tsne:badEmbedding", "the fitted embedding y must not be NULL");
  for (int64_t e = 0; e < n * dims; e++)
    if (!isfinite(y[e]))
      return gm_fail(GPUML_ERR_ARG, "tsne:badEmbedding",
                     "the fitted embedding contains a non-finite value at row %lld, column %lld",
                     (long long)(e % n + 1), (long long)(e / n + 1));
  if (d_new != d)
    return gm_fail(GPUML_ERR_ARG, "tsne:badColumns",
                   "the new data have %lld columns but the training data %lld", (long long)d_new,
                   (long long)d);
  if ((st = gm_check_matrix(x_new, m, d, "new data", "tsne"))) return st;
  if ((st = gm_check_options(opt))) return st;
  if ((st = check_transform_params(params, n))) return st;
  if (!y_new) return gm_fail(GPUML_ERR_ARG, "tsne:badOutput", "the output y_new must not be NULL");
  if (n + m > INT32_MAX)
    return gm_fail(GPUML_ERR_ARG, "tsne:tooLarge", "%lld points is more than supported",
                   (long long)(n + m));

  const double t_start = gm_seconds();
  int64_t k = (int64_t)floor(3 * params->perplexity);
  if (k < 1) k = 1;
  if (k > n) k = n;
  const double work = (double)m * (double)n * ((double)d + params->max_iter);
  gpuml_options used;
  const gm_backend *b;
  if ((st = gm_backend_resolve(opt, GM_ALGO_TSNE, work, "tsne", &used, &b))) return st;
  gm_tsne_place_run run;
  run.n_fixed = n;
  run.n = n + m;
  run.dims = (int)dims;
  run.max_iter = (int)params->max_iter;
  run.method = params->method;
  if (run.method == GPUML_TSNE_AUTO)
    run.method = (double)m * (double)n <= GM_TSNE_PLACE_EXACT_MAX_PAIRS ? GPUML_TSNE_EXACT
                                                                       : GPUML_TSNE_FFT;
  /* A point's gradient sums its own affinities (1), not the 1/n of a fit's: a step of
   * the order of the gradient itself, with gains, settles in tens of iterations. */
  run.learning_rate = params->learning_rate > 0 ? params->learning_rate : 1.0;
  run.momentum = params->momentum;
  run.max_step_norm = params->max_step_norm;
  run.df = params->df;

  gpuml_tsne_result local;
  if (!result) result = &local;
  memset(result, 0, sizeof *result);
  result->method_used = run.method;
  result->learning_rate_used = run.learning_rate;
  result->neighbours = k;

  const size_t mk = (size_t)m * (size_t)k;
  int64_t *idx = gm_alloc(mk, sizeof *idx);
  double *dist = gm_alloc(mk, sizeof *dist), *p = gm_alloc(mk, sizeof *p);
  double *joint = gm_alloc((size_t)(n + m) * (size_t)dims, sizeof *joint);
  double *scratch = gm_alloc((size_t)k, sizeof *scratch);
  gm_entry *row = gm_alloc((size_t)k, sizeof *row);
  gm_csr P = {0};
  P.n = n + m;
  P.nnz = (int64_t)mk;
  P.row = gm_alloc((size_t)(n + m) + 1, sizeof *P.row);
  P.col = gm_alloc(mk, sizeof *P.col);
  P.val = gm_alloc(mk, sizeof *P.val);
  if (!idx || !dist || !p || !joint || !scratch || !row || !P.row || !P.col || !P.val) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB to place the new points",
                 ((double)mk * 40 + (double)(n + m) * (dims + 1) * 8) / 1e6);
    goto done;
  }
  if ((st = gpuml_knn_search(x, n, d, x_new, m, k, idx, dist, &used, NULL))) goto done;
  if ((st = b->tsne->conditional(dist, m, k, params->perplexity, p, NULL, &used))) goto done;
  /* The joint embedding: the training points, then the new ones at their starts. */
  for (int d2 = 0; d2 < dims; d2++)
    memcpy(joint + (size_t)d2 * (size_t)(n + m), y + (size_t)d2 * (size_t)n, sizeof *y * (size_t)n);
  place_starts(y, n, (int)dims, idx, p, m, k, params->init, joint + n, n + m, scratch);
  /* P: no rows for the training points; row n + i holds p_{j|i}, by column. */
  for (int64_t i = 0; i <= n; i++) P.row[i] = 0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t t = 0; t < k; t++) {
      row[t].col = idx[i + t * m];
      row[t].val = p[i + t * m];
    }
    qsort(row, (size_t)k, sizeof *row, by_column);
    for (int64_t t = 0; t < k; t++) {
      P.col[i * k + t] = row[t].col;
      P.val[i * k + t] = row[t].val;
    }
    P.row[n + i + 1] = (i + 1) * k;
  }
  result->nnz = P.nnz;
  const double t_opt = gm_seconds();
  result->seconds_affinities = t_opt - t_start;
  if (run.max_iter > 0 && (st = b->tsne->place(&P, &run, joint, &used))) goto done;
  for (int64_t e = 0; e < m * dims; e++)
    if (!isfinite(joint[(e / m) * (n + m) + n + e % m])) {
      st = gm_fail(GPUML_ERR_NUMERIC, "tsne:numeric",
                   "new point %lld left the embedding (a normaliser Z_i of 0): try a smaller learning_rate",
                   (long long)(e % m + 1));
      goto done;
    }
  result->seconds_optimisation = gm_seconds() - t_opt;
  result->iterations_done = run.max_iter;
  gm_run_info_fill(&result->run, &used, GM_F64, t_start);
  for (int d2 = 0; d2 < dims; d2++)
    memcpy(y_new + (size_t)d2 * (size_t)m, joint + (size_t)d2 * (size_t)(n + m) + n,
           sizeof *y_new * (size_t)m);
done:
  free(idx);
  free(dist);
  free(p);
  free(joint);
  free(scratch);
  free(row);
  gm_csr_free(&P);
  return st;
}
