#!/usr/bin/env bash
# What CF_CHECK costs: 8-byte allreduce latency of a baseline carflow_cli
# (e.g. built from main) and of this tree's, the latter with CF_CHECK=0 and
# CF_CHECK=1, in interleaved runs; prints min and median per variant.
#   bench/check_cost.sh BASELINE_CLI THIS_CLI IMAGES ITERS ROUNDS
# e.g. bench/check_cost.sh /tmp/main_cli bazel-bin/tools/carflow_cli 8 3000 7
set -euo pipefail
base=$1 this=$2 images=$3 iters=$4 rounds=$5
out=$(mktemp)
for _ in $(seq "$rounds"); do
  for variant in baseline check0 check1; do
    case $variant in
      baseline) cli=$base; check=0 ;;
      check0) cli=$this; check=0 ;;
      check1) cli=$this; check=1 ;;
    esac
    CF_CHECK=$check "$cli" bench --coll allreduce --images "$images" --sizes 8 --iters "$iters" --json |
      grep avg_us | sed "s/^/$variant /" >> "$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    variant, record = line.split(' ', 1)
    r = json.loads(record)
    assert r['verified'], line
    runs.setdefault(variant, []).append(r['avg_us'])
for variant, us in runs.items():
    print(f"{variant}: min {min(us):.2f} us, median {statistics.median(us):.2f} us over {len(us)} runs")
PY
rm -f "$out"
