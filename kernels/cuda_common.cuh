// Host-side plumbing shared by the CUDA drivers: a call's Context on its device's
// persistent resources (context.cuh), and the device helpers that the distance and
// selection kernels share.
#ifndef GPUML_CUDA_COMMON_CUH
#define GPUML_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "context.cuh"
#include "gpuml_cuda.h"

namespace gm {

// A GEMM value below this fraction of |a|^2 + |b|^2 is recomputed directly, as on the
// CPU (core/distance_tiles.c).
constexpr double kCancellationGuard = 1e-3;
// Below this dimension the direct form is used (GM_GEMM_MIN_DIM on the CPU).
constexpr int64_t kGemmMinDim = 16;
constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------
// Device helpers

// The strict order used everywhere: by distance, then by index.
template <typename T>
__device__ __forceinline__ bool before(T d1, int64_t i1, T d2, int64_t i2) {
  return d1 < d2 || (d1 == d2 && i1 < i2);
}

template <typename T>
__device__ __forceinline__ T infinity_of();
template <>
__device__ __forceinline__ float infinity_of<float>() {
  return __int_as_float(0x7f800000);
}
template <>
__device__ __forceinline__ double infinity_of<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

// The reference squared distance: a plain fp64 sum in dimension order with no fused
// multiply-add, which is what gm_sqdist() computes on the CPU (bit for bit).
template <typename In>
__device__ __forceinline__ double exact_sqdist(const In *a, const In *b, int64_t d) {
  double s = 0;
  for (int64_t t = 0; t < d; t++) {
    double diff = __dsub_rn((double)a[t], (double)b[t]);
    s = __dadd_rn(s, __dmul_rn(diff, diff));
  }
  return s;
}

// s += diff^2 in T without contraction for doubles (so that the fp64 direct form gives
// exactly the reference value); fp32 is free to use an FMA.
__device__ __forceinline__ double add_square(double s, double diff) {
  return __dadd_rn(s, __dmul_rn(diff, diff));
}
__device__ __forceinline__ float add_square(float s, float diff) { return fmaf(diff, diff, s); }

// The GEMM form's value from -2 a.b and the two squared norms, with the cancellation
// guard and the clamp at +0 (never -0, so float bits order like the values).
template <typename T, typename In>
__device__ __forceinline__ T gemm_value(T minus2dot, T na, T nb, const In *xa, const In *xb,
                                        int64_t d) {
  T norms = na + nb;
  T s = norms + minus2dot;
  if (s < (T)kCancellationGuard * norms) s = (T)exact_sqdist(xa, xb, d);
  return s > (T)0 ? s : (T)0;
}

// ---------------------------------------------------------------------------------------
// Host context

// Parses a positive integer from the environment (0 when unset or malformed). Used for
// internal testing knobs only.
static inline int64_t env_int(const char *name) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  return (end && *end == '\0' && v > 0) ? (int64_t)v : 0;
}


// One call's share of its device's context (context.cuh): it holds the context for the
// call's duration, runs on its stream and handles, takes device memory from its pool and
// gives everything back in the destructor: the single cleanup path, also on errors and
// interrupts. It turns CUDA and library failures into gm_fail() messages.
class Context {
 public:
  explicit Context(const char *id) : id_(id) {}
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  ~Context() {
    if (dc_) {
      if (stream_) cudaStreamSynchronize(stream_);
      for (int i = 0; i < nextra_; i++) {
        cudaStreamSynchronize(extra_[i]);
        dc_->give_stream(extra_[i]);
      }
      for (int i = 0; i < nevent_; i++) cudaEventDestroy(event_[i]);
      for (int i = 0; i < ndev_; i++) dc_->free(dev_[i], dev_bytes_[i]);
      dc_->trim(dc_->cache_limit());
      cudaGetLastError();
      if (locked_) dc_->lock().unlock();
    }
    if (prev_device_ >= 0) cudaSetDevice(prev_device_);
  }

