/*
 * gpuml_mpi_mex: MEX gateway to the SPMD entry points of gpuml_mpi.h, for a job started as
 * `mpirun -np N octave script.m` in which every rank calls them on its own rows over
 * MPI_COMM_WORLD. Called by gpu_mpi_rank.m, gpu_mpi_size.m, gpu_mpi_finalize.m,
 * gpu_mpi_knn.m, gpu_mpi_gmm.m and gpu_mpi_dpc.m.
 *
 *   [rank, size, started] = gpuml_mpi_mex ("start")
 *   ended = gpuml_mpi_mex ("finalize")
 *   [idx, dist, backend, rechecked] =
 *       gpuml_mpi_mex ("knn", data, query, k, backend, verbose, precision, metric, devices)
 *   [labels, model] = gpuml_mpi_mex ("gmm", X, params, seed, backend, verbose, devices)
 *   [rho, delta, nearest, gamma, dc, backend, peaks, clusters, halo, rows] =
 *       gpuml_mpi_mex ("dpc", x, params, seed, backend, verbose, devices)
 *
 * The arguments and outputs are those of gpuml_knn_mex, gpuml_gmm_mex and gpuml_dpc_mex
 * (double data only) for this rank's rows: data, X and x are this rank's rows (the same
 * number of columns on every rank), and so are idx and dist of a self-search, labels,
 * model.z and model.uncertainty, rho, delta, nearest, gamma, clusters and halo; the
 * neighbour indices, nearest and peaks are global 1-based rows (the ranks' rows one after
 * another in rank order), and rows the global rows of this rank's rows. started: true when
 * this call initialised MPI. ended: true when this call finalised MPI. devices: "local",
 * [] (the default, "local"), device numbers or "all", by the core's rule for MPI calls
 * (gpuml_mpi_options_set_devices).
 *
 * MPI starts at the first call when nobody has started it; gpuml then finalises it when
 * Octave exits or clears this file, or at "finalize" (gpuml_mpi_start and gpuml_mpi_end
 * hold that rule). While MPI runs this file stays loaded (mexLock), so that `clear all`
 * between two calls does not end it. Built without MPI (GPUML_HAVE_MPI undefined), every
 * command but "finalize" is an error that says so.
 */
#include <stdlib.h>
#include <string.h>
#include "gpuml_mex.h"

#ifdef GPUML_HAVE_MPI
#include <mpi.h>
#include "gpuml_dpc_mex.h"
#include "gpuml_gmm_mex.h"
#include "gpuml_mpi.h"

/* The end of this file: the GPU contexts it kept, and MPI when gpuml started it. */
static void at_unload(void) {
  gpuml_shutdown();
  gpuml_mpi_end();
}

static void at_process_exit(void) { gpuml_mpi_end(); }

static void mpi_up(int *rank, int *size, int *started) {
  int began = 0;
  gpuml_status st = gpuml_mpi_start(rank, size, &began);
  if (st) gpuml_mex_raise(st);
  if (began) {
    mexLock();
    atexit(at_process_exit); /* should Octave exit without unloading this file */
  }
  mexAtExit(at_unload);
  if (started) *started = began;
}

/* The devices of a call over the ranks, by the core's rule (a collective; MPI up and
 * opt->backend set). */
static void mpi_devices(gpuml_options *opt, const mxArray *a) {
  char *word = NULL;
  if (mxIsChar(a))
    word = gpuml_mex_word(a, "devices", "\"local\", device numbers or \"all\"");
  else if (!mxIsDouble(a) || mxIsComplex(a))
    mexErrMsgIdAndTxt("gpuml:badOption",
                      "devices must be \"local\", [], device numbers or \"all\"");
  gpuml_status st = gpuml_mpi_options_set_devices(
      MPI_COMM_WORLD, opt, word, word ? NULL : mxGetPr(a),
      word ? 0 : (int64_t)mxGetNumberOfElements(a));
  if (word) mxFree(word);
  if (st) gpuml_mex_raise(st);
}

