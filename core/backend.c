/* The registry of backends (the one place that knows whether CUDA was built), what was
 * built and found, and which backend runs a call. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"

#ifdef GPUML_HAVE_CUDA
#define GM_CUDA_BACKEND (&gm_cuda_backend)
#else
#define GM_CUDA_BACKEND NULL
#endif

const gm_backend *gm_backend_get(gpuml_backend id) {
  switch (id) {
    case GPUML_BACKEND_CPU: return &gm_cpu_backend;
    case GPUML_BACKEND_CUDA: return GM_CUDA_BACKEND;
    default: return NULL;
  }
}

const gm_backend *gm_backend_used(const gpuml_options *used) {
  const gm_backend *b = gm_backend_get(used->backend);
  return b ? b : &gm_cpu_backend;
}

void gm_run_info_fill(gpuml_run_info *run, const gpuml_options *used, gm_dtype dtype, double t0) {
  const int cuda = used->backend == GPUML_BACKEND_CUDA;
  run->backend = cuda ? GPUML_BACKEND_CUDA : GPUML_BACKEND_CPU;
  run->device = cuda ? used->device : -1;
  /* single input always runs in single precision; the CPU computes double input in
   * double whatever was asked; auto gives the double-precision answer */
  run->precision = dtype == GM_F32                                   ? GPUML_PRECISION_SINGLE
                   : cuda && used->precision == GPUML_PRECISION_SINGLE ? GPUML_PRECISION_SINGLE
                                                                      : GPUML_PRECISION_DOUBLE;
  run->threads = gm_threads(used);
  run->seconds = gm_seconds() - t0;
}

static int implements(const gm_backend *b, gm_algo algo) {
  switch (algo) {
    case GM_ALGO_NEIGHBOURS: return b->neighbours != NULL;
    case GM_ALGO_DPC: return b->dpc != NULL;
    case GM_ALGO_TSNE: return b->tsne != NULL;
    case GM_ALGO_GMM: return b->gmm != NULL;
  }
  return 0;
}

/* `auto` takes the GPU only above this many pair-dimension operations (m * n * d):
 * below it, transfers and start-up cost more than the CPU needs for the whole job. */
#define GM_AUTO_CUDA_MIN_WORK 2e8

gpuml_status gpuml_backend_info(gpuml_info *info) {
  if (!info) return gm_fail(GPUML_ERR_ARG, "badArgument", "info must not be NULL");
  memset(info, 0, sizeof *info);
  /* The devices of a process do not change: they are probed once (every call resolving
   * its backend asks, and a probe costs milliseconds). A race only probes twice. */
  static gpuml_info probed;
  static _Atomic int have_probed = 0;
  if (!have_probed) {
    gpuml_info p;
    memset(&p, 0, sizeof p);
    const gm_backend *cuda = gm_backend_get(GPUML_BACKEND_CUDA);
    if (cuda)
      cuda->probe(&p);
    else
      snprintf(p.cuda_message, sizeof p.cuda_message,
               "gpuml was built without CUDA (configure found no usable nvcc/cudart/cuBLAS)");
    probed = p;
    have_probed = 1;
  }
  *info = probed;
  snprintf(info->version, sizeof info->version, "%s", GPUML_VERSION);
  gm_cpu_backend.probe(info);
  return GPUML_OK;
}

gpuml_status gpuml_context_free(int device) {
  gm_clear_error();
  if (device < 0)
    return gm_fail(GPUML_ERR_ARG, "badDevice", "device = %d must be 0 or positive", device);
  const gm_backend *cuda = gm_backend_get(GPUML_BACKEND_CUDA);
  if (cuda && cuda->release) cuda->release(device);
  return GPUML_OK;
}

void gpuml_shutdown(void) {
  const gm_backend *cuda = gm_backend_get(GPUML_BACKEND_CUDA);
  if (cuda && cuda->release) cuda->release(-1);
}

gpuml_status gm_backend_resolve(const gpuml_options *opt, gm_algo algo, double work,
                                const char *id, gpuml_options *used,
                                const gm_backend **backend) {
  char full_id[64];
  snprintf(full_id, sizeof full_id, "%s:noCuda", id);
  const gm_backend *unused;
  if (!backend) backend = &unused;
  *used = *opt;
  used->backend = GPUML_BACKEND_CPU;
  *backend = &gm_cpu_backend;
  if (opt->backend == GPUML_BACKEND_CPU) return GPUML_OK;
  const gm_backend *cuda = gm_backend_get(GPUML_BACKEND_CUDA);
  const int cuda_ready = cuda && implements(cuda, algo);
  gpuml_info info;
  gpuml_backend_info(&info);
  const int usable = info.cuda_compiled && info.device_count > opt->device && cuda_ready;
  if (opt->backend == GPUML_BACKEND_AUTO) {
    if (usable && work >= GM_AUTO_CUDA_MIN_WORK) {
      used->backend = GPUML_BACKEND_CUDA;
      *backend = cuda;
    }
    return GPUML_OK;
  }
  if (!info.cuda_compiled || info.device_count == 0)
    return gm_fail(GPUML_ERR_NO_CUDA, full_id, "backend \"cuda\" is not available: %s; use backend \"cpu\" or \"auto\"",
                   info.cuda_message);
  if (info.device_count <= opt->device)
    return gm_fail(GPUML_ERR_ARG, full_id, "device %d does not exist: %d CUDA device%s found",
                   opt->device, info.device_count, info.device_count == 1 ? "" : "s");
  if (!cuda_ready)
    return gm_fail(GPUML_ERR_NO_CUDA, full_id,
                   "%s has no CUDA implementation in this version of gpuml; use backend \"cpu\" or \"auto\"",
                   id);
  used->backend = GPUML_BACKEND_CUDA;
  *backend = cuda;
  return GPUML_OK;
}

/* Accepts "1073741824", "512M", "2G", "64k" (powers of 1024). */
int gm_parse_bytes(const char *s, size_t *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) return 0;
  while (*end && isspace((unsigned char)*end)) end++;
  double scale = 1;
  switch (toupper((unsigned char)*end)) {
    case 'K': scale = 1024.0; end++; break;
    case 'M': scale = 1024.0 * 1024; end++; break;
    case 'G': scale = 1024.0 * 1024 * 1024; end++; break;
    case '\0': break;
    default: return 0;
  }
  if (toupper((unsigned char)*end) == 'B') end++;
  if (*end) return 0;
  *out = (size_t)(v * scale);
  return 1;
}

gpuml_status gm_gpu_memory_limit(const gpuml_options *opt, size_t *bytes) {
  *bytes = opt->gpu_memory_limit;
  if (*bytes) return GPUML_OK;
  const char *env = getenv("GPUML_GPU_MEMORY_LIMIT");
  if (env && *env && !gm_parse_bytes(env, bytes))
    return gm_fail(GPUML_ERR_ARG, "badMemoryLimit",
                   "GPUML_GPU_MEMORY_LIMIT=\"%s\" is not a size such as 512M or 2G", env);
  return GPUML_OK;
}
