#!/usr/bin/env bash
# tools/carflow sanitize [asan|tsan]... [-- BAZEL_TEST_ARGS]: runs the suites
# that exercise threads under ThreadSanitizer and the API, engine and
# multi-process suites under AddressSanitizer + UBSan (.bazelrc's configs),
# each config in an output base of its own so that the normal build's cache
# stays warm. A sanitizer report fails its test (the configs halt on the
# first one), and a failed test fails this script. tests/README.md,
# "Sanitizers".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# What each config runs: chosen to fit CI's budget on 2 cores (the timings
# are in tests/README.md). TSan: the engine's threads, the inproc rings and
# the sync family under each progress mode that adds threads. ASan + UBSan:
# every refused call, teams, handles, aggregates, the generator builder,
# the engine, the cost model's flat DAGs and simulator, refused calls
# across processes, and the multi-process
# suite's CF_FAULT cases that lose or fail a node (a doctest filter: the
# whole suite would take most of CI's budget under ASan).
declare -A TARGETS=(
  [tsan]="//tests:engine_test //tests:inproc_transport_test //tests:host_rings_test
          //tests:api_sync_test_thread //tests:api_handles_test_thread //tests:api_aggregate_test_rings
          //tests:record_pool_test //tests:ofi_credit_test"
  [asan]="//tests:api_bad_args_test //tests:api_errors_test //tests:api_init_test //tests:api_teams_test
          //tests:api_handles_test //tests:api_aggregate_test //tests:api_generator_test //tests:engine_test
          //tests:refused_test //tests:ofi_credit_test //tests:loggp_test //tests:model_symmetry_test"
)
declare -A FAULT_CASES=(
  [asan]="CF_FAULT=kill_after*,CF_FAULT=close_link*,CF_FAULT=nomem*"
)

configs=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    asan|tsan) configs+=("$1"); shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: tools/carflow sanitize [asan|tsan]... [-- BAZEL_TEST_ARGS]" >&2; exit 2 ;;
  esac
done
[ ${#configs[@]} -gt 0 ] || configs=(tsan asan)

# bazel test under config $c in its output base $base.
run() {
  (cd "$ROOT" && bazel --output_base="$base" test --config="$c" --symlink_prefix=/ --nocache_test_results "$@")
}

failed=()
for c in "${configs[@]}"; do
  base="${CF_SANITIZE_OUTPUT_BASE:-$HOME/.cache/bazel_carflow}_$c"
  start=$SECONDS
  # The fault cases in a run of their own: a --test_arg reaches every target.
  # shellcheck disable=SC2086  # TARGETS holds a word list
  if run ${TARGETS[$c]} "${extra[@]}" &&
     { [ -z "${FAULT_CASES[$c]:-}" ] ||
       run //tests:multiproc_test --test_arg=--test-case="${FAULT_CASES[$c]}" "${extra[@]}"; }; then
    echo "sanitize: $c passed in $((SECONDS - start)) s" >&2
  else
    echo "sanitize: $c FAILED after $((SECONDS - start)) s (logs: $base/execroot/carflow/bazel-out/*/testlogs)" >&2
    failed+=("$c")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "sanitize: FAILED: ${failed[*]}" >&2; exit 1; }
