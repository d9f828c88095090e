/* C tests of each rank's GPU (core/mpi/local_device.c), run as `mpirun -np 3
 * build/tests/test_devices_mpi`: the ranks of a host get distinct local numbers 0, 1, ...
 * (the part of gpuml_mpi_local_device before the modulo, which a host without GPUs
 * cannot show), the local device is that number modulo the host's devices, the rule of
 * the `devices` argument ("local", nothing, "all", numbers, bad values) sets the options
 * alike on every rank or fails on every rank, and the entry points give the same answers
 * with the options of every rule. Rank 0 prints the counts of all ranks. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gmm_compare.h" /* gmm_fit_t; check.h */
#include "gpuml_mpi.h"

/* The local numbers of the ranks of each host: distinct, 0 .. local_size - 1, in the
 * order of the ranks; local_size the host's ranks. */
static void check_local_rank(int rank, int size) {
  int local = -1, local_size = -1;
  gpuml_status st = gpuml_mpi_local_rank(MPI_COMM_WORLD, &local, &local_size);
  CHECK(st == GPUML_OK, "gpuml_mpi_local_rank (rank %d): %s", rank, gpuml_last_error());
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  char *hosts = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
  int mine[2] = {local, local_size}, *all = malloc(sizeof(int) * 2 * (size_t)size);
  MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                MPI_COMM_WORLD);
  MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
  int before = 0, same_host = 0;
  for (int r = 0; r < size; r++) {
    if (strcmp(hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME, host) != 0) continue;
    same_host++;
    if (r < rank) before++;
    if (r != rank)
      CHECK(all[2 * r] != local, "ranks %d and %d of one host share local number %d", rank, r,
            local);
  }
  CHECK(local == before && local_size == same_host,
        "rank %d: local number %d of %d, expected %d of %d (the host's ranks in order)", rank,
        local, local_size, before, same_host);
  /* the device: the local number modulo the host's devices, 0 without any */
  gpuml_info info;
  gpuml_backend_info(&info);
  int device = -1;
  st = gpuml_mpi_local_device(MPI_COMM_WORLD, &device);
  const int expected = info.device_count > 0 ? local % info.device_count : 0;
  CHECK(st == GPUML_OK && device == expected, "rank %d: local device %d, expected %d (%d devices)",
        rank, device, expected, info.device_count);
  CHECK(gpuml_mpi_local_rank(MPI_COMM_WORLD, NULL, NULL) == GPUML_ERR_ARG,
        "local_rank NULL is an error");
  free(hosts);
  free(all);
}

