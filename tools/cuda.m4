# GPUML_CHECK_CUDA: finds the CUDA toolkit and chooses the device code to build, for the
# top-level configure and the R package's own (R-package/configure.ac) alike. Never
# fails: without CUDA it says why in CUDA_WHY and the CPU backend alone is built.
#
#   --with-cuda[=DIR] | --without-cuda, or the environment variable GPUML_CUDA=no
#       the toolkit: DIR, else CUDA_HOME, else nvcc on PATH, else /usr/local/cuda
#   --with-cuda-arch=native | portable | all | LIST
#       native    machine code for this machine's GPU (nvidia-smi), with its PTX
#       portable  PTX of the oldest architecture nvcc builds (compute_70 with CUDA 12 and
#                 older, compute_75 with CUDA 13), which the driver compiles for any later
#                 GPU at its first use (and caches): one compilation instead of six
#       all       machine code for sm_70 (where nvcc still builds it) sm_75 sm_80 sm_86
#                 sm_89 sm_90, plus PTX of the newest for later GPUs
#       LIST      e.g. "sm_80,sm_90" (or "sm_90" alone, as the GPU machine's run uses)
#       default: native when a GPU is found here, else portable (a machine without a GPU
#       builds in minutes; `all` takes about 7 minutes more on 2 cores, for packages
#       made here to run on GPUs elsewhere without the first-use compilation)
#
# Sets HAVE_CUDA (yes/no), NVCC, CUDA_HOME, CUDA_LIBS, CUDA_DEFS, NVCC_FLAGS,
# CUDA_ARCH_LIST (the device code, e.g. "sm_80 sm_90 compute_90") and CUDA_WHY.
AC_DEFUN([GPUML_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend (default: when nvcc is found; DIR is the toolkit root; GPUML_CUDA=no in the environment disables it)])],
  [], [with_cuda=check])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=ARCHS], [device code: native, portable, all, or a list such as sm_80,sm_90 (default: native when a GPU is present, else portable)])],
  [cuda_arch_request="$withval"], [cuda_arch_request=""])
test "x$GPUML_CUDA" = xno && with_cuda=no
HAVE_CUDA=no
NVCC=""
CUDA_WHY="disabled (--without-cuda or GPUML_CUDA=no)"
CUDA_ARCH_LIST=""
if test "x$with_cuda" != xno; then
  if test "x$with_cuda" != xyes && test "x$with_cuda" != xcheck; then
    CUDA_HOME="$with_cuda"
    AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_HOME/bin])
  else
    cuda_search="$PATH:/usr/local/cuda/bin"
    test -n "$CUDA_HOME" && cuda_search="$CUDA_HOME/bin:$cuda_search"
    AC_PATH_PROG([NVCC], [nvcc], [], [$cuda_search])
    test -n "$NVCC" && CUDA_HOME=`dirname "$NVCC"` && CUDA_HOME=`dirname "$CUDA_HOME"`
  fi
  CUDA_WHY="nvcc not found (set CUDA_HOME, put nvcc on PATH, or --with-cuda=DIR)"
  if test -n "$NVCC"; then
    CUDA_LIBDIR="$CUDA_HOME/lib64"
    test -d "$CUDA_LIBDIR" || CUDA_LIBDIR="$CUDA_HOME/lib"
    save_LIBS="$LIBS"; save_LDFLAGS="$LDFLAGS"; save_CPPFLAGS="$CPPFLAGS"
    LDFLAGS="$LDFLAGS -L$CUDA_LIBDIR"; CPPFLAGS="$CPPFLAGS -I$CUDA_HOME/include"
    LIBS="-lcufft -lcusolver -lcublasLt -lcublas -lcudart"
    AC_MSG_CHECKING([whether cudart, cuBLAS(Lt), cuSOLVER and cuFFT link])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cusolverDn.h>
