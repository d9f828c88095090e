/* Parameters set by name (params.h). */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "params.h"

int gm_same_name(const char *a, const char *b) {
  if (!a || !b) return 0;
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

/* "a", "b" or "c" into buf. */
static void list_names(const char *const *names, size_t stride, size_t count, char *buf,
                       size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < count; i++) {
    const char *name = *(const char *const *)((const char *)names + i * stride);
    const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
    int w = snprintf(buf + used, used < size ? size - used : 0, "%s\"%s\"", sep, name);
    if (w < 0 || used + (size_t)w >= size) break;
    used += (size_t)w;
  }
}

static size_t spec_count(const gm_param_spec *specs) {
  size_t n = 0;
  while (specs[n].name) n++;
  return n;
}

static gpuml_status find(const gm_param_spec *specs, const char *algo, const char *name,
                         const gm_param_spec **out) {
  for (const gm_param_spec *s = specs; s->name; s++)
    if (gm_same_name(s->name, name)) {
      *out = s;
      return GPUML_OK;
    }
  char id[64], names[1024];
  snprintf(id, sizeof id, "%s:badParameter", algo);
  list_names(&specs[0].name, sizeof *specs, spec_count(specs), names, sizeof names);
  return gm_fail(GPUML_ERR_ARG, id, "unknown %s parameter \"%s\": the parameters are %s", algo,
                 name ? name : "(null)", names);
}

static gpuml_status bad_value(const gm_param_spec *s, const char *algo, const char *fmt,
                              const char *what) {
  char id[64];
  snprintf(id, sizeof id, "%s:badParameter", algo);
  return gm_fail(GPUML_ERR_ARG, id, fmt, s->name, what);
}

static int is_list(const gm_param_spec *s) {
  return s->type == GM_PARAM_REAL_LIST || s->type == GM_PARAM_INT64_LIST ||
         s->type == GM_PARAM_CHOICE_LIST;
}

static int whole(double v) { return isfinite(v) && v == floor(v); }

/* The value stored for a choice's name, or -1 for an unknown name. */
static int choice_index(const gm_param_spec *s, const char *value) {
  for (int i = 0; s->choices && s->choices[i]; i++)
    if (gm_same_name(s->choices[i], value)) return s->choice_values ? s->choice_values[i] : i;
  return -1;
}

static gpuml_status bad_choice(const gm_param_spec *s, const char *algo, const char *value) {
  char names[512], id[64];
  size_t count = 0;
  while (s->choices && s->choices[count]) count++;
  list_names(s->choices, sizeof *s->choices, count, names, sizeof names);
  snprintf(id, sizeof id, "%s:badParameter", algo);
  return gm_fail(GPUML_ERR_ARG, id, "%s = \"%s\" is not known: use %s", s->name,
                 value ? value : "(null)", names);
}

/* The count of a list parameter: at least one value, at most its capacity. */
static gpuml_status check_count(const gm_param_spec *s, const char *algo, int64_t count) {
  if (count < 1) return bad_value(s, algo, "%s must have %s", "at least one value");
  if (count <= s->capacity) return GPUML_OK;
  char id[64];
  snprintf(id, sizeof id, "%s:badParameter", algo);
  return gm_fail(GPUML_ERR_ARG, id, "%s has %lld values; at most %lld are supported", s->name,
                 (long long)count, (long long)s->capacity);
}

/* Converts value v for value number i of a list (or the scalar when i == 0 and the spec
 * is scalar) and stores it, unless `dry` (then it only checks). */
