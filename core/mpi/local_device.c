/* Each rank's GPU on its host, and the rule of the front ends' `devices` argument of the
 * MPI functions (gpuml_mpi_local_rank, gpuml_mpi_local_device,
 * gpuml_mpi_options_set_devices). */
#include <string.h>
#include "gpuml_mpi.h"
#include "params.h" /* gm_same_name */
#include "ranks.h"

gpuml_status gpuml_mpi_local_rank(MPI_Comm comm, int *local_rank, int *local_size) {
  gm_clear_error();
  if (!local_rank) return gm_fail(GPUML_ERR_ARG, "badArgument", "local_rank must not be NULL");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return gm_fail(GPUML_ERR_ARG, "mpi:error", "MPI is not initialised: call MPI_Init first");
  /* The ranks of comm that share memory with this one are those of its host; the key
   * (its rank in comm) numbers them in the order of comm. */
  int rank = 0;
  MPI_Comm host;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS) return gm_mpi_failed("MPI_Comm_rank");
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Comm_split_type");
  int mine = 0, count = 1;
  const int ok = MPI_Comm_rank(host, &mine) == MPI_SUCCESS &&
                 MPI_Comm_size(host, &count) == MPI_SUCCESS;
  MPI_Comm_free(&host);
  if (!ok) return gm_mpi_failed("MPI_Comm_rank");
  *local_rank = mine;
  if (local_size) *local_size = count;
  return GPUML_OK;
}

/* The local device of a local rank on a host of `devices` CUDA devices. */
static int device_of(int local_rank, int devices) {
  return devices > 0 ? local_rank % devices : 0;
}

gpuml_status gpuml_mpi_local_device(MPI_Comm comm, int *device) {
  if (!device) {
    gm_clear_error();
    return gm_fail(GPUML_ERR_ARG, "badArgument", "device must not be NULL");
  }
  int local = 0;
  gpuml_status st = gpuml_mpi_local_rank(comm, &local, NULL);
  if (st) return st;
  gpuml_info info;
  gpuml_backend_info(&info);
  *device = device_of(local, info.device_count);
  return GPUML_OK;
}

/* The devices of one rank, on a copy of its options: "local" or nothing given (the
 * local device `local`, no list), "all", or the numbers listed. */
static gpuml_status set_devices(gpuml_options *opt, const char *word, const double *ids,
                                int64_t count, int local) {
  if (!word && count == 0) word = "local"; /* the default */
  if (word && gm_same_name(word, "local")) {
    opt->device = local;
    opt->ndevices = 0;
    return GPUML_OK;
  }
  if (word && gm_same_name(word, "all")) return gpuml_options_set_devices_word(opt, word);
  if (word)
    return gm_fail(GPUML_ERR_ARG, "badDevice",
                   "unknown devices \"%s\": give \"local\" (each rank on a GPU of its host, "
                   "the default), CUDA ordinals (0, 1, ...) or \"all\"", word);
  return gpuml_options_set_devices(opt, ids, count);
}

gpuml_status gpuml_mpi_options_set_devices(MPI_Comm comm, gpuml_options *opt, const char *word,
                                           const double *ids, int64_t count) {
  gm_clear_error();
  if (!opt) return gm_fail(GPUML_ERR_ARG, "badOptions", "options must not be NULL");
  /* Every rank takes the same steps whatever it was given (a rank cannot know whether the
   * others asked for "local"), and the ranks agree on the status before any options
   * change, so that a bad value on one rank is the error of every rank. */
  int rank = 0, size = 1, local = 0;
  gpuml_status st = gpuml_mpi_local_rank(comm, &local, NULL); /* MPI up, or "mpi:error" */
  if (st) return st;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return gm_mpi_failed("MPI_Comm_rank");
  /* The CPU backend runs as one device and ignores it: the devices are not counted then
   * (counting them starts the CUDA runtime, whose probe runs on device 0, in every rank
   * of a job that uses no GPU). */
  int devices = 0;
  if (opt->backend != GPUML_BACKEND_CPU) {
    gpuml_info info;
    gpuml_backend_info(&info);
    devices = info.device_count;
  }
  gpuml_options chosen = *opt;
  st = gm_mpi_agree(comm, rank, size,
                    set_devices(&chosen, word, ids, count, device_of(local, devices)));
  if (!st) *opt = chosen;
  return st;
}
