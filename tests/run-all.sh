#!/bin/sh
# Runs every test suite and ends with one line "N passed, N failed" over all of them.
#   C       build/tests/test_* (backend from GPUML_TEST_BACKEND, default cpu)
#   R       R CMD check of the package tarball; its testthat counts, plus one test for
#           the check itself (no ERROR, no WARNING). With --gpu: testthat alone against
#           the package in RPKG_LIB, with GPUML_TEST_BACKEND=cuda.
#   Octave  the %!test blocks of octave/*.m through tests/run_octave_tests.m
#   MPI     with MPI (not with --gpu): the C tests of tests/mpi, tests/mpi/r_mpi.R and
#           tests/mpi/octave_mpi.m under mpirun -np 3; and the Octave package installed
#           without MPI, whose gpu_mpi_* functions must say so
# Called by `make check` / `make check-gpu`, which set R, OCTAVE, HAVE_R, HAVE_OCTAVE,
# HAVE_MPI, MPIRUN, OCT_LOAD, OCT_PKG, RPKG_TARBALL and RPKG_LIB.
gpu=no
[ "${1:-}" = "--gpu" ] && gpu=yes
passed=0
failed=0
skipped=0
log_dir=build/test-logs
mkdir -p "$log_dir"

# Adds the counts of the last "SUITE: N passed, N failed[, N skipped]" line in file $2.
add_counts() {
  line=$(grep -E "^$1: [0-9]+ passed, [0-9]+ failed" "$2" | tail -n 1)
  if [ -z "$line" ]; then
    echo "$1: no result line; counted as 1 failure (see $2)"
    failed=$((failed + 1))
    return
  fi
  echo "$line"
  p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  sk=0
  case $line in *skipped*) sk=$(echo "$line" | sed -E 's/.* ([0-9]+) skipped.*/\1/') ;; esac
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + sk))
}

echo "== C tests (backend ${GPUML_TEST_BACKEND:-cpu})"
for t in build/tests/test_*; do
  name=$(basename "$t")
  case $name in *_mpi) continue ;; esac
  "$t" > "$log_dir/$name.log" 2>&1
  grep FAIL "$log_dir/$name.log"
  printf '%s ' "$name"
  add_counts C "$log_dir/$name.log"
done

if [ "${HAVE_MPI:-no}" = yes ]; then
  echo "== MPI tests (mpirun -np 3, CPU backend)"
  run_as_root=""
  [ "$(id -u)" -eq 0 ] && run_as_root="--allow-run-as-root"
  for t in build/tests/test_*_mpi; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    "$MPIRUN" $run_as_root --oversubscribe -np 3 "$t" > "$log_dir/$name.log" 2>&1
    grep FAIL "$log_dir/$name.log"
    printf '%s ' "$name"
    add_counts C "$log_dir/$name.log"
  done
fi