static gpuml_status store_number(const gm_param_spec *s, const char *algo, void *params,
                                 int64_t i, double v, int dry) {
  char scratch[16];
  char *field = dry ? scratch : (char *)params + s->offset;
  if (dry) i = 0;
  switch (s->type) {
    case GM_PARAM_REAL: *(double *)field = v; return GPUML_OK;
    case GM_PARAM_REAL_LIST: ((double *)field)[i] = v; return GPUML_OK;
    case GM_PARAM_BOOL:
      if (isnan(v)) return bad_value(s, algo, "%s must be %s", "true or false");
      *(int *)field = v != 0;
      return GPUML_OK;
    case GM_PARAM_INT:
      if (!whole(v) || v < INT_MIN || v > INT_MAX)
        return bad_value(s, algo, "%s must be %s", "a whole number");
      *(int *)field = (int)v;
      return GPUML_OK;
    case GM_PARAM_INT64:
    case GM_PARAM_INT64_LIST:
      if (!whole(v) || fabs(v) >= 9.2e18)
        return bad_value(s, algo, "%s must be %s", s->type == GM_PARAM_INT64 ? "a whole number" : "whole numbers");
      if (s->type == GM_PARAM_INT64) *(int64_t *)field = (int64_t)v;
      else ((int64_t *)field)[i] = (int64_t)v;
      return GPUML_OK;
    case GM_PARAM_CHOICE:
    case GM_PARAM_CHOICE_LIST:
      return bad_value(s, algo, "%s must be %s", "a name, not a number");
  }
  return bad_value(s, algo, "%s: %s", "unknown parameter type");
}

gpuml_status gm_params_set_numbers(const gm_param_spec *specs, const char *algo, void *params,
                                   const char *name, const double *values, int64_t count) {
  gm_clear_error();
  const gm_param_spec *s = NULL;
  gpuml_status st = find(specs, algo, name, &s);
  if (st) return st;
  if (!params || (count > 0 && !values))
    return bad_value(s, algo, "%s: %s", "no parameters or values given");
  if (!is_list(s)) {
    if (count != 1) return bad_value(s, algo, "%s must be %s", "a single value");
    if ((st = store_number(s, algo, params, 0, values[0], 0))) return st;
    if (s->has_flag) *(int *)((char *)params + s->flag_offset) = s->flag_on_number;
    return GPUML_OK;
  }
  if ((st = check_count(s, algo, count))) return st;
  /* all values checked before any is stored: a failed call leaves the list as it was */
  for (int64_t i = 0; i < count; i++)
    if ((st = store_number(s, algo, params, i, values[i], 1))) return st;
  for (int64_t i = 0; i < count; i++) store_number(s, algo, params, i, values[i], 0);
  *(int64_t *)((char *)params + s->count_offset) = count;
  return GPUML_OK;
}

gpuml_status gm_params_set_number(const gm_param_spec *specs, const char *algo, void *params,
                                  const char *name, double value) {
  return gm_params_set_numbers(specs, algo, params, name, &value, 1);
}

gpuml_status gm_params_set_strings(const gm_param_spec *specs, const char *algo, void *params,
                                   const char *name, const char *const *values, int64_t count) {
  gm_clear_error();
  const gm_param_spec *s = NULL;
  gpuml_status st = find(specs, algo, name, &s);
  if (st) return st;
  if (!params || (count > 0 && !values))
    return bad_value(s, algo, "%s: %s", "no parameters or values given");
  char *field = (char *)params + s->offset;
  if (s->type == GM_PARAM_CHOICE_LIST) {
    if ((st = check_count(s, algo, count))) return st;
    for (int64_t i = 0; i < count; i++)
      if (choice_index(s, values[i]) < 0) return bad_choice(s, algo, values[i]);
    for (int64_t i = 0; i < count; i++) ((int *)field)[i] = choice_index(s, values[i]);
    *(int64_t *)((char *)params + s->count_offset) = count;
    return GPUML_OK;
  }
  if (count != 1) return bad_value(s, algo, "%s must be %s", "a single name");
  const char *value = values[0];
  if (s->type == GM_PARAM_CHOICE) {
    const int c = choice_index(s, value);
    if (c < 0) return bad_choice(s, algo, value);
    *(int *)field = c;
    return GPUML_OK;
  }
  if (s->auto_name && gm_same_name(value, s->auto_name)) {
    if (is_list(s)) {
      st = store_number(s, algo, params, 0, s->auto_value, 0);
      if (!st) *(int64_t *)((char *)params + s->count_offset) = 1;
      return st;
    }
    if ((st = store_number(s, algo, params, 0, s->auto_value, 0))) return st;
    if (s->has_flag) *(int *)((char *)params + s->flag_offset) = !s->flag_on_number;
    return GPUML_OK;
  }
  char id[64];
  snprintf(id, sizeof id, "%s:badParameter", algo);
  if (s->auto_name)
    return gm_fail(GPUML_ERR_ARG, id, "%s must be a number or \"%s\", not \"%s\"", s->name,
                   s->auto_name, value ? value : "(null)");
  return gm_fail(GPUML_ERR_ARG, id, "%s must be a number, not \"%s\"", s->name,
                 value ? value : "(null)");
}

