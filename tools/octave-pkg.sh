#!/bin/sh
# Assembles the Octave package build/gpuml-<version>.tar.gz (run by `make octave-pkg`):
#   DESCRIPTION, INDEX, COPYING
#   inst/      the .m wrappers (octave/*.m, octave/private/)
#   src/       the MEX gateways (octave/src/*.c), a copy of the core's C sources and
#              src/Makefile, which `pkg install` runs: it links the library the top of the
#              tree built (CUDA included) when GPUML_PREBUILT names its folder, else it
#              compiles the bundled core for the CPU backend. gpuml_mpi_mex (gpu_mpi_*)
#              gets MPI when Open MPI's flags are found (pkg-config ompi, else
#              mpicc --showme) and, with GPUML_PREBUILT, the tree built libgpuml_mpi.a;
#              GPUML_MPI=no leaves MPI out. Without it the gpu_mpi_* functions say so.
# Usage: sh tools/octave-pkg.sh VERSION OUTDIR
set -eu
version=${1:?usage: octave-pkg.sh VERSION OUTDIR}
out=${2:?usage: octave-pkg.sh VERSION OUTDIR}
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/gpuml
mkdir -p "$pkg/inst/private" "$pkg/src/core/include" "$pkg/src/core/cpu" "$pkg/src/core/mpi"
cat > "$pkg/DESCRIPTION" <<DESC
Name: gpuml
Version: $version
Date: $(date +%Y-%m-%d)
Author: gpuml developers
Maintainer: gpuml developers <maintainers@gpuml.invalid>
Title: Exact kNN, distances, density peaks, t-SNE and Gaussian mixtures on the GPU or CPU
Description: Exact k-nearest-neighbour search (Euclidean or cosine, with a reusable
 index kept on the GPU), distance matrices, density peaks clustering, t-SNE and Gaussian
 mixture models (EM), computed by a C core with an OpenMP CPU backend and an optional
 CUDA GPU backend that give the same results.
Depends: octave (>= 6.0.0)
License: MIT
Url: https://gpuml.invalid
DESC
{
  echo "gpuml >> gpuml: GPU and CPU machine learning"
  echo "Nearest neighbours"
  echo " gpu_knn gpu_knn_index gpu_knn_free gpu_dist"
  echo "Density peaks clustering"
  echo " gpu_dpc gpu_dpc_clusters"
  echo "t-SNE"
  echo " gpu_tsne gpu_tsne_transform"
  echo "Gaussian mixtures"
  echo " gpu_gmm gpu_gmm_predict"
  echo "Across hosts (MPI, under mpirun)"
  echo " gpu_mpi_knn gpu_mpi_gmm gpu_mpi_dpc gpu_mpi_rank gpu_mpi_size gpu_mpi_finalize"
  echo "Data, plots and information"
  echo " read_fashion_mnist gpuml_palette gpuml_info"
} > "$pkg/INDEX"
cp R-package/LICENSE "$pkg/COPYING"
cp octave/*.m "$pkg/inst/"
cp octave/private/*.m "$pkg/inst/private/"
cp octave/src/*.c octave/src/*.h "$pkg/src/"
cp core/include/gpuml.h core/include/gpuml_mpi.h "$pkg/src/core/include/"
cp core/*.c core/*.h "$pkg/src/core/"
cp core/cpu/*.c core/cpu/*.h "$pkg/src/core/cpu/"
cp core/mpi/*.c core/mpi/*.h "$pkg/src/core/mpi/"
cat > "$pkg/src/Makefile" <<'MAKE'
# Builds the MEX gateways of gpuml for `pkg install`.
MKOCTFILE ?= mkoctfile
GATEWAYS := $(wildcard gpuml_*_mex.c)
MEX := $(GATEWAYS:.c=.mex)
CORE_SRC := $(wildcard core/*.c core/cpu/*.c)
MPI_SRC := $(wildcard core/mpi/*.c)
CFLAGS_CORE := -std=c11 -O2 -fPIC -fopenmp -Icore/include -Icore -Icore/cpu
ifneq ($(strip $(GPUML_PREBUILT)),)
GPUML_LIB := $(GPUML_PREBUILT)/libgpuml.a $(shell cat $(GPUML_PREBUILT)/gpuml-link.txt)
else
GPUML_LIB := libgpuml_local.a
endif
BLAS := $(shell $(MKOCTFILE) -p LAPACK_LIBS) $(shell $(MKOCTFILE) -p BLAS_LIBS)
# MPI for gpuml_mpi_mex: Open MPI's flags, unless GPUML_MPI=no; with GPUML_PREBUILT only
# when that tree built libgpuml_mpi.a. MPI_DEFS goes to every gateway (gpuml_info says
# whether MPI was built).
ifneq ($(GPUML_MPI),no)
MPI_CFLAGS := $(shell pkg-config --cflags ompi 2>/dev/null || mpicc --showme:compile 2>/dev/null)
MPI_LIBS := $(shell pkg-config --libs ompi 2>/dev/null || mpicc --showme:link 2>/dev/null)
endif
ifneq ($(strip $(MPI_LIBS)),)
ifneq ($(strip $(GPUML_PREBUILT)),)
MPI_LIB := $(wildcard $(GPUML_PREBUILT)/libgpuml_mpi.a)
else
MPI_LIB := libgpuml_mpi_local.a
endif
endif
MPI_DEFS := $(if $(MPI_LIB),-DGPUML_HAVE_MPI)
LOCAL_LIBS := $(filter libgpuml_local.a libgpuml_mpi_local.a,$(GPUML_LIB) $(MPI_LIB))

all: $(MEX)

libgpuml_local.a: $(CORE_SRC:.c=.o)
	ar rcs $@ $^

libgpuml_mpi_local.a: $(MPI_SRC:.c=.o)
	ar rcs $@ $^

core/mpi/%.o: core/mpi/%.c
	$(shell $(MKOCTFILE) -p CC) $(CFLAGS_CORE) $(MPI_CFLAGS) -c $< -o $@

core/%.o: core/%.c
	$(shell $(MKOCTFILE) -p CC) $(CFLAGS_CORE) -c $< -o $@

gpuml_mpi_mex.mex: gpuml_mpi_mex.c $(LOCAL_LIBS)
	$(MKOCTFILE) --mex $(MPI_DEFS) $(if $(MPI_LIB),$(MPI_CFLAGS)) -Icore/include $< $(MPI_LIB) $(GPUML_LIB) $(BLAS) $(if $(MPI_LIB),$(MPI_LIBS)) -lpthread -lgomp -o $@

%.mex: %.c $(filter libgpuml_local.a,$(GPUML_LIB))
	$(MKOCTFILE) --mex $(MPI_DEFS) -Icore/include $< $(GPUML_LIB) $(BLAS) -lpthread -lgomp -o $@

clean:
	rm -f *.mex *.o core/*.o core/cpu/*.o core/mpi/*.o libgpuml_local.a libgpuml_mpi_local.a
MAKE
mkdir -p "$out"
tar -C "$stage" -czf "$out/gpuml-$version.tar.gz" gpuml
echo "$out/gpuml-$version.tar.gz"
