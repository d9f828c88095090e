/* C tests of setting parameters by name (core/params.c): conversions, errors, lists. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "gpuml.h"
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
    {GM_PARAM(toy, rate, GM_PARAM_REAL), .auto_name = "auto", .auto_value = 0,
     .has_flag = 1, .flag_offset = offsetof(toy, flag), .flag_on_number = 0},
    {GM_PARAM(toy, iterations, GM_PARAM_INT)},
    {GM_PARAM(toy, count, GM_PARAM_INT64)},
    {GM_PARAM(toy, flag, GM_PARAM_BOOL)},
    {GM_PARAM(toy, method, GM_PARAM_CHOICE), .choices = methods},
    {GM_PARAM(toy, scales, GM_PARAM_REAL_LIST), .count_offset = offsetof(toy, nscales), .capacity = 4},
    {GM_PARAM(toy, sizes, GM_PARAM_INT64_LIST), .count_offset = offsetof(toy, nsizes), .capacity = 3},
    {GM_PARAM(toy, models, GM_PARAM_CHOICE_LIST), .choices = methods,
     .count_offset = offsetof(toy, nmodels), .capacity = 2},
    {.name = NULL}};

static int failed_with(gpuml_status st, const char *needle) {
  return st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "toy:badParameter") == 0 &&
         strstr(gpuml_last_error(), needle) != NULL;
}

/* The tables of the algorithms, through the public entry points. */
static void test_algorithms(void) {
  gpuml_tsne_params tp;
  gpuml_tsne_params_init(&tp);
  const char *fft = "FFT", *rate = "auto";
  double v = 0;
  CHECK(gpuml_params_set_strings(GPUML_PARAMS_TSNE, &tp, "method", &fft, 1) == GPUML_OK &&
            tp.method == GPUML_TSNE_FFT,
        "tsne: method by name");
  const double perplexity = 12.5, iters = 300;
  CHECK(gpuml_params_set_numbers(GPUML_PARAMS_TSNE, &tp, "perplexity", &perplexity, 1) == GPUML_OK &&
            gpuml_params_set_numbers(GPUML_PARAMS_TSNE, &tp, "max_iter", &iters, 1) == GPUML_OK &&
            tp.perplexity == 12.5 && tp.max_iter == 300,
        "tsne: numbers by name");
  tp.learning_rate = 500;
  CHECK(gpuml_params_set_strings(GPUML_PARAMS_TSNE, &tp, "learning_rate", &rate, 1) == GPUML_OK &&
            tp.learning_rate == 0,
        "tsne: learning_rate \"auto\" is the core's automatic rate");
  gpuml_tsne_params_init(&tp);
  CHECK(gpuml_params_get(GPUML_PARAMS_TSNE, &tp, "stop_lying_iter", &v) == GPUML_OK && v == 250,
        "tsne: a default read by name");
  CHECK(gpuml_params_get(GPUML_PARAMS_TSNE, &tp, "bogus", &v) == GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "tsne:badParameter") == 0 &&
            strstr(gpuml_last_error(), "\"perplexity\"") != NULL,
        "tsne: an unknown name lists the parameters: %s", gpuml_last_error());
  int names = 0;
  while (gpuml_params_name(GPUML_PARAMS_TSNE, names)) names++;
  CHECK(names == 16 && gpuml_params_name(GPUML_PARAMS_TSNE, -1) == NULL, "tsne: %d names", names);
  names = 0;
  while (gpuml_params_name(GPUML_PARAMS_TSNE_TRANSFORM, names)) names++;
  CHECK(names == 8, "tsne transform: %d names", names);

  gpuml_gmm_params gp;
  gpuml_gmm_params_init(&gp);
  CHECK(gp.nG == 9 && gp.G[0] == 1 && gp.G[8] == 9, "gmm: G = 1:9 by default (mclust's)");
  const double G[] = {2, 3, 5};
  const char *diag = "diag";
  CHECK(gpuml_params_set_numbers(GPUML_PARAMS_GMM, &gp, "G", G, 3) == GPUML_OK && gp.nG == 3 &&
            gp.G[2] == 5 &&
            gpuml_params_set_strings(GPUML_PARAMS_GMM, &gp, "models", &diag, 1) == GPUML_OK &&
            gp.n_models == 1 && gp.models[0] == GPUML_GMM_VVI,
        "gmm: G and a model by name");
  const char *two[] = {"EVE", "vvv"};
  CHECK(gpuml_params_set_strings(GPUML_PARAMS_GMM, &gp, "models", two, 2) == GPUML_OK &&
            gp.n_models == 2 && gp.models[0] == GPUML_GMM_EVE && gp.models[1] == GPUML_GMM_VVV,
        "gmm: models by mclust's names");
  const char *bad = "XXX";
  CHECK(gpuml_params_set_strings(GPUML_PARAMS_GMM, &gp, "models", &bad, 1) == GPUML_ERR_ARG,
        "gmm: an unknown model name");
  const char *km = "kmeans++";
  CHECK(gpuml_params_set_strings(GPUML_PARAMS_GMM, &gp, "init", &km, 1) == GPUML_OK &&
            gp.init == GPUML_GMM_INIT_KMEANSPP,
        "gmm: init by name");
  int64_t gmax = 0;
  CHECK(gpuml_gmm_check(100, 4, &gp, NULL, &gmax) == GPUML_ERR_ARG, "gmm check: NULL options");
  gpuml_options opt;
  gpuml_options_init(&opt);
  CHECK(gpuml_gmm_check(100, 4, &gp, &opt, &gmax) == GPUML_OK && gmax == 5,
        "gmm check: the largest G for the caller's buffers");
  CHECK(gpuml_gmm_check(4, 4, &gp, &opt, &gmax) == GPUML_ERR_ARG &&
            strcmp(gpuml_last_error_id(), "gmm:badG") == 0,
        "gmm check: G beyond the rows, before any data: %s", gpuml_last_error());

  gpuml_dpc_params dp;
  gpuml_dpc_params_init(&dp);
  const double dc = 0.5, k = 4;
  const char *autow = "auto", *gauss = "gaussian";
  CHECK(gpuml_params_set_numbers(GPUML_PARAMS_DPC, &dp, "dc", &dc, 1) == GPUML_OK &&
            dp.dc == 0.5 && dp.estimate_dc == 0,
        "dpc: a number for dc is the cutoff");
  CHECK(gpuml_params_set_strings(GPUML_PARAMS_DPC, &dp, "dc", &autow, 1) == GPUML_OK &&
            dp.estimate_dc == 1,
        "dpc: dc \"auto\" estimates it");
  CHECK(gpuml_params_set_numbers(GPUML_PARAMS_DPC, &dp, "k", &k, 1) == GPUML_OK &&
            dp.select.has_k == 1 && dp.select.k == 4 && !dp.select.has_rho,
        "dpc: k marks the selection given");
  CHECK(gpuml_params_set_strings(GPUML_PARAMS_DPC, &dp, "kernel", &gauss, 1) == GPUML_OK &&
            dp.kernel == GPUML_DPC_GAUSSIAN,
        "dpc: the kernel by name");
}

int main(void) {
  toy t;
  memset(&t, 0, sizeof t);
  CHECK(gm_params_set_number(toy_specs, "toy", &t, "RATE", 0.5) == GPUML_OK && t.rate == 0.5 &&
            t.flag == 0,
        "a real by a name in any case, its flag set for a number");
  CHECK(gm_params_set_string(toy_specs, "toy", &t, "rate", "Auto") == GPUML_OK && t.rate == 0 &&
            t.flag == 1,
        "\"auto\" stores the auto value and the other flag");
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
  test_algorithms();
  return check_summary("C");
}
