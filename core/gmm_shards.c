/* The mixtures' EM over shards of the rows (several devices, or GPUML_SHARDS): an engine
 * (gmm.h) made of one backend engine per shard, each on its shard's rows and device, so
 * that the EM driver runs unchanged on top of it.
 *
 *  - Every shard holds the same parameters (set on all of them).
 *  - E-step: each shard on its rows; the log-likelihood is the sum of the shards' sums,
 *    in shard order.
 *  - M-step: each shard's engine computes its own sizes nk_s, means mu_s and scatter
 *    about mu_s over nk_s (cov_s); they are combined in shard order into the whole
 *    data's statistics (gm_gmm_combine) and the result set on every shard.
 * Every value is the single engine's up to the order of the sums (the shards' partial
 * sums, then the shift of each shard's scatter to the common mean), so a fit agrees with
 * the one-engine fit to rounding (about 1e-15 relative per iteration). */
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "gmm.h"
#include "shards.h"

int gm_gmm_held_alloc(gm_gmm_held *h, int64_t d, int64_t kmax) {
  h->d = d;
  h->w = gm_alloc((size_t)kmax, sizeof(double));
  h->mu = gm_alloc((size_t)(d * kmax), sizeof(double));
  h->cov = gm_alloc((size_t)(d * d * kmax), sizeof(double));
  return h->w && h->mu && h->cov;
}

void gm_gmm_held_free(gm_gmm_held *h) {
  free(h->w);
  free(h->mu);
  free(h->cov);
  h->w = h->mu = h->cov = NULL;
}

void gm_gmm_held_set(gm_gmm_held *h, int64_t K, const double *w, const double *mu,
                     const double *cov) {
  const size_t d = (size_t)h->d;
  if (w != h->w) memcpy(h->w, w, (size_t)K * sizeof(double));
  if (mu != h->mu) memcpy(h->mu, mu, d * (size_t)K * sizeof(double));
  if (cov != h->cov) memcpy(h->cov, cov, d * d * (size_t)K * sizeof(double));
}

void gm_gmm_held_set_component(gm_gmm_held *h, int64_t K, const double *w, int64_t k,
                               const double *mu, const double *cov) {
  const size_t d = (size_t)h->d;
  memcpy(h->w, w, (size_t)K * sizeof(double));
  memcpy(h->mu + (size_t)k * d, mu, d * sizeof(double));
  memcpy(h->cov + (size_t)k * d * d, cov, d * d * sizeof(double));
}

void gm_gmm_held_get(const gm_gmm_held *h, int64_t K, double *w, double *mu, double *cov) {
  const size_t d = (size_t)h->d;
  if (w) memcpy(w, h->w, (size_t)K * sizeof(double));
  if (mu) memcpy(mu, h->mu, d * (size_t)K * sizeof(double));
  if (cov) memcpy(cov, h->cov, d * d * (size_t)K * sizeof(double));
}

void gm_gmm_combine(int64_t parts, int64_t K, int64_t d, int full, int64_t n,
                    const double *nk_s, const double *mu_s, const double *cov_s, double *nk,
                    gm_gmm_held *held) {
  const int64_t dd = d * d;
  for (int64_t k = 0; k < K; k++) {
    double total = 0;
    for (int64_t s = 0; s < parts; s++) total += nk_s[s * K + k];
    nk[k] = total;
    if (!(total > 0)) continue; /* no row: the component keeps its parameters */
    double *m = held->mu + k * d, *S = held->cov + k * dd;
    held->w[k] = total / (double)n;
    for (int64_t j = 0; j < d; j++) {
      double v = 0;
      for (int64_t s = 0; s < parts; s++)
        if (nk_s[s * K + k] > 0) v += nk_s[s * K + k] * mu_s[(s * K + k) * d + j];
      m[j] = v / total;
    }
    memset(S, 0, (size_t)dd * sizeof(double));
    for (int64_t s = 0; s < parts; s++) {
      const double w = nk_s[s * K + k];
      if (!(w > 0)) continue;
      const double *ms = mu_s + (s * K + k) * d, *Cs = cov_s + (s * K + k) * dd;
      /* the part's scatter about its own mean, moved to the common one */
      for (int64_t b = 0; b < d; b++)
        for (int64_t a = full ? 0 : b; a <= b; a++)
          S[a + b * d] += w * (Cs[a + b * d] + (ms[a] - m[a]) * (ms[b] - m[b]));
    }
    for (int64_t b = 0; b < d; b++)
      for (int64_t a = full ? 0 : b; a <= b; a++) S[b + a * d] = S[a + b * d] /= total;
  }
}

typedef struct {
  const gm_gmm_ops *ops;
  void *e;
  gm_gmm_data data;     /* the shard's rows (a copy of them: x) */
  double *x;
  int64_t r0;           /* its first row in the whole data */
  double *nk, *mu, *cov; /* kmax, d x kmax, d x d x kmax: its M-step */
  int *info;
  double loglik;
} gmm_shard;