/* The options of a fit (gpuml_mex_options, gpuml_mex_seed, the devices) over the ranks;
 * MPI up. */
static void fit_options(gpuml_options *opt, gpuml_mex_progress_state *ps,
                        const mxArray *const args[]) {
  gpuml_mex_options(opt, args[3], args[4], ps);
  gpuml_mex_seed(opt, args[2]);
  mpi_up(NULL, NULL, NULL); /* after gpuml_mex_options: this file's exit function */
  mpi_devices(opt, args[5]);
}

static void start(int nlhs, mxArray *plhs[]) {
  int rank = 0, size = 1, started = 0;
  mpi_up(&rank, &size, &started);
  plhs[0] = mxCreateDoubleScalar(rank);
  if (nlhs > 1) plhs[1] = mxCreateDoubleScalar(size);
  if (nlhs > 2) plhs[2] = mxCreateLogicalScalar(started != 0);
}

static void finalize(mxArray *plhs[]) {
  const int ended = gpuml_mpi_end();
  if (ended) mexUnlock();
  plhs[0] = mxCreateLogicalScalar(ended != 0);
}

/* As gpuml_knn_mex, over the ranks, in double precision. */
static void knn(int nlhs, mxArray *plhs[], const mxArray *prhs[]) {
  const mxArray *data = prhs[0], *query = prhs[1];
  int64_t k = 0;
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  const int self = gpuml_mex_knn_args(prhs, &k, &opt, &ps);
  if (!mxIsDouble(data)) mexErrMsgIdAndTxt("gpuml:knn:badType", "data must be double");
  mpi_up(NULL, NULL, NULL); /* after gpuml_mex_options: this file's exit function */
  mpi_devices(&opt, prhs[7]);
  const int64_t n = (int64_t)mxGetM(data), d = (int64_t)mxGetN(data);
  const int64_t m = self ? n : (int64_t)mxGetM(query);
  int64_t n_total = 0;
  gpuml_status st = gpuml_mpi_rows(MPI_COMM_WORLD, n, d, &n_total);
  if (st) gpuml_mex_raise(st);
  /* A k the core will refuse must not size an allocation: the core then gets
   * placeholders and reports the bad k on every rank. */
  const int64_t kk = k >= 1 && k <= n_total ? k : 0;
  mxArray *dist = mxCreateDoubleMatrix((mwSize)m, (mwSize)kk, mxREAL);
  int64_t *index = (int64_t *)mxMalloc((m * kk > 0 ? (size_t)(m * kk) : 1) * sizeof *index);
  double dist_placeholder = 0;
  gpuml_knn_result result;
  st = gpuml_mpi_knn_search(MPI_COMM_WORLD, (const double *)gpuml_mex_data(data), n, d,
                            self ? NULL : (const double *)gpuml_mex_data(query), m, k, index,
                            m * kk > 0 ? mxGetPr(dist) : &dist_placeholder, &opt, &result);
  if (st) {
    mxDestroyArray(dist);
    gpuml_mex_raise(st); /* index is mxMalloc'ed: Octave frees it */
  }
  plhs[0] = gpuml_mex_indices(index, m, kk);
  mxFree(index);
  if (nlhs > 1) plhs[1] = dist;
  else mxDestroyArray(dist);
  if (nlhs > 2) plhs[2] = mxCreateString(gpuml_backend_name(result.run.backend));
  if (nlhs > 3) plhs[3] = mxCreateDoubleScalar((double)result.rechecked);
}

/* As gpuml_gmm_mex, over the ranks. */
static void gmm(int nlhs, mxArray *plhs[], const mxArray *prhs[]) {
  gpuml_gmm_mex_check_x(prhs[0]);
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  fit_options(&opt, &ps, prhs);
  int64_t n_total = 0;
  gpuml_status st = gpuml_mpi_rows(MPI_COMM_WORLD, (int64_t)mxGetM(prhs[0]),
                                   (int64_t)mxGetN(prhs[0]), &n_total);
  if (st) gpuml_mex_raise(st);
  MPI_Comm world = MPI_COMM_WORLD;
  gpuml_gmm_mex_fit_with(nlhs, plhs, prhs[0], prhs[1], &opt, n_total, gpuml_mpi_gmm_fit_comm,
                         &world);
}

