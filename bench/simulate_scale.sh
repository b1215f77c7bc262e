#!/usr/bin/env bash
# How fast `carflow simulate` is at scale: the whole command under
# /usr/bin/time -v (wall seconds, CPU seconds, peak RSS) for the log-depth
# algorithms at up to 2^20 images, and CARs simulated per second (all CARs
# over the command's wall time, generation included). One JSON line per
# run, then a table of each case's median over ROUNDS runs.
#   bench/simulate_scale.sh [CLI] [ROUNDS] [BASE_CLI]
# e.g. bench/simulate_scale.sh bazel-bin/tools/carflow_cli 3
# With BASE_CLI, every round runs BASE_CLI then CLI on each case (the
# machine is shared: interleaved runs see the same load) and the table adds
# the medians of the per-round ratios CLI / BASE_CLI of wall and CPU time.
# CASES="coll algo bytes images;..." replaces the list of cases.
set -euo pipefail
cli=${1:-bazel-bin/tools/carflow_cli}
rounds=${2:-3}
base=${3:-}
default_cases="broadcast binomial 8 1048576;broadcast knomial 8 1048576;broadcast logp 8 1048576;\
barrier dissemination 0 1048576;\
reduce_vec binomial 8 1048576;gather binomial 8 1048576;allreduce recursive_doubling 8 1048576;\
allreduce recursive_doubling 8 65536"
IFS=';' read -r -a cases <<< "${CASES:-$default_cases}"
out=$(mktemp)
trap 'rm -f "$out" "$out.time" "$out.json"' EXIT
# run_one LABEL CLI ROUND coll algo bytes images: one JSON line into $out.
run_one() {
  local label=$1 bin=$2 round=$3 coll=$4 algo=$5 bytes=$6 images=$7
  /usr/bin/time -v -o "$out.time" "$bin" simulate --coll "$coll" --algo "$algo" --bytes "$bytes" \
    --images "$images" --json > "$out.json"
  python3 - "$out.json" "$out.time" "$label" "$round" "$(cut -d' ' -f1 /proc/loadavg)" >> "$out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
t = dict(l.strip().split(": ", 1) for l in open(sys.argv[2]) if ": " in l)
wall = 0.0
for p in t["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"):
    wall = wall * 60 + float(p)
cpu = float(t["User time (seconds)"]) + float(t["System time (seconds)"])
rss = int(t["Maximum resident set size (kbytes)"])
print(json.dumps({"cli": sys.argv[3], "round": int(sys.argv[4]), "load": float(sys.argv[5]),
                  "coll": r["coll"], "algorithm": r["algorithm"], "images": r["images"],
                  "bytes": r["bytes"], "cars": r["cars"], "time_ns": r["time_ns"], "wall_s": wall,
                  "cpu_s": round(cpu, 2), "build_s": round(r["build_s"], 3),
                  "simulate_s": round(r["simulate_s"], 3), "rss_mb": round(rss / 1024),
                  "cars_per_s": round(r["cars"] / wall)}))
PY
}
for round in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    read -r coll algo bytes images <<< "$c"
    if [ -n "$base" ]; then run_one base "$base" "$round" "$coll" "$algo" "$bytes" "$images"; fi
    run_one new "$cli" "$round" "$coll" "$algo" "$bytes" "$images"
  done
done
cat "$out"
python3 - "$out" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def med(xs):
    return statistics.median(xs)
keys = list(dict.fromkeys((r["coll"], r["algorithm"], r["images"]) for r in runs))
paired = any(r["cli"] == "base" for r in runs)
head = (f"{'collective':<12} {'algorithm':<20} {'images':>8} {'CARs':>10} {'wall s':>7} {'cpu s':>6} "
        f"{'build s':>7} {'sim s':>6} {'RSS MB':>7} {'CARs/s':>10}")
print(head + ("  wall new/base  cpu new/base" if paired else ""))
for k in keys:
    new = [r for r in runs if (r["coll"], r["algorithm"], r["images"]) == k and r["cli"] == "new"]
    line = (f"{k[0]:<12} {k[1]:<20} {k[2]:>8} {new[0]['cars']:>10} {med([r['wall_s'] for r in new]):>7.2f} "
            f"{med([r['cpu_s'] for r in new]):>6.2f} {med([r['build_s'] for r in new]):>7.2f} "
            f"{med([r['simulate_s'] for r in new]):>6.2f} {max(r['rss_mb'] for r in new):>7} "
            f"{med([r['cars_per_s'] for r in new]):>10.0f}")
    if paired:
        base = {r["round"]: r for r in runs if (r["coll"], r["algorithm"], r["images"]) == k and r["cli"] == "base"}
        def ratio(field):  # nan where the base run read 0 (too short to time)
            return med([r[field] / base[r["round"]][field] if base[r["round"]][field] else float("nan")
                        for r in new])
        wall, cpu = ratio("wall_s"), ratio("cpu_s")
        line += f"  {wall:>13.2f}  {cpu:>12.2f}"
    print(line)
print("load average (1 min) during the runs:", min(r["load"] for r in runs), "-", max(r["load"] for r in runs))
PY