gpuml_status gm_params_set_string(const gm_param_spec *specs, const char *algo, void *params,
                                  const char *name, const char *value) {
  return gm_params_set_strings(specs, algo, params, name, &value, 1);
}

gpuml_status gm_params_get_number(const gm_param_spec *specs, const char *algo,
                                  const void *params, const char *name, double *value) {
  gm_clear_error();
  const gm_param_spec *s = NULL;
  gpuml_status st = find(specs, algo, name, &s);
  if (st) return st;
  if (!params || !value) return bad_value(s, algo, "%s: %s", "no parameters or output given");
  const char *field = (const char *)params + s->offset;
  switch (s->type) {
    case GM_PARAM_REAL: *value = *(const double *)field; return GPUML_OK;
    case GM_PARAM_INT:
    case GM_PARAM_BOOL:
    case GM_PARAM_CHOICE: *value = *(const int *)field; return GPUML_OK;
    case GM_PARAM_INT64: *value = (double)*(const int64_t *)field; return GPUML_OK;
    default: return bad_value(s, algo, "%s is %s", "a list, not a single number");
  }
}

/* The tables of the algorithms (core/tsne.c, core/gmm.c, core/dpc.c). */
extern const gm_param_spec gm_tsne_param_specs[];
extern const gm_param_spec gm_gmm_param_specs[];
extern const gm_param_spec gm_dpc_param_specs[];
extern const gm_param_spec gm_tsne_transform_param_specs[];

static const gm_param_spec *specs_of(gpuml_params_kind kind, const char **algo) {
  switch (kind) {
    case GPUML_PARAMS_TSNE: *algo = "tsne"; return gm_tsne_param_specs;
    case GPUML_PARAMS_GMM: *algo = "gmm"; return gm_gmm_param_specs;
    case GPUML_PARAMS_DPC: *algo = "dpc"; return gm_dpc_param_specs;
    case GPUML_PARAMS_TSNE_TRANSFORM: *algo = "tsne"; return gm_tsne_transform_param_specs;
  }
  *algo = "gpuml";
  return NULL;
}

static gpuml_status unknown_kind(gpuml_params_kind kind) {
  return gm_fail(GPUML_ERR_ARG, "badParameter", "unknown kind of parameters %d", (int)kind);
}

gpuml_status gpuml_params_set_numbers(gpuml_params_kind kind, void *params, const char *name,
                                      const double *values, int64_t count) {
  const char *algo;
  const gm_param_spec *specs = specs_of(kind, &algo);
  return specs ? gm_params_set_numbers(specs, algo, params, name, values, count)
               : unknown_kind(kind);
}

gpuml_status gpuml_params_set_strings(gpuml_params_kind kind, void *params, const char *name,
                                      const char *const *values, int64_t count) {
  const char *algo;
  const gm_param_spec *specs = specs_of(kind, &algo);
  return specs ? gm_params_set_strings(specs, algo, params, name, values, count)
               : unknown_kind(kind);
}

gpuml_status gpuml_params_get(gpuml_params_kind kind, const void *params, const char *name,
                              double *value) {
  const char *algo;
  const gm_param_spec *specs = specs_of(kind, &algo);
  return specs ? gm_params_get_number(specs, algo, params, name, value) : unknown_kind(kind);
}

const char *gpuml_params_name(gpuml_params_kind kind, int i) {
  const char *algo;
  const gm_param_spec *specs = specs_of(kind, &algo);
  if (!specs || i < 0) return NULL;
  for (int j = 0; specs[j].name; j++)
    if (j == i) return specs[j].name;
  return NULL;
}
