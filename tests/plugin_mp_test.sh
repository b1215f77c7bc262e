#!/usr/bin/env bash
# The example plug-in across processes: plugin_test under cfrun -n 3
# --images 2, every process loading the plug-in through CF_PLUGINS.
# Then processes that registered different generators (node 0 alone has
# one and asks for it), and processes given different CF_ALGO_BROADCAST:
# under CF_CHECK=1 every image gets CF_ERR_MISMATCH naming the algorithm
# it chose and what differs between the processes.
# Usage (tests/BUILD passes them): plugin_mp_test.sh CFRUN PLUGIN_TEST PLUGIN
set -uo pipefail
out=$(CF_PLUGINS="$3" "$1" --timeout 120 -n 3 --images 2 "$2" 2>&1)
status=$?
echo "$out"
[ "$status" -eq 0 ] || { echo "cfrun exited with $status"; exit 1; }
n=$(grep -c "plugin_test: [0-9]* checks, 0 failures, cf_finalize 0" <<<"$out")
[ "$n" -eq 3 ] || { echo "expected 3 clean summaries, found $n"; exit 1; }
out=$(CF_CHECK=1 "$1" --timeout 120 -n 2 --images 2 "$2" disagree 2>&1)
status=$?
echo "$out"
[ "$status" -eq 0 ] || { echo "disagree: cfrun exited with $status"; exit 1; }
n=$(grep -c "plugin_test: 4 checks, 0 failures, cf_finalize 0" <<<"$out")
[ "$n" -eq 2 ] || { echo "disagree: expected 2 clean summaries (4 checks each), found $n"; exit 1; }
# The image that found the difference first names the other's choice too.
grep -q "for this broadcast and image [0-9]* chose" <<<"$out" || { echo "disagree: no image named both choices"; exit 1; }
out=$(CF_CHECK=1 "$1" --timeout 120 -n 2 --images 2 "$2" disagree-env 2>&1)
status=$?
echo "$out"
[ "$status" -eq 0 ] || { echo "disagree-env: cfrun exited with $status"; exit 1; }
n=$(grep -c "plugin_test: 2 checks, 0 failures, cf_finalize 0" <<<"$out")
[ "$n" -eq 2 ] || { echo "disagree-env: expected 2 clean summaries (2 checks each), found $n"; exit 1; }
grep -Eq "chose '(binomial|flat)' for this broadcast and image [0-9]* chose '(binomial|flat)'" <<<"$out" ||
  { echo "disagree-env: no image named both choices"; exit 1; }
