#!/usr/bin/env bash
# The model's choice against the clock: each transport is calibrated
# (carflow calibrate), then every algorithm of broadcast, allreduce,
# gather_all, exchange, reduce_scatter and barrier at 8 B, 4 KiB, 256 KiB
# and 4 MiB is timed in one interleaved run (carflow compare, ROUNDS
# rounds), and the algorithm the calibrated model ranks first (carflow
# simulate --algo all, as CF_MODEL chooses) is looked up in that run. On 2
# image threads of one process (inproc) and 2 processes of one host (shm).
# Prints one markdown row per step: the model's choice, the fastest
# measured, and the choice's mean time over the fastest's (goal: <= 1.10).
# With FRESH=1 the calls are timed as `compare --fresh-src` times them:
# every image writes its source again before each call and the images
# start together, as the simulation of one call assumes.
#
#   bench/model_choice.sh [ITERS=200] [ROUNDS=5]
#   FRESH=1 bench/model_choice.sh ...
#   CLI=... CFRUN=... bench/model_choice.sh   (other binaries than bazel-bin's)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ITERS="${1:-200}"
ROUNDS="${2:-5}"
CLI="${CLI:-$ROOT/bazel-bin/tools/carflow_cli}"
CFRUN="${CFRUN:-$ROOT/bazel-bin/tools/cfrun_bin}"
FRESH_FLAG=()
if [ "${FRESH:-0}" = 1 ]; then FRESH_FLAG=(--fresh-src); fi
if [ ! -x "$CLI" ] || [ ! -x "$CFRUN" ]; then
  (cd "$ROOT" && bazel build -c opt //tools:carflow_cli //tools:cfrun_bin >&2)
fi
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
"$CLI" calibrate --transport inproc --out "$W/inproc.json" > "$W/inproc.txt"
"$CLI" calibrate --transport shm --out "$W/shm.json" > "$W/shm.txt"
echo "| placement | collective | bytes | model's choice | fastest measured | choice / fastest |"
echo "|---|---|---:|---|---|---:|"
for placement in "2 images" "2 processes"; do
  for coll in broadcast allreduce gather_all exchange reduce_scatter barrier; do
    if [ "$placement" = "2 images" ]; then
      model="$W/inproc.json"
      "$CLI" compare --coll "$coll" --images 2 --sizes 8,4K,256K,4M --iters "$ITERS" --rounds "$ROUNDS" \
        "${FRESH_FLAG[@]}" > "$W/run.txt"
    else
      model="$W/shm.json"
      "$CFRUN" -n 2 "$CLI" compare --coll "$coll" --images 1 --sizes 8,4K,256K,4M --iters "$ITERS" \
        --rounds "$ROUNDS" "${FRESH_FLAG[@]}" | sed -n 's/^\[0\] //p' > "$W/run.txt"
    fi
    python3 - "$CLI" "$model" "$placement" "$coll" "$W/run.txt" <<'PY'
import json, re, subprocess, sys
cli, model, placement, coll, run = sys.argv[1:6]
units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
steps = {}  # bytes -> {algorithm: mean_us}
for line in open(run):
    f = line.split()
    if len(f) < 7 or f[0] != coll or f[2].startswith("default"):
        continue
    m = re.fullmatch(r"(\d+)([KMG]?)", f[1])
    steps.setdefault(int(m.group(1)) * units[m.group(2)], {})[f[2]] = float(f[3])
for nbytes, measured in sorted(steps.items()):
    elem = ["--elem-size", "4"] if coll in ("allreduce", "reduce_scatter") and nbytes % 4 == 0 else []
    out = subprocess.run([cli, "simulate", "--coll", coll, "--images", "2", "--bytes", str(nbytes), "--algo", "all",
                          "--model-file", model, "--json"] + elem, check=True, capture_output=True, text=True).stdout
    ranked = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    choice = min(ranked, key=lambda r: r["rank"])["algorithm"]
    best = min(measured, key=measured.get)
    ratio = measured[choice] / measured[best] if choice in measured else float("nan")
    print("| %s | %s | %d | %s (%.2f us) | %s (%.2f us) | %.2f |" % (
        placement, coll, nbytes, choice, measured.get(choice, float("nan")), best, measured[best], ratio))
PY
  done
done
echo
echo "models: inproc $(tr -d ' \n' < "$W/inproc.json"); shm $(tr -d ' \n' < "$W/shm.json")"
