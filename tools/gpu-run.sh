#!/bin/sh
# The GPU machine's run, from the repository root:  sh tools/gpu-run.sh
#   1. configure (CUDA for sm_90, or GPU_RUN_ARCH) and build the library and the C tests
#   2. the C tests with the CUDA backend: auto (certified kNN), double, single, a 64 MB
#      memory limit, forced small tiles (reloaded and resident), the general (radix)
#      selection forced, every certified query rechecked
#   3. compute-sanitizer memcheck and racecheck on small runs of every path
#   4. the other algorithms' C benchmarks (bench/*_gpu.c) and their scikit-learn peers
#   5. bench/knn_gpu.c (gpuml, C API, host arrays in and out) and bench/knn_torch.py
#      (PyTorch cdist + topk), then a table: case | gpuml ms | torch ms | ratio
#   6. kNN variants for the bench notes, and a kernel-time breakdown with ncu
#   7. several devices: the C tests on logical shards of one device (GPUML_SHARDS=3),
#      then bench/devices_gpu on 1, 2, 4 ... devices when the machine has more than one
#   8. R (when tools/gpu-r-env.sh put the portable R on PATH): the package on the prebuilt
#      library, its testthat suite with backend cuda, bench/knn_gpu_r.R (GPU_RUN_R_BENCH:
#      its arguments, e.g. "--only self_65536x128_k16"; "none" skips it) and
#      bench/gpu_user.R when GPU_RUN_USER names its arguments (GPU_RUN_R_TESTS=0: the
#      benchmarks without the testthat suite)
# Environment:
#   GPU_RUN_ARCH=sm_90     the device code to build (configure's --with-cuda-arch)
#   GPU_RUN_PREBUILT=1     link against the build/libgpuml.a that came with the call
#                          (configured with --with-cuda-arch=GPU_RUN_ARCH) instead of
#                          compiling the kernels here
#   GPU_RUN_SKIP_LARGE=1   skip the n = m = 1e6 case (about a minute with PyTorch)
#   GPU_RUN_STEPS="build tests sanitize algos bench variants devices r"   only these steps
#   GPU_RUN_SHARD_TESTS="test_tsne test_dpc"   the C test programs run on logical shards
#   GPU_RUN_DEVICES_ARGS="--only tsne,gmm --reps 2"   bench/devices_gpu's arguments
#   GPU_RUN_ALGOS="dpc gmm tsne"   the other algorithms' programs (tests, sanitizer,
#                          benchmarks and scikit-learn peers) to run
#   GPU_RUN_KNN=0          leave out the kNN tests and sanitizer runs (test_core,
#                          test_knn_index, test_knn_values, bench/knn_gpu --sanitize)
#   GPU_RUN_ALGO_CONFIGS="auto double-64M"   the configurations the other algorithms'
#                          tests run in (default: auto double single double-64M
#                          double-tiles)
# bench/mpi_gpu.c (MPI ranks on the host's GPUs) is built when mpicc is found: source
# tools/gpu-mpi-env.sh first, with Open MPI's packages carried in .openmpi-debs.
# When the machine has no BLAS, source tools/gpu-r-env.sh first: its portable R brings
# Debian's BLAS/LAPACK and puts them on the linker's path.
# Logs go to build/gpu-run (pack them into $OUT after the run: at most 8 files come back).
# The last line says whether all passed. GPU_RUN_ALGOS="" runs none of the other programs.
set -u
LOG=build/gpu-run
mkdir -p "$LOG"
STEPS=${GPU_RUN_STEPS:-build tests sanitize algos bench variants devices r}
ALGOS=${GPU_RUN_ALGOS-dpc gmm tsne}
T0=$(date +%s)
failures=0
step() { echo; echo "== $* [$(($(date +%s) - T0)) s]"; }
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
# GPU_RUN_PREBUILT=1: build/libgpuml.a came with the call (compiled for this GPU on the
# development machine, where nvcc runs too); make links the programs against it.
prebuilt=
if [ "${GPU_RUN_PREBUILT:-0}" = 1 ] && [ -f build/libgpuml.a ]; then prebuilt="-o build/libgpuml.a"; fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null ||
  echo "nvidia-smi not available"