if [ "$HAVE_R" = yes ]; then
  if [ "$gpu" = yes ]; then
    echo "== R testthat (backend ${GPUML_TEST_BACKEND:-cpu})"
    R_LIBS="$PWD/$RPKG_LIB" "$R" --no-echo --no-restore -e '
      library(testthat); library(gpuml)
      res <- as.data.frame(test_dir("R-package/tests/testthat", package = "gpuml",
                                    load_package = "installed", stop_on_failure = FALSE))
      cat(sprintf("R: %d passed, %d failed, %d skipped\n",
                  sum(res$nb) - sum(res$failed) - sum(res$skipped),
                  sum(res$failed) + sum(res$error), sum(res$skipped)))' > "$log_dir/r.log" 2>&1
    add_counts R "$log_dir/r.log"
  else
    echo "== R CMD check (runs the testthat suite and the vignette)"
    tarball=$(basename "$RPKG_TARBALL")
    (cd build && _R_CHECK_FORCE_SUGGESTS_=false "$R" CMD check --no-manual "$tarball") > "$log_dir/r.log" 2>&1
    rout=build/gpuml.Rcheck/tests/testthat.Rout
    [ -f "$rout" ] || rout=build/gpuml.Rcheck/tests/testthat.Rout.fail
    counts=$(grep -E '\[ FAIL [0-9]+ \| WARN [0-9]+ \| SKIP [0-9]+ \| PASS [0-9]+ \]' "$rout" 2>/dev/null | tail -n 1)
    if [ -n "$counts" ]; then
      rf=$(echo "$counts" | sed -E 's/.*FAIL ([0-9]+).*/\1/')
      rp=$(echo "$counts" | sed -E 's/.*PASS ([0-9]+).*/\1/')
      rs=$(echo "$counts" | sed -E 's/.*SKIP ([0-9]+).*/\1/')
    else
      rf=1
      rp=0
      rs=0
      echo "R: no testthat summary found"
    fi
    status=$(grep -E '^Status:' "$log_dir/r.log" | tail -n 1)
    echo "R CMD check: ${status:-no status line}"
    if echo "$status" | grep -qE 'ERROR|WARNING' || [ -z "$status" ]; then
      grep -E -A8 '\.\.\. (ERROR|WARNING)$' "$log_dir/r.log" | head -n 60
      rf=$((rf + 1))
    else
      rp=$((rp + 1))
    fi
    echo "R: $rp passed, $rf failed, $rs skipped" | tee -a "$log_dir/r.log"
    passed=$((passed + rp))
    failed=$((failed + rf))
    skipped=$((skipped + rs))
  fi
fi

if [ "$HAVE_R" = yes ] && [ "$gpu" = no ] && [ "${HAVE_MPI:-no}" = yes ]; then
  # The R package's MPI functions: 3 ranks of R, each with its counts.
  echo "== R under MPI (mpirun -np 3 R -f tests/mpi/r_mpi.R, the package in build/Rlib)"
  run_as_root=""
  [ "$(id -u)" -eq 0 ] && run_as_root="--allow-run-as-root"
  # stderr in a log of its own: a rank's message without a newline would otherwise run
  # into another rank's result line, which would then count as missing
  R_LIBS="$PWD/build/Rlib" "$MPIRUN" $run_as_root --oversubscribe -np 3 \
    "$R" --no-echo --no-restore -f tests/mpi/r_mpi.R > "$log_dir/r-mpi.log" \
    2> "$log_dir/r-mpi.stderr.log"
  grep FAIL "$log_dir/r-mpi.log"
  for rank in 0 1 2; do
    printf 'rank %s ' "$rank"
    add_counts "R-MPI-$rank" "$log_dir/r-mpi.log"
  done
fi

if [ "$HAVE_OCTAVE" = yes ] && [ "$gpu" = no ] && [ "${HAVE_MPI:-no}" = yes ]; then
  # The Octave package's MPI functions: 3 ranks of Octave, each with its counts.
  echo "== Octave under MPI (mpirun -np 3 octave, tests/mpi/octave_mpi.m, the package in build/octave-pkg)"
  run_as_root=""
  [ "$(id -u)" -eq 0 ] && run_as_root="--allow-run-as-root"
  # stderr apart: Octave's messages at exit, some without a newline, would otherwise run
  # into another rank's result line
  "$MPIRUN" $run_as_root --oversubscribe -np 3 "$OCTAVE" --no-gui --norc -q \
    --eval "$OCT_LOAD addpath('tests/mpi'); octave_mpi()" > "$log_dir/octave-mpi.log" \
    2> "$log_dir/octave-mpi.stderr.log"
  grep -E 'FAIL|got' "$log_dir/octave-mpi.log"
  for rank in 0 1 2; do
    printf 'rank %s ' "$rank"
    add_counts "Octave-MPI-$rank" "$log_dir/octave-mpi.log"
  done
fi

