/* Work split into shards: the reference rows of a kNN search, the rows of an EM pass.
 * Each shard runs on one device of the call's device list, one host thread per device,
 * its shards one after another; logical shards (GPUML_SHARDS, a development knob that
 * tests the split and merge code without several GPUs) run on the calling thread when
 * there is one device or the CPU backend runs, or on GPUML_SHARD_THREADS threads (a
 * second knob: the threaded runner of several devices, tested on one device or the CPU).
 *
 * A worker never calls the caller's callbacks (they belong to the calling thread): the
 * calling thread waits, forwards an interrupt to the workers and reports progress. */
#ifndef GPUML_SHARDS_H
#define GPUML_SHARDS_H

#include <stdint.h>
#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gm_shard_plan {
  int64_t rows;                    /* the rows split */
  int count;                       /* shards, >= 1 */
  int ndevices;                    /* devices the shards run on (1 for the CPU) */
  int devices[GPUML_MAX_DEVICES];  /* their ordinals (CUDA) */
} gm_shard_plan;

/* The plan of a call on `rows` rows with resolved options: the devices of
 * used->devices (all of them for GPUML_ALL_DEVICES; used->device when none is listed; the
 * CPU counts as one), and as many shards as devices, or GPUML_SHARDS when that is larger;
 * never more shards than rows. Errors: a listed device that does not exist. */
gpuml_status gm_shard_plan_make(const gpuml_options *used, int64_t rows, gm_shard_plan *plan);

/* Shard s holds rows [gm_shard_start(rows, count, s), gm_shard_start(rows, count, s + 1)). */
int64_t gm_shard_start(int64_t rows, int count, int s);

/* Runs fn(ctx, s, opt_s) for every shard s, where opt_s is the call's options with
 * device = the shard's device and callbacks that the workers may call. Returns the
 * first failure (its message kept), or GPUML_ERR_INTERRUPTED when the caller's
 * interrupted() asked to stop. Progress is reported as stage `stage`, in rows of the
 * finished shards out of all rows. */
typedef gpuml_status (*gm_shard_fn)(void *ctx, int shard, const gpuml_options *opt);
gpuml_status gm_shards_run(const gm_shard_plan *plan, const gpuml_options *used, gm_shard_fn fn,
                           void *ctx, const char *stage);

/* The same runner kept alive across several runs: an engine that holds a device between
 * calls (a mixture's) is opened, used and closed by the same thread. The pool's options
 * (and the opt each fn receives) live until gm_shard_pool_close(). stage NULL: no
 * progress reported. */
typedef struct gm_shard_pool gm_shard_pool;
gpuml_status gm_shard_pool_open(const gm_shard_plan *plan, const gpuml_options *used,
                                gm_shard_pool **pool);
gpuml_status gm_shard_pool_run(gm_shard_pool *pool, gm_shard_fn fn, void *ctx,
                               const char *stage);
/* fn on every shard whatever happens: no interrupt stops it, nor a shard's failure (the
 * first is returned). For closing what the shards hold (an engine that holds its
 * device's lock until it is closed must be closed). */
gpuml_status gm_shard_pool_run_all(gm_shard_pool *pool, gm_shard_fn fn, void *ctx);
void gm_shard_pool_close(gm_shard_pool *pool);

/* ---- the sharded algorithms ---- */

/* One of the lists a kNN merge takes: for query i, entries index[i + j * ld] and
 * dist[i + j * ld] for j < len (or count[i] when count is not NULL), sorted by
 * (distance, index), indices global. */
typedef struct {
  const int64_t *index;
  const void *dist;   /* in the merge's dtype */
  int64_t len, ld;
  const int64_t *count;
} gm_knn_list;

/* Merges the lists of m queries into their k best by (distance, index) (the order every
 * backend's final lists follow), skipping index == self_base + i for query i (self_base
 * < 0: nothing skipped). index and dist are m x k (ld m); found[i] receives how many
 * query i got (k unless the lists hold fewer). */
gpuml_status gm_knn_merge(const gm_knn_list *lists, int count, int64_t m, int64_t k,
                          gm_dtype dtype, int64_t self_base, int64_t *index, void *dist,
                          int64_t *found);

/* kNN with the references split by `plan` (core/knn_shards.c): arguments as the backend's
 * knn operation takes them (query NULL: the data against itself). */
struct gm_backend;
gpuml_status gm_knn_sharded(const struct gm_backend *b, const gm_shard_plan *plan,
                            const gm_matrix *data, const gm_matrix *query, int64_t k,
                            int64_t *index, void *dist, const gpuml_options *used,
                            int64_t *rechecked);

#ifdef __cplusplus
}
#endif

#endif
