/*
 * gpuml_info_mex: MEX gateway to gpuml_backend_info. Called by gpuml_info.m.
 *
 *   s = gpuml_info_mex ()
 *
 * s: scalar struct with the fields of gpuml_info (see gpuml.h), and mpi: true when the
 * package was built with MPI (GPUML_HAVE_MPI, set by its build for every gateway when it
 * builds gpuml_mpi_mex with MPI).
 */
#include "gpuml_mex.h"

static void set_number(mxArray *s, const char *field, double v) {
  mxSetField(s, 0, field, mxCreateDoubleScalar(v));
}

static void set_logical(mxArray *s, const char *field, int v) {
  mxSetField(s, 0, field, mxCreateLogicalScalar(v != 0));
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[]) {
  (void)prhs;
  if (nrhs != 0) mexErrMsgIdAndTxt("gpuml:info:nargs", "gpuml_info_mex takes no arguments");
  if (nlhs > 1) mexErrMsgIdAndTxt("gpuml:info:nargs", "gpuml_info_mex returns one output");
  gpuml_info info;
  gpuml_status st = gpuml_backend_info(&info);
  if (st) gpuml_mex_raise(st);
  gpuml_build build;
  if ((st = gpuml_build_info(&build))) gpuml_mex_raise(st);
  static const char *fields[] = {"version",        "openmp",
                                 "max_threads",    "cuda_compiled",
                                 "cuda_runtime_version", "cuda_driver_version",
                                 "device_count",   "device_name",
                                 "compute_capability",   "device_memory",
                                 "cuda_message",   "cuda_architectures",
                                 "compiler",       "environment",
                                 "mpi"};
  mxArray *s = mxCreateStructMatrix(1, 1, (int)(sizeof fields / sizeof fields[0]), fields);
  mxSetField(s, 0, "version", mxCreateString(info.version));
  set_logical(s, "openmp", info.openmp);
  set_number(s, "max_threads", info.max_threads);
  set_logical(s, "cuda_compiled", info.cuda_compiled);
  set_number(s, "cuda_runtime_version", info.cuda_runtime_version);
  set_number(s, "cuda_driver_version", info.cuda_driver_version);
  set_number(s, "device_count", info.device_count);
  mxSetField(s, 0, "device_name", mxCreateString(info.device_name));
  mxArray *cc = mxCreateDoubleMatrix(1, 2, mxREAL);
  mxGetPr(cc)[0] = info.compute_major;
  mxGetPr(cc)[1] = info.compute_minor;
  mxSetField(s, 0, "compute_capability", cc);
  set_number(s, "device_memory", (double)info.device_memory);
  mxSetField(s, 0, "cuda_message", mxCreateString(info.cuda_message));
  mxSetField(s, 0, "cuda_architectures", mxCreateString(build.cuda_architectures));
  mxSetField(s, 0, "compiler", mxCreateString(build.compiler));
  int nenv = 0;
  while (gpuml_env_name(nenv)) nenv++;
  mxArray *env = mxCreateCellMatrix((mwSize)nenv, 2);
  for (int i = 0; i < nenv; i++) {
    mxSetCell(env, (mwIndex)i, mxCreateString(gpuml_env_name(i)));
    mxSetCell(env, (mwIndex)(i + nenv), mxCreateString(gpuml_env_meaning(i)));
  }
  mxSetField(s, 0, "environment", env);
#ifdef GPUML_HAVE_MPI
  set_logical(s, "mpi", 1);
#else
  set_logical(s, "mpi", 0);
#endif
  plhs[0] = s;
}
