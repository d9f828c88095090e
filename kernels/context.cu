// The per-device contexts of the CUDA backend (context.cuh) and their release.
#include <algorithm>
#include <memory>
#include <stdio.h>
#include <stdlib.h>
#include "context.cuh"
#include "gpuml_cuda.h"

namespace gm {

static gpuml_status cuda_failure(const char *id, cudaError_t e, const char *what) {
  cudaGetLastError();
  if (e == cudaErrorMemoryAllocation)
    return gm_fail(GPUML_ERR_NOMEM, id, "CUDA error in %s: %s (the GPU is out of memory)", what,
                   cudaGetErrorString(e));
  return gm_fail(GPUML_ERR_CUDA, id, "CUDA error in %s: %s", what, cudaGetErrorString(e));
}

gpuml_status DeviceContext::open(const char *id) {
  if (open_) return GPUML_OK;
  // Attributes one by one: cudaGetDeviceProperties fills every field, some at a cost
  // (the CUDA guide's advice), where a call needs three.
  cudaError_t e = cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&cc_major_, cudaDevAttrComputeCapabilityMajor, device_);
  if (e != cudaSuccess) return cuda_failure(id, e, "cudaDeviceGetAttribute");
  size_t free_bytes = 0, total_bytes = 0;
  e = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (e != cudaSuccess) return cuda_failure(id, e, "cudaMemGetInfo");
  e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_failure(id, e, "cudaStreamCreate");
  cache_limit_ = total_bytes / 4;
  const char *env = getenv("GPUML_CUDA_POOL_CACHE");
  size_t bytes = 0;
  if (env && *env) {
    if (!gm_parse_bytes(env, &bytes))
      return gm_fail(GPUML_ERR_ARG, "badPoolCache",
                     "GPUML_CUDA_POOL_CACHE=\"%s\" is not a size such as 512M or 2G", env);
    cache_limit_ = bytes;
  }
  open_ = true;
  return GPUML_OK;
}

gpuml_status DeviceContext::blas(const char *id, cublasHandle_t *out) {
  if (!blas_) {
    cublasHandle_t h = nullptr;
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      cudaGetLastError();
      return gm_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? GPUML_ERR_NOMEM : GPUML_ERR_CUDA, id,
                     "cuBLAS error in cublasCreate: %s", cublasGetStatusString(s));
    }
    // Default math: no TF32 for S/DGEMM (TF32 is only used where a kernel asks for it);
    // scalars from the host.
    if ((s = cublasSetStream(h, stream_)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST)) != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      return gm_fail(GPUML_ERR_CUDA, id, "cuBLAS error setting up the handle: %s",
                     cublasGetStatusString(s));
    }
    blas_ = h;
  }
  *out = blas_;
  return GPUML_OK;
}

gpuml_status DeviceContext::blas_lt(const char *id, cublasLtHandle_t *out) {
  if (!blas_lt_) {
    cublasLtHandle_t h = nullptr;
    const cublasStatus_t s = cublasLtCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      cudaGetLastError();
      return gm_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? GPUML_ERR_NOMEM : GPUML_ERR_CUDA, id,
                     "cuBLAS error in cublasLtCreate: %s", cublasGetStatusString(s));
    }
    blas_lt_ = h;
  }
  *out = blas_lt_;
  return GPUML_OK;
}

gpuml_status DeviceContext::solver(const char *id, cusolverDnHandle_t *out) {
  if (!solver_) {
    cusolverDnHandle_t h = nullptr;
    cusolverStatus_t s = cusolverDnCreate(&h);
    if (s == CUSOLVER_STATUS_SUCCESS) s = cusolverDnSetStream(h, stream_);
    if (s != CUSOLVER_STATUS_SUCCESS) {
      if (h) cusolverDnDestroy(h);
      cudaGetLastError();
      return gm_fail(s == CUSOLVER_STATUS_ALLOC_FAILED ? GPUML_ERR_NOMEM : GPUML_ERR_CUDA, id,
                     "cuSOLVER error %d creating its handle", (int)s);
    }
    solver_ = h;
  }
  *out = solver_;
  return GPUML_OK;
}

gpuml_status DeviceContext::take_stream(const char *id, cudaStream_t *out) {
  if (!spare_streams_.empty()) {
    *out = spare_streams_.back();
    spare_streams_.pop_back();
    return GPUML_OK;
  }
  cudaError_t e = cudaStreamCreateWithFlags(out, cudaStreamNonBlocking);
  return e == cudaSuccess ? GPUML_OK : cuda_failure(id, e, "cudaStreamCreate");
}

void DeviceContext::give_stream(cudaStream_t s) {
  if (s) spare_streams_.push_back(s);
}

gpuml_status DeviceContext::alloc(const char *id, const char *what, size_t bytes, void **out) {
  *out = nullptr;
  if (bytes == 0) bytes = 1;
  bytes = (bytes + 511) & ~(size_t)511;
  // The smallest cached block that fits, if it wastes at most half of itself.
  size_t best = cache_.size();
  for (size_t i = 0; i < cache_.size(); i++)
    if (cache_[i].bytes >= bytes && cache_[i].bytes / 2 <= bytes &&
        (best == cache_.size() || cache_[i].bytes < cache_[best].bytes))
      best = i;
  if (best < cache_.size()) {
    *out = cache_[best].p;
    cached_bytes_ -= cache_[best].bytes;
    cache_.erase(cache_.begin() + (ptrdiff_t)best);
    return GPUML_OK;
  }
  cudaError_t e = cudaMalloc(out, bytes);
  if (e == cudaErrorMemoryAllocation && cached_bytes_ > 0) {
    cudaGetLastError();
    trim(0);  // the cache may be what stands in the way
    e = cudaMalloc(out, bytes);
  }
  if (e != cudaSuccess) {
    *out = nullptr;
    cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
      return gm_fail(GPUML_ERR_NOMEM, id,
                     "cannot allocate %.1f MB of GPU memory for %s (%s): free GPU memory or "
                     "set a smaller gpu_memory_limit",
                     (double)bytes / 1e6, what, cudaGetErrorString(e));
    return cuda_failure(id, e, what);
  }
  return GPUML_OK;
}