typedef struct {
  gm_gmm_data data; /* the whole data */
  const gm_gmm_backend *backend;
  gm_shard_plan plan;
  gm_shard_pool *pool;
  gmm_shard *shards;
  gm_gmm_held held;             /* the parameters every shard holds */
  double *nk_s, *mu_s, *cov_s; /* the shards' statistics, gathered */
  /* the arguments of the step being run */
  int64_t K, k;
  double *out;
} gmm_sharded;

static gpuml_status shard_open(void *ctx, int s, const gpuml_options *opt) {
  gmm_sharded *g = ctx;
  gmm_shard *sh = &g->shards[s];
  const int64_t n = g->data.n, d = g->data.d, K = g->data.kmax;
  const int64_t r0 = gm_shard_start(n, g->plan.count, s), rn = gm_shard_start(n, g->plan.count, s + 1) - r0;
  sh->r0 = r0;
  sh->x = gm_alloc((size_t)rn * (size_t)d, sizeof(double));
  sh->nk = gm_alloc((size_t)K, sizeof(double));
  sh->mu = gm_alloc((size_t)(d * K), sizeof(double));
  sh->cov = gm_alloc((size_t)(d * d * K), sizeof(double));
  sh->info = gm_alloc((size_t)K, sizeof(int));
  if (!sh->x || !sh->nk || !sh->mu || !sh->cov || !sh->info)
    return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate a shard of the mixture's data");
  for (int64_t j = 0; j < d; j++)
    memcpy(sh->x + j * rn, g->data.x + j * n + r0, (size_t)rn * sizeof(double));
  sh->data = g->data;
  sh->data.x = sh->x;
  sh->data.n = rn;
  sh->data.opt = opt; /* the pool's, alive as long as the engine */
  sh->ops = g->backend->ops;
  return g->backend->open(&sh->data, &sh->e);
}

static gpuml_status shard_close(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_shard *sh = &((gmm_sharded *)ctx)->shards[s];
  if (sh->e) sh->ops->close(sh->e);
  sh->e = NULL;
  return GPUML_OK;
}

static void sharded_close(void *p) {
  gmm_sharded *g = p;
  if (!g) return;
  if (g->pool && g->shards) gm_shard_pool_run_all(g->pool, shard_close, g);
  gm_shard_pool_close(g->pool);
  for (int s = 0; g->shards && s < g->plan.count; s++) {
    free(g->shards[s].x);
    free(g->shards[s].nk);
    free(g->shards[s].mu);
    free(g->shards[s].cov);
    free(g->shards[s].info);
  }
  free(g->shards);
  gm_gmm_held_free(&g->held);
  free(g->nk_s);
  free(g->mu_s);
  free(g->cov_s);
  free(g);
}

gpuml_status gm_gmm_sharded_open(const gm_gmm_data *data, const gm_shard_plan *plan,
                                 void **engine) {
  *engine = NULL;
  gmm_sharded *g = calloc(1, sizeof *g);
  if (!g) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the mixture's shards");
  g->data = *data;
  g->backend = gm_backend_used(data->opt)->gmm;
  g->plan = *plan;
  if (data->opt->backend == GPUML_BACKEND_CUDA) {
    /* A GPU engine holds its device from open to close: one thread per distinct device
     * (GPUML_SHARD_THREADS on one GPU runs its shards on one thread). */
    int distinct = 0;
    for (int t = 0; t < plan->ndevices; t++) {
      int seen = 0;
      for (int u = 0; u < distinct; u++) seen |= g->plan.devices[u] == plan->devices[t];
      if (!seen) g->plan.devices[distinct++] = plan->devices[t];
    }
    g->plan.ndevices = distinct;
  }
  const int S = g->plan.count;
  const size_t d = (size_t)data->d, K = (size_t)data->kmax;
  g->shards = calloc((size_t)S, sizeof *g->shards);
  const int held = gm_gmm_held_alloc(&g->held, data->d, data->kmax);
  g->nk_s = gm_alloc((size_t)S * K, sizeof(double));
  g->mu_s = gm_alloc((size_t)S * d * K, sizeof(double));
  g->cov_s = gm_alloc((size_t)S * d * d * K, sizeof(double));
  gpuml_status st = GPUML_OK;
  if (!g->shards || !held || !g->nk_s || !g->mu_s || !g->cov_s)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the mixture's shards");
  if (!st) st = gm_shard_pool_open(&g->plan, data->opt, &g->pool);
  if (!st) st = gm_shard_pool_run(g->pool, shard_open, g, NULL);
  if (st) {
    sharded_close(g);
    return st;
  }
  *engine = g;
  return GPUML_OK;
}

/* ---- the steps: each runs one function on every shard ---- */

static gpuml_status on_shards(gmm_sharded *g, gm_shard_fn fn) {
  return gm_shard_pool_run(g->pool, fn, g, NULL);
}

static gpuml_status shard_set_params(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  return g->shards[s].ops->set_params(g->shards[s].e, g->K, g->held.w, g->held.mu, g->held.cov);
}

static gpuml_status sharded_set_params(void *p, int64_t K, const double *w, const double *mu,
                                       const double *cov) {
  gmm_sharded *g = p;
  gm_gmm_held_set(&g->held, K, w, mu, cov);
  g->K = K;
  return on_shards(g, shard_set_params);
}

