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

/* The pool: one persistent thread per device of the plan (none for one device), each
 * running the shards s = thread, thread + ndevices, ... of every job posted. */
typedef struct worker {
  struct gm_shard_pool *pool;
  int thread;              /* which device */
  gpuml_options opt;       /* its options, alive as long as the pool */
  int failed_shard;        /* the first shard of this job that failed, or -1 */
  gpuml_status status;
  char id[64];
  char message[1024];
} worker;

struct gm_shard_pool {
  gm_shard_plan plan;
  gpuml_options used;
  int nthreads;            /* 0: the shards run on the calling thread */
  pthread_t threads[GPUML_MAX_DEVICES];
  worker workers[GPUML_MAX_DEVICES];
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  /* the job (under lock) */
  gm_shard_fn fn;
  void *ctx;
  int all;                 /* every shard runs, whatever the interrupts and failures */
  long generation;
  int finished, quit;
  atomic_int stop;         /* set by the calling thread on an interrupt, or by a failure */
  atomic_llong rows_done;
};

static int worker_interrupted(void *ctx) {
  return atomic_load(&((struct gm_shard_pool *)ctx)->stop);
}

static int64_t shard_rows(const gm_shard_plan *plan, int s) {
  return gm_shard_start(plan->rows, plan->count, s + 1) - gm_shard_start(plan->rows, plan->count, s);
}

static void run_shards(worker *w) {
  gm_shard_pool *p = w->pool;
  w->status = GPUML_OK;
  w->failed_shard = -1;
  for (int s = w->thread; s < p->plan.count && (p->all || !atomic_load(&p->stop));
       s += p->plan.ndevices) {
    gpuml_status st = p->fn(p->ctx, s, &w->opt);
    if (st && !w->status) {
      w->status = st;
      w->failed_shard = s;
      snprintf(w->id, sizeof w->id, "%s", gpuml_last_error_id());
      snprintf(w->message, sizeof w->message, "%s", gpuml_last_error());
    }
    if (st && !p->all) {
      atomic_store(&p->stop, 1);
      break;
    }
    atomic_fetch_add(&p->rows_done, (long long)shard_rows(&p->plan, s));
  }
}

static void *pool_thread(void *arg) {
  worker *w = arg;
  gm_shard_pool *p = w->pool;
  long seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (p->generation == seen && !p->quit) pthread_cond_wait(&p->wake, &p->lock);
    if (p->quit) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    run_shards(w);
    pthread_mutex_lock(&p->lock);
    p->finished++;
    pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

void gm_shard_pool_close(gm_shard_pool *p) {
  if (!p) return;
  if (p->nthreads > 0) {
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int t = 0; t < p->nthreads; t++) pthread_join(p->threads[t], NULL);
  }
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

gpuml_status gm_shard_pool_open(const gm_shard_plan *plan, const gpuml_options *used,
                                gm_shard_pool **out) {
  *out = NULL;
  gm_shard_pool *p = calloc(1, sizeof *p);
  if (!p) return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot allocate the shards' threads");
  p->plan = *plan;
  p->used = *used;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->stop, 0);
  atomic_init(&p->rows_done, 0);
  const int threaded = plan->ndevices > 1;
  for (int t = 0; t < (threaded ? plan->ndevices : 1); t++) {
    worker *w = &p->workers[t];
    w->pool = p;
    w->thread = t;
    w->opt = *used;
    w->opt.device = plan->devices[t];
    w->opt.ndevices = 0;
    w->opt.verbose = 0;
    if (threaded) {
      /* the host threads shared among the workers, whose host work (a density pass's
       * scatter, say) runs at the same time */
      const int share = gm_threads(used) / plan->ndevices;
      w->opt.threads = share > 1 ? share : 1;
      /* a worker never calls the caller's callbacks */
      w->opt.progress = NULL;
      w->opt.interrupted = worker_interrupted;
      w->opt.callback_ctx = p;
    }
  }
  for (int t = 0; threaded && t < plan->ndevices; t++) {
    if (pthread_create(&p->threads[t], NULL, pool_thread, &p->workers[t]) != 0) {
      gm_shard_pool_close(p);
      return gm_fail(GPUML_ERR_NOMEM, "noMemory", "cannot start a thread for device %d",
                     plan->devices[t]);
    }
    p->nthreads++;
  }
  *out = p;
  return GPUML_OK;
}

