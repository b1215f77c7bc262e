#!/usr/bin/env bash
# CF_TRACE end to end: a traced bench on 2 image threads and on 2 processes
# under cfrun; the files merged with `carflow trace merge`; every file and
# the merge checked by tests/trace_check.py (fields, one X event per CAR,
# each SEND's flow matched by exactly one receive's, a receive never ending
# before its SEND started); a full buffer reported; the viewer opens it.
# Usage (tests/BUILD passes them): trace_test.sh CARFLOW_CLI CFRUN TRACE_CHECK
set -uo pipefail
cli=$(realpath "$1") cfrun=$(realpath "$2") check=$(realpath "$3")
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/trace.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3

# 2 image threads, 8 B and 4 KiB: one engine (and file) per size.
CF_TRACE=$work/threads timeout 120 "$cli" bench --coll allreduce --images 2 --sizes 8,4K --iters 30 >/dev/null ||
  fail "traced bench on threads"
[ "$(ls "$work/threads" | wc -l)" -eq 2 ] || fail "expected 2 trace files, got: $(ls "$work/threads")"
for f in "$work"/threads/*.json; do "$py" "$check" "$f" --min-x 60 || fail "check $f"; done

# 2 processes: node 0 and node 1 write their own files; merged, every flow
# crosses between them.
CF_TRACE=$work/procs timeout 180 "$cfrun" --timeout 120 -n 2 --images 1 \
  "$cli" bench --coll broadcast --images 1 --sizes 64 --iters 30 >/dev/null || fail "traced bench under cfrun"
ls "$work/procs" | grep node0 >/dev/null || fail "no node 0 file"
ls "$work/procs" | grep node1 >/dev/null || fail "no node 1 file"
timeout 60 "$cli" trace merge "$work/procs" -o "$work/merged.json" || fail "trace merge"
"$py" "$check" "$work/merged.json" --min-x 60 --flows-across-pids --one-host || fail "check merged"

# A buffer of 5 records: the first 5 kept, the rest counted and reported.
out=$(CF_TRACE=$work/small CF_TRACE_EVENTS=5 timeout 60 "$cli" bench --coll allreduce --images 2 --sizes 8 \
  --iters 10 2>&1) || fail "small buffer bench"
grep -q "kept the first CF_TRACE_EVENTS CARs per image" <<<"$out" || fail "no report of a full buffer: $out"
"$py" "$check" "$work"/small/*.json --max-x 10 --dropped || fail "check small"

# Hostile: merge refuses a directory without traces, a broken file and a deep one.
timeout 30 "$cli" trace merge "$work/none" -o "$work/x.json" 2>/dev/null && fail "merge of a missing directory"
mkdir -p "$work/bad" && echo '{"traceEvents": [1, 2' >"$work/bad/carflow-trace-node0-run0.json"
msg=$(timeout 30 "$cli" trace merge "$work/bad" -o "$work/y.json" 2>&1) && fail "merge of a broken file"
grep -q "carflow-trace-node0-run0.json: not a JSON object" <<<"$msg" || fail "merge error does not name the file: $msg"
[ ! -e "$work/y.json" ] || fail "a failed merge left its output"
# An event nested a million levels deep, which nlohmann's recursive copy and
# dump would overflow the stack on: refused naming the file.
mkdir -p "$work/deep" && "$py" -c 'import sys; n = 10**6; sys.stdout.write("{\"traceEvents\": [{\"ph\": \"X\", \"args\": " + "[" * n + "]" * n + "}]}")' \
  >"$work/deep/carflow-trace-node0-run0.json"
msg=$(timeout 30 "$cli" trace merge "$work/deep" -o "$work/z.json" 2>&1) && fail "merge of a deep file"
grep -q "carflow-trace-node0-run0.json: nests deeper than 64 levels" <<<"$msg" || fail "deep merge: $msg"

# The viewer takes the merged trace.
timeout 60 "$cli" view "$work/merged.json" -o "$work/merged.html" >/dev/null || fail "view of the merged trace"
echo "PASS"
