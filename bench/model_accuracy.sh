#!/usr/bin/env bash
# The LogGP model against the clock: each transport is calibrated
# (carflow calibrate), then broadcast, allreduce, gather_all, exchange,
# reduce_scatter and barrier at 8 B, 4 KiB, 256 KiB and 4 MiB are timed
# (carflow bench, the default algorithms) and predicted for the algorithm
# the run used (carflow simulate with the calibrated model), on 2 image
# threads of one process (inproc), on 2 processes of one host (shm), and
# on 8 image threads (inproc, more images than this machine has cores).
#
# carflow bench times a loop of blocking calls, so the prediction it is
# held to is the time per call of CALLS back-to-back calls (simulate
# --calls): a one-way call's next call overlaps its last message, which a
# single call's time does not show. The single call's time is printed
# beside it. Each round calibrates anew and measures right after, so a
# round's calibration and measurements meet the same phase of a noisy
# machine; per step the table gives the medians over rounds and the
# median of the rounds' own ratios.
#
# With FRESH=1 the steps are timed with `bench --fresh-src` (sources
# written before each call, each call timed alone from a common start):
# the "one call" column is then the prediction to read.
#
#   bench/model_accuracy.sh [ITERS=5000] [ROUNDS=3] [CALLS=1000]
#   FRESH=1 bench/model_accuracy.sh ...
# (fewer ITERS let the first calls' schedule builds and page faults into
# the means)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ITERS="${1:-5000}" ROUNDS="${2:-3}" CALLS="${3:-1000}"
CLI="${CLI:-$ROOT/bazel-bin/tools/carflow_cli}"
CFRUN="${CFRUN:-$ROOT/bazel-bin/tools/cfrun_bin}"
FRESH_FLAG=()
if [ "${FRESH:-0}" = 1 ]; then FRESH_FLAG=(--fresh-src); fi
if [ ! -x "$CLI" ] || [ ! -x "$CFRUN" ]; then
  (cd "$ROOT" && bazel build -c opt //tools:carflow_cli //tools:cfrun_bin >&2)
fi
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
for round in $(seq "$ROUNDS"); do
  "$CLI" calibrate --transport inproc --out "$W/inproc.$round.json" > /dev/null
  "$CLI" calibrate --transport shm --out "$W/shm.$round.json" > /dev/null
  for placement in "2 images" "2 processes" "8 images"; do
    for coll in broadcast allreduce gather_all exchange reduce_scatter barrier; do
      images=2 model="$W/inproc.$round.json"
      if [ "$placement" = "2 processes" ]; then
        model="$W/shm.$round.json"
        "$CFRUN" -n 2 "$CLI" bench --coll "$coll" --images 1 --sizes 8,4K,256K,4M --iters "$ITERS" --json \
          "${FRESH_FLAG[@]}" | sed -n 's/^\[0\] //p' > "$W/run.txt"
      else
        # 8 images: oversubscribed, priced with the 2-image calibration
        # (the model knows nothing of cores).
        [ "$placement" = "8 images" ] && images=8
        "$CLI" bench --coll "$coll" --images "$images" --sizes 8,4K,256K,4M --iters "$ITERS" --json \
          "${FRESH_FLAG[@]}" > "$W/run.txt"
      fi
      grep '^{' "$W/run.txt" | python3 -c '
import json, subprocess, sys
cli, model, placement, images, calls, rnd = sys.argv[1:7]
def predict(r, extra):
    elem = ["--elem-size", "4"] if r["coll"] in ("allreduce", "reduce_scatter") and r["bytes"] % 4 == 0 else []
    out = subprocess.run([cli, "simulate", "--coll", r["coll"], "--images", images, "--bytes", str(r["bytes"]),
                          "--algo", r["algo"], "--model-file", model, "--json"] + elem + extra,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])["per_call_ns"] / 1000
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"round": int(rnd), "placement": placement, "coll": r["coll"], "bytes": r["bytes"],
                      "algo": r["algo"], "one_call_us": predict(r, []),
                      "loop_us": predict(r, ["--calls", calls]), "measured_us": r["avg_us"]}))
' "$CLI" "$model" "$placement" "$images" "$CALLS" "$round" >> "$W/rows.jsonl"
    done
  done
done
python3 - "$W/rows.jsonl" "$ROUNDS" "$CALLS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = {}
for r in rows:
    steps.setdefault((r["placement"], r["coll"], r["bytes"]), []).append(r)
print("| placement | collective | bytes | algorithm | one call (us) | per call of %s (us) | measured (us) "
      "| measured / per call | measured / one call |" % sys.argv[3])
print("|---|---|---:|---|---:|---:|---:|---:|---:|")
med = statistics.median
errs, errs_one = {}, {}
for (placement, coll, nbytes), rs in steps.items():
    loop = med(r["measured_us"] / r["loop_us"] for r in rs)
    one = med(r["measured_us"] / r["one_call_us"] for r in rs)
    errs.setdefault(placement, []).append(abs(loop - 1))
    errs_one.setdefault(placement, []).append(abs(one - 1))
    print("| %s | %s | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
        placement, coll, nbytes, "/".join(sorted({r["algo"] for r in rs})), med(r["one_call_us"] for r in rs),
        med(r["loop_us"] for r in rs), med(r["measured_us"] for r in rs), loop, one))
print()
print("Over %s round(s), per step the median of the rounds' ratios:" % sys.argv[2])
for placement, e in errs.items():
    o = errs_one[placement]
    print("%s: median |measured / per call - 1| %.2f, within 25%%: %d of %d; against one call: %.2f, %d of %d" %
          (placement, med(e), sum(x <= 0.25 for x in e), len(e), med(o), sum(x <= 0.25 for x in o), len(o)))
PY
echo
for round in $(seq "$ROUNDS"); do
  echo "round $round models: inproc $(tr -d ' \n' < "$W/inproc.$round.json"); shm $(tr -d ' \n' < "$W/shm.$round.json")"
done
