/* Work split into shards (shards.h): the plan, and the runner with one host thread per
 * device. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "shards.h"

int64_t gm_shard_start(int64_t rows, int count, int s) {
  /* the first rows % count shards hold one row more */
  const int64_t base = rows / count, extra = rows % count;
  return (int64_t)s * base + (s < extra ? s : extra);
}

/* A development knob: a whole number >= 1, else 1. */
static int knob(const char *name) {
  const char *s = getenv(name);
  if (!s || !*s) return 1;
  char *end = NULL;
  long v = strtol(s, &end, 10);
  return end && *end == '\0' && v > 1 && v <= 4096 ? (int)v : 1;
}

gpuml_status gm_shard_plan_make(const gpuml_options *used, int64_t rows, gm_shard_plan *plan) {
  memset(plan, 0, sizeof *plan);
  plan->rows = rows;
  plan->ndevices = 1;
  plan->devices[0] = used->device;
  if (used->backend == GPUML_BACKEND_CUDA && used->ndevices != 0) {
    gpuml_info info;
    gpuml_backend_info(&info);
    if (used->ndevices == GPUML_ALL_DEVICES) {
      plan->ndevices = info.device_count < GPUML_MAX_DEVICES ? info.device_count : GPUML_MAX_DEVICES;
      if (plan->ndevices < 1) plan->ndevices = 1;
      for (int i = 0; i < plan->ndevices; i++) plan->devices[i] = i;
    } else {
      plan->ndevices = used->ndevices;
      for (int i = 0; i < used->ndevices; i++) {
        if (used->devices[i] >= info.device_count)
          return gm_fail(GPUML_ERR_ARG, "badDevice", "device %d does not exist: %d CUDA device%s found",
                         used->devices[i], info.device_count, info.device_count == 1 ? "" : "s");
        plan->devices[i] = used->devices[i];
      }
    }
  }
  int count = knob("GPUML_SHARDS");
  if (count < plan->ndevices) count = plan->ndevices;
  if (rows >= 1 && count > rows) count = (int)rows;
  if (count < 1) count = 1;
  const int threads = knob("GPUML_SHARD_THREADS");
  if (plan->ndevices == 1 && threads > 1) {
    /* the same device on several threads */
    plan->ndevices = threads < GPUML_MAX_DEVICES ? threads : GPUML_MAX_DEVICES;
    for (int i = 1; i < plan->ndevices; i++) plan->devices[i] = plan->devices[0];
  }
  if (plan->ndevices > count) plan->ndevices = count;
  plan->count = count;
  return GPUML_OK;
}

/* What the workers share. */
typedef struct {
  const gm_shard_plan *plan;
  const gpuml_options *used;
  gm_shard_fn fn;
  void *ctx;
  atomic_int stop;         /* set by the calling thread on an interrupt */
  atomic_llong rows_done;
  atomic_int threads_done;
} shared_state;

typedef struct {
  shared_state *shared;
  int thread;              /* which device */
  int failed_shard;        /* the first shard that failed, or -1 */
  gpuml_status status;
  char id[64];
  char message[1024];
} worker;

static int worker_interrupted(void *ctx) { return atomic_load(&((shared_state *)ctx)->stop); }

static void *run_worker(void *arg) {
  worker *w = arg;
  shared_state *sh = w->shared;
  gpuml_options opt = *sh->used;
  opt.device = sh->plan->devices[w->thread];
  opt.ndevices = 0;
  opt.verbose = 0;
  opt.progress = NULL;
  opt.interrupted = worker_interrupted;
  opt.callback_ctx = sh;
  for (int s = w->thread; s < sh->plan->count && !atomic_load(&sh->stop);
       s += sh->plan->ndevices) {
    gpuml_status st = sh->fn(sh->ctx, s, &opt);
    if (st) {
      w->status = st;
      w->failed_shard = s;
      snprintf(w->id, sizeof w->id, "%s", gpuml_last_error_id());
      snprintf(w->message, sizeof w->message, "%s", gpuml_last_error());
      atomic_store(&sh->stop, 1);
      break;
    }
    atomic_fetch_add(&sh->rows_done, (long long)(gm_shard_start(sh->plan->rows, sh->plan->count, s + 1) -
                                                 gm_shard_start(sh->plan->rows, sh->plan->count, s)));
  }
  atomic_fetch_add(&sh->threads_done, 1);
  return NULL;
}

gpuml_status gm_shards_run(const gm_shard_plan *plan, const gpuml_options *used, gm_shard_fn fn,
                           void *ctx, const char *stage) {
  if (plan->ndevices <= 1) {
    /* one device (or the CPU): the shards in turn on the calling thread, whose callbacks
     * the shards may call; progress counts shards */
    gpuml_options opt = *used;
    opt.device = plan->devices[0];
    opt.ndevices = 0;
    opt.verbose = 0;
    for (int s = 0; s < plan->count; s++) {
      GM_TRY(fn(ctx, s, &opt));
      gm_progress(used, stage, gm_shard_start(plan->rows, plan->count, s + 1), plan->rows);
    }
    return GPUML_OK;
  }
  shared_state sh;
  sh.plan = plan;
  sh.used = used;
  sh.fn = fn;
  sh.ctx = ctx;
  atomic_init(&sh.stop, 0);
  atomic_init(&sh.rows_done, 0);
  atomic_init(&sh.threads_done, 0);
  worker workers[GPUML_MAX_DEVICES];
  pthread_t threads[GPUML_MAX_DEVICES];
  int started = 0;
  gpuml_status st = GPUML_OK;
  for (int t = 0; t < plan->ndevices; t++) {
    workers[t] = (worker){&sh, t, -1, GPUML_OK, "", ""};
    if (pthread_create(&threads[t], NULL, run_worker, &workers[t]) != 0) {
      atomic_store(&sh.stop, 1);
      st = gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot start a thread for device %d",
                   plan->devices[t]);
      break;
    }
    started++;
  }
  /* The calling thread watches for an interrupt and reports progress while they run. */
  int64_t reported = 0;
  int interrupted = 0;
  const struct timespec pause = {0, 5 * 1000 * 1000};
  while (atomic_load(&sh.threads_done) < started) {
    nanosleep(&pause, NULL);
    if (!interrupted && gm_interrupted(used)) {
      interrupted = 1;
      atomic_store(&sh.stop, 1);
    }
    const int64_t done = (int64_t)atomic_load(&sh.rows_done);
    if (done > reported) gm_progress(used, stage, reported = done, plan->rows);
  }
  for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
  if (st) return st;
  /* the failure of the lowest shard, so that the message does not depend on timing */
  const worker *first = NULL;
  for (int t = 0; t < started; t++)
    if (workers[t].status && workers[t].status != GPUML_ERR_INTERRUPTED &&
        (!first || workers[t].failed_shard < first->failed_shard))
      first = &workers[t];
  if (first) return gm_fail(first->status, first->id, "%s", first->message);
  if (interrupted) return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "%s interrupted", stage);
  for (int t = 0; t < started; t++)
    if (workers[t].status) return gm_fail(workers[t].status, workers[t].id, "%s", workers[t].message);
  return GPUML_OK;
}
