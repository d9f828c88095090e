/* gpuml_mpi_gmm_fit(): Gaussian mixtures on rows spread over the ranks of an MPI
 * communicator (core/include/gpuml_mpi.h). The EM driver of one process (core/gmm.c)
 * runs on every rank over a gm_gmm_spread whose collectives are MPI calls:
 *  - sums: every rank's values gathered (MPI_Allgather) and added in rank order, so that
 *    every rank gets the same bits (an MPI_Allreduce may add in any order);
 *  - rows: the rows a start needs are gathered from their owners (MPI_Allgatherv);
 *  - the engine: the backend's engine on the rank's rows; the M-step statistics of every
 *    rank gathered and combined in rank order by gm_gmm_combine (as the shards of one
 *    process are), the log-likelihood summed in rank order, the Cholesky status the
 *    largest over the ranks. Every step settles its status across the ranks, so a failure
 *    on one rank is every rank's and no rank waits in a collective alone. */
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "gmm.h"
#include "gpuml_mpi.h"
#include "ranks.h"

typedef struct {
  MPI_Comm comm;
  int rank, size;
  int64_t *offsets; /* size + 1: the first global row of each rank, then all rows */
  /* the engine (one per fit) */
  const gm_gmm_ops *local_ops;
  void *local;
  gm_gmm_data data; /* this rank's rows */
  gm_gmm_held held;                   /* the parameters, the same on every rank */
  double *mine, *all;                 /* the M-step's statistics: this rank's, every rank's */
  double *nk_s, *mu_s, *cov_s;        /* every rank's, in gm_gmm_combine's layout */
  int64_t K;
} mpi_gmm;

static gpuml_status settle(mpi_gmm *g, gpuml_status st) {
  return gm_mpi_agree(g->comm, g->rank, g->size, st);
}

static gpuml_status spread_agree(void *ctx, gpuml_status st) { return settle(ctx, st); }

