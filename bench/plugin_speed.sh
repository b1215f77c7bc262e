#!/usr/bin/env bash
# The plug-in path against the built-in: api/examples/builtin_copies.c
# builds the very DAGs of the binomial broadcast and the recursive-doubling
# allreduce (tests/api_generator_test.cc proves it), so any difference is
# the cost of a registered generator. Runs each pair back to back, order
# alternating, ROUNDS times, on 2 images as threads and on 2 processes of
# one image (tools/cfrun), and prints the median of the rounds' own
# copy / built-in ratios.
#   bench/plugin_speed.sh [ROUNDS] [ITERS]     (defaults 8, 2000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-8} iters=${2:-2000}
bazel build //tools:carflow_cli //tools:cfrun_bin //bench:libbuiltin_copies.so >/dev/null 2>&1
# Copies: a rebuild during the run must not swap the binaries under it.
bin=$(mktemp -d)
out=$bin/results
trap 'rm -rf "$bin"' EXIT
cp bazel-bin/tools/carflow_cli bazel-bin/tools/cfrun_bin bazel-bin/bench/libbuiltin_copies.so "$bin/"
cli=$bin/carflow_cli cfrun=$bin/cfrun_bin plugin=$bin/libbuiltin_copies.so
run() {  # MODE COLL ALGO SIZE
  local mode=$1 coll=$2 algo=$3 size=$4
  local cmd=("$cli" bench --coll "$coll" --sizes "$size" --iters "$iters" --algo "$algo" --json)
  if [ "$mode" = threads ]; then
    CF_PLUGINS=$plugin "${cmd[@]}" --images 2
  else
    CF_PLUGINS=$plugin timeout 300 "$cfrun" -n 2 --images 1 "${cmd[@]}" --images 1
  fi | grep avg_us | head -1 | sed -e "s/^\[[0-9]*\] //" -e "s/^/$mode $coll $algo $size /"
}
for r in $(seq "$rounds"); do
  for mode in threads processes; do
    for pair in "broadcast binomial binomial_copy" "allreduce recursive_doubling recursive_doubling_copy"; do
      read -r coll builtin copy <<<"$pair"
      for size in 8 1M; do
        if [ $((r % 2)) -eq 0 ]; then order=("$builtin" "$copy"); else order=("$copy" "$builtin"); fi
        for algo in "${order[@]}"; do run "$mode" "$coll" "$algo" "$size" >>"$out"; done
      done
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    mode, coll, algo, size, record = line.split(' ', 4)
    r = json.loads(record)
    assert r['verified'], line
    runs.setdefault((mode, coll, size), {}).setdefault(algo, []).append(r['avg_us'])
for (mode, coll, size), by_algo in sorted(runs.items()):
    (copy, c), = [(a, v) for a, v in by_algo.items() if a.endswith('_copy')]
    (builtin, b), = [(a, v) for a, v in by_algo.items() if not a.endswith('_copy')]
    ratios = [x / y for x, y in zip(c, b)]
    print(f"{mode:9} {coll:9} {size:>3}: {copy} / {builtin} = {statistics.median(ratios):.3f} "
          f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; medians {statistics.median(c):.2f} / "
          f"{statistics.median(b):.2f} us)")
PY
