/* Per-thread last error, status names and the parsing of option names. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "params.h"

static _Thread_local char last_message[1024];
static _Thread_local char last_id[64];

gpuml_status gm_fail(gpuml_status status, const char *id, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  snprintf(last_id, sizeof last_id, "%s", id ? id : "");
  return status;
}

void gm_clear_error(void) {
  last_message[0] = '\0';
  last_id[0] = '\0';
}

const char *gpuml_last_error(void) { return last_message; }
const char *gpuml_last_error_id(void) { return last_id; }

const char *gpuml_status_string(gpuml_status status) {
  switch (status) {
    case GPUML_OK: return "ok";
    case GPUML_ERR_ARG: return "invalid argument";
    case GPUML_ERR_NOMEM: return "out of memory";
    case GPUML_ERR_CUDA: return "CUDA error";
    case GPUML_ERR_NO_CUDA: return "CUDA backend not available";
    case GPUML_ERR_NUMERIC: return "numerical failure";
    case GPUML_ERR_INTERRUPTED: return "interrupted";
  }
  return "unknown status";
}

const char *gpuml_backend_name(gpuml_backend backend) {
  switch (backend) {
    case GPUML_BACKEND_AUTO: return "auto";
    case GPUML_BACKEND_CPU: return "cpu";
    case GPUML_BACKEND_CUDA: return "cuda";
  }
  return "unknown";
}

gpuml_status gpuml_parse_backend(const char *name, gpuml_backend *out) {
  static const gpuml_backend all[] = {GPUML_BACKEND_AUTO, GPUML_BACKEND_CPU, GPUML_BACKEND_CUDA};
  for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
    if (gm_same_name(name, gpuml_backend_name(all[i]))) {
      *out = all[i];
      return GPUML_OK;
    }
  return gm_fail(GPUML_ERR_ARG, "badBackend",
                 "unknown backend \"%s\": use \"auto\", \"cpu\" or \"cuda\"",
                 name ? name : "(null)");
}

gpuml_status gpuml_parse_precision(const char *name, gpuml_precision *out) {
  if (name && gm_same_name(name, "auto")) *out = GPUML_PRECISION_AUTO;
  else if (name && gm_same_name(name, "double")) *out = GPUML_PRECISION_DOUBLE;
  else if (name && gm_same_name(name, "single")) *out = GPUML_PRECISION_SINGLE;
  else
    return gm_fail(GPUML_ERR_ARG, "badPrecision",
                   "unknown precision \"%s\": use \"auto\", \"double\" or \"single\"",
                   name ? name : "(null)");
  return GPUML_OK;
}

const char *gpuml_metric_name(gpuml_metric metric) {
  switch (metric) {
    case GPUML_METRIC_EUCLIDEAN: return "euclidean";
    case GPUML_METRIC_COSINE: return "cosine";
  }
  return "unknown";
}

gpuml_status gpuml_parse_metric(const char *name, gpuml_metric *out) {
  static const gpuml_metric all[] = {GPUML_METRIC_EUCLIDEAN, GPUML_METRIC_COSINE};
  for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
    if (gm_same_name(name, gpuml_metric_name(all[i]))) {
      *out = all[i];
      return GPUML_OK;
    }
  return gm_fail(GPUML_ERR_ARG, "badMetric", "unknown metric \"%s\": use \"euclidean\" or \"cosine\"",
                 name ? name : "(null)");
}
