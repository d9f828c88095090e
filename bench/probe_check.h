// Error checks of the standalone CUDA probes (bench/screen_probe.cu, bench/select_probe.cu):
// the call, where and why, then exit.
#ifndef GPUML_BENCH_PROBE_CHECK_H
#define GPUML_BENCH_PROBE_CHECK_H
#include <stdio.h>
#include <stdlib.h>

// A probe's failure: what failed, where, why; then exit.
#define PROBE_FAIL(what, why)                                                \
  do {                                                                       \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, what, why);        \
    exit(1);                                                                 \
  } while (0)
#define CK(x)                                                                \
  do {                                                                       \
    cudaError_t e_ = (x);                                                    \
    if (e_ != cudaSuccess) PROBE_FAIL(#x, cudaGetErrorString(e_));           \
  } while (0)
#define CB(x)                                                                \
  do {                                                                       \
    cublasStatus_t s_ = (x);                                                 \
    if (s_ != CUBLAS_STATUS_SUCCESS) PROBE_FAIL(#x, cublasGetStatusString(s_)); \
  } while (0)
#endif
