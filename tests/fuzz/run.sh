#!/usr/bin/env bash
# tools/carflow fuzz [--seconds N] [TARGET...]: builds the fuzz targets with
# clang (--config=fuzz, in an output base of their own so the gcc build's
# cache stays warm) and runs each for N seconds (30), two at a time, each on
# a temporary copy of corpus/TARGET (the committed corpus never grows by
# itself). Prints one line per target (execs/s, coverage); exits 1 naming
# each target that crashed, leaked or hung and its crash file, kept with
# the run's log under the printed directory. tests/README.md, "Fuzzing".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Per target: the longest input libFuzzer makes. Room for a few CARs of
# graph JSON, or a trace nested deep enough to overflow a recursive
# reader's stack; a few dozen lines or words elsewhere.
declare -A MAX_LEN=([graph_json]=16384 [store_protocol]=2048 [bootstrap_reply]=2048
                    [model_params]=512 [cli_options]=512 [trace_merge]=32768
                    [liveness_frames]=4096)
ALL=(graph_json store_protocol bootstrap_reply model_params cli_options trace_merge liveness_frames)

usage() {
  echo "usage: tools/carflow fuzz [--seconds N] [TARGET...]   targets: ${ALL[*]}" >&2
  exit 2
}

seconds=30
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage; seconds="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) [ -n "${MAX_LEN[$1]:-}" ] || { echo "fuzz: unknown target '$1'" >&2; usage; }; targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")

bazel_fuzz() {
  (cd "$ROOT" && CC=clang-14 bazel --output_base="${CF_FUZZ_OUTPUT_BASE:-$HOME/.cache/bazel_carflow_fuzz}" "$@")
}
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
start=$SECONDS
bazel_fuzz build --config=fuzz --symlink_prefix=/ "${labels[@]}" >&2
bin="$(bazel_fuzz info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz"
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s" >&2

work="$(mktemp -d "${TMPDIR:-/tmp}/carflow-fuzz.XXXXXX")"
# One target: its own directory holds the corpus copy, the crash files and the log.
run_one() {
  local t="$1" dir="$work/$1"
  mkdir -p "$dir/crashes"
  cp -r "$ROOT/tests/fuzz/corpus/$t" "$dir/corpus"
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     "$bin/$t" -max_total_time="$seconds" -max_len="${MAX_LEN[$t]}" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$dir/crashes/" corpus >"$dir/log" 2>&1)
}

# The summary line of a finished target; its crash file when it failed.
report() {
  local t="$1" rc="$2" dir="$work/$1"
  local execs cov ft corpus
  execs="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)"
  read -r cov ft < <(grep -o 'cov: [0-9]* ft: [0-9]*' "$dir/log" | tail -1 | awk '{print $2, $4}') || true
  corpus="$(find "$dir/corpus" -type f | wc -l)"
  local crash
  crash="$(find "$dir/crashes" -type f | head -1)"
  local note=""
  # A timeout (or a slow unit) is a hang only if it comes back: an input
  # that exceeded the limit while the machine stalled (every target at
  # once) finishes when replayed alone, well inside it.
  if [ -n "$crash" ] && [[ "$(basename "$crash")" == timeout-* || "$(basename "$crash")" == slow-unit-* ]] &&
     [ "$(find "$dir/crashes" -type f | wc -l)" -eq 1 ]; then
    local t0=$SECONDS
    if (cd "$dir" && timeout 10 "$bin/$t" "$crash" >"$dir/replay.log" 2>&1); then
      note="  (one input was slow once; replayed alone it ends in $((SECONDS - t0)) s: the machine stalled)"
      rc=0
      crash=""
    fi
  fi
  if [ "$rc" -eq 0 ] && [ -z "$crash" ]; then
    printf 'fuzz: %-16s ok     %4s s  %7s execs/s  cov %-6s ft %-6s corpus %s%s\n' \
      "$t" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$note"
    return 0
  fi
  printf 'fuzz: %-16s FAILED (exit %s) crash file: %s  log: %s\n' "$t" "$rc" "${crash:-none}" "$dir/log"
  grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|^fuzz: ' "$dir/log" | sed 's/^/      /' || true
  return 1
}

failed=()
pids=()
names=()
# Two at a time: a 2-core machine runs both flat out.
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!); names+=("$t")
  if [ ${#pids[@]} -eq 2 ]; then
    rc=0; wait "${pids[0]}" || rc=$?
    report "${names[0]}" "$rc" || failed+=("${names[0]}")
    pids=("${pids[@]:1}"); names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  rc=0; wait "${pids[$i]}" || rc=$?
  report "${names[$i]}" "$rc" || failed+=("${names[$i]}")
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (crash files and logs under $work; replay one with" \
       "$bin/TARGET FILE, minimise with -minimize_crash=1 -runs=10000)" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed in $((SECONDS - start)) s" >&2
rm -rf "$work"
