#!/usr/bin/env bash
# Installs everything gpuml needs on a fresh Debian 12 machine: compilers, autoconf,
# BLAS/LAPACK, R with testthat and the peer packages (FNN, RANN, Rtsne, mclust,
# densityClust, dbscan), Octave with its headers, Open MPI (the SPMD entry points of
# libgpuml_mpi and their tests under mpirun), pandoc (vignettes) and the Fashion-MNIST
# data set. The CUDA toolkit is optional and
# not installed here. Re-running is cheap: only missing packages are fetched.
set -euo pipefail

packages=(
  build-essential autoconf pkg-config
  libopenblas-dev liblapack-dev
  r-base-core r-base-dev r-cran-testthat r-cran-knitr r-cran-rmarkdown pandoc
  r-cran-fnn r-cran-rann r-cran-rtsne r-cran-mclust r-cran-densityclust r-cran-dbscan
  octave liboctave-dev
  openmpi-bin libopenmpi-dev
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all Debian packages present"
fi