/* As gpuml_dpc_mex, over the ranks, and the global rows of this rank's rows. */
static void dpc(int nlhs, mxArray *plhs[], const mxArray *prhs[]) {
  gpuml_dpc_mex_check_x(prhs[0]);
  gpuml_options opt;
  gpuml_mex_progress_state ps;
  fit_options(&opt, &ps, prhs);
  const int64_t n = (int64_t)mxGetM(prhs[0]);
  int64_t n_total = 0, offset = 0;
  gpuml_status st =
      gpuml_mpi_block(MPI_COMM_WORLD, n, (int64_t)mxGetN(prhs[0]), &n_total, &offset);
  if (st) gpuml_mex_raise(st);
  MPI_Comm world = MPI_COMM_WORLD;
  gpuml_dpc_mex_fit_with(nlhs < 9 ? nlhs : 9, plhs, prhs[0], prhs[1], &opt, n_total,
                         gpuml_mpi_dpc_fit_comm, &world);
  if (nlhs > 9) {
    mxArray *rows = mxCreateDoubleMatrix((mwSize)n, 1, mxREAL);
    for (int64_t i = 0; i < n; i++) mxGetPr(rows)[i] = (double)(offset + i + 1);
    plhs[9] = rows;
  }
}

#else /* built without MPI */

static void without_mpi(void) {
  mexErrMsgIdAndTxt("gpuml:mpi:notBuilt",
                    "gpuml was built without MPI: install Open MPI (Debian: libopenmpi-dev "
                    "and openmpi-bin) and install the gpuml package again, whose build then "
                    "finds mpicc");
}

static void start(int nlhs, mxArray *plhs[]) {
  (void)nlhs, (void)plhs;
  without_mpi();
}

static void finalize(mxArray *plhs[]) { plhs[0] = mxCreateLogicalScalar(0); }

static void knn(int nlhs, mxArray *plhs[], const mxArray *prhs[]) {
  (void)nlhs, (void)plhs, (void)prhs;
  without_mpi();
}

static void gmm(int nlhs, mxArray *plhs[], const mxArray *prhs[]) {
  (void)nlhs, (void)plhs, (void)prhs;
  without_mpi();
}

static void dpc(int nlhs, mxArray *plhs[], const mxArray *prhs[]) {
  (void)nlhs, (void)plhs, (void)prhs;
  without_mpi();
}

#endif

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  static const struct {
    const char *name;
    int nargs, nout; /* arguments after the command; outputs at most */
  } commands[] = {{"start", 0, 3}, {"finalize", 0, 1}, {"knn", 8, 4}, {"gmm", 6, 2},
                  {"dpc", 6, 10}};
  char *cmd = nrhs >= 1 && mxIsChar(prhs[0]) ? mxArrayToString(prhs[0]) : NULL;
  int which = -1;
  for (int i = 0; cmd && i < (int)(sizeof commands / sizeof commands[0]); i++)
    if (!strcmp(cmd, commands[i].name)) which = i;
  if (cmd) mxFree(cmd);
  if (which < 0 || nrhs - 1 != commands[which].nargs || nlhs > commands[which].nout)
    mexErrMsgIdAndTxt("gpuml:mpi:nargs",
                      "usage: gpuml_mpi_mex (\"start\" | \"finalize\" | \"knn\" | \"gmm\" | "
                      "\"dpc\", ...); call gpu_mpi_rank, gpu_mpi_size, gpu_mpi_finalize, "
                      "gpu_mpi_knn, gpu_mpi_gmm or gpu_mpi_dpc instead");
  switch (which) {
    case 0: start(nlhs, plhs); break;
    case 1: finalize(plhs); break;
    case 2: knn(nlhs, plhs, prhs + 1); break;
    case 3: gmm(nlhs, plhs, prhs + 1); break;
    default: dpc(nlhs, plhs, prhs + 1); break;
  }
}