  const char *id() const { return id_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  size_t budget() const { return budget_; }
  // The device's context: its pinned staging ring, its solver handle.
  DeviceContext &device() const { return *dc_; }
  int sm_count() const { return dc_->sm_count(); }
  int cc_major() const { return dc_->cc_major(); }
  gpuml_status solver(cusolverDnHandle_t *out) { return dc_->solver(id_, out); }
  gpuml_status blas_lt(cublasLtHandle_t *out) { return dc_->blas_lt(id_, out); }
  gpuml_status pinned(int slot, size_t bytes, void **out) {
    return dc_->pinned(id_, slot, bytes, out);
  }

  gpuml_status fail(cudaError_t e, const char *what) {
    cudaGetLastError();  // clear a non-sticky error so that cleanup calls work
    if (e == cudaErrorMemoryAllocation)
      return gm_fail(GPUML_ERR_NOMEM, id_,
                     "CUDA error in %s: %s (the GPU is out of memory: free GPU memory or "
                     "set a smaller gpu_memory_limit)",
                     what, cudaGetErrorString(e));
    return gm_fail(GPUML_ERR_CUDA, id_, "CUDA error in %s: %s", what, cudaGetErrorString(e));
  }
  gpuml_status check(cudaError_t e, const char *what) {
    return e == cudaSuccess ? GPUML_OK : fail(e, what);
  }
  gpuml_status check_blas(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return GPUML_OK;
    cudaGetLastError();
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
      return gm_fail(GPUML_ERR_NOMEM, id_, "cuBLAS error in %s: %s (the GPU is out of memory)",
                     what, cublasGetStatusString(s));
    return gm_fail(GPUML_ERR_CUDA, id_, "cuBLAS error in %s: %s", what,
                   cublasGetStatusString(s));
  }
  // The host threads the call's options allow (1 before init).
  int threads() const { return threads_; }
  // After a kernel launch: reports launch errors at once.
  gpuml_status launched(const char *what) { return check(cudaGetLastError(), what); }
  // Waits for the stream: reports errors of the kernels queued before.
  gpuml_status sync(const char *what) { return check(cudaStreamSynchronize(stream_), what); }
  // GPUML_TRACE=1: the step's mark (gm_trace) once the work queued so far is done.
  gpuml_status trace(const char *step) {
    if (!gm_trace_on()) return GPUML_OK;
    GM_TRY(check(cudaDeviceSynchronize(), step));
    gm_trace(step);
    return GPUML_OK;
  }

  // Takes the device's context (created on the first call of the process, with its
  // stream; the cuBLAS handle on the first call that needs one) and works out the
  // memory budget: the caller's limit, else 80% of the memory free to this call (the
  // device's free memory and the context's cached blocks).
  gpuml_status init(const gpuml_options *opt, int need_blas) {
    int prev = 0;
    gpuml_status st = check(cudaGetDevice(&prev), "cudaGetDevice");
    if (st) return st;
    prev_device_ = prev;
    threads_ = gm_threads(opt);
    if ((st = check(cudaSetDevice(opt->device), "cudaSetDevice"))) return st;
    if ((st = device_context(opt->device, id_, &dc_))) return st;
    dc_->lock().lock();
    locked_ = true;
    if ((st = dc_->open(id_))) return st;
    stream_ = dc_->stream();
    if (need_blas && (st = dc_->blas(id_, &blas_))) return st;
    size_t free_b = 0, total_b = 0;
    if ((st = check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"))) return st;
    free_b += dc_->cached();
    size_t limit = 0;
    if ((st = gm_gpu_memory_limit(opt, &limit))) return st;
    size_t usable = (size_t)((double)free_b * 0.8);
    budget_ = limit ? limit : usable;
    if (budget_ > (size_t)((double)free_b * 0.95)) budget_ = (size_t)((double)free_b * 0.95);
    return GPUML_OK;
  }

  // A further stream (work that overlaps the main one) and events to order them; both
  // are given back by the destructor.
  gpuml_status new_stream(cudaStream_t *s) {
    *s = nullptr;
    if (nextra_ == kMaxStreams) return gm_fail(GPUML_ERR_CUDA, id_, "internal: too many streams");
    GM_TRY(dc_->take_stream(id_, s));
    extra_[nextra_++] = *s;
    return GPUML_OK;
  }
  gpuml_status new_event(cudaEvent_t *e) {
    *e = nullptr;
    if (nevent_ == kMax) return gm_fail(GPUML_ERR_CUDA, id_, "internal: too many events");
    GM_TRY(check(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreate"));
    event_[nevent_++] = *e;
    return GPUML_OK;
  }
  // Makes `waiter` wait for the work queued on `s` so far.
  gpuml_status order(cudaStream_t s, cudaStream_t waiter, cudaEvent_t e) {
    GM_TRY(check(cudaEventRecord(e, s), "cudaEventRecord"));
    return check(cudaStreamWaitEvent(waiter, e, 0), "cudaStreamWaitEvent");
  }
  gpuml_status sync_all(const char *what) {
    for (int i = 0; i < nextra_; i++) GM_TRY(check(cudaStreamSynchronize(extra_[i]), what));
    return sync(what);
  }

  template <typename P>
  gpuml_status alloc(P **p, size_t count, const char *what) {
    *p = NULL;
    if (count == 0) count = 1;
    if (ndev_ == kMax) return gm_fail(GPUML_ERR_CUDA, id_, "internal: too many device buffers");
    if (count > SIZE_MAX / sizeof(P))
      return gm_fail(GPUML_ERR_NOMEM, id_, "%s is too large for the GPU", what);
    void *q = NULL;
    GM_TRY(dc_->alloc(id_, what, count * sizeof(P), &q));
    dev_[ndev_] = q;
    dev_bytes_[ndev_++] = count * sizeof(P);
    *p = (P *)q;
    return GPUML_OK;
  }

  // Device memory from the pool that this call does not give back: `held` keeps it (and
  // gives it back when it goes) for a later call on the same device.
  template <typename P>
  gpuml_status alloc_held(HeldBlock &held, P **p, size_t count, const char *what) {
    *p = NULL;
    if (count == 0) count = 1;
    if (count > SIZE_MAX / sizeof(P))
      return gm_fail(GPUML_ERR_NOMEM, id_, "%s is too large for the GPU", what);
    void *q = NULL;
    GM_TRY(dc_->alloc(id_, what, count * sizeof(P), &q));
    held.hold(dc_->device(), q, count * sizeof(P));
    *p = (P *)q;
    return GPUML_OK;
  }

 private:
  static constexpr int kMax = 64;
  static constexpr int kMaxStreams = 4;
  cudaStream_t extra_[kMaxStreams] = {};
  int nextra_ = 0;
  cudaEvent_t event_[kMax] = {};
  int nevent_ = 0;
  const char *id_;
  int prev_device_ = -1;
  DeviceContext *dc_ = nullptr;
  bool locked_ = false;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  size_t budget_ = 0;
  int threads_ = 1;
  void *dev_[kMax] = {};
  size_t dev_bytes_[kMax] = {};
  int ndev_ = 0;
};

static inline unsigned grid_1d(int64_t count, int block) {
  int64_t g = (count + block - 1) / block;
  if (g < 1) g = 1;
  if (g > 2147483647) g = 2147483647;
  return (unsigned)g;
}

}  // namespace gm


#endif
