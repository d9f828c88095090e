// Device discovery for gpuml_backend_info() and the backend choice.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include "gpuml_cuda.h"

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
  info->device_count = count;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    snprintf(info->device_name, sizeof info->device_name, "%s", prop.name);
    info->compute_major = prop.major;
    info->compute_minor = prop.minor;
    info->device_memory = prop.totalGlobalMem;
  }
  info->cuda_message[0] = '\0';
  return count;
}
