#!/usr/bin/env bash
# Shrinks the portable R that ../shared/portable-r/pack.sh downloaded into DIR (default
# .portable-r) so that it travels to the GPU machine with room for data (the device tool
# carries 64 MiB per call): r-base-core is repacked without its translations, manuals,
# help pages and tests (R runs the same), xz-compressed. Idempotent.
set -eu
dir=${1:-.portable-r}
deb=$(ls "$dir"/r-base-core_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "no r-base-core .deb in $dir"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -R "$deb" "$work/x"
if [ -d "$work/x/usr/lib/R/library/translations" ] || [ -d "$work/x/usr/share/R/doc/manual" ]; then
  rm -rf "$work/x/usr/lib/R/library/translations" "$work/x/usr/share/R/doc" "$work/x/usr/share/doc" \
         "$work/x/usr/share/man" "$work/x/usr/share/texmf"
  for lib in "$work"/x/usr/lib/R/library/*/; do
    rm -rf "$lib/help" "$lib/html" "$lib/doc" "$lib/tests" "$lib/po" "$lib/demo"
  done
  mkdir -p "$work/x/usr/share/R/doc"   # R_DOC_DIR must exist
  dpkg-deb -Zxz -z9 -b "$work/x" "$deb" > /dev/null
fi
du -sh "$dir" | sed 's/\t.*/ in all/'
