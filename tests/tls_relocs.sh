#!/usr/bin/env bash
# The shared library's initial-exec thread-locals: every TPOFF relocation
# must name its variable. A nameless one resolves to offset 0 of the
# library's TLS block, so two variables share bytes (transports/transport.h
# says which variables may use that model and why).
set -euo pipefail
lib="$1"
bad=$(readelf -rW "$lib" | awk '$3 ~ /TPOFF/ && (NF < 7 || $5 == "<null>")')
if [ -n "$bad" ]; then
  echo "$lib: TPOFF relocations that name no symbol:"
  echo "$bad"
  exit 1
fi
count=$(readelf -rW "$lib" | awk '$3 ~ /TPOFF/' | wc -l)
[ "$count" -gt 0 ] || { echo "$lib: no TPOFF relocations at all (was the library built?)"; exit 1; }
echo "$lib: $count TPOFF relocations, each naming its variable"
