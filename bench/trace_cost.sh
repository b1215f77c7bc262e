#!/usr/bin/env bash
# What CF_TRACE costs: the 8-byte allreduce on 2 image threads and on 2
# processes (cfrun -n 2), for a baseline carflow_cli built without tracing
# (the same commit with each `if (timing_)` of engine/run.cc and
# engine/sync.cc made `if (false)`, in a git worktree: the instrumentation's
# cost alone, nothing else differs), this tree's with tracing off, and this
# tree's with CF_TRACE on; interleaved rounds, order rotating; prints each
# variant's median and the paired median ratio against the baseline.
#   bench/trace_cost.sh BASE_CLI BASE_CFRUN THIS_CLI THIS_CFRUN [ROUNDS] [ITERS]
set -euo pipefail
base=$1 base_cfrun=$2 this=$3 this_cfrun=$4 rounds=${5:-10} iters=${6:-20000}
out=$(mktemp) tdir=$(mktemp -d)
trap 'rm -rf "$out" "$tdir"' EXIT
run() {  # VARIANT MODE
  local cli=$this cfrun=$this_cfrun env=()
  case $1 in
    baseline) cli=$base cfrun=$base_cfrun ;;
    on) env=(CF_TRACE="$tdir/t" CF_TRACE_EVENTS=4000000) ;;
  esac
  local cmd=("$cli" bench --coll allreduce --sizes 8 --iters "$iters" --json)
  if [ "$2" = threads ]; then
    env "${env[@]}" "${cmd[@]}" --images 2
  else
    env "${env[@]}" timeout 300 "$cfrun" -n 2 --images 1 "${cmd[@]}" --images 1
  fi | grep avg_us | head -1 | sed -e "s/^\[[0-9]*\] //" -e "s/^/$1 $2 /"
  rm -rf "$tdir/t"
}
variants=(baseline off on)
for r in $(seq "$rounds"); do
  for mode in threads processes; do
    for k in 0 1 2; do run "${variants[$(((k + r) % 3))]}" "$mode" >>"$out"; done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    variant, mode, record = line.split(' ', 2)
    r = json.loads(record)
    assert r['verified'], line
    runs.setdefault(mode, {}).setdefault(variant, []).append(r['avg_us'])
for mode, by in runs.items():
    b = by['baseline']
    for v in ('off', 'on'):
        ratios = [x / y for x, y in zip(by[v], b)]
        print(f"{mode:9} {v:3}: median {statistics.median(by[v]):.3f} us vs baseline {statistics.median(b):.3f}; "
              f"paired ratio {statistics.median(ratios):.3f} (rounds {min(ratios):.2f}-{max(ratios):.2f})")
PY
