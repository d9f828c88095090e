// The per-device resources that the CUDA backend keeps across calls (the model is
// FAISS's GpuResources): one stream, library handles created on first use, a pool of
// device memory blocks, a page-locked staging ring and the device's properties, owned by
// the library and released by gpuml_context_free() / gpuml_shutdown().
//
// A call takes its device's context for its whole duration (gm::Context below locks
// it), so calls on one device from several host threads run one after another; calls
// on different devices run side by side.
#ifndef GPUML_CONTEXT_CUH
#define GPUML_CONTEXT_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <mutex>
#include <stddef.h>
#include <vector>
#include "internal.h"

namespace gm {

class DeviceContext {
 public:
  explicit DeviceContext(int device) : device_(device) {}
  DeviceContext(const DeviceContext &) = delete;
  DeviceContext &operator=(const DeviceContext &) = delete;
  ~DeviceContext() { release(); }

  int device() const { return device_; }
  // Held by a call for its duration; recursive, so that a call may run another on the
  // same device from within (the same thread).
  std::recursive_mutex &lock() { return lock_; }

  // Everything below expects the caller to hold lock() with the device current.

  // Creates the stream and reads the properties the calls use, once.
  gpuml_status open(const char *id);
  int sm_count() const { return sm_count_; }
  int cc_major() const { return cc_major_; }  // the compute capability's major number
  cudaStream_t stream() const { return stream_; }
  // Library handles, created on first use, bound to stream().
  gpuml_status blas(const char *id, cublasHandle_t *out);
  gpuml_status solver(const char *id, cusolverDnHandle_t *out);
  gpuml_status blas_lt(const char *id, cublasLtHandle_t *out);
  // Further streams for work that overlaps the main one: taken for a call, given back.
  gpuml_status take_stream(const char *id, cudaStream_t *out);
  void give_stream(cudaStream_t s);

  // Device memory from the pool: a cached block of at least `bytes` (and not much more)
  // when there is one, else cudaMalloc (after dropping the cache when memory is short).
  gpuml_status alloc(const char *id, const char *what, size_t bytes, void **out);
  // Returns a block to the cache (the stream must be done with it).
  void free(void *p, size_t bytes);
  // Bytes held in the cache: free for this context's next allocations.
  size_t cached() const { return cached_bytes_; }
  // Frees cached blocks until at most `keep` bytes stay cached.
  void trim(size_t keep);
  // What a call leaves cached when it ends: GPUML_CUDA_POOL_CACHE (bytes, K/M/G), else a
  // quarter of the device's memory.
  size_t cache_limit() const { return cache_limit_; }

  // Page-locked host buffer `slot` (0 .. kPinnedSlots - 1) of at least `bytes`, kept and
  // grown as needed: the staging ring of uploads and downloads.
  static constexpr int kPinnedSlots = 4;
  gpuml_status pinned(const char *id, int slot, size_t bytes, void **out);

  // Frees everything (the stream, handles, pool, pinned buffers).
  void release();

 private:
  struct Block {
    void *p;
    size_t bytes;
  };
  int device_;
  std::recursive_mutex lock_;
  bool open_ = false;
  int sm_count_ = 1, cc_major_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  cublasLtHandle_t blas_lt_ = nullptr;
  std::vector<cudaStream_t> spare_streams_;
  std::vector<Block> cache_;
  size_t cached_bytes_ = 0;
  size_t cache_limit_ = 0;
  void *pinned_[kPinnedSlots] = {};
  size_t pinned_bytes_[kPinnedSlots] = {};
};

// The context of `device`, created on first use and kept until gpuml_shutdown().
gpuml_status device_context(int device, const char *id, DeviceContext **out);

// A block of a device's pool that outlives the call that took it (Context::alloc_held):
// one stage's output that a later call reads on the device, such as a t-SNE fit's
// neighbour lists and P. The destructor gives it back to the pool, under the device's
// lock (work queued on the device's stream before stays ordered before its next user).
// Release it outside any Context: finding the device's context takes the registry's lock,
// which gpuml_context_free() holds while it waits for the device's.
class HeldBlock {
 public:
  HeldBlock() = default;
  HeldBlock(const HeldBlock &) = delete;
  HeldBlock &operator=(const HeldBlock &) = delete;
  ~HeldBlock() { release(); }
  void hold(int device, void *p, size_t bytes) {
    release();
    device_ = device;
    p_ = p;
    bytes_ = bytes;
  }
  void *get() const { return p_; }
  void release();

 private:
  int device_ = -1;
  void *p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace gm

#endif
