#!/usr/bin/env bash
# The example plug-in across processes: plugin_test under cfrun -n 3
# --images 2, every process loading the plug-in through CF_PLUGINS.
# Usage (tests/BUILD passes them): plugin_mp_test.sh CFRUN PLUGIN_TEST PLUGIN
set -uo pipefail
out=$(CF_PLUGINS="$3" "$1" --timeout 120 -n 3 --images 2 "$2" 2>&1)
status=$?
echo "$out"
[ "$status" -eq 0 ] || { echo "cfrun exited with $status"; exit 1; }
n=$(grep -c "plugin_test: [0-9]* checks, 0 failures, cf_finalize 0" <<<"$out")
[ "$n" -eq 3 ] || { echo "expected 3 clean summaries, found $n"; exit 1; }