static gpuml_status pool_run(gm_shard_pool *p, gm_shard_fn fn, void *ctx, const char *stage,
                             int all) {
  const gm_shard_plan *plan = &p->plan;
  const gpuml_options *used = &p->used;
  if (p->nthreads == 0 && all) {
    gpuml_status first = GPUML_OK;
    for (int s = 0; s < plan->count; s++) {
      const gpuml_status st = fn(ctx, s, &p->workers[0].opt);
      if (st && !first) first = st; /* its message stays the last error */
    }
    return first;
  }
  if (p->nthreads == 0) {
    /* one device (or the CPU): the shards in turn on the calling thread, whose callbacks
     * the shards may call; progress counts shards */
    for (int s = 0; s < plan->count; s++) {
      GM_TRY(fn(ctx, s, &p->workers[0].opt));
      if (stage) gm_progress(used, stage, gm_shard_start(plan->rows, plan->count, s + 1), plan->rows);
    }
    return GPUML_OK;
  }
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->ctx = ctx;
  p->all = all;
  p->finished = 0;
  atomic_store(&p->stop, 0);
  atomic_store(&p->rows_done, 0);
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  /* The calling thread watches for an interrupt and reports progress while they run. */
  int64_t reported = 0;
  int interrupted = 0;
  for (;;) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 5 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->lock);
    if (p->finished < p->nthreads) pthread_cond_timedwait(&p->done, &p->lock, &until);
    const int all_done = p->finished == p->nthreads;
    pthread_mutex_unlock(&p->lock);
    if (all_done) break;
    if (!all && !interrupted && gm_interrupted(used)) {
      interrupted = 1;
      atomic_store(&p->stop, 1);
    }
    const int64_t done = (int64_t)atomic_load(&p->rows_done);
    if (stage && done > reported) gm_progress(used, stage, reported = done, plan->rows);
  }
  /* the failure of the lowest shard, so that the message does not depend on timing */
  const worker *first = NULL;
  for (int t = 0; t < p->nthreads; t++) {
    const worker *w = &p->workers[t];
    if (w->status && w->status != GPUML_ERR_INTERRUPTED &&
        (!first || w->failed_shard < first->failed_shard))
      first = w;
  }
  if (first) return gm_fail(first->status, first->id, "%s", first->message);
  if (interrupted)
    return gm_fail(GPUML_ERR_INTERRUPTED, "interrupted", "%s interrupted", stage ? stage : "the work");
  for (int t = 0; t < p->nthreads; t++)
    if (p->workers[t].status)
      return gm_fail(p->workers[t].status, p->workers[t].id, "%s", p->workers[t].message);
  /* the last shards may finish between two looks */
  if (stage && reported < plan->rows) gm_progress(used, stage, plan->rows, plan->rows);
  return GPUML_OK;
}

gpuml_status gm_shard_pool_run(gm_shard_pool *p, gm_shard_fn fn, void *ctx, const char *stage) {
  return pool_run(p, fn, ctx, stage, 0);
}

gpuml_status gm_shard_pool_run_all(gm_shard_pool *p, gm_shard_fn fn, void *ctx) {
  return pool_run(p, fn, ctx, NULL, 1);
}

gpuml_status gm_shards_run(const gm_shard_plan *plan, const gpuml_options *used, gm_shard_fn fn,
                           void *ctx, const char *stage) {
  gm_shard_pool *pool;
  GM_TRY(gm_shard_pool_open(plan, used, &pool));
  gpuml_status st = gm_shard_pool_run(pool, fn, ctx, stage);
  gm_shard_pool_close(pool);
  return st;
}
