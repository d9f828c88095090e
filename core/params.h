/* Parameters set by name: each algorithm describes its parameter struct once, as a table
 * of gm_param_spec, and its public gpuml_<algo>_params_set*() calls go through these
 * helpers, so that a front end loops over the names its user gave and converts each
 * value by type, holding no list of names, defaults or rules of its own.
 *
 * Setting converts and type-checks only (a whole number for a count, a known name for a
 * choice, a list within its capacity); whether a value is in range is checked once, by
 * the algorithm's check at run time, also for structs filled directly in C. */
#ifndef GPUML_PARAMS_H
#define GPUML_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GM_PARAM_REAL,        /* double */
  GM_PARAM_INT,         /* int: a whole number within int's range */
  GM_PARAM_INT64,       /* int64_t: a whole number */
  GM_PARAM_BOOL,        /* int: 0 or 1 (any non-zero number gives 1) */
  GM_PARAM_CHOICE,      /* int (an enum): the index of a name in `choices` */
  GM_PARAM_REAL_LIST,   /* double[capacity] at offset, int64_t count at count_offset */
  GM_PARAM_INT64_LIST,  /* int64_t[capacity], whole numbers */
  GM_PARAM_CHOICE_LIST  /* int[capacity]: indices of names in `choices` */
} gm_param_type;

typedef struct {
  const char *name;
  gm_param_type type;
  size_t offset;              /* offsetof() the field in the params struct */
  const char *const *choices; /* CHOICE, CHOICE_LIST: the names, NULL-terminated, matched
                                 without regard to case; also accepted by set_strings */
  const int *choice_values;   /* the value each name stores (NULL: its position), so that
                                 several names can mean one value */
  const char *auto_name;      /* a number may also be given as this word ("auto") ... */
  double auto_value;          /* ... which stores this value */
  size_t count_offset;        /* lists: offsetof() the int64_t count */
  int64_t capacity;           /* lists: the most values the array holds */
  int has_flag;               /* a number also sets the int at flag_offset to flag_on_number, */
  size_t flag_offset;         /* and the auto word sets it to !flag_on_number (dpc's dc: a */
  int flag_on_number;         /* number is the cutoff, "auto" estimates it) */
} gm_param_spec;

/* A table entry: GM_PARAM(my_params, field, GM_PARAM_REAL) names the field as it is
 * called in C; further members by designated initializers after it. */
#define GM_PARAM(struct_type, field, param_type) \
  .name = #field, .type = (param_type), .offset = offsetof(struct_type, field)

/* Each takes the table (terminated by an entry with name NULL), the struct, and the
 * algorithm's prefix for error ids ("tsne" gives "tsne:badParameter"). An unknown name
 * is an error that lists the known ones. */
gpuml_status gm_params_set_number(const gm_param_spec *specs, const char *algo, void *params,
                                  const char *name, double value);
/* A word: a choice, or a number's auto_name. */
gpuml_status gm_params_set_string(const gm_param_spec *specs, const char *algo, void *params,
                                  const char *name, const char *value);
/* Several numbers: a list parameter, or a scalar one given one value. */
gpuml_status gm_params_set_numbers(const gm_param_spec *specs, const char *algo, void *params,
                                   const char *name, const double *values, int64_t count);
/* Several words: a choice list, or a scalar one given one word. */
gpuml_status gm_params_set_strings(const gm_param_spec *specs, const char *algo, void *params,
                                   const char *name, const char *const *values, int64_t count);

/* The value of a scalar number parameter (REAL, INT, INT64, BOOL; a CHOICE gives its
 * index), so that front ends and tests can show the core's defaults. */
gpuml_status gm_params_get_number(const gm_param_spec *specs, const char *algo,
                                  const void *params, const char *name, double *value);

/* Case-insensitive equality of two names (the rule every parser of names follows). */
int gm_same_name(const char *a, const char *b);

#ifdef __cplusplus
}
#endif

#endif
