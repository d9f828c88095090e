# Sourced on the GPU machine (no package registry there), from the repository root:
# unpacks Open MPI's Debian packages, carried in .openmpi-debs, into /tmp/ompi and points
# PATH, the loader and Open MPI itself (OPAL_PREFIX) there, so that ./configure finds
# mpicc and mpirun and builds libgpuml_mpi and bench/mpi_gpu.c. Make the folder here with
#   mkdir -p .openmpi-debs && (cd .openmpi-debs && apt-get download openmpi-bin \
#     openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7 \
#     libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2 \
#     libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libmunge2 libxnvctrl0 libltdl7 \
#     libnuma1 libpciaccess0)          # about 7 MB
# and carry it with the run. Then, for example:
#   mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=16 -np 4 build/bench/mpi_gpu
# (each rank on the GPU of its local number; run I in bench/RESULTS.md).
if [ -d .openmpi-debs ] && [ ! -x /tmp/ompi/usr/bin/mpicc ]; then
  mkdir -p /tmp/ompi
  for f in .openmpi-debs/*.deb; do dpkg -x "$f" /tmp/ompi; done
  for t in mpicc mpirun mpiexec; do ln -sf "/tmp/ompi/usr/bin/$t.openmpi" "/tmp/ompi/usr/bin/$t"; done
fi
if [ -x /tmp/ompi/usr/bin/mpicc ]; then
  export OPAL_PREFIX=/tmp/ompi/usr
  export PATH=/tmp/ompi/usr/bin:$PATH
  export LD_LIBRARY_PATH=/tmp/ompi/usr/lib/x86_64-linux-gnu:/tmp/ompi/usr/lib/x86_64-linux-gnu/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpicc --version > /dev/null 2>&1 && echo "Open MPI: $(mpirun --version 2>/dev/null | head -n 1)"
else
  echo "Open MPI: not available (no .openmpi-debs); the MPI programs are not built"
fi
