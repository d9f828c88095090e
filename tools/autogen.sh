#!/bin/sh
# Regenerates ./configure from configure.ac. Autoconf's test clean-up also deletes a
# core dump named "core"; here core/ is the source folder, so that word is dropped
# to keep configure's output free of spurious "cannot remove" errors.
set -e
cd "$(dirname "$0")/.."
autoconf
sed -i 's/rm -f core \*.core core.conftest.\* /rm -f /; s/rm -f core /rm -f /' configure
rm -rf autom4te.cache
