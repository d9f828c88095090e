# Sourced on the GPU machine (no package registry there): unpacks the .deb files in
# .portable-r (carried with the run) into /tmp/r and points the linker and the loader at
# Debian's reference BLAS/LAPACK there; when they include R (../shared/portable-r/pack.sh
# made the folder), also PATH, so that ./configure finds R and `make check-gpu` runs the
# R suite too. For the C side alone, the folder may hold just the BLAS packages:
#   apt-get download libblas3 liblapack3 libgfortran5 libquadmath0   (about 4 MB)
if [ -d .portable-r ] && [ ! -d /tmp/r/usr/lib ]; then
  if [ -f .portable-r/unpack.sh ] && ls .portable-r/r-base-core_*.deb > /dev/null 2>&1; then
    bash .portable-r/unpack.sh .portable-r /tmp/r > /tmp/r-unpack.log 2>&1 ||
      echo "portable R: unpack failed (see /tmp/r-unpack.log)"
  else
    mkdir -p /tmp/r
    for f in .portable-r/*.deb; do dpkg -x "$f" /tmp/r; done
  fi
fi
gm_lib=/tmp/r/usr/lib/x86_64-linux-gnu
if [ -f "$gm_lib/blas/libblas.so.3" ]; then
  mkdir -p /tmp/r/linklib
  ln -sf "$gm_lib/blas/libblas.so.3" /tmp/r/linklib/libblas.so
  ln -sf "$gm_lib/blas/libblas.so.3" /tmp/r/linklib/libblas.so.3
  ln -sf "$gm_lib/lapack/liblapack.so.3" /tmp/r/linklib/liblapack.so
  ln -sf "$gm_lib/lapack/liblapack.so.3" /tmp/r/linklib/liblapack.so.3
  export LIBRARY_PATH=/tmp/r/linklib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=/tmp/r/linklib:$gm_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ -x /tmp/r/bin/R ]; then
  export PATH=/tmp/r/bin:$PATH
  R --version | head -n 1
else
  echo "portable R: not available; the R suite is skipped"
fi
