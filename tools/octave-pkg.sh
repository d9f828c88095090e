#!/bin/sh
# Assembles the Octave package build/gpuml-<version>.tar.gz (run by `make octave-pkg`):
#   DESCRIPTION, INDEX, COPYING
#   inst/      the .m wrappers (octave/*.m, octave/private/)
#   src/       the MEX gateways (octave/src/*.c), a copy of the core's C sources and
#              src/Makefile, which `pkg install` runs: it links the library the top of the
#              tree built (CUDA included) when GPUML_PREBUILT names its folder, else it
#              compiles the bundled core for the CPU backend.
# Usage: sh tools/octave-pkg.sh VERSION OUTDIR
set -eu
version=${1:?usage: octave-pkg.sh VERSION OUTDIR}
out=${2:?usage: octave-pkg.sh VERSION OUTDIR}
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/gpuml
mkdir -p "$pkg/inst/private" "$pkg/src/core/include" "$pkg/src/core/cpu"
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
  echo "Data, plots and information"
  echo " read_fashion_mnist gpuml_palette gpuml_info"
} > "$pkg/INDEX"
cp R-package/LICENSE "$pkg/COPYING"
cp octave/*.m "$pkg/inst/"
cp octave/private/*.m "$pkg/inst/private/"
cp octave/src/*.c octave/src/*.h "$pkg/src/"
cp core/include/gpuml.h "$pkg/src/core/include/"
cp core/*.c core/*.h "$pkg/src/core/"
cp core/cpu/*.c core/cpu/*.h "$pkg/src/core/cpu/"
cat > "$pkg/src/Makefile" <<'MAKE'
# Builds the MEX gateways of gpuml for `pkg install`.
MKOCTFILE ?= mkoctfile
GATEWAYS := $(wildcard gpuml_*_mex.c)
MEX := $(GATEWAYS:.c=.mex)
CORE_SRC := $(wildcard core/*.c core/cpu/*.c)
CFLAGS_CORE := -std=c11 -O2 -fPIC -fopenmp -Icore/include -Icore -Icore/cpu
ifneq ($(strip $(GPUML_PREBUILT)),)
GPUML_LIB := $(GPUML_PREBUILT)/libgpuml.a $(shell cat $(GPUML_PREBUILT)/gpuml-link.txt)
else
GPUML_LIB := libgpuml_local.a
endif
BLAS := $(shell $(MKOCTFILE) -p LAPACK_LIBS) $(shell $(MKOCTFILE) -p BLAS_LIBS)

all: $(MEX)

libgpuml_local.a: $(CORE_SRC:.c=.o)
	ar rcs $@ $^

core/%.o: core/%.c
	$(shell $(MKOCTFILE) -p CC) $(CFLAGS_CORE) -c $< -o $@

%.mex: %.c $(filter libgpuml_local.a,$(GPUML_LIB))
	$(MKOCTFILE) --mex -Icore/include $< $(GPUML_LIB) $(BLAS) -lpthread -lgomp -o $@

clean:
	rm -f *.mex *.o core/*.o core/cpu/*.o libgpuml_local.a
MAKE
mkdir -p "$out"
tar -C "$stage" -czf "$out/gpuml-$version.tar.gz" gpuml
echo "$out/gpuml-$version.tar.gz"
