#!/usr/bin/env bash
# The LogGP model against the clock: each transport is calibrated
# (carflow calibrate), then broadcast, allreduce, gather_all, exchange,
# reduce_scatter and barrier at 8 B, 4 KiB, 256 KiB and 4 MiB are timed
# (carflow bench, the default algorithms) and predicted for the algorithm
# the run used (carflow simulate with the calibrated model), on 2 image
# threads of one process (inproc), on 2 processes of one host (shm), and
# on 8 image threads (inproc, more images than this machine has cores).
# Prints one markdown row per step: predicted, measured, their ratio.
#
#   bench/model_accuracy.sh [ITERS=5000]   (fewer calls let the first calls' schedule
#   builds and page faults into the means)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ITERS="${1:-5000}"
CLI="${CLI:-$ROOT/bazel-bin/tools/carflow_cli}"
CFRUN="${CFRUN:-$ROOT/bazel-bin/tools/cfrun_bin}"
if [ ! -x "$CLI" ] || [ ! -x "$CFRUN" ]; then
  (cd "$ROOT" && bazel build -c opt //tools:carflow_cli //tools:cfrun_bin >&2)
fi
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
"$CLI" calibrate --transport inproc --out "$W/inproc.json" > "$W/inproc.txt"
"$CLI" calibrate --transport shm --out "$W/shm.json" > "$W/shm.txt"
echo "| placement | collective | bytes | algorithm | predicted (us) | measured (us) | measured / predicted |"
echo "|---|---|---:|---|---:|---:|---:|"
for placement in "2 images" "2 processes" "8 images"; do
  for coll in broadcast allreduce gather_all exchange reduce_scatter barrier; do
    images=2
    if [ "$placement" = "8 images" ]; then
      # Oversubscribed: 8 image threads on the machine's cores, priced with
      # the 2-image calibration (the model knows nothing of cores).
      images=8 model="$W/inproc.json"
      "$CLI" bench --coll "$coll" --images 8 --sizes 8,4K,256K,4M --iters "$ITERS" --json > "$W/run.txt"
    elif [ "$placement" = "2 images" ]; then
      model="$W/inproc.json"
      "$CLI" bench --coll "$coll" --images 2 --sizes 8,4K,256K,4M --iters "$ITERS" --json > "$W/run.txt"
    else
      model="$W/shm.json"
      "$CFRUN" -n 2 "$CLI" bench --coll "$coll" --images 1 --sizes 8,4K,256K,4M --iters "$ITERS" --json \
        | sed -n 's/^\[0\] //p' > "$W/run.txt"
    fi
    grep '^{' "$W/run.txt" | python3 -c '
import json, subprocess, sys
cli, model, placement, images = sys.argv[1:5]
for line in sys.stdin:
    r = json.loads(line)
    elem = ["--elem-size", "4"] if r["coll"] in ("allreduce", "reduce_scatter") and r["bytes"] % 4 == 0 else []
    out = subprocess.run([cli, "simulate", "--coll", r["coll"], "--images", images, "--bytes", str(r["bytes"]),
                          "--algo", r["algo"], "--model-file", model, "--json"] + elem,
                         check=True, capture_output=True, text=True).stdout
    p = json.loads(out.splitlines()[0])["time_ns"] / 1000
    print("| %s | %s | %d | %s | %.2f | %.2f | %.2f |" % (placement, r["coll"], r["bytes"], r["algo"], p,
                                                        r["avg_us"], r["avg_us"] / p if p > 0 else float("nan")))
' "$CLI" "$model" "$placement" "$images"
  done
done | tee "$W/rows.md"
echo
# Per placement: the median of |measured / predicted - 1| and how many
# steps are within 25%.
python3 - "$W/rows.md" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(f) == 7 and f[6] not in ("", "nan"):
        by.setdefault(f[0], []).append(abs(float(f[6]) - 1))
for placement, errs in by.items():
    print("%s: median |measured/predicted - 1| %.2f; within 25%%: %d of %d" %
          (placement, statistics.median(errs), sum(e <= 0.25 for e in errs), len(errs)))
PY
echo
echo "models: inproc $(tr -d ' \n' < "$W/inproc.json"); shm $(tr -d ' \n' < "$W/shm.json")"