/* The rule of `devices`, on every rank alike. */
static void check_rule(int rank, int size) {
  int device = -1;
  gpuml_mpi_local_device(MPI_COMM_WORLD, &device);
  gpuml_options opt;
  const char *words[] = {"local", "LOCAL", NULL};
  for (int w = 0; w < 3; w++) {
    gpuml_options_init(&opt);
    opt.device = 5;
    opt.ndevices = 2;
    gpuml_status st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, words[w], NULL, 0);
    CHECK(st == GPUML_OK && opt.device == device && opt.ndevices == 0,
          "devices %s (rank %d): device %d, %d listed (%s)", words[w] ? words[w] : "not given",
          rank, opt.device, opt.ndevices, gpuml_last_error());
  }
  gpuml_options_init(&opt);
  opt.backend = GPUML_BACKEND_CPU;
  opt.device = 5;
  gpuml_status st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, "local", NULL, 0);
  CHECK(st == GPUML_OK && opt.device == 0 && opt.ndevices == 0,
        "devices \"local\" on the CPU backend (rank %d): device %d", rank, opt.device);
  gpuml_options_init(&opt);
  st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, "all", NULL, 0);
  CHECK(st == GPUML_OK && opt.ndevices == GPUML_ALL_DEVICES, "devices \"all\" (rank %d): %s",
        rank, gpuml_last_error());
  const double ids[2] = {1, 0};
  gpuml_options_init(&opt);
  st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, NULL, ids, 2);
  CHECK(st == GPUML_OK && opt.ndevices == 2 && opt.devices[0] == 1 && opt.devices[1] == 0,
        "devices c(1, 0) (rank %d): %s", rank, gpuml_last_error());
  /* bad values: an error on every rank, the options unchanged */
  const double minus_one = -1, twice[2] = {0, 0};
  struct {
    const char *word;
    const double *ids;
    int64_t count;
    const char *says;
  } bad[] = {{"locall", NULL, 0, "\"locall\""}, {"", NULL, 0, "local"},
             {NULL, &minus_one, 1, "-1"}, {NULL, twice, 2, "twice"}};
  for (int b = 0; b < 4; b++) {
    gpuml_options_init(&opt);
    gpuml_options before = opt;
    st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, bad[b].word, bad[b].ids, bad[b].count);
    CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "badDevice") == 0 &&
              strstr(gpuml_last_error(), bad[b].says) && !memcmp(&opt, &before, sizeof opt),
          "bad devices %d (rank %d): %s", b, rank, gpuml_last_error());
  }
  /* a bad value on rank 1 alone: every rank fails, naming rank 1 */
  gpuml_options_init(&opt);
  st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, rank == 1 ? "locall" : "local", NULL, 0);
  if (size > 1)
    CHECK(st == GPUML_ERR_ARG && strcmp(gpuml_last_error_id(), "badDevice") == 0 &&
              (rank == 1 || strstr(gpuml_last_error(), "rank 1:") != NULL) && opt.ndevices == 0 &&
              opt.device == 0,
          "\"locall\" on rank 1 alone (rank %d): %s", rank, gpuml_last_error());
  /* ranks that give different forms still meet in the same collectives */
  gpuml_options_init(&opt);
  st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, rank == 0 ? NULL : "local",
                                     rank == 0 ? ids : NULL, rank == 0 ? 2 : 0);
  CHECK(st == GPUML_OK, "numbers on rank 0, \"local\" elsewhere (rank %d): %s", rank,
        gpuml_last_error());
}

/* The points of every rank, and rank r's block: sizes 1 : 2 : 3 ... */
static double *points(int64_t n, int64_t d) {
  uint64_t s = 1717;
  double *x = malloc(sizeof(double) * (size_t)(n * d));
  for (int64_t i = 0; i < n * d; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = (double)(s >> 11) / 9007199254740992.0;
    x[i] = i % n < n / 2 ? u : u + 4; /* two groups */
  }
  return x;
}

static double *block_of(const double *x, int64_t n, int64_t d, int rank, int size, int64_t *r0,
                        int64_t *rn) {
  int64_t total = 0, before = 0;
  for (int r = 0; r < size; r++) total += r + 1;
  for (int r = 0; r < rank; r++) before += r + 1;
  *r0 = n * before / total;
  *rn = n * (before + rank + 1) / total - *r0;
  double *b = malloc(sizeof(double) * (size_t)((*rn > 0 ? *rn : 1) * d));
  for (int64_t t = 0; t < d; t++)
    memcpy(b + t * *rn, x + t * n + *r0, sizeof(double) * (size_t)*rn);
  return b;
}

/* The three entry points with options from each rule give the answers of the default
 * options (backend auto: the CPU on a host without GPUs, which ignores the devices). */
