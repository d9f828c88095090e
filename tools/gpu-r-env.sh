# Sourced on the GPU machine (no package registry there): unpacks the portable R that
# ../shared/portable-r/pack.sh put in .portable-r (carried with the run) into /tmp/r and
# points PATH, the linker and the loader at it, with Debian's reference BLAS/LAPACK for
# linking. Afterwards ./configure finds R and `make check-gpu` runs the R suite too.
if [ -d .portable-r ] && [ ! -x /tmp/r/bin/R ]; then
  bash .portable-r/unpack.sh .portable-r /tmp/r > /tmp/r-unpack.log 2>&1 ||
    echo "portable R: unpack failed (see /tmp/r-unpack.log)"
fi
if [ -x /tmp/r/bin/R ]; then
  gm_lib=/tmp/r/usr/lib/x86_64-linux-gnu
  mkdir -p /tmp/r/linklib
  ln -sf "$gm_lib/blas/libblas.so.3" /tmp/r/linklib/libblas.so
  ln -sf "$gm_lib/blas/libblas.so.3" /tmp/r/linklib/libblas.so.3
  ln -sf "$gm_lib/lapack/liblapack.so.3" /tmp/r/linklib/liblapack.so
  ln -sf "$gm_lib/lapack/liblapack.so.3" /tmp/r/linklib/liblapack.so.3
  export PATH=/tmp/r/bin:$PATH
  export LIBRARY_PATH=/tmp/r/linklib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=/tmp/r/linklib:$gm_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  R --version | head -n 1
else
  echo "portable R: not available; the R suite is skipped"
fi
