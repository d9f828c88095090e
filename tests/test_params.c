/* C tests of setting parameters by name (core/params.c): conversions, errors, lists. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "params.h"

typedef struct {
  double rate;
  int iterations;
  int64_t count;
  int flag;
  int method;
  double scales[4];
  int64_t nscales;
  int64_t sizes[3];
  int64_t nsizes;
  int models[2];
  int64_t nmodels;
} toy;

static const char *const methods[] = {"auto", "exact", "fft", NULL};
static const gm_param_spec toy_specs[] = {
    {"rate", GM_PARAM_REAL, offsetof(toy, rate), NULL, "auto", 0, 0, 0},
    {"iterations", GM_PARAM_INT, offsetof(toy, iterations), NULL, NULL, 0, 0, 0},
    {"count", GM_PARAM_INT64, offsetof(toy, count), NULL, NULL, 0, 0, 0},
    {"flag", GM_PARAM_BOOL, offsetof(toy, flag), NULL, NULL, 0, 0, 0},
    {"method", GM_PARAM_CHOICE, offsetof(toy, method), methods, NULL, 0, 0, 0},
    {"scales", GM_PARAM_REAL_LIST, offsetof(toy, scales), NULL, NULL, 0, offsetof(toy, nscales), 4},
    {"sizes", GM_PARAM_INT64_LIST, offsetof(toy, sizes), NULL, NULL, 0, offsetof(toy, nsizes), 3},
    {"models", GM_PARAM_CHOICE_LIST, offsetof(toy, models), methods, NULL, 0, offsetof(toy, nmodels), 2},
    {NULL, GM_PARAM_REAL, 0, NULL, NULL, 0, 0, 0}};

static int failed_with(gpuml_status st, const char *needle) {
  return st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "toy:badParameter") == 0 &&
         strstr(gpuml_last_error(), needle) != NULL;
}

int main(void) {
  toy t;
  memset(&t, 0, sizeof t);
  CHECK(gm_params_set_number(toy_specs, "toy", &t, "RATE", 0.5) == GPUML_OK && t.rate == 0.5,
        "a real by a name in any case");
  CHECK(gm_params_set_string(toy_specs, "toy", &t, "rate", "Auto") == GPUML_OK && t.rate == 0,
        "\"auto\" stores the auto value");
  CHECK(failed_with(gm_params_set_string(toy_specs, "toy", &t, "rate", "fast"), "\"auto\""),
        "another word for a number is an error naming auto: %s", gpuml_last_error());
  CHECK(gm_params_set_number(toy_specs, "toy", &t, "iterations", 250) == GPUML_OK &&
            t.iterations == 250,
        "an int");
  CHECK(failed_with(gm_params_set_number(toy_specs, "toy", &t, "iterations", 2.5), "whole"),
        "a fraction for an int: %s", gpuml_last_error());
  CHECK(failed_with(gm_params_set_number(toy_specs, "toy", &t, "iterations", 3e10), "whole"),
        "an int out of range");
  CHECK(gm_params_set_number(toy_specs, "toy", &t, "count", 5e12) == GPUML_OK &&
            t.count == (int64_t)5e12,
        "an int64 beyond int");
  CHECK(gm_params_set_number(toy_specs, "toy", &t, "flag", 2) == GPUML_OK && t.flag == 1,
        "a flag");
  CHECK(gm_params_set_string(toy_specs, "toy", &t, "method", "FFT") == GPUML_OK && t.method == 2,
        "a choice");
  CHECK(failed_with(gm_params_set_string(toy_specs, "toy", &t, "method", "bh"),
                    "\"auto\", \"exact\" or \"fft\""),
        "an unknown choice lists the choices: %s", gpuml_last_error());
  CHECK(failed_with(gm_params_set_number(toy_specs, "toy", &t, "method", 1), "name"),
        "a number for a choice");
  CHECK(failed_with(gm_params_set_number(toy_specs, "toy", &t, "perplexity", 1),
                    "\"rate\", \"iterations\""),
        "an unknown name lists the parameters: %s", gpuml_last_error());
  const double scales[] = {5, 30, 50};
  CHECK(gm_params_set_numbers(toy_specs, "toy", &t, "scales", scales, 3) == GPUML_OK &&
            t.nscales == 3 && t.scales[2] == 50,
        "a real list");
  CHECK(gm_params_set_number(toy_specs, "toy", &t, "scales", 7) == GPUML_OK && t.nscales == 1 &&
            t.scales[0] == 7,
        "a list of one");
  const double five[] = {1, 2, 3, 4, 5};
  CHECK(failed_with(gm_params_set_numbers(toy_specs, "toy", &t, "scales", five, 5), "at most 4"),
        "a list beyond its capacity");
  const double sizes[] = {1, 2, 9};
  CHECK(gm_params_set_numbers(toy_specs, "toy", &t, "sizes", sizes, 3) == GPUML_OK &&
            t.nsizes == 3 && t.sizes[2] == 9,
        "a whole-number list");
  const double bad_sizes[] = {1, 2.5};
  CHECK(failed_with(gm_params_set_numbers(toy_specs, "toy", &t, "sizes", bad_sizes, 2), "whole"),
        "a fraction in a whole-number list");
  CHECK(t.nsizes == 3 && t.sizes[0] == 1 && t.sizes[1] == 2 && t.sizes[2] == 9,
        "a failed set leaves the list as it was");
  CHECK(failed_with(gm_params_set_numbers(toy_specs, "toy", &t, "rate", scales, 2), "single"),
        "several values for a scalar");
  const char *models[] = {"exact", "AUTO"};
  CHECK(gm_params_set_strings(toy_specs, "toy", &t, "models", models, 2) == GPUML_OK &&
            t.nmodels == 2 && t.models[0] == 1 && t.models[1] == 0,
        "a choice list");
  const char *bad_models[] = {"exact", "xyz"};
  CHECK(failed_with(gm_params_set_strings(toy_specs, "toy", &t, "models", bad_models, 2), "xyz"),
        "an unknown name in a choice list");
  double v = 0;
  CHECK(gm_params_get_number(toy_specs, "toy", &t, "iterations", &v) == GPUML_OK && v == 250,
        "get a number");
  CHECK(gm_params_get_number(toy_specs, "toy", &t, "method", &v) == GPUML_OK && v == 2,
        "get a choice's index");
  CHECK(failed_with(gm_params_get_number(toy_specs, "toy", &t, "scales", &v), "list"),
        "get of a list is an error");
  CHECK(gm_same_name("VVV", "vvv") && !gm_same_name("VVV", "VV") && !gm_same_name(NULL, "a"),
        "names compare without case");
  return check_summary("C");
}
