#!/bin/sh
# Before and after on the GPU machine, in one run:  sh tools/gpu-compare.sh OLD_DIR
# OLD_DIR holds an earlier commit of this tree (e.g. `git archive REV | tar -x -C .old`,
# carried to the machine). Both trees are configured for sm_90 and built side by side,
# then each bench/*_gpu.c program of the two runs alternately (old, new, old, new: the
# second pair is kept, so both run warm), and the RESULT lines are printed as
#   | case | old ms | new ms | new / old |
# Environment: COMPARE_PROGRAMS="knn dpc gmm tsne" (default); COMPARE_ROUNDS=1 runs each
# side once (the last round is the one reported); COMPARE_SKIP_BUILD=1 reuses the builds.
# Logs go to $OUT (when set) or build/gpu-compare. Source tools/gpu-r-env.sh first where
# the machine has no BLAS.
set -u
old=${1:?usage: sh tools/gpu-compare.sh OLD_DIR}
LOG=${OUT:-build/gpu-compare}
mkdir -p "$LOG"
PROGRAMS=${COMPARE_PROGRAMS:-knn dpc gmm tsne}
build() {  # dir, label
  (cd "$1" && GPU_RUN_STEPS=build OUT="$LOG/build-$2" sh tools/gpu-run.sh > "$LOG/build-$2.log" 2>&1)
}
if [ "${COMPARE_SKIP_BUILD:-0}" != 1 ]; then
  build "$old" old & pid=$!
  build . new
  wait $pid
  for side in old new; do tail -n 1 "$LOG/build-$side.log" | sed "s/^/$side build: /"; done
fi
rounds=${COMPARE_ROUNDS:-2}
here=$(pwd)
args_for() {
  case $1 in
    dpc) echo "--no-check" ;;
    tsne) [ -d "$here/bench-data" ] && echo "--data $here/bench-data" ;;
  esac
}
for p in $PROGRAMS; do
  for round in $(seq 1 "$rounds"); do
    for side in old new; do
      dir=.; [ $side = old ] && dir=$old
      [ -x "$dir/build/bench/${p}_gpu" ] || continue
      (cd "$dir" && timeout "${COMPARE_TIMEOUT:-300}" "./build/bench/${p}_gpu" $(args_for $p)) \
        > "$LOG/$p-$side-$round.log" 2>&1
    done
  done
  echo "-- $p"
  echo "| case | old ms | new ms | new / old |"
  echo "|---|---|---|---|"
  grep '^RESULT ' "$LOG/$p-new-$rounds.log" 2>/dev/null | while read -r _ name ms; do
    o=$(grep "^RESULT $name " "$LOG/$p-old-$rounds.log" 2>/dev/null | awk '{print $3}')
    echo "$name ${o:--} $ms" | awk '{ r = ($2 == "-") ? "-" : sprintf("%.2f", $3 / $2);
      printf "| %s | %s | %s | %s |\n", $1, $2, $3, r }'
  done
  grep -hE 'differ|agree|FAIL' "$LOG/$p-new-$rounds.log" 2>/dev/null | head -n 5
done