void DeviceContext::free(void *p, size_t bytes) {
  if (!p) return;
  if (bytes == 0) bytes = 1;
  bytes = (bytes + 511) & ~(size_t)511;
  cache_.push_back({p, bytes});
  cached_bytes_ += bytes;
}

void DeviceContext::trim(size_t keep) {
  // Largest blocks first: they are the least likely to fit the next call exactly.
  std::sort(cache_.begin(), cache_.end(),
            [](const Block &a, const Block &b) { return a.bytes < b.bytes; });
  while (cached_bytes_ > keep && !cache_.empty()) {
    cudaFree(cache_.back().p);
    cached_bytes_ -= cache_.back().bytes;
    cache_.pop_back();
  }
  cudaGetLastError();
}

gpuml_status DeviceContext::pinned(const char *id, int slot, size_t bytes, void **out) {
  *out = nullptr;
  if (slot < 0 || slot >= kPinnedSlots)
    return gm_fail(GPUML_ERR_CUDA, id, "internal: staging slot %d out of range", slot);
  if (pinned_bytes_[slot] < bytes) {
    if (pinned_[slot]) cudaFreeHost(pinned_[slot]);
    pinned_[slot] = nullptr;
    pinned_bytes_[slot] = 0;
    cudaError_t e = cudaHostAlloc(&pinned_[slot], bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      pinned_[slot] = nullptr;
      return cuda_failure(id, e, "allocating page-locked staging memory");
    }
    pinned_bytes_[slot] = bytes;
  }
  *out = pinned_[slot];
  return GPUML_OK;
}

void DeviceContext::release() {
  if (stream_) cudaStreamSynchronize(stream_);
  trim(0);
  for (int i = 0; i < kPinnedSlots; i++) {
    if (pinned_[i]) cudaFreeHost(pinned_[i]);
    pinned_[i] = nullptr;
    pinned_bytes_[i] = 0;
  }
  if (blas_) cublasDestroy(blas_);
  if (solver_) cusolverDnDestroy(solver_);
  if (blas_lt_) cublasLtDestroy(blas_lt_);
  blas_lt_ = nullptr;
  for (cudaStream_t s : spare_streams_) cudaStreamDestroy(s);
  spare_streams_.clear();
  if (stream_) cudaStreamDestroy(stream_);
  blas_ = nullptr;
  solver_ = nullptr;
  stream_ = nullptr;
  open_ = false;
  cudaGetLastError();
}

namespace {
constexpr int kMaxDevices = 64;
std::mutex registry_lock;
std::unique_ptr<DeviceContext> registry[kMaxDevices];
}  // namespace

gpuml_status device_context(int device, const char *id, DeviceContext **out) {
  *out = nullptr;
  if (device < 0 || device >= kMaxDevices)
    return gm_fail(GPUML_ERR_ARG, id, "device %d is beyond the %d supported", device, kMaxDevices);
  std::lock_guard<std::mutex> guard(registry_lock);
  if (!registry[device]) {
    registry[device].reset(new (std::nothrow) DeviceContext(device));
    if (!registry[device]) return gm_fail(GPUML_ERR_NOMEM, id, "cannot allocate a device context");
  }
  *out = registry[device].get();
  return GPUML_OK;
}

void HeldBlock::release() {
  if (!p_) return;
  // By the device number, not a kept pointer: the context may have been released and made
  // again since (the block itself stays valid: release() frees cached blocks only).
  DeviceContext *dc = nullptr;
  if (device_context(device_, "cuda", &dc) == GPUML_OK) {
    std::lock_guard<std::recursive_mutex> call(dc->lock());
    int previous = 0;
    const bool restore = cudaGetDevice(&previous) == cudaSuccess;
    if (cudaSetDevice(device_) == cudaSuccess) {
      dc->free(p_, bytes_);
      dc->trim(dc->cache_limit());
    }
    if (restore) cudaSetDevice(previous);
    cudaGetLastError();
  }
  p_ = nullptr;
  bytes_ = 0;
}

}  // namespace gm

// Releases the contexts of one device (device >= 0) or of all (device < 0); each waits
// for a call that holds it.
extern "C" void gm_cuda_release(int device) {
  using namespace gm;
  std::lock_guard<std::mutex> guard(registry_lock);
  for (int d = 0; d < kMaxDevices; d++) {
    if (!registry[d] || (device >= 0 && d != device)) continue;
    {
      std::lock_guard<std::recursive_mutex> call(registry[d]->lock());
      int previous = 0;
      const bool restore = cudaGetDevice(&previous) == cudaSuccess;
      if (cudaSetDevice(d) == cudaSuccess) registry[d]->release();
      if (restore) cudaSetDevice(previous);
      cudaGetLastError();
    }
    registry[d].reset();
  }
}
