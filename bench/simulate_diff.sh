#!/usr/bin/env bash
# Whether two carflow CLIs predict alike: `carflow simulate --algo all
# --json` over every kind, team sizes 1-64 (powers of two and not), four
# sizes, with and without nodes of 4 images, with the default model and
# another; the JSON lines of both, build and simulate times removed, must
# be identical. For changes to the generators' speed, the simulator or the
# model's matcher that must not change a prediction.
#
#   bench/simulate_diff.sh BASE_CLI NEW_CLI
#
# Exit status 0 when identical, 1 with the first differences, 2 on a bad
# argument.
set -euo pipefail
[ $# = 2 ] && [ -x "$1" ] && [ -x "$2" ] || { echo "usage: bench/simulate_diff.sh BASE_CLI NEW_CLI" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

grid() {  # grid CLI OUT
  local cli=$1 out=$2 coll P b node model
  : > "$out"
  for coll in broadcast barrier allreduce gather_all exchange reduce_scatter gather scatter reduce_vec scan; do
    for P in 1 2 3 5 8 13 16 31 64; do
      for b in 8 4096 65536 4194304; do
        for node in "" "--images-per-node 4"; do
          for model in "" "--model L=700,o=30,g=50,G=0.2,O=0.05,S=8192"; do
            echo "== $coll $P $b $node $model" >> "$out"
            # shellcheck disable=SC2086  # node and model are option lists
            "$cli" simulate --coll "$coll" --images "$P" --bytes "$b" --algo all $node $model --json >> "$out" 2>&1 || true
          done
        done
      done
    done
  done
  sed -i -E 's/"build_s": [0-9.e+-]+, "simulate_s": [0-9.e+-]+//' "$out"
}

grid "$1" "$work/base"
grid "$2" "$work/new"
if diff -q "$work/base" "$work/new" > /dev/null; then
  echo "simulate_diff: $(grep -c '^{' "$work/new") predictions over $(grep -c '^==' "$work/new") cases, identical"
  exit 0
fi
echo "simulate_diff: predictions differ (first differences):" >&2
diff "$work/base" "$work/new" | head -20 >&2
exit 1