#include <cufft.h>]], [[int n; cublasHandle_t h; cusolverDnHandle_t s; cufftHandle p;
cudaGetDeviceCount(&n); cublasCreate(&h); cusolverDnCreate(&s); cufftCreate(&p);
cublasLtHandle_t lt; cublasLtCreate(&lt);]])],
      [HAVE_CUDA=yes; CUDA_WHY=""], [CUDA_WHY="cudart/cuBLAS/cuBLASLt/cuSOLVER/cuFFT did not link from $CUDA_LIBDIR"])
    AC_MSG_RESULT([$HAVE_CUDA])
    LIBS="$save_LIBS"; LDFLAGS="$save_LDFLAGS"; CPPFLAGS="$save_CPPFLAGS"
  fi
  if test "x$with_cuda" != xcheck && test "$HAVE_CUDA" = no; then
    AC_MSG_WARN([CUDA was asked for but cannot be built: $CUDA_WHY])
  fi
fi
CUDA_DEFS=""
CUDA_LIBS=""
NVCC_FLAGS=""
if test "$HAVE_CUDA" = yes; then
  AC_MSG_CHECKING([which device code to build])
  cuda_supported=`"$NVCC" --list-gpu-arch 2>/dev/null | sed -n 's/^compute_//p' | tr '\n' ' '`
  cuda_request="$cuda_arch_request"
  if test -z "$cuda_request"; then
    cuda_request=portable
    if command -v nvidia-smi >/dev/null 2>&1 &&
       nvidia-smi --query-gpu=compute_cap --format=csv,noheader >/dev/null 2>&1; then
      cuda_request=native
    fi
  fi
  case "$cuda_request" in
    native)
      cuda_sms=`nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '. ' | sort -u | tr '\n' ' '`
      test -n "$cuda_sms" || cuda_sms="75 80 86 89 90" ;;
    all) cuda_sms="70 75 80 86 89 90" ;;
    portable) cuda_sms="" ;;
    *) cuda_sms=`echo "$cuda_request" | tr ',' ' ' | sed 's/sm_//g; s/compute_//g'` ;;
  esac
  cuda_gencode=""
  cuda_newest=""
  cuda_dropped=""
  for sm in $cuda_sms; do
    case " $cuda_supported " in
      *" $sm "*)
        cuda_gencode="$cuda_gencode -gencode=arch=compute_$sm,code=sm_$sm"
        CUDA_ARCH_LIST="$CUDA_ARCH_LIST sm_$sm"
        test -z "$cuda_newest" || test "$sm" -gt "$cuda_newest" && cuda_newest=$sm ;;
      *) cuda_dropped="$cuda_dropped sm_$sm" ;;
    esac
  done
  if test "$cuda_request" = portable; then
    for sm in 70 75 80; do
      case " $cuda_supported " in *" $sm "*) cuda_newest=$sm; break ;; esac
    done
    test -n "$cuda_newest" && cuda_gencode="" && CUDA_ARCH_LIST=""
  fi
  if test -z "$cuda_newest"; then
    AC_MSG_RESULT([none])
    AC_MSG_WARN([nvcc builds none of the architectures asked for ($cuda_request); the CUDA backend is not built])
    HAVE_CUDA=no
    CUDA_WHY="nvcc builds none of $cuda_request"
  else
    cuda_gencode="$cuda_gencode -gencode=arch=compute_$cuda_newest,code=compute_$cuda_newest"
    CUDA_ARCH_LIST=`echo "$CUDA_ARCH_LIST compute_$cuda_newest" | sed 's/^ *//'`
    AC_MSG_RESULT([$CUDA_ARCH_LIST])
    test -n "$cuda_dropped" && AC_MSG_WARN([this nvcc cannot build$cuda_dropped (Volta needs CUDA 12 or older); left out])
    CUDA_DEFS="-DGPUML_HAVE_CUDA"
    CUDA_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR -lcufft -lcusolver -lcublasLt -lcublas -lcudart -lstdc++"
    # --threads 0: nvcc compiles the architectures of one file in parallel
    NVCC_FLAGS="-O3$cuda_gencode --threads 0 -Xcompiler -fPIC -std=c++17"
  fi
fi
AC_SUBST([HAVE_CUDA])
AC_SUBST([NVCC])
AC_SUBST([NVCC_FLAGS])
AC_SUBST([CUDA_ARCH_LIST])
AC_SUBST([CUDA_DEFS])
AC_SUBST([CUDA_LIBS])
])
