/* kNN over shards of the references (several devices, or GPUML_SHARDS): each shard of
 * data rows is searched by every query on its device, then each query's lists are merged
 * by (distance, index) with global indices. The distances are the exact ones every
 * backend computes for its final order, so for double input the merged lists are the
 * single search's, bit for bit; for single input, neighbours whose distances round to the
 * same float are ordered by index, but each shard's search centres its own rows, so a
 * distance may round differently than in one search and two near neighbours swap (3 of
 * 10^6 entries at 10^7 x 128 on 4 devices). For a search of the data against itself, the
 * shard holding a query's own row is asked for one more neighbour and the row itself
 * dropped. */
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "shards.h"

typedef struct {
  const gm_backend *b;
  const gm_matrix *data, *query; /* query: the explicit queries (the data when self) */
  int self;
  int64_t k;
  const gm_shard_plan *plan;
  int64_t *index;                /* per shard: m x kcap (global indices) */
  void *dist;                    /* per shard: m x kcap, in the data's type */
  int64_t *kshard;               /* neighbours found per shard */
  int64_t *rechecked;            /* per shard: queries searched again in fp64 */
  int64_t kcap;
} shard_job;

static size_t value_size(gm_dtype t) { return t == GM_F32 ? sizeof(float) : sizeof(double); }

static gpuml_status search_shard(void *ctx, int s, const gpuml_options *opt) {
  shard_job *job = ctx;
  const gm_matrix *D = job->data;
  const int64_t n = D->rows, d = D->cols, m = job->query->rows;
  const int64_t r0 = gm_shard_start(n, job->plan->count, s),
                r1 = gm_shard_start(n, job->plan->count, s + 1), rn = r1 - r0;
  int64_t ks = job->k + (job->self ? 1 : 0);
  if (ks > rn) ks = rn;
  job->kshard[s] = ks;
  const size_t vs = value_size(D->dtype);
  /* the shard's rows, contiguous (column-major rn x d) */
  char *rows = gm_alloc((size_t)rn * (size_t)d, vs);
  if (!rows) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate a shard of the data");
  for (int64_t t = 0; t < d; t++)
    memcpy(rows + (size_t)(t * rn) * vs, (const char *)D->values + (size_t)(t * n + r0) * vs,
           (size_t)rn * vs);
  const gm_matrix R = {rows, rn, d, D->dtype};
  int64_t *idx = job->index + (size_t)s * (size_t)m * (size_t)job->kcap;
  char *dst = (char *)job->dist + (size_t)s * (size_t)m * (size_t)job->kcap * vs;
  gpuml_status st = job->b->neighbours->knn(&R, job->query, ks, idx, dst, opt,
                                            &job->rechecked[s]);
  free(rows);
  if (st) return st;
  for (int64_t e = 0; e < m * ks; e++) idx[e] += r0;
  return GPUML_OK;
}

static double value_at(const void *v, gm_dtype t, size_t at) {
  return t == GM_F32 ? (double)((const float *)v)[at] : ((const double *)v)[at];
}

gpuml_status gm_knn_merge(const gm_knn_list *lists, int count, int64_t m, int64_t k,
                          gm_dtype dtype, int64_t self_base, int64_t *index, void *dist,
                          int64_t *found) {
  const size_t vs = value_size(dtype);
  int64_t at_small[16], *at = count <= 16 ? at_small : gm_alloc((size_t)count, sizeof *at);
  if (!at) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the merge of %d lists", count);
  for (int64_t i = 0; i < m; i++) {
    for (int s = 0; s < count; s++) at[s] = 0;
    int64_t j = 0;
    for (; j < k; j++) {
      int best = -1;
      int64_t best_idx = 0;
      double best_d = 0;
      for (int s = 0; s < count; s++) {
        const gm_knn_list *L = &lists[s];
        const int64_t len = L->count ? L->count[i] : L->len;
        while (at[s] < len && self_base >= 0 && L->index[i + at[s] * L->ld] == self_base + i)
          at[s]++;  /* the query's own row */
        if (at[s] >= len) continue;
        const size_t e = (size_t)(i + at[s] * L->ld);
        const double v = value_at(L->dist, dtype, e);
        const int64_t vi = L->index[e];
        if (best < 0 || v < best_d || (v == best_d && vi < best_idx)) {
          best = s;
          best_d = v;
          best_idx = vi;
        }
      }
      if (best < 0) break;
      const gm_knn_list *L = &lists[best];
      index[i + j * m] = best_idx;
      memcpy((char *)dist + (size_t)(i + j * m) * vs,
             (const char *)L->dist + (size_t)(i + at[best] * L->ld) * vs, vs);
      at[best]++;
    }
    found[i] = j;
  }
  if (at != at_small) free(at);
  return GPUML_OK;
}

gpuml_status gm_knn_sharded(const gm_backend *b, const gm_shard_plan *plan,
                            const gm_matrix *data, const gm_matrix *query, int64_t k,
                            int64_t *index, void *dist, const gpuml_options *used,
                            int64_t *rechecked) {
  const int self = query == NULL;
  const gm_matrix *Q = self ? data : query;
  const int64_t m = Q->rows, S = plan->count;
  const size_t vs = value_size(data->dtype);
  shard_job job = {b, data, Q, self, k, plan, NULL, NULL, NULL, NULL, k + (self ? 1 : 0)};
  job.index = gm_alloc((size_t)S * (size_t)m * (size_t)job.kcap, sizeof *job.index);
  job.dist = gm_alloc((size_t)S * (size_t)m * (size_t)job.kcap, vs);
  job.kshard = gm_alloc((size_t)S, sizeof *job.kshard);
  job.rechecked = gm_alloc((size_t)S, sizeof *job.rechecked);
  gm_knn_list *lists = gm_alloc((size_t)S, sizeof *lists);
  int64_t *found = gm_alloc((size_t)m, sizeof *found);
  gpuml_status st = GPUML_OK;
  if (!job.index || !job.dist || !job.kshard || !job.rechecked || !lists || !found) {
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %.1f MB for the shards' lists",
                 (double)S * (double)m * (double)job.kcap * (8.0 + (double)vs) / 1e6);
    goto done;
  }
  if ((st = gm_shards_run(plan, used, search_shard, &job, "knn"))) goto done;
  if (rechecked) {
    *rechecked = 0;
    for (int64_t s = 0; s < S; s++) *rechecked += job.rechecked[s];
  }
  for (int64_t s = 0; s < S; s++)
    lists[s] = (gm_knn_list){job.index + (size_t)s * (size_t)m * (size_t)job.kcap,
                             (const char *)job.dist + (size_t)s * (size_t)m * (size_t)job.kcap * vs,
                             job.kshard[s], m, NULL};
  if ((st = gm_knn_merge(lists, (int)S, m, k, data->dtype, self ? 0 : -1, index, dist, found)))
    goto done;
  for (int64_t i = 0; i < m; i++)
    if (found[i] < k) {
      st = gm_fail(GPUML_ERR_NUMERIC, "knn:internal", "the shards found fewer than k neighbours");
      goto done;
    }
done:
  free(job.index);
  free(job.dist);
  free(job.kshard);
  free(job.rechecked);
  free(lists);
  free(found);
  return st;
}