static gpuml_status shard_set_component(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  const int64_t d = g->data.d;
  return g->shards[s].ops->set_component(g->shards[s].e, g->K, g->held.w, g->k,
                                         g->held.mu + g->k * d, g->held.cov + g->k * d * d);
}

static gpuml_status sharded_set_component(void *p, int64_t K, const double *w, int64_t k,
                                          const double *mu, const double *cov) {
  gmm_sharded *g = p;
  gm_gmm_held_set_component(&g->held, K, w, k, mu, cov);
  g->K = K;
  g->k = k;
  return on_shards(g, shard_set_component);
}

static gpuml_status shard_factor(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  return g->shards[s].ops->factor(g->shards[s].e, g->K, g->shards[s].info);
}

static gpuml_status sharded_factor(void *p, int64_t K, int *info) {
  gmm_sharded *g = p;
  g->K = K;
  GM_TRY(on_shards(g, shard_factor));
  /* the same parameters factored the same way: any shard's failure is the answer */
  for (int64_t k = 0; k < K; k++) {
    info[k] = 0;
    for (int s = 0; s < g->plan.count && !info[k]; s++) info[k] = g->shards[s].info[k];
  }
  return GPUML_OK;
}

static gpuml_status shard_estep(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  return g->shards[s].ops->estep(g->shards[s].e, g->K, &g->shards[s].loglik);
}

static gpuml_status sharded_estep(void *p, int64_t K, double *loglik) {
  gmm_sharded *g = p;
  g->K = K;
  GM_TRY(on_shards(g, shard_estep));
  double ll = 0;
  for (int s = 0; s < g->plan.count; s++) ll += g->shards[s].loglik;
  *loglik = ll;
  return GPUML_OK;
}

static gpuml_status shard_log_density(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  return g->shards[s].ops->log_density(g->shards[s].e, g->out + g->shards[s].r0);
}

static gpuml_status sharded_log_density(void *p, double *out) {
  gmm_sharded *g = p;
  g->out = out;
  return on_shards(g, shard_log_density);
}

static gpuml_status shard_mstep(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  gmm_shard *sh = &g->shards[s];
  GM_TRY(sh->ops->mstep(sh->e, g->K, sh->nk));
  return sh->ops->get_params(sh->e, g->K, NULL, sh->mu, sh->cov);
}

static gpuml_status sharded_mstep(void *p, int64_t K, double *nk) {
  gmm_sharded *g = p;
  const int64_t d = g->data.d;
  const int S = g->plan.count;
  g->K = K;
  GM_TRY(on_shards(g, shard_mstep));
  /* the shards' statistics side by side, K per shard (as gm_gmm_combine takes them) */
  for (int s = 0; s < S; s++) {
    memcpy(g->nk_s + (size_t)(s * K), g->shards[s].nk, (size_t)K * sizeof(double));
    memcpy(g->mu_s + (size_t)(s * K * d), g->shards[s].mu, (size_t)(K * d) * sizeof(double));
    memcpy(g->cov_s + (size_t)(s * K * d * d), g->shards[s].cov,
           (size_t)(K * d * d) * sizeof(double));
  }
  gm_gmm_combine(S, K, d, g->data.structure == GM_GMM_FULL_STRUCTURE, g->data.n, g->nk_s,
                 g->mu_s, g->cov_s, nk, &g->held);
  return on_shards(g, shard_set_params);
}

static gpuml_status sharded_get_params(void *p, int64_t K, double *w, double *mu, double *cov) {
  gm_gmm_held_get(&((gmm_sharded *)p)->held, K, w, mu, cov);
  return GPUML_OK;
}

static gpuml_status shard_get_z(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  gmm_shard *sh = &g->shards[s];
  const int64_t rn = sh->data.n, n = g->data.n, K = g->K;
  double *z = gm_alloc((size_t)rn * (size_t)K, sizeof(double));
  if (!z) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate a shard's responsibilities");
  gpuml_status st = sh->ops->get_z(sh->e, K, z);
  for (int64_t k = 0; !st && k < K; k++)
    memcpy(g->out + k * n + sh->r0, z + k * rn, (size_t)rn * sizeof(double));
  free(z);
  return st;
}

static gpuml_status sharded_get_z(void *p, int64_t K, double *z) {
  gmm_sharded *g = p;
  g->K = K;
  g->out = z;
  return on_shards(g, shard_get_z);
}

static gpuml_status shard_set_structure(void *ctx, int s, const gpuml_options *opt) {
  (void)opt;
  gmm_sharded *g = ctx;
  return g->shards[s].ops->set_structure(g->shards[s].e, g->data.structure);
}

static gpuml_status sharded_set_structure(void *p, gm_gmm_structure structure) {
  gmm_sharded *g = p;
  g->data.structure = structure;
  return on_shards(g, shard_set_structure);
}

const gm_gmm_ops gm_gmm_sharded_ops = {
    sharded_set_params, sharded_set_component, sharded_factor,     sharded_estep,
    sharded_log_density, sharded_mstep,        sharded_get_params, sharded_get_z,
    sharded_set_structure, sharded_close};
