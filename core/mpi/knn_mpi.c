/* gpuml_mpi_knn_search(): exact kNN across the ranks of an MPI communicator
 * (core/include/gpuml_mpi.h). Each rank searches its own rows with gpuml_knn_search on
 * its backend; the lists meet in gm_knn_merge, the merge of the shards. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpuml_mpi.h"
#include "ranks.h"
#include "shards.h"

/* The ranks must agree on the shape of the call. */
static gpuml_status check_same(MPI_Comm comm, int64_t d, int64_t k, int64_t m, int has_query) {
  int64_t mine[4] = {d, k, has_query ? m : -1, has_query}, lo[4], hi[4];
  if (MPI_Allreduce(mine, lo, 4, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS ||
      MPI_Allreduce(mine, hi, 4, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allreduce");
  static const char *const names[] = {"the number of columns", "k", "the number of queries",
                                      "whether queries are given"};
  for (int i = 0; i < 4; i++)
    if (lo[i] != hi[i])
      return gm_fail(GPUML_ERR_ARG, "mpi:mismatch",
                     "the ranks disagree on %s (from %lld to %lld): every rank passes the same",
                     names[i], (long long)lo[i], (long long)hi[i]);
  return GPUML_OK;
}

/* Queries given on every rank: search the local rows, gather every rank's lists, merge. */
static gpuml_status replicated_queries(MPI_Comm comm, int rank, int size, const double *data,
                                       int64_t n_local, int64_t d, int64_t offset,
                                       const double *query, int64_t m, int64_t k,
                                       int64_t *index, double *dist, const gpuml_options *opt,
                                       gpuml_knn_result *result) {
  const size_t mk = (size_t)m * (size_t)k;
  int64_t *idx = gm_alloc(mk, sizeof *idx), *all_idx = gm_alloc(mk * (size_t)size, sizeof *all_idx);
  double *dst = gm_alloc(mk, sizeof *dst), *all_dst = gm_alloc(mk * (size_t)size, sizeof *all_dst);
  int64_t *counts = gm_alloc((size_t)size, sizeof *counts), *found = gm_alloc((size_t)m, sizeof *found);
  gm_knn_list *lists = gm_alloc((size_t)size, sizeof *lists);
  gpuml_status st = GPUML_OK;
  int64_t kl = n_local < k ? n_local : k;
  if (!idx || !all_idx || !dst || !all_dst || !counts || !found || !lists)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the ranks' lists (%.1f MB)",
                 (double)mk * (double)size * 16 / 1e6);
  /* the collectives need every rank's buffers */
  if ((st = gm_mpi_agree(comm, rank, size, st))) goto done;
  if (kl > 0) {
    st = gpuml_knn_search(data, n_local, d, query, m, kl, idx, dst, opt, result);
    if (!st)
      for (size_t e = 0; e < (size_t)m * (size_t)kl; e++) idx[e] += offset;
    else
      kl = 0;
  }
  /* every rank takes part in the collectives, also after a local failure */
  if (MPI_Allgather(&kl, 1, MPI_INT64_T, counts, 1, MPI_INT64_T, comm) != MPI_SUCCESS ||
      MPI_Allgather(idx, (int)mk, MPI_INT64_T, all_idx, (int)mk, MPI_INT64_T, comm) != MPI_SUCCESS ||
      MPI_Allgather(dst, (int)mk, MPI_DOUBLE, all_dst, (int)mk, MPI_DOUBLE, comm) != MPI_SUCCESS) {
    if (!st) st = gm_mpi_failed("MPI_Allgather");
  }
  if (!st) {
    for (int r = 0; r < size; r++)
      lists[r] = (gm_knn_list){all_idx + (size_t)r * mk, all_dst + (size_t)r * mk, counts[r], m,
                               NULL};
    st = gm_knn_merge(lists, size, m, k, GM_F64, -1, index, dist, found);
  }
done:
  free(idx);
  free(all_idx);
  free(dst);
  free(all_dst);
  free(counts);
  free(found);
  free(lists);
  return st;
}

/* The data against itself: the blocks of rows travel around the ring of ranks; each
 * rank searches its own rows against the block it holds and merges into its lists. */
static gpuml_status ring(MPI_Comm comm, int rank, int size, const double *data, int64_t n_local,
                         int64_t d, int64_t offset, int64_t k, int64_t *index, double *dist,
                         const gpuml_options *opt, gpuml_knn_result *result) {
  int64_t maxn = 0;
  if (MPI_Allreduce(&n_local, &maxn, 1, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Allreduce");
  const size_t block_values = (size_t)(maxn > 0 ? maxn : 1) * (size_t)d;
  const size_t lk = (size_t)(n_local > 0 ? n_local : 1) * (size_t)(k + 1);
  double *block = gm_alloc(block_values, sizeof *block);
  int64_t *bidx = gm_alloc(lk, sizeof *bidx), *ridx = gm_alloc(lk, sizeof *ridx);
  double *bdst = gm_alloc(lk, sizeof *bdst), *rdst = gm_alloc(lk, sizeof *rdst);
  int64_t *found = gm_alloc((size_t)(n_local > 0 ? n_local : 1), sizeof *found);
  gpuml_status st = GPUML_OK;
  if (!block || !bidx || !ridx || !bdst || !rdst || !found)
    st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the ring's buffers (%.1f MB)",
                 ((double)block_values + (double)lk * 4) * 8 / 1e6);
  /* the ring needs every rank's buffers */
  if ((st = gm_mpi_agree(comm, rank, size, st))) goto done;
  memcpy(block, data, sizeof *block * (size_t)n_local * (size_t)d);
  for (int64_t i = 0; i < n_local; i++) found[i] = 0;
  int64_t meta[2] = {n_local, offset};  /* rows and first global row of the block held */
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int step = 0; step < size; step++) {
    const int64_t nb = meta[0], ob = meta[1];
    if (!st && nb > 0 && n_local > 0) {
      const int own = step == 0;
      int64_t kb = k + own;
      if (kb > nb) kb = nb;
      st = gpuml_knn_search(block, nb, d, data, n_local, kb, bidx, bdst, opt, result);
      if (!st) {
        for (size_t e = 0; e < (size_t)n_local * (size_t)kb; e++) bidx[e] += ob;
        /* merge the running lists with the block's: index/dist hold the merged ones */
        memcpy(ridx, index, sizeof *ridx * (size_t)n_local * (size_t)k);
        memcpy(rdst, dist, sizeof *rdst * (size_t)n_local * (size_t)k);
        int64_t *counts = found;
        gm_knn_list lists[2] = {{ridx, rdst, k, n_local, counts}, {bidx, bdst, kb, n_local, NULL}};
        int64_t *merged = gm_alloc((size_t)n_local, sizeof *merged);
        if (!merged) st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the merge");
        else st = gm_knn_merge(lists, 2, n_local, k, GM_F64, offset, index, dist, merged);
        if (merged) {
          memcpy(found, merged, sizeof *found * (size_t)n_local);
          free(merged);
        }
      }
    }
    if (step + 1 == size) break;
    /* pass the block on; a rank that failed still passes, so that no rank waits forever */
    MPI_Status status;
    if (MPI_Sendrecv_replace(meta, 2, MPI_INT64_T, next, 1, prev, 1, comm, &status) != MPI_SUCCESS ||
        MPI_Sendrecv_replace(block, (int)block_values, MPI_DOUBLE, next, 2, prev, 2, comm,
                             &status) != MPI_SUCCESS) {
      if (!st) st = gm_mpi_failed("MPI_Sendrecv_replace");
    }
  }
  for (int64_t i = 0; !st && i < n_local; i++)
    if (found[i] < k)
      st = gm_fail(GPUML_ERR_NUMERIC, "knn:internal", "the ring found fewer than k neighbours");
done:
  free(block);
  free(bidx);
  free(ridx);
  free(bdst);
  free(rdst);
  free(found);
  return st;
}

gpuml_status gpuml_mpi_knn_search(MPI_Comm comm, const double *data, int64_t n_local, int64_t d,
                                  const double *query, int64_t m, int64_t k, int64_t *index,
                                  double *dist, const gpuml_options *opt,
                                  gpuml_knn_result *result) {
  gm_clear_error();
  int rank = 0, size = 1, initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "MPI is not initialised: call MPI_Init first");
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "not a valid communicator");
  const double t0 = gm_seconds();
  gpuml_status st = check_same(comm, d, k, m, query != NULL);
  if (st) return st;  /* the same on every rank */
  /* local checks, then agreement: an error on any rank is an error on all */
  if (n_local < 0) st = gm_fail(GPUML_ERR_ARG, "knn:badData", "n_local = %lld is negative", (long long)n_local);
  if (!st && n_local > 0) st = gm_check_matrix(data, n_local, d, "data", "knn");
  if (!st && query) st = gm_check_matrix(query, m, d, "query", "knn");
  if (!st && (!index || !dist))
    st = gm_fail(GPUML_ERR_ARG, "knn:badOutput", "the output arrays must not be NULL");
  int64_t offset = 0, total = 0;
  if (MPI_Exscan(&n_local, &offset, 1, MPI_INT64_T, MPI_SUM, comm) != MPI_SUCCESS ||
      MPI_Allreduce(&n_local, &total, 1, MPI_INT64_T, MPI_SUM, comm) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Exscan");
  if (rank == 0) offset = 0;  /* MPI_Exscan leaves rank 0's value undefined */
  if (!st) st = gpuml_knn_check(total, d, query ? m : -1, k, opt);
  if ((st = gm_mpi_agree(comm, rank, size, st))) return st;
  if (result) memset(result, 0, sizeof *result);
  if (!query && n_local > 0) {  /* the ring reads the running lists before they fill */
    memset(index, 0, sizeof *index * (size_t)n_local * (size_t)k);
    memset(dist, 0, sizeof *dist * (size_t)n_local * (size_t)k);
  }
  st = query ? replicated_queries(comm, rank, size, data, n_local, d, offset, query, m, k, index, dist,
                                  opt, result)
             : ring(comm, rank, size, data, n_local, d, offset, k, index, dist, opt, result);
  st = gm_mpi_agree(comm, rank, size, st);
  if (!st && result) result->run.seconds = gm_seconds() - t0;
  return st;
}
