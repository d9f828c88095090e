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

const gm_backend *gm_backend_used(const gpuml_options *opt) {
  const gm_backend *b = gm_backend_get(opt->backend_used);
  return b ? b : &gm_cpu_backend;
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
  snprintf(info->version, sizeof info->version, "%s", GPUML_VERSION);
  gm_cpu_backend.probe(info);
  const gm_backend *cuda = gm_backend_get(GPUML_BACKEND_CUDA);
  if (cuda)
    cuda->probe(info);
  else
    snprintf(info->cuda_message, sizeof info->cuda_message,
             "gpuml was built without CUDA (configure found no usable nvcc/cudart/cuBLAS)");
  return GPUML_OK;
}

gpuml_status gm_backend_resolve(gpuml_options *opt, gm_algo algo, double work, const char *id,
                                const gm_backend **backend) {
  char full_id[64];
  snprintf(full_id, sizeof full_id, "%s:noCuda", id);
  const gm_backend *unused;
  if (!backend) backend = &unused;
  *backend = &gm_cpu_backend;
  if (opt->backend == GPUML_BACKEND_CPU) {
    opt->backend_used = GPUML_BACKEND_CPU;
    return GPUML_OK;
  }
  const gm_backend *cuda = gm_backend_get(GPUML_BACKEND_CUDA);
  const int cuda_ready = cuda && implements(cuda, algo);
  gpuml_info info;
  gpuml_backend_info(&info);
  int usable = info.cuda_compiled && info.device_count > opt->device && cuda_ready;
  if (opt->backend == GPUML_BACKEND_AUTO) {
    opt->backend_used = usable && work >= GM_AUTO_CUDA_MIN_WORK ? GPUML_BACKEND_CUDA
                                                                 : GPUML_BACKEND_CPU;
    *backend = gm_backend_used(opt);
    return GPUML_OK;
  }
  if (!info.cuda_compiled)
    return gm_fail(GPUML_ERR_NO_CUDA, full_id, "backend \"cuda\" is not available: %s; use backend \"cpu\" or \"auto\"",
                   info.cuda_message);
  if (info.device_count == 0)
    return gm_fail(GPUML_ERR_NO_CUDA, full_id, "backend \"cuda\" is not available: %s; use backend \"cpu\" or \"auto\"",
                   info.cuda_message);
  if (info.device_count <= opt->device)
    return gm_fail(GPUML_ERR_ARG, full_id, "device %d does not exist: %d CUDA device%s found",
                   opt->device, info.device_count, info.device_count == 1 ? "" : "s");
  if (!cuda_ready)
    return gm_fail(GPUML_ERR_NO_CUDA, full_id,
                   "%s has no CUDA implementation in this version of gpuml; use backend \"cpu\" or \"auto\"",
                   id);
  opt->backend_used = GPUML_BACKEND_CUDA;
  *backend = cuda;
  return GPUML_OK;
}

/* Accepts "1073741824", "512M", "2G", "64k" (powers of 1024). */
static int parse_bytes(const char *s, size_t *out) {
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
  if (env && *env && !parse_bytes(env, bytes))
    return gm_fail(GPUML_ERR_ARG, "badMemoryLimit",
                   "GPUML_GPU_MEMORY_LIMIT=\"%s\" is not a size such as 512M or 2G", env);
  return GPUML_OK;
}