static void check_entry_points(int rank, int size) {
  const int64_t n = 240, d = 3, k = 6;
  double *x = points(n, d);
  int64_t r0, rn;
  double *mine = block_of(x, n, d, rank, size, &r0, &rn);
  gpuml_options plain;
  gpuml_options_init(&plain);
  int64_t *idx0 = malloc(sizeof(int64_t) * (size_t)(rn * k)), *idx = malloc(sizeof(int64_t) * (size_t)(rn * k));
  double *dist0 = malloc(sizeof(double) * (size_t)(rn * k)), *dist = malloc(sizeof(double) * (size_t)(rn * k));
  gpuml_gmm_params gp;
  gpuml_gmm_params_init(&gp);
  gp.nG = 2;
  gp.n_models = 1;
  gp.models[0] = GPUML_GMM_VVV;
  gmm_fit_t f0 = gmm_fit_alloc(rn, d, &gp), f1 = gmm_fit_alloc(rn, d, &gp);
  gpuml_dpc_params dp;
  gpuml_dpc_params_init(&dp);
  dp.estimate_dc = 0;
  dp.dc = 0.5;
  double *rho0 = malloc(sizeof(double) * (size_t)rn), *rho1 = malloc(sizeof(double) * (size_t)rn);
  double *delta0 = malloc(sizeof(double) * (size_t)rn), *delta1 = malloc(sizeof(double) * (size_t)rn);
  int64_t *near0 = malloc(sizeof(int64_t) * (size_t)rn), *near1 = malloc(sizeof(int64_t) * (size_t)rn);
  gpuml_status s0 = gpuml_mpi_knn_search(MPI_COMM_WORLD, mine, rn, d, NULL, 0, k, idx0, dist0, &plain, NULL);
  gpuml_status g0 = gpuml_mpi_gmm_fit(MPI_COMM_WORLD, mine, rn, d, &gp, &f0.model, NULL, f0.cls,
                                      NULL, f0.bic, &plain, NULL);
  gpuml_status p0 = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, mine, rn, d, &dp, rho0, delta0, near0, NULL,
                                      NULL, NULL, NULL, NULL, &plain, NULL);
  CHECK(s0 == GPUML_OK && g0 == GPUML_OK && p0 == GPUML_OK, "default options (rank %d): %s", rank,
        gpuml_last_error());
  const double ids[1] = {0};
  const char *rules[] = {"local", NULL, "all", "0"};
  for (int r = 0; r < 4; r++) {
    gpuml_options opt;
    gpuml_options_init(&opt);
    const int numbers = rules[r] && !strcmp(rules[r], "0");
    gpuml_status st = gpuml_mpi_options_set_devices(MPI_COMM_WORLD, &opt, numbers ? NULL : rules[r],
                                                    numbers ? ids : NULL, numbers ? 1 : 0);
    const char *name = rules[r] ? rules[r] : "not given";
    CHECK(st == GPUML_OK, "devices %s (rank %d): %s", name, rank, gpuml_last_error());
    st = gpuml_mpi_knn_search(MPI_COMM_WORLD, mine, rn, d, NULL, 0, k, idx, dist, &opt, NULL);
    CHECK(st == GPUML_OK && !memcmp(idx, idx0, sizeof(int64_t) * (size_t)(rn * k)) &&
              !memcmp(dist, dist0, sizeof(double) * (size_t)(rn * k)),
          "kNN with devices %s (rank %d): %s", name, rank, gpuml_last_error());
    st = gpuml_mpi_gmm_fit(MPI_COMM_WORLD, mine, rn, d, &gp, &f1.model, NULL, f1.cls, NULL,
                           f1.bic, &opt, NULL);
    CHECK(st == GPUML_OK && f1.model.loglik == f0.model.loglik && f1.model.G == f0.model.G &&
              !memcmp(f1.cls, f0.cls, sizeof(int64_t) * (size_t)rn),
          "mixtures with devices %s (rank %d): %s", name, rank, gpuml_last_error());
    st = gpuml_mpi_dpc_fit(MPI_COMM_WORLD, mine, rn, d, &dp, rho1, delta1, near1, NULL, NULL, NULL,
                           NULL, NULL, &opt, NULL);
    CHECK(st == GPUML_OK && !memcmp(rho1, rho0, sizeof(double) * (size_t)rn) &&
              !memcmp(delta1, delta0, sizeof(double) * (size_t)rn) &&
              !memcmp(near1, near0, sizeof(int64_t) * (size_t)rn),
          "density peaks with devices %s (rank %d): %s", name, rank, gpuml_last_error());
  }
  gmm_fit_free(&f0);
  gmm_fit_free(&f1);
  free(x), free(mine), free(idx0), free(idx), free(dist0), free(dist);
  free(rho0), free(rho1), free(delta0), free(delta1), free(near0), free(near1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check_local_rank(rank, size);
  check_rule(rank, size);
  check_entry_points(rank, size);
  int counts[2] = {check_passed, check_failed}, total[2] = {0, 0};
  MPI_Reduce(counts, total, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("C: %d passed, %d failed\n", total[0], total[1]);
  MPI_Finalize();
  return rank == 0 && total[1] ? 1 : 0;
}
