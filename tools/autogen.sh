#!/bin/sh
# Regenerates ./configure and R-package/configure from their configure.ac (both take the
# CUDA checks from tools/cuda.m4). Autoconf's test clean-up also deletes a core dump
# named "core"; here core/ is the source folder, so that word is dropped to keep
# configure's output free of spurious "cannot remove" errors.
set -e
cd "$(dirname "$0")/.."
for dir in . R-package; do
  (cd "$dir" && autoconf && rm -rf autom4te.cache)
  sed -i 's/rm -f core \*.core core.conftest.\* /rm -f /; s/rm -f core /rm -f /' "$dir/configure"
done
