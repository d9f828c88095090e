// Device discovery for gpuml_backend_info() and the backend choice: the devices found,
// and whether this build holds device code that runs on them.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include "gpuml_cuda.h"

#ifndef GPUML_CUDA_ARCHS
#define GPUML_CUDA_ARCHS "unknown"
#endif

// A kernel that exists only to ask whether the build's device code loads on a device.
__global__ void gm_probe_kernel(int *out) {
  if (out) *out = 1;
}

extern "C" int gm_cuda_probe(gpuml_info *info) {
  info->cuda_compiled = 1;
  cudaRuntimeGetVersion(&info->cuda_runtime_version);
  if (cudaDriverGetVersion(&info->cuda_driver_version) != cudaSuccess)
    info->cuda_driver_version = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    info->device_count = 0;
    snprintf(info->cuda_message, sizeof info->cuda_message, "no CUDA device: %s",
             err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    snprintf(info->device_name, sizeof info->device_name, "%s", prop.name);
    info->compute_major = prop.major;
    info->compute_minor = prop.minor;
    info->device_memory = prop.totalGlobalMem;
  }
  // A device whose architecture the build has no code for (and whose PTX it cannot
  // compile) is not usable: say so, and let "auto" take the CPU, rather than fail in
  // the first kernel.
  int previous = 0;
  const bool restore = cudaGetDevice(&previous) == cudaSuccess;
  cudaFuncAttributes attr;
  if (cudaSetDevice(0) == cudaSuccess &&
      cudaFuncGetAttributes(&attr, gm_probe_kernel) != cudaSuccess) {
    cudaGetLastError();
    if (restore) cudaSetDevice(previous);
    info->device_count = 0;
    snprintf(info->cuda_message, sizeof info->cuda_message,
             "the GPU (%s, compute capability %d.%d) has no device code in this build of "
             "gpuml, which holds %s: rebuild with --with-cuda-arch=native (or all)",
             info->device_name, info->compute_major, info->compute_minor, GPUML_CUDA_ARCHS);
    return 0;
  }
  cudaGetLastError();
  if (restore) cudaSetDevice(previous);
  info->device_count = count;
  info->cuda_message[0] = '\0';
  return count;
}