/* Every rank's `count` doubles into all (size x count), once every rank's st is OK. */
static gpuml_status gather_all(mpi_gmm *g, gpuml_status st, const double *mine, int64_t count,
                               double *all) {
  GM_TRY(settle(g, st));
  if (count > INT_MAX) return gm_fail(GPUML_ERR_ARG, "gmm:tooLarge", "too many values to gather");
  if (MPI_Allgather(mine, (int)count, MPI_DOUBLE, all, (int)count, MPI_DOUBLE, g->comm) !=
      MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allgather");
  return GPUML_OK;
}

static gpuml_status spread_sum(void *ctx, double *v, int64_t count) {
  mpi_gmm *g = ctx;
  double *all = gm_alloc((size_t)count * (size_t)g->size, sizeof(double));
  gpuml_status st = all ? GPUML_OK : gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate a sum");
  if ((st = gather_all(g, st, v, count, all))) {
    free(all);
    return st;
  }
  for (int64_t i = 0; i < count; i++) {
    double s = 0;
    for (int r = 0; r < g->size; r++) s += all[(int64_t)r * count + i];
    v[i] = s;
  }
  free(all);
  return GPUML_OK;
}

static int owner_of(const mpi_gmm *g, int64_t row) {
  int lo = 0, hi = g->size - 1;
  while (lo < hi) { /* the last rank whose first row is <= row */
    const int mid = (lo + hi + 1) / 2;
    if (g->offsets[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static gpuml_status spread_gather(void *ctx, const double *x, int64_t n_local, int64_t d,
                                  const int64_t *rows, int64_t m, double *out) {
  mpi_gmm *g = ctx;
  int *counts = gm_alloc((size_t)g->size, sizeof(int)), *displs = gm_alloc((size_t)g->size, sizeof(int));
  int64_t *cursor = gm_alloc((size_t)g->size, sizeof(int64_t));
  double *pack = gm_alloc((size_t)(m > 0 ? m : 1) * (size_t)d, sizeof(double));
  double *recv = gm_alloc((size_t)(m > 0 ? m : 1) * (size_t)d, sizeof(double));
  gpuml_status st = GPUML_OK;
  if (!counts || !displs || !cursor || !pack || !recv)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate %lld gathered rows", (long long)m);
  else if ((double)m * (double)d > INT_MAX)
    st = gm_fail(GPUML_ERR_ARG, "gmm:tooLarge", "%lld rows of %lld columns are too many to gather",
                 (long long)m, (long long)d);
  if (!(st = settle(g, st))) {
    /* every rank knows who owns what: the counts need no message */
    for (int r = 0; r < g->size; r++) counts[r] = 0;
    int64_t packed = 0;
    for (int64_t i = 0; i < m; i++) {
      const int r = owner_of(g, rows[i]);
      counts[r] += (int)d;
      if (r == g->rank) {
        const int64_t local = rows[i] - g->offsets[g->rank];
        for (int64_t j = 0; j < d; j++) pack[packed * d + j] = x[local + j * n_local];
        packed++;
      }
    }
    for (int r = 0, at = 0; r < g->size; r++) {
      displs[r] = at;
      at += counts[r];
      cursor[r] = 0;
    }
    if (MPI_Allgatherv(pack, counts[g->rank], MPI_DOUBLE, recv, counts, displs, MPI_DOUBLE,
                       g->comm) != MPI_SUCCESS)
      st = gm_mpi_failed("MPI_Allgatherv");
    for (int64_t i = 0; !st && i < m; i++) {
      const int r = owner_of(g, rows[i]);
      const double *v = recv + displs[r] + cursor[r]++ * d;
      for (int64_t j = 0; j < d; j++) out[i + j * m] = v[j];
    }
  }
  free(counts);
  free(displs);
  free(cursor);
  free(pack);
  free(recv);
  return st;
}

/* (value, row) ordered by value, then row. */
static int before(double v, int64_t r, double w, int64_t q) { return v < w || (v == w && r < q); }

/* The `count` smallest of n (values[i], first + i) into out (value, row pairs as doubles;
 * padded with +inf). */
static void smallest_pairs(const double *values, int64_t n, int64_t first, int64_t count,
                           double *out) {
  for (int64_t c = 0; c < count; c++) {
    int64_t pick = -1;
    for (int64_t i = 0; i < n; i++) {
      const int64_t row = first + i;
      /* not taken: after the previous pick in the order */
      if (c > 0 && !before(out[2 * (c - 1)], (int64_t)out[2 * (c - 1) + 1], values[i], row))
        continue;
      if (pick < 0 || before(values[i], row, values[pick], first + pick)) pick = i;
    }
    out[2 * c] = pick < 0 ? HUGE_VAL : values[pick];
    out[2 * c + 1] = pick < 0 ? (double)INT64_MAX : (double)(first + pick);
  }
}

static gpuml_status spread_smallest(void *ctx, const double *values, int64_t n_local,
                                    int64_t count, int64_t *rows) {
  mpi_gmm *g = ctx;
  double *mine = gm_alloc((size_t)(2 * count), sizeof(double));
  double *all = gm_alloc((size_t)(2 * count) * (size_t)g->size, sizeof(double));
  gpuml_status st = mine && all ? GPUML_OK
                                : gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the worst rows");
  if (!st) smallest_pairs(values, n_local, g->offsets[g->rank], count, mine);
  if (!(st = gather_all(g, st, mine, 2 * count, all))) {
    /* the smallest of every rank's smallest, in the same order */
    double *pairs = gm_alloc((size_t)(2 * count), sizeof(double));
    if (!pairs) {
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the worst rows");
    } else {
      const int64_t total = count * g->size;
      for (int64_t c = 0; c < count; c++) {
        int64_t pick = -1;
        for (int64_t e = 0; e < total; e++) {
          const double val = all[2 * e];
          const int64_t row = (int64_t)all[2 * e + 1];
          if (c > 0 && !before(pairs[2 * (c - 1)], (int64_t)pairs[2 * (c - 1) + 1], val, row))
            continue;
          if (pick < 0 || before(val, row, all[2 * pick], (int64_t)all[2 * pick + 1])) pick = e;
        }
        pairs[2 * c] = all[2 * pick];
        pairs[2 * c + 1] = all[2 * pick + 1];
        rows[c] = (int64_t)all[2 * pick + 1];
      }
      free(pairs);
    }
  }
  free(mine);
  free(all);
  return st;
}

/* ---- the engine ---- */

static gpuml_status mpi_set_params(void *p, int64_t K, const double *w, const double *mu,
                                   const double *cov) {
  mpi_gmm *g = p;
  gm_gmm_held_set(&g->held, K, w, mu, cov);
  return settle(g, g->local_ops->set_params(g->local, K, g->held.w, g->held.mu, g->held.cov));
}

static gpuml_status mpi_set_component(void *p, int64_t K, const double *w, int64_t k,
                                      const double *mu, const double *cov) {
  mpi_gmm *g = p;
  gm_gmm_held_set_component(&g->held, K, w, k, mu, cov);
  return settle(g, g->local_ops->set_component(g->local, K, w, k, mu, cov));
}

static gpuml_status mpi_factor(void *p, int64_t K, int *info) {
  mpi_gmm *g = p;
  GM_TRY(settle(g, g->local_ops->factor(g->local, K, info)));
  /* the same parameters everywhere: any rank's failure is the answer */
  if (MPI_Allreduce(MPI_IN_PLACE, info, (int)K, MPI_INT, MPI_MAX, g->comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allreduce");
  return GPUML_OK;
}

static gpuml_status mpi_estep(void *p, int64_t K, double *loglik) {
  mpi_gmm *g = p;
  double mine = 0;
  gpuml_status st = g->local_ops->estep(g->local, K, &mine);
  GM_TRY(gather_all(g, st, &mine, 1, g->all));
  double ll = 0;
  for (int r = 0; r < g->size; r++) ll += g->all[r];
  *loglik = ll;
  return GPUML_OK;
}

static gpuml_status mpi_log_density(void *p, double *out) {
  mpi_gmm *g = p;
  return settle(g, g->local_ops->log_density(g->local, out));
}

static gpuml_status mpi_mstep(void *p, int64_t K, double *nk) {
  mpi_gmm *g = p;
  const int64_t d = g->data.d, per = K * (1 + d + d * d);
  double *nk_l = g->mine, *mu_l = g->mine + K, *cov_l = g->mine + K + d * K;
  gpuml_status st = g->local_ops->mstep(g->local, K, nk_l);
  if (!st) st = g->local_ops->get_params(g->local, K, NULL, mu_l, cov_l);
  GM_TRY(gather_all(g, st, g->mine, per, g->all));
  for (int r = 0; r < g->size; r++) {
    const double *a = g->all + (int64_t)r * per;
    memcpy(g->nk_s + r * K, a, (size_t)K * sizeof(double));
    memcpy(g->mu_s + r * K * d, a + K, (size_t)(d * K) * sizeof(double));
    memcpy(g->cov_s + r * K * d * d, a + K + d * K, (size_t)(d * d * K) * sizeof(double));
  }
  gm_gmm_combine(g->size, K, d, g->data.structure == GM_GMM_FULL_STRUCTURE, g->offsets[g->size],
                 g->nk_s, g->mu_s, g->cov_s, nk, &g->held);
  return mpi_set_params(g, K, g->held.w, g->held.mu, g->held.cov);
}

static gpuml_status mpi_get_params(void *p, int64_t K, double *w, double *mu, double *cov) {
  gm_gmm_held_get(&((mpi_gmm *)p)->held, K, w, mu, cov);
  return GPUML_OK;
}

static gpuml_status mpi_get_z(void *p, int64_t K, double *z) {
  mpi_gmm *g = p;
  return settle(g, g->local_ops->get_z(g->local, K, z));
}

static gpuml_status mpi_set_structure(void *p, gm_gmm_structure structure) {
  mpi_gmm *g = p;
  g->data.structure = structure;
  return settle(g, g->local_ops->set_structure(g->local, structure));
}

static void release_engine(mpi_gmm *g) {
  if (g->local) g->local_ops->close(g->local);
  g->local = NULL;
  gm_gmm_held_free(&g->held);
  free(g->mine);
  free(g->all);
  free(g->nk_s);
  free(g->mu_s);
  free(g->cov_s);
  g->mine = g->all = g->nk_s = g->mu_s = g->cov_s = NULL;
}

static void mpi_close(void *p) { release_engine(p); }

static const gm_gmm_ops mpi_gmm_ops = {mpi_set_params,  mpi_set_component, mpi_factor,
                                       mpi_estep,       mpi_log_density,   mpi_mstep,
                                       mpi_get_params,  mpi_get_z,         mpi_set_structure,
                                       mpi_close};

static gpuml_status spread_open(void *ctx, const gm_gmm_data *data, const gm_gmm_ops **ops,
                                void **engine) {
  mpi_gmm *g = ctx;
  *engine = NULL;
  *ops = &mpi_gmm_ops;
  g->data = *data;
  const gm_gmm_backend *b = gm_backend_used(data->opt)->gmm;
  g->local_ops = b->ops;
  const size_t d = (size_t)data->d, K = (size_t)data->kmax, per = K * (1 + d + d * d);
  const int held = gm_gmm_held_alloc(&g->held, data->d, data->kmax);
  g->mine = gm_alloc(per, sizeof(double));
  g->all = gm_alloc(per * (size_t)g->size, sizeof(double));
  g->nk_s = gm_alloc(K * (size_t)g->size, sizeof(double));
  g->mu_s = gm_alloc(d * K * (size_t)g->size, sizeof(double));
  g->cov_s = gm_alloc(d * d * K * (size_t)g->size, sizeof(double));
  gpuml_status st = GPUML_OK;
  if (!held || !g->mine || !g->all || !g->nk_s || !g->mu_s || !g->cov_s)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the ranks' mixture statistics");
  else if (per > INT_MAX)
    st = gm_fail(GPUML_ERR_ARG, "gmm:tooLarge", "G (1 + d + d^2) = %lld values are too many to gather",
                 (long long)per);
  if (!st) st = b->open(data, &g->local);
  if ((st = settle(g, st))) {
    release_engine(g);
    return st;
  }
  *engine = g;
  return GPUML_OK;
}

gpuml_status gpuml_mpi_gmm_fit(MPI_Comm comm, const double *x, int64_t n_local, int64_t d,
                               const gpuml_gmm_params *params, gpuml_gmm_model *model,
                               double *z, int64_t *classification, double *uncertainty,
                               double *bic, const gpuml_options *opt,
                               gpuml_gmm_result *result) {
  gm_clear_error();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "MPI is not initialised: call MPI_Init first");
  mpi_gmm g;
  memset(&g, 0, sizeof g);
  g.comm = comm;
  if (MPI_Comm_rank(comm, &g.rank) != MPI_SUCCESS || MPI_Comm_size(comm, &g.size) != MPI_SUCCESS)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "not a valid communicator");
  const double t0 = gm_seconds();
  /* the shape of the call, the same on every rank */
  int64_t mine[3] = {d, params ? params->nG : -1, params ? params->n_models : -1}, lo[3], hi[3];
  if (MPI_Allreduce(mine, lo, 3, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS ||
      MPI_Allreduce(mine, hi, 3, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allreduce");
  if (memcmp(lo, hi, sizeof lo) != 0)
    return gm_fail(GPUML_ERR_ARG, "mpi:mismatch",
                   "the ranks disagree on the number of columns or the parameters: every rank "
                   "passes the same");
  g.offsets = gm_alloc((size_t)g.size + 1, sizeof(int64_t));
  int64_t *counts = gm_alloc((size_t)g.size, sizeof(int64_t));
  gpuml_status st = g.offsets && counts ? GPUML_OK
                                        : gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the ranks' rows");
  if ((st = gm_mpi_agree(comm, g.rank, g.size, st))) goto done;
  if (MPI_Allgather(&n_local, 1, MPI_INT64_T, counts, 1, MPI_INT64_T, comm) != MPI_SUCCESS) {
    st = gm_mpi_failed("MPI_Allgather");
    goto done;
  }
  g.offsets[0] = 0;
  for (int r = 0; r < g.size; r++) g.offsets[r + 1] = g.offsets[r] + (counts[r] > 0 ? counts[r] : 0);
  /* every check that one rank alone could fail, before the collective fit */
  if (n_local < 1)
    st = gm_fail(GPUML_ERR_ARG, "gmm:badData",
                 "rank %d holds %lld rows: every rank holds at least one", g.rank, (long long)n_local);
  if (!st) st = gm_check_matrix(x, n_local, d, "data", "gmm");
  if (!st) st = gpuml_gmm_check(g.offsets[g.size], d, params, opt, NULL);
  if (!st && (!model || !model->weights || !model->means || !model->covariances))
    st = gm_fail(GPUML_ERR_ARG, "gmm:badOutput",
                 "the model's weights, means and covariances must be allocated");
  if ((st = gm_mpi_agree(comm, g.rank, g.size, st))) goto done;
  const gm_gmm_spread spread = {g.offsets[g.size], &g, spread_sum, spread_gather,
                                spread_smallest, spread_open, spread_agree};
  /* a rank cannot stop alone: the interrupt callback is not polled (each rank still
   * reports its progress) */
  gpuml_options local = *opt;
  local.interrupted = NULL;
  uint64_t seed = opt->seed;  /* the starts draw the same rows on every rank */
  if (MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, comm) != MPI_SUCCESS) {
    st = gm_mpi_failed("MPI_Bcast");
    goto done;
  }
  local.seed = seed;
  st = gm_gmm_fit_spread(&spread, x, n_local, d, params, model, z, classification, uncertainty,
                         bic, &local, result);
  st = gm_mpi_agree(comm, g.rank, g.size, st);
  if (!st && result) result->run.seconds = gm_seconds() - t0;
done:
  free(g.offsets);
  free(counts);
  return st;
}

gpuml_status gpuml_mpi_gmm_fit_comm(void *comm, const double *x, int64_t n_local, int64_t d,
                                    const gpuml_gmm_params *params, gpuml_gmm_model *model,
                                    double *z, int64_t *classification, double *uncertainty,
                                    double *bic, const gpuml_options *opt,
                                    gpuml_gmm_result *result) {
  return gpuml_mpi_gmm_fit(*(MPI_Comm *)comm, x, n_local, d, params, model, z, classification,
                           uncertainty, bic, opt, result);
}
