#!/usr/bin/env bash
# Two carflow builds against each other: the same collectives and sizes,
# run alternately (the order flips every round), each run followed by the
# machine's phase probe (bench/pingpong_floor, as compare_mpi.sh does);
# prints per step the medians, the paired ratio NEW/BASE (the median of
# each round's own ratio) and that ratio over the rounds where both runs
# ended in a fast phase (cache-line round trip below 300 ns).
#
#   bench/ab_builds.sh BASE_DIR NEW_DIR [--np N | --images N] [--colls C,...]
#       [--sizes 8,64] [--iters 200000] [--rounds 6]
#
# BASE_DIR and NEW_DIR each hold carflow_cli and cfrun_bin (copies of
# bazel-bin/tools from the two commits). --np N (default 2): N processes
# of one image under cfrun; --images N: N image threads of one process.
# Exit status 0; 1 on a failed run; 2 on a bad argument.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '9,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,2\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
BASE=$1 NEW=$2
shift 2
NP=2 IMAGES=0 COLLS=broadcast,scatter,gather,allreduce SIZES=8,64 ITERS=200000 ROUNDS=6
while [ $# -gt 0 ]; do
  case "$1" in
    --np) NP="${2:?--np: missing value}"; IMAGES=0; shift 2 ;;
    --images) IMAGES="${2:?--images: missing value}"; shift 2 ;;
    --colls) COLLS="${2:?--colls: missing value}"; shift 2 ;;
    --sizes) SIZES="${2:?--sizes: missing value}"; shift 2 ;;
    --iters) ITERS="${2:?--iters: missing value}"; shift 2 ;;
    --rounds) ROUNDS="${2:?--rounds: missing value}"; shift 2 ;;
    *) echo "ab_builds: $1: not an option" >&2; usage ;;
  esac
done
for d in "$BASE" "$NEW"; do
  [ -x "$d/carflow_cli" ] && [ -x "$d/cfrun_bin" ] || { echo "ab_builds: $d: no carflow_cli and cfrun_bin" >&2; exit 2; }
done
FLOOR="$ROOT/bazel-bin/bench/pingpong_floor"
[ -x "$FLOOR" ] || (cd "$ROOT" && bazel build //bench:pingpong_floor >&2)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

run() {  # run LABEL DIR ROUND COLL: one JSON line per step into $out
  local label=$1 dir=$2 round=$3 coll=$4 cmd
  if [ "$IMAGES" -gt 0 ]; then
    cmd=("$dir/carflow_cli" bench --images "$IMAGES")
  else
    cmd=("$dir/cfrun_bin" -n "$NP" "$dir/carflow_cli" bench --images 1)
  fi
  local lines floor
  lines=$("${cmd[@]}" --coll "$coll" --sizes "$SIZES" --iters "$ITERS" --json 2>&1) ||
    { echo "ab_builds: $label $coll failed: $lines" >&2; exit 1; }
  floor=$("$FLOOR" | sed -n 's/.*"round_trip_ns":\([0-9.]*\).*/\1/p')
  # With cfrun every rank prints; rank 0's lines ("[0] {...}") are kept.
  echo "$lines" | sed -n 's/^\(\[0\] \)\{0,1\}\({.*"avg_us".*}\)$/\2/p' |
    sed "s/^{/{\"label\":\"$label\",\"round\":$round,\"floor_ns\":$floor,/" >> "$out"
}

IFS=, read -r -a colls <<< "$COLLS"
for round in $(seq "$ROUNDS"); do
  for coll in "${colls[@]}"; do
    if [ $((round % 2)) = 1 ]; then run base "$BASE" "$round" "$coll"; run new "$NEW" "$round" "$coll"
    else run new "$NEW" "$round" "$coll"; run base "$BASE" "$round" "$coll"; fi
  done
done

python3 - "$out" <<'EOF'
import json, statistics as st, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
steps = list(dict.fromkeys((r["coll"], r["bytes"]) for r in runs))
print(f"{'collective':<15} {'bytes':>8} {'base us':>8} {'new us':>8} {'new/base':>9} {'fast phase (rounds)':>20}")
for coll, nbytes in steps:
    by = {}
    for r in runs:
        if (r["coll"], r["bytes"]) == (coll, nbytes):
            by.setdefault(r["round"], {})[r["label"]] = r
    pairs = [v for v in by.values() if len(v) == 2]
    ratio = [p["new"]["avg_us"] / p["base"]["avg_us"] for p in pairs]
    fast = [p["new"]["avg_us"] / p["base"]["avg_us"] for p in pairs
            if p["new"]["floor_ns"] < 300 and p["base"]["floor_ns"] < 300]
    base = st.median(p["base"]["avg_us"] for p in pairs)
    new = st.median(p["new"]["avg_us"] for p in pairs)
    fast_text = f"{st.median(fast):.2f} ({len(fast)})" if fast else "- (0)"
    print(f"{coll:<15} {nbytes:>8} {base:>8.3f} {new:>8.3f} {st.median(ratio):>9.2f} {fast_text:>20}")
EOF