if [ "$HAVE_OCTAVE" = yes ] && [ "$gpu" = no ] && [ -n "${OCT_PKG:-}" ]; then
  # The Octave package built without MPI (GPUML_MPI=no, as where Open MPI is missing):
  # it installs, and the %!test blocks of gpu_mpi_*.m check that each function says so.
  echo "== Octave package without MPI (pkg install with GPUML_MPI=no; the tests of gpu_mpi_*.m)"
  tmp=$(mktemp -d)
  log=$log_dir/octave-without-mpi.log
  lists="pkg('local_list', '$tmp/octave_packages'); pkg('global_list', '$tmp/global_packages');"
  if GPUML_MPI=no "$OCTAVE" --no-gui --norc -q --eval "pkg('prefix', '$tmp', '$tmp'); $lists warning('off', 'all'); pkg('install', '$PWD/$OCT_PKG')" > "$log" 2>&1; then
    "$OCTAVE" --no-gui --norc -q --eval "$lists pkg load gpuml; assert (! gpuml_info ().mpi); addpath('tests'); run_octave_tests('octave', 'gpu_mpi_*.m')" >> "$log" 2>&1
    grep -iE '^!!!!! |failed' "$log" | grep -v ' 0 failed' | head -n 20
    printf 'without MPI '
    add_counts Octave "$log"
  else
    tail -n 20 "$log"
    echo "Octave without MPI: the package did not install; counted as 1 failure (see $log)"
    failed=$((failed + 1))
  fi
  rm -rf "$tmp"
fi

if [ "$HAVE_R" = yes ] && [ "$gpu" = no ]; then
  # The R package by itself, as an R user installs it: R CMD build of R-package/ alone,
  # R CMD INSTALL of the tarball without CUDA into a library of its own, then a kNN; and
  # R CMD INSTALL of the folder itself (its links to the core), cleaned afterwards.
  echo "== R package by itself (R CMD build R-package; R CMD INSTALL --without-cuda of the tarball and of the folder; a kNN each)"
  tmp=$(mktemp -d)
  here=$PWD
  log=$log_dir/r-standalone.log
  knn_from() {  # library
    R_LIBS="$1" "$R" --no-echo --no-restore -e '
      library(gpuml)
      r <- gpu_knn(as.matrix(iris[, 1:4]), k = 3)
      stopifnot(identical(dim(r$nn.index), c(150L, 3L)), r$backend == "cpu",
                !gpuml_info()$cuda_compiled)
      cat("standalone package: kNN ok\n")'
  }
  if (cd "$tmp" && env -u GPUML_PREBUILT "$R" CMD build --no-build-vignettes "$here/R-package") > "$log" 2>&1 &&
     mkdir -p "$tmp/lib" "$tmp/lib2" &&
     env -u GPUML_PREBUILT "$R" CMD INSTALL --configure-args=--without-cuda -l "$tmp/lib" "$tmp"/gpuml_*.tar.gz >> "$log" 2>&1 &&
     knn_from "$tmp/lib" >> "$log" 2>&1 &&
     env -u GPUML_PREBUILT "$R" CMD INSTALL --preclean --clean --configure-args=--without-cuda -l "$tmp/lib2" "$here/R-package" >> "$log" 2>&1 &&
     knn_from "$tmp/lib2" >> "$log" 2>&1; then
    echo "R standalone: 1 passed, 0 failed"
    passed=$((passed + 1))
  else
    tail -n 20 "$log"
    echo "R standalone: 0 passed, 1 failed (see $log)"
    failed=$((failed + 1))
  fi
  rm -rf "$tmp"
fi

if [ "$HAVE_OCTAVE" = yes ]; then
  echo "== Octave tests (the gpuml package, installed under build/octave-pkg)"
  "$OCTAVE" --no-gui --norc -q --eval "$OCT_LOAD addpath('tests'); run_octave_tests('octave')" > "$log_dir/octave.log" 2>&1
  grep -iE '^!!!!! |failed|shadows' "$log_dir/octave.log" | grep -v ' 0 failed' | head -n 20
  add_counts Octave "$log_dir/octave.log"
  if grep -q "shadows a core library function" "$log_dir/octave.log"; then
    echo "Octave: functions shadow each other (see $log_dir/octave.log): counted as 1 failure"
    failed=$((failed + 1))
  fi
fi

if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