if want build; then
  step "configure and build"
  ldconfig -p 2>/dev/null | grep -qE 'lib(open)?blas\.so' || [ -n "${LIBRARY_PATH:-}" ] ||
    echo "no system BLAS: source tools/gpu-r-env.sh first, or configure will fail"
  if ! ./configure --with-cuda-arch="${GPU_RUN_ARCH:-sm_90}" > "$LOG/configure.log" 2>&1; then
    tail -n 20 "$LOG/configure.log"
    fail "configure"
    echo "$failures step(s) failed"
    exit 1
  fi
  grep -E '^  (CUDA|BLAS)' "$LOG/configure.log"
  if ! make -j "$(nproc)" $prebuilt build/libgpuml.a tests > "$LOG/make.log" 2>&1; then
    grep -E 'error|Error' "$LOG/make.log" | head -n 30
    fail "make"
    echo "$failures step(s) failed"
    exit 1
  fi
  CUDA_INC="$(dirname "$(dirname "$(sed -n 's/^NVCC = //p' Makefile)")")/include"
  LIBS="$(sed -n 's/^LAPACK_LIBS = //p' Makefile) $(sed -n 's/^BLAS_LIBS = //p' Makefile) $(sed -n 's/^CUDA_LIBS = //p' Makefile)"
  mkdir -p build/bench
  for src in bench/*_gpu.c; do
    prog=$(basename "$src" .c)
    # bench/mpi_gpu.c is an MPI program: built with mpicc where there is one
    case $prog in mpi_*)
      command -v mpicc > /dev/null 2>&1 || { echo "no mpicc: $src not built"; continue; }
      make -j "$(nproc)" build/libgpuml_mpi.a >> "$LOG/make.log" 2>&1 &&
      mpicc -O2 -std=c11 -fopenmp -Icore/include "$src" build/libgpuml_mpi.a build/libgpuml.a \
        $LIBS -lm -o "build/bench/$prog" > "$LOG/build-$prog.log" 2>&1 ||
        { cat "$LOG/build-$prog.log"; fail "building $src"; }
      continue ;;
    esac
    if ! gcc -O2 -std=c11 -fopenmp -Icore/include -I"$CUDA_INC" "$src" build/libgpuml.a \
        $LIBS -lm -o "build/bench/$prog" > "$LOG/build-$prog.log" 2>&1; then
      cat "$LOG/build-$prog.log"
      fail "building $src"
    fi
  done
fi

run_tests() {  # test program, label, then VAR=value settings
  prog=$1
  label=$prog-$2
  shift 2
  if env "$@" GPUML_TEST_BACKEND=cuda ./build/tests/$prog > "$LOG/test-$label.log" 2>&1; then
    echo "$label: $(tail -n 1 "$LOG/test-$label.log")"
  else
    grep FAIL "$LOG/test-$label.log" | head -n 20
    echo "$label: $(tail -n 1 "$LOG/test-$label.log")"
    fail "C tests ($label)"
  fi
}

if want tests; then
  step "C tests with the CUDA backend"
  # Internal knobs that force the code paths the default sizes of the tests miss:
  #   GPUML_CUDA_TILE=N          tiles of at most N rows, data not resident (reloaded)
  #   GPUML_CUDA_REF_TILE=N, GPUML_CUDA_QUERY_TILE=N   tile sizes with the data resident
  #                              (double-buffered GEMM tiles, query tiles loaded ahead)
  #   GPUML_CUDA_KNN_SELECT=general   the radix selection for every k
  #   GPUML_CUDA_KNN_FUSED=0     the tile-by-tile path instead of the fused kernel
  #   GPUML_CUDA_FUSED_SPLIT=N   the fused kernel with the references split (merge path)
  #   GPUML_CUDA_KNN_SPLIT=0     plain SGEMM instead of the split TF32 GEMM (fp32)
  #   GPUML_CUDA_KNN_RECHECK=all no list certified: every query of the plain TF32 pass
  #                              searched again by the split pass (and in precision auto
  #                              by fp64)
  #   GPUML_CUDA_KNN_PLAIN=0     no plain TF32 candidate pass: the split pass at once
  #   GPUML_CUDA_KNN_SCREEN_CHUNK=N, GPUML_CUDA_KNN_SCREEN_SLOTS=N   the fused screen
  #                              (kernels/knn_screen.cuh) in short chunks, with short
  #                              queues (every chunk overflowing: its GEMM-tile redo);
  #                              with small reference tiles it runs at the tests' sizes
  #   GPUML_CUDA_KNN_SCREEN=0    no fused screen: the half pass (fp16 GEMM) at the tests'
  #                              small d
  #   GPUML_CUDA_KNN_SYMMETRIC=0 the row-by-row path instead of the symmetric schedule of
  #                              the self-search (test_core's test_knn_symmetric runs both
  #                              itself, with small tiles; these runs take the old path for
  #                              every self-search)
  #   GPUML_CUDA_KNN_RERANK=thread   the exact distances a thread per candidate (the
  #                              kernel before the staged one, kept for comparisons)
  #   GPUML_CUDA_KNN_QUEUE=0     the warp selection's one-pass kernel for the row side too
  #                              (it serves the symmetric search's column side and
  #                              unaligned tiles; kept for comparisons)
  #   GPUML_CUDA_KNN_HALF_TILE=0 the half pass's tiles in fp32 (the fp16 GEMM's output
  #                              before fp16 tiles; kept for comparisons)
  #   GPUML_GMM_FUSED=1          the fused kernels of the full-covariance mixtures (test_gmm
  #                              runs its GPU-CPU comparison both ways itself)
  #   GPUML_GMM_DMMA=0           the GEMM path instead of the tensor-core kernels of the
  #                              full-covariance mixtures (test_gmm runs its own comparison
  #                              with them on as well)
  if [ "${GPU_RUN_KNN:-1}" != 0 ]; then
  run_tests test_core auto GPUML_TEST_PRECISION=auto
  run_tests test_core double GPUML_TEST_PRECISION=double
  run_tests test_core single GPUML_TEST_PRECISION=single
  run_tests test_core auto-recheck-all GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_RECHECK=all
  run_tests test_core auto-rowwise GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_SYMMETRIC=0
  run_tests test_core double-rowwise GPUML_TEST_PRECISION=double GPUML_CUDA_KNN_SYMMETRIC=0
  run_tests test_core single-rowwise GPUML_TEST_PRECISION=single GPUML_CUDA_KNN_SYMMETRIC=0
  run_tests test_core auto-rowwise-recheck-all GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_SYMMETRIC=0 GPUML_CUDA_KNN_RECHECK=all
  run_tests test_core auto-split GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_PLAIN=0
  run_tests test_core single-recheck-all GPUML_TEST_PRECISION=single GPUML_CUDA_KNN_RECHECK=all
  run_tests test_core auto-one-pass-rowwise GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_QUEUE=0 GPUML_CUDA_KNN_SYMMETRIC=0
  SCREENED="GPUML_CUDA_REF_TILE=100 GPUML_CUDA_KNN_SYMMETRIC=0 GPUML_CUDA_KNN_SCREEN_CHUNK=300"
  # the half pass (the fp16 GEMM) where the screen would take the small d of the tests:
  # symmetric, row by row, and small resident tiles
  NOSCREEN="GPUML_CUDA_KNN_SCREEN=0"
  run_tests test_core auto-half GPUML_TEST_PRECISION=auto $NOSCREEN
  run_tests test_core single-half GPUML_TEST_PRECISION=single $NOSCREEN
  run_tests test_core auto-half-rowwise GPUML_TEST_PRECISION=auto $NOSCREEN GPUML_CUDA_KNN_SYMMETRIC=0
  run_tests test_core single-half-rowwise GPUML_TEST_PRECISION=single $NOSCREEN GPUML_CUDA_KNN_SYMMETRIC=0
  run_tests test_core auto-half-resident-tiles GPUML_TEST_PRECISION=auto $NOSCREEN GPUML_CUDA_REF_TILE=500 GPUML_CUDA_QUERY_TILE=100
  # fp16 tiles read 8 values a vector: tiles of 512 rows take the vector paths (500: one by one)
  run_tests test_core auto-half-aligned-tiles GPUML_TEST_PRECISION=auto $NOSCREEN GPUML_CUDA_REF_TILE=512 GPUML_CUDA_QUERY_TILE=96
  run_tests test_core auto-half-one-pass-rowwise GPUML_TEST_PRECISION=auto $NOSCREEN GPUML_CUDA_KNN_QUEUE=0 GPUML_CUDA_KNN_SYMMETRIC=0
  run_tests test_core auto-half-fp32-tiles GPUML_TEST_PRECISION=auto $NOSCREEN GPUML_CUDA_KNN_HALF_TILE=0
  # the radix selection reads fp32 tiles: forced, the half pass keeps them
  run_tests test_core auto-half-general GPUML_TEST_PRECISION=auto $NOSCREEN GPUML_CUDA_KNN_SELECT=general
  run_tests test_core auto-screen GPUML_TEST_PRECISION=auto $SCREENED
  run_tests test_core single-screen GPUML_TEST_PRECISION=single $SCREENED
  run_tests test_core auto-screen-overflow GPUML_TEST_PRECISION=auto $SCREENED GPUML_CUDA_KNN_SCREEN_SLOTS=2
  run_tests test_core auto-screen-all-recheck GPUML_TEST_PRECISION=auto $SCREENED GPUML_CUDA_KNN_SCREEN=all GPUML_CUDA_KNN_RECHECK=all
  # GPU_RUN_KNN_CONFIGS=0: kNN in the two precisions only (the other programs all run).
  [ "${GPU_RUN_KNN_CONFIGS:-1}" = 0 ] || {
  run_tests test_core auto-64M GPUML_TEST_PRECISION=auto GPUML_GPU_MEMORY_LIMIT=64M
  run_tests test_core auto-tiles GPUML_TEST_PRECISION=auto GPUML_CUDA_TILE=300
  run_tests test_core auto-resident-tiles GPUML_TEST_PRECISION=auto GPUML_CUDA_REF_TILE=500 GPUML_CUDA_QUERY_TILE=100
  run_tests test_core auto-general-tiles GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_SELECT=general GPUML_CUDA_TILE=257
  run_tests test_core auto-sgemm GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_SPLIT=0
  run_tests test_core double-64M GPUML_TEST_PRECISION=double GPUML_GPU_MEMORY_LIMIT=64M
  run_tests test_core single-64M GPUML_TEST_PRECISION=single GPUML_GPU_MEMORY_LIMIT=64M
  run_tests test_core double-tiles GPUML_TEST_PRECISION=double GPUML_CUDA_TILE=300
  run_tests test_core single-tiles GPUML_TEST_PRECISION=single GPUML_CUDA_TILE=300
  run_tests test_core double-resident-tiles GPUML_TEST_PRECISION=double GPUML_CUDA_REF_TILE=500 GPUML_CUDA_QUERY_TILE=100
  run_tests test_core single-resident-tiles GPUML_TEST_PRECISION=single GPUML_CUDA_REF_TILE=256 GPUML_CUDA_QUERY_TILE=64
  run_tests test_core single-unfused GPUML_TEST_PRECISION=single GPUML_CUDA_KNN_FUSED=0
  run_tests test_core double-unfused GPUML_TEST_PRECISION=double GPUML_CUDA_KNN_FUSED=0
  run_tests test_core single-split GPUML_TEST_PRECISION=single GPUML_CUDA_FUSED_SPLIT=300
  run_tests test_core double-split GPUML_TEST_PRECISION=double GPUML_CUDA_FUSED_SPLIT=300
  run_tests test_core single-sgemm GPUML_TEST_PRECISION=single GPUML_CUDA_KNN_SPLIT=0
  run_tests test_core double-general GPUML_TEST_PRECISION=double GPUML_CUDA_KNN_SELECT=general
  run_tests test_core single-general-tiles GPUML_TEST_PRECISION=single GPUML_CUDA_KNN_SELECT=general GPUML_CUDA_TILE=257
  }
  # The kNN index and the cosine metric (tests/test_knn_index.c).
  run_tests test_knn_index auto GPUML_TEST_PRECISION=auto
  run_tests test_knn_index double GPUML_TEST_PRECISION=double
  run_tests test_knn_index single GPUML_TEST_PRECISION=single
  run_tests test_knn_index auto-recheck-all GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_RECHECK=all
  run_tests test_knn_index single-recheck-all GPUML_TEST_PRECISION=single GPUML_CUDA_KNN_RECHECK=all
  run_tests test_knn_index auto-split GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_PLAIN=0
  run_tests test_knn_index auto-half GPUML_TEST_PRECISION=auto GPUML_CUDA_KNN_SCREEN=0
  run_tests test_knn_index single-half GPUML_TEST_PRECISION=single GPUML_CUDA_KNN_SCREEN=0
  run_tests test_knn_index auto-screen GPUML_TEST_PRECISION=auto GPUML_CUDA_REF_TILE=100 GPUML_CUDA_KNN_SCREEN_CHUNK=300
  run_tests test_knn_index auto-64M GPUML_TEST_PRECISION=auto GPUML_GPU_MEMORY_LIMIT=64M
  run_tests test_knn_index auto-tiles GPUML_TEST_PRECISION=auto GPUML_CUDA_TILE=300
  run_tests test_knn_index double-resident-tiles GPUML_TEST_PRECISION=double GPUML_CUDA_REF_TILE=500 GPUML_CUDA_QUERY_TILE=100
  # NA, NaN and Inf in kNN's input, checked as the CUDA backend stages it
  # (tests/test_knn_values.c): through the page-locked ring and straight from host memory
  # (GPUML_CUDA_PAGEABLE=1: every block so), reloaded tiles, logical shards of the
  # references, and lists copied out tile by tile (k = 256 under the 64 MB limit).
  run_tests test_knn_values auto GPUML_TEST_PRECISION=auto
  run_tests test_knn_values double GPUML_TEST_PRECISION=double
  run_tests test_knn_values single GPUML_TEST_PRECISION=single
  run_tests test_knn_values auto-pageable GPUML_TEST_PRECISION=auto GPUML_CUDA_PAGEABLE=1
  run_tests test_knn_values auto-64M GPUML_TEST_PRECISION=auto GPUML_GPU_MEMORY_LIMIT=64M
  run_tests test_knn_values auto-tiles GPUML_TEST_PRECISION=auto GPUML_CUDA_TILE=300
  run_tests test_knn_values auto-shards3 GPUML_TEST_PRECISION=auto GPUML_SHARDS=3
  fi
  # The other algorithms' programs: both precisions, and a small memory limit.
  for t in build/tests/test_*; do
    prog=$(basename "$t")
    [ "$prog" = test_core ] && continue
    case " $ALGOS rng " in *" ${prog#test_} "*) ;; *) continue ;; esac
    for config in ${GPU_RUN_ALGO_CONFIGS:-auto double single double-64M double-tiles}; do
      case $config in
        auto) run_tests "$prog" auto GPUML_TEST_PRECISION=auto ;;
        double) run_tests "$prog" double GPUML_TEST_PRECISION=double ;;
        single) run_tests "$prog" single GPUML_TEST_PRECISION=single ;;
        double-64M) run_tests "$prog" double-64M GPUML_TEST_PRECISION=double GPUML_GPU_MEMORY_LIMIT=64M ;;
        double-tiles) run_tests "$prog" double-tiles GPUML_TEST_PRECISION=double GPUML_CUDA_TILE=300 ;;
      esac
    done
    # density peaks' delta with every point past its own cell walked by a warp, and the
    # cut's clusters on the device at any n
    [ "$prog" = test_dpc ] && run_tests test_dpc warps-assign GPUML_CUDA_DPC_RINGS=0 GPUML_CUDA_DPC_ASSIGN=all
    # the screened cutoff count one point a step (grid_count_kernel), not across the lanes
    [ "$prog" = test_dpc ] && run_tests test_dpc one-step GPUML_CUDA_DPC_LANES=0
    # across the lanes, each position's segment found by stepping (the long runs' path)
    [ "$prog" = test_dpc ] && run_tests test_dpc lanes-search GPUML_CUDA_DPC_LANES=search
    # delta walked over the mean density's cells only, a cell's points in index order
    [ "$prog" = test_dpc ] && run_tests test_dpc mean-cells GPUML_CUDA_DPC_DELTA_CELLS=mean GPUML_CUDA_DPC_SUB_CELLS=0
  done
fi

if want sanitize && [ "${GPU_RUN_KNN:-1}" != 0 ]; then
  step "compute-sanitizer (small runs of every path, each checked against the CPU)"
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -n 1)
  if [ -z "$CS" ]; then
    fail "compute-sanitizer not found"
  else
    # racecheck leaves out the largest k (--quick): they take minutes under it.
    # GPU_RUN_SANITIZE="memcheck default full,racecheck tiles quick": only these runs
    runs=${GPU_RUN_SANITIZE:-memcheck default full,memcheck recheck full,memcheck split full,memcheck tiles full,memcheck resident-tiles full,memcheck screen full,racecheck default quick,racecheck split quick,racecheck tiles quick,racecheck screen quick}
    old_ifs=$IFS
    IFS=,
    set -- $runs
    IFS=$old_ifs
    for run in "$@"; do
      set -- $run
      tool=$1
      mode=$3
      case $2 in
        default) set -- ;;
        tiles) set -- GPUML_CUDA_TILE=200 ;;
        recheck) set -- GPUML_CUDA_KNN_RECHECK=all ;;
        split) set -- GPUML_CUDA_FUSED_SPLIT=150 ;;
        resident-tiles) set -- GPUML_CUDA_REF_TILE=200 GPUML_CUDA_QUERY_TILE=64 ;;
        # the fused screen, short chunks and queues (some overflow)
        screen) set -- GPUML_CUDA_REF_TILE=100 GPUML_CUDA_KNN_SYMMETRIC=0 GPUML_CUDA_KNN_SCREEN_CHUNK=300 GPUML_CUDA_KNN_SCREEN_SLOTS=4 ;;
      esac
      label=$(echo "$run" | tr ' ' -)
      f="$LOG/sanitize-$label.log"
      t1=$(date +%s)
      if [ "$mode" = quick ]; then
        env "$@" "$CS" --tool "$tool" --error-exitcode 99 ./build/bench/knn_gpu --sanitize --quick > "$f" 2>&1
      else
        env "$@" "$CS" --tool "$tool" --error-exitcode 99 ./build/bench/knn_gpu --sanitize > "$f" 2>&1
      fi
      rc=$?
      summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -n 1)
      echo "$run: rc $rc, $(($(date +%s) - t1)) s, $(grep 'sanitize runs' "$f") ${summary}"
      if [ "$rc" != 0 ]; then
        grep -E '=========' "$f" | head -n 20
        grep -E 'differ|failed' "$f" | grep -vE ' 0 indices differ| 0 results differ|: 0 failed' | head
        fail "compute-sanitizer $run"
      fi
    done
  fi
fi

if want sanitize && [ -n "${CS:-}" ] && [ "${GPU_RUN_KNN:-1}" != 0 ]; then
  step "compute-sanitizer on the kNN index's and the non-finite input's tests (device memory leaks included)"
  f="$LOG/sanitize-knn-index.log"
  t1=$(date +%s)
  GPUML_TEST_BACKENDS=cuda "$CS" --tool memcheck --leak-check full --error-exitcode 99 \
    ./build/tests/test_knn_index > "$f" 2>&1
  rc=$?
  echo "test_knn_index memcheck: rc $rc, $(($(date +%s) - t1)) s, $(tail -n 1 "$f")"
  [ "$rc" = 0 ] || { grep -E '=========|FAIL' "$f" | head -n 20; fail "compute-sanitizer test_knn_index"; }
  # the searches stopped by a non-finite value (GPUML_TEST_QUICK=1: NaN at a later row of
  # each call, then valid calls on the same context)
  f="$LOG/sanitize-knn-values.log"
  t1=$(date +%s)
  GPUML_TEST_BACKENDS=cuda GPUML_TEST_QUICK=1 "$CS" --tool memcheck --leak-check full --error-exitcode 99 \
    ./build/tests/test_knn_values > "$f" 2>&1
  rc=$?
  echo "test_knn_values memcheck: rc $rc, $(($(date +%s) - t1)) s, $(tail -n 1 "$f")"
  [ "$rc" = 0 ] || { grep -E '=========|FAIL' "$f" | head -n 20; fail "compute-sanitizer test_knn_values"; }
fi

if want sanitize; then
  step "compute-sanitizer on the other algorithms' small runs (each checked against the CPU)"
  CS=${CS:-$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -n 1)}
  for algo in $ALGOS; do
    prog=${algo}_gpu
    [ -x "build/bench/$prog" ] && [ -n "$CS" ] || continue
    for tool in memcheck racecheck; do
      f="$LOG/sanitize-$prog-$tool.log"
      t1=$(date +%s)
      "$CS" --tool "$tool" --error-exitcode 99 "./build/bench/$prog" --sanitize > "$f" 2>&1
      rc=$?
      echo "$prog $tool: rc $rc, $(($(date +%s) - t1)) s, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -n 1)"
      [ "$rc" = 0 ] || { grep -E '=========|FAIL|differ' "$f" | head -n 20; fail "compute-sanitizer $prog $tool"; }
    done
  done
fi

if want algos; then
  step "density peaks, t-SNE, Gaussian mixtures: benchmarks through the C API"
  for algo in $ALGOS; do
    prog=${algo}_gpu
    [ -x "build/bench/$prog" ] || continue
    echo "-- $prog"
    args=""
    # t-SNE reads Fashion-MNIST from bench-data/ (copies of the Debian data set's .gz files)
    [ "$prog" = tsne_gpu ] && [ -d bench-data ] && args="--data bench-data"
    "./build/bench/$prog" $args > "$LOG/bench-$prog.log" 2>&1 || fail "bench $prog"
    grep -E '^RESULT|^tsne_|differ|agree|repeatable|FAIL|ceiling' "$LOG/bench-$prog.log" | head -n 40
  done
  step "scikit-learn on this machine's cores"
  for algo in $ALGOS; do
    py=bench/${algo}_sklearn.py
    [ -f "$py" ] || continue
    echo "-- $py"
    args=""
    [ "$py" = bench/tsne_sklearn.py ] && [ -d bench-data ] && args="--data bench-data"
    PYTHONUNBUFFERED=1 timeout "${SKLEARN_TIMEOUT:-240}" python3 "$py" $args > "$LOG/$(basename "$py" .py).log" 2>&1
    grep -E '^RESULT|^sklearn_|rror' "$LOG/$(basename "$py" .py).log" | head -n 20
  done
fi

if want bench; then
  step "benchmarks: gpuml (bench/knn_gpu.c)"
  [ "${GPU_RUN_SKIP_LARGE:-0}" != 0 ] && export GPUML_BENCH_SKIP_LARGE=1
  ./build/bench/knn_gpu 2>&1 | tee "$LOG/bench-gpuml.log" || fail "bench/knn_gpu"
  step "benchmarks: PyTorch (bench/knn_torch.py)"
  PYTHONUNBUFFERED=1 python3 bench/knn_torch.py 2>&1 | tee "$LOG/bench-torch.log"
  step "table"
  ceiling=$(sed -n 's/^CEILING_TFLOPS //p' "$LOG/bench-gpuml.log")
  echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1); SGEMM ceiling ${ceiling:-?} TFLOP/s"
  echo "| case | gpuml ms | torch cdist ms | torch GEMM ms | best torch / gpuml | gpuml TFLOP/s (2mnd) |"
  echo "|---|---|---|---|---|---|"
  grep '^RESULT ' "$LOG/bench-gpuml.log" | grep -v warmup | while read -r _ name ms; do
    base=${name%%/index-*}
    t=$(grep "^RESULT $base " "$LOG/bench-torch.log" | awk '{print $3}')
    g=$(grep "^RESULT $base/gemm " "$LOG/bench-torch.log" | awk '{print $3}')
    echo "$name $ms ${t:--} ${g:--}" | awk '{
      split($1, a, /[_=\/]/); n = a[2]; d = a[4]; m = (a[7] == "m") ? a[8] : n;
      tf = 2 * m * n * d / ($2 / 1e3) / 1e12;
      best = ($3 == "-") ? $4 : (($4 == "-" || $3 + 0 < $4 + 0) ? $3 : $4);
      r = (best == "-") ? "-" : sprintf("%.2f", best / $2);
      printf "| %s | %s | %s | %s | %s | %.1f |\n", $1, $2, $3, $4, r, tf }'
  done
fi

if want variants; then
  step "variants (bench notes): split TF32 GEMM vs SGEMM; fused vs tiled direct form"
  {
    for c in "65536 65536 128 16" "65536 65536 784 16"; do
      set -- $c
      ./build/bench/knn_gpu --case $c 3 "n=$1_d=$3_k=$4/split-tf32" | grep -E '^RESULT|agreement'
      GPUML_CUDA_KNN_SPLIT=0 ./build/bench/knn_gpu --case $c 3 "n=$1_d=$3_k=$4/sgemm" | grep -E '^RESULT|agreement'
    done
    ./build/bench/knn_gpu --case 65536 65536 2 16 3 "n=65536_d=2_k=16/fused" | grep -E '^RESULT|agreement'
    GPUML_CUDA_KNN_FUSED=0 ./build/bench/knn_gpu --case 65536 65536 2 16 3 "n=65536_d=2_k=16/tiled" | grep -E '^RESULT|agreement'
    ./build/bench/knn_gpu --case 1000 1000 2 16 5 "n=1000_d=2_k=16/fixed-cost" | grep -E '^RESULT'
  } 2>&1 | tee "$LOG/variants.log"
  # Kernel time by kernel name for the d = 128 case (the search only: no warm-up).
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
  if [ -n "$NCU" ]; then
    timeout 240 "$NCU" --clock-control none --print-units base --metrics gpu__time_duration.sum --csv \
      ./build/bench/knn_gpu --case 65536 65536 128 16 1 profile > "$LOG/ncu.csv" 2> "$LOG/ncu.err"
    awk -F'","' '/gpu__time_duration.sum/ {
        name = $5; sub(/\(.*/, "", name); v = $NF; gsub(/[",]/, "", v); t[name] += v; c[name]++ }
      END { for (k in t) printf "%10.3f ms %5d x  %s\n", t[k] / 1e6, c[k], k }' "$LOG/ncu.csv" |
      sort -rn | head -n 15 | tee "$LOG/profile.txt"
  else
    echo "ncu not found: no kernel breakdown"
  fi
fi

if want devices; then
  step "several devices: C tests on logical shards (GPUML_SHARDS=3), bench/devices_gpu"
  for prog in ${GPU_RUN_SHARD_TESTS:-test_tsne test_dpc}; do
    run_tests "$prog" shards3 GPUML_TEST_PRECISION=auto GPUML_SHARDS=3
  done
  ndev=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${ndev:-0}" -gt 1 ]; then
    ./build/bench/devices_gpu ${GPU_RUN_DEVICES_ARGS:-} > "$LOG/bench-devices.log" 2>&1 ||
      fail "bench/devices_gpu"
    grep -E '^  [0-9]|failed' "$LOG/bench-devices.log"
    sed -n '/^case /,$p' "$LOG/bench-devices.log"
  else
    echo "one device: bench/devices_gpu skipped"
  fi
fi

if want r && command -v R > /dev/null 2>&1; then
  step "R: package, testthat on the GPU, bench/knn_gpu_r.R"
  if ! make -j 16 $prebuilt RBUILD_FLAGS=--no-build-vignettes build/Rlib/gpuml/DESCRIPTION > "$LOG/r-build.log" 2>&1; then
    tail -n 30 "$LOG/r-build.log"
    fail "the R package"
  elif [ "${GPU_RUN_R_TESTS:-1}" != 0 ]; then
    GPUML_TEST_BACKEND=cuda R_LIBS="$PWD/build/Rlib" R --no-echo --no-restore -e '
      library(testthat); library(gpuml)
      res <- as.data.frame(test_dir("R-package/tests/testthat", package = "gpuml",
                                    load_package = "installed", stop_on_failure = FALSE,
                                    reporter = "summary"))
      cat(sprintf("R (cuda): %d passed, %d failed, %d skipped\n",
                  sum(res$nb) - sum(res$failed) - sum(res$skipped),
                  sum(res$failed) + sum(res$error), sum(res$skipped)))' > "$LOG/r-tests.log" 2>&1
    grep -E '^R \(cuda\)|Failure|Error' "$LOG/r-tests.log" | head -n 20
    grep -qE '^R \(cuda\): [0-9]+ passed, 0 failed' "$LOG/r-tests.log" || fail "R tests on the GPU"
  fi
  if [ -f build/Rlib/gpuml/DESCRIPTION ]; then
    if [ "${GPU_RUN_R_BENCH:-}" != none ]; then
      R_LIBS="$PWD/build/Rlib" timeout 400 Rscript bench/knn_gpu_r.R ${GPU_RUN_R_BENCH:-} > "$LOG/knn_gpu_r.log" 2>&1 ||
        fail "bench/knn_gpu_r.R"
      grep -E '^USER|^INDEX|^\||rror' "$LOG/knn_gpu_r.log"
    fi
    if [ -n "${GPU_RUN_USER:-}" ]; then
      R_LIBS="$PWD/build/Rlib" timeout 400 Rscript bench/gpu_user.R $GPU_RUN_USER > "$LOG/gpu_user.log" 2>&1 ||
        fail "bench/gpu_user.R"
      grep -E '^USER|^\||rror' "$LOG/gpu_user.log"
    fi
  fi
fi

echo
echo "gpu-run: $failures step(s) failed [$(($(date +%s) - T0)) s]"
[ "$failures" -eq 0 ]
