#!/usr/bin/env bash
# bench/compare_mpi.sh: carflow against Open MPI and MPICH, the same
# collectives, sizes and process count, in one run (bench/compare_mpi.md).
#
#   bench/compare_mpi.sh [--np 2] [--colls broadcast,allreduce,...]
#       [--sizes 8:4M] [--iters 1000] [--rounds 3]
#       [--out DIR] [--bin-dir DIR] [--no-install] [--no-malloc-env]
#       [--mpi openmpi,mpich] [--fast-floor-ns 300]
#       [--mixed-ops 200] [--mixed-iters 5] [--seed 1] [--threads]
#
# --threads adds carflow's NP images as threads of one process (`carflow
# bench --images NP`, no cfrun) to every round's rotation; the table adds
# its time, its paired ratio over carflow's NP processes (over all rounds,
# and over the rounds where both ended in a fast phase), and over the
# faster MPI.
#
# Besides the ten collectives, "mixed" (in the default list, or named in
# --colls) runs the seeded sequence of bench/mixed_sequence.h, the same ops
# in every implementation; its row is the time of one pass.
#
# carflow runs as `cfrun -n NP carflow bench --images 1` (one image per
# process); each MPI runs bench/osu_mpi.c under its own mpirun. Per round and
# collective the implementations run back to back, in an order that rotates,
# so that drift in the machine's load reaches all of them alike. The table
# holds the median over rounds of each implementation's avg_us, their
# ratio, and the paired ratio: the median over rounds of each round's own
# ratio (the two ran back to back, so both met the machine of that moment).
#
# The machine's phase: on a shared VM the cost of moving one cache line
# between the two cores flips between phases that last about a second
# (measured here: 110-160 ns a round trip, then 490-630 ns), and a small
# message's latency with it, for every implementation alike. Right after
# each run the script times that round trip (bench/pingpong_floor, 20000
# trips, a few ms) and tags the run's lines with it (floor_ns): measured
# here, the probe after a run matched the run's own phase in 15 of 16 runs
# (2-process 8-byte broadcast: 0.14-0.19 us with the probe at 55-148 ns,
# 0.28-0.32 us with it at 507-700 ns), the probe before it did not. The
# table adds, per MPI, the median over the rounds where both
# implementations' runs ended in a fast phase (floor below
# --fast-floor-ns) of the round's own ratio: the comparison of the two
# under the same machine conditions.
#
# Writes into DIR (default bench/results): compare_mpi.jsonl (every JSON
# line, tagged with round and impl; carflow's per rank), compare_mpi.md (the
# table), compare_mpi.png (gnuplot, when present), compare_mpi.log (the
# runs' output). Exit status 0; 1 on a failed run or a result that is not
# verified; 2 on a bad argument.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL_COLLS=broadcast,barrier,allreduce,scatter,gather,gather_all,exchange,reduce_vec,scan,reduce_scatter
NP=2 COLLS=$ALL_COLLS SIZES=8:4M ITERS=1000 ROUNDS=3 OUT="$ROOT/bench/results"
INSTALL=1 BIN_DIR='' MALLOC_ENV=1 MPI_LIST=openmpi,mpich FAST_FLOOR_NS=300
MIXED_OPS=200 MIXED_ITERS=5 MIXED_SEED=1 COLLS_GIVEN=0 THREADS=0
# glibc's allocator knobs, set for every implementation alike (--no-malloc-env
# drops them). An MPI that mallocs and frees a large temporary per call gives
# the pages back on free (munmap, heap trim) and faults in fresh ones on the
# next call; where a page fault is dear (a VM that hands freed pages back to
# its host) that swamps the collective: here Open MPI's
# MPI_Reduce_scatter_block of 64 KiB took 10 ms instead of 33 us. With these
# the heap keeps such buffers (32 MiB is glibc's largest mmap threshold on
# 64-bit).
MALLOC_VARS=(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=67108864)
RUN_TIMEOUT_S=300
# Must equal kStepBudgetBytes in bench/osu_mpi.c; the summary checks that
# carflow and MPI report the same iters for every step.
STEP_BUDGET_BYTES=$((64 << 20))

# shellcheck source=bench/mpi_bench_shared.sh
. "$ROOT/bench/mpi_bench_shared.sh"

fail() { echo "compare_mpi: $*" >&2; exit 1; }
usage() { echo usage: >&2; sed -n '5,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,2\}//' >&2; exit 2; }
note() { echo "compare_mpi: $*" >&2; }

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --np) NP="${2:?--np: missing value}"; shift 2 ;;
      --colls) COLLS="${2:?--colls: missing value}"; COLLS_GIVEN=1; shift 2 ;;
      --mixed-ops) MIXED_OPS="${2:?--mixed-ops: missing value}"; shift 2 ;;
      --mixed-iters) MIXED_ITERS="${2:?--mixed-iters: missing value}"; shift 2 ;;
      --seed) MIXED_SEED="${2:?--seed: missing value}"; shift 2 ;;
      --sizes) SIZES="${2:?--sizes: missing value}"; shift 2 ;;
      --iters) ITERS="${2:?--iters: missing value}"; shift 2 ;;
      --rounds) ROUNDS="${2:?--rounds: missing value}"; shift 2 ;;
      --out) OUT="${2:?--out: missing value}"; shift 2 ;;
      --bin-dir) BIN_DIR="${2:?--bin-dir: missing value}"; shift 2 ;;
      --no-install) INSTALL=0; shift ;;
      --no-malloc-env) MALLOC_ENV=0; shift ;;
      --mpi) MPI_LIST="${2:?--mpi: missing value}"; shift 2 ;;
      --fast-floor-ns) FAST_FLOOR_NS="${2:?--fast-floor-ns: missing value}"; shift 2 ;;
      --threads) THREADS=1; shift ;;
      -h|--help) usage ;;
      *) echo "compare_mpi: unknown argument '$1'" >&2; usage ;;
    esac
  done
  if ! [[ "$NP" =~ ^[0-9]+$ ]] || [ "$NP" -lt 2 ] || [ "$NP" -gt 64 ]; then
    echo "compare_mpi: --np: 2..64 processes, got '$NP'" >&2; exit 2
  fi
  if ! [[ "$ITERS" =~ ^[0-9]+$ ]] || [ "$ITERS" -lt 1 ]; then
    echo "compare_mpi: --iters: a positive count, got '$ITERS'" >&2; exit 2
  fi
  if ! [[ "$ROUNDS" =~ ^[0-9]+$ ]] || [ "$ROUNDS" -lt 1 ]; then
    echo "compare_mpi: --rounds: a positive count, got '$ROUNDS'" >&2; exit 2
  fi
  if ! [[ "$FAST_FLOOR_NS" =~ ^[0-9]+$ ]] || [ "$FAST_FLOOR_NS" -lt 1 ]; then
    echo "compare_mpi: --fast-floor-ns: a positive number of ns, got '$FAST_FLOOR_NS'" >&2; exit 2
  fi
  if ! [[ "$MIXED_OPS" =~ ^[0-9]+$ ]] || [ "$MIXED_OPS" -lt 1 ] || [ "$MIXED_OPS" -gt 100000 ]; then
    echo "compare_mpi: --mixed-ops: 1..100000 ops, got '$MIXED_OPS'" >&2; exit 2
  fi
  if ! [[ "$MIXED_ITERS" =~ ^[0-9]+$ ]] || [ "$MIXED_ITERS" -lt 1 ]; then
    echo "compare_mpi: --mixed-iters: a positive count, got '$MIXED_ITERS'" >&2; exit 2
  fi
  if ! [[ "$MIXED_SEED" =~ ^[0-9]+$ ]] || [ "${#MIXED_SEED}" -gt 18 ]; then
    echo "compare_mpi: --seed: a number below 10^18, got '$MIXED_SEED'" >&2; exit 2
  fi
  [ "$COLLS_GIVEN" = 1 ] || COLLS="$COLLS,mixed"
  IFS=, read -ra MPI_NAMES <<<"$MPI_LIST"
  local c
  [ ${#MPI_NAMES[@]} -gt 0 ] || { echo "compare_mpi: --mpi: empty" >&2; exit 2; }
  for c in "${MPI_NAMES[@]}"; do
    [[ "$c" == openmpi || "$c" == mpich ]] ||
      { echo "compare_mpi: --mpi: '$c' is not one of openmpi,mpich" >&2; exit 2; }
  done
  IFS=, read -ra COLL_LIST <<<"$COLLS"
  [ ${#COLL_LIST[@]} -gt 0 ] || { echo "compare_mpi: --colls: empty" >&2; exit 2; }
  for c in "${COLL_LIST[@]}"; do
    [[ ",$ALL_COLLS,mixed," == *",$c,"* ]] ||
      { echo "compare_mpi: --colls: '$c' is not one of $ALL_COLLS,mixed" >&2; exit 2; }
  done
}

# The iteration rule of bench/osu_mpi.c (iters_for), applied to carflow too.
iters_for() {
  local n=$((STEP_BUDGET_BYTES / ($1 > 4096 ? $1 : 4096)))
  [ "$n" -ge 10 ] || n=10
  echo $((n < ITERS ? n : ITERS))
}

# The MPIs this script knows (--mpi picks from them): Debian's
# alternatives-free command names.
MPI_NAMES=(openmpi mpich)
declare -A MPICC=([openmpi]=mpicc.openmpi [mpich]=mpicc.mpich)
declare -A MPIRUN=([openmpi]=mpirun.openmpi [mpich]=mpirun.mpich)
declare -A MPI_PACKAGE=([openmpi]=libopenmpi-dev [mpich]=libmpich-dev)

# True when MPI $1's compiler wrapper builds a program with mpi.h (Debian's
# openmpi-bin ships mpicc.openmpi without the headers of libopenmpi-dev).
mpi_builds() {
  command -v "${MPICC[$1]}" >/dev/null &&
    printf '#include <mpi.h>\nint main(void) { return 0; }\n' |
      "${MPICC[$1]}" -x c - -o /dev/null >/dev/null 2>&1
}

# As root with apt-get: installs the MPIs and gnuplot that are missing.
install_missing() {
  local packages=() m
  for m in "${MPI_NAMES[@]}"; do
    mpi_builds "$m" || packages+=("${MPI_PACKAGE[$m]}")
  done
  command -v gnuplot >/dev/null || packages+=(gnuplot-nox)
  [ ${#packages[@]} -gt 0 ] && [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ] &&
    command -v apt-get >/dev/null || return 0
  note "installing ${packages[*]} (apt-get; --no-install skips this)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}" >>"$LOG" 2>&1 ||
    note "apt-get install failed (see $LOG); going on with what is installed"
}

# IMPLS: carflow and every MPI whose compiler and launcher are present, each
# MPI's osu_mpi built into WORK.
find_implementations() {
  IMPLS=(carflow)
  local m
  for m in "${MPI_NAMES[@]}"; do
    if ! mpi_builds "$m" || ! command -v "${MPIRUN[$m]}" >/dev/null; then
      note "skipping $m: ${MPICC[$m]} cannot build with mpi.h, or ${MPIRUN[$m]} is missing (Debian: apt-get install ${MPI_PACKAGE[$m]})"
      continue
    fi
    "${MPICC[$m]}" -O2 -std=c11 -Wall -Wextra -o "$WORK/osu_mpi-$m" "$ROOT/bench/osu_mpi.c" 2>>"$LOG" ||
      fail "${MPICC[$m]} could not build bench/osu_mpi.c; see $LOG"
    IMPLS+=("mpi-$m")
  done
  [ ${#IMPLS[@]} -gt 1 ] || fail "no MPI to compare with: install libopenmpi-dev or libmpich-dev"
}

# CLI, CFRUN: copies, in WORK, of an optimized carflow_cli and cfrun_bin
# (from --bin-dir, else bazel-bin), so that a build during the run cannot
# swap them. bazel-bin follows the last bazel command: after a
# --config=tsan or asan run it holds debug binaries, and the optimized ones
# stay in bazel-out/*-opt/bin.
find_carflow() {
  local dir=$BIN_DIR
  if [ -z "$dir" ]; then
    dir="$ROOT/bazel-bin/tools"
    local config
    config=$(basename "$(dirname "$(readlink -f "$ROOT/bazel-bin")")")
    if [[ "$config" != *-opt ]]; then
      note "bazel-bin holds a $config build; using the optimized one in bazel-out/*-opt"
      dir=$(compgen -G "$ROOT/bazel-out/*-opt/bin/tools" | head -1 || true)
    fi
    if [ -z "$dir" ] || [ ! -x "$dir/carflow_cli" ] || [ ! -x "$dir/cfrun_bin" ] ||
       [ ! -x "$dir/../bench/pingpong_floor" ]; then
      note "building //tools:carflow_cli //tools:cfrun_bin //bench:pingpong_floor"
      (cd "$ROOT" && bazel build -c opt //tools:carflow_cli //tools:cfrun_bin //bench:pingpong_floor >&2) ||
        fail "bazel build failed"
      dir="$(cd "$ROOT" && bazel info -c opt bazel-bin)/tools"
    fi
  fi
  if [ ! -x "$dir/carflow_cli" ] || [ ! -x "$dir/cfrun_bin" ]; then
    fail "--bin-dir: no carflow_cli and cfrun_bin in $dir"
  fi
  cp "$dir/carflow_cli" "$dir/cfrun_bin" "$WORK/"
  CLI="$WORK/carflow_cli" CFRUN="$WORK/cfrun_bin" CARFLOW_FROM=$dir FLOOR_BIN=''
  # The phase probe: next to the binaries (--bin-dir), or in bench/ beside tools/.
  local probe
  for probe in "$dir/pingpong_floor" "$dir/../bench/pingpong_floor"; do
    if [ -x "$probe" ]; then cp "$probe" "$WORK/pingpong_floor"; FLOOR_BIN="$WORK/pingpong_floor"; break; fi
  done
  [ -n "$FLOOR_BIN" ] || note "no pingpong_floor beside $dir: runs are not tagged with the machine's phase"
}

# FLOOR: one cache line's round trip between two cores now, in ns (the
# machine's phase; see the top), or null without the probe.
probe_floor() {
  FLOOR=null
  [ -n "$FLOOR_BIN" ] || return 0
  local ns
  ns=$("$FLOOR_BIN" 20000 2>/dev/null | sed -n 's/.*"round_trip_ns":\([0-9.]*\).*/\1/p') || ns=''
  [ -z "$ns" ] || FLOOR=$ns
}

# A run exited with status RC: a wrong result if it printed one, else how.
run_failed() {
  local what=$1 rc=$2
  ! grep -q '"verified":false' "$WORK/run.out" ||
    fail "$what reported verified=false: $(grep -m1 '"verified":false' "$WORK/run.out")"
  [ "$rc" != 124 ] || fail "$what timed out after $RUN_TIMEOUT_S s; see $LOG"
  fail "$what failed with status $rc; see $LOG"
}

# Appends the JSON lines of WORK/run.out (PATTERN selects them, REPLACEMENT
# tags them) to the raw file; fails unless EXPECTED lines came, all verified.
collect() {
  local what=$1 expected=$2 pattern=$3 replacement=$4 lines
  lines=$(sed -n "s/$pattern/$replacement/p" "$WORK/run.out")
  if [ -z "$lines" ] || [ "$(wc -l <<<"$lines")" -ne "$expected" ]; then
    fail "$what: expected $expected JSON lines, got $(grep -c . <<<"$lines"); see $LOG"
  fi
  ! grep -q '"verified":false' <<<"$lines" ||
    fail "$what reported verified=false: $(grep -m1 '"verified":false' <<<"$lines")"
  # Each process must have joined one job of NP images: a cfrun_bin and a
  # carflow_cli from different builds can run NP separate one-image jobs.
  ! grep -qv "\"images\":$NP," <<<"$lines" ||
    fail "$what: a line does not span $NP images (cfrun_bin and carflow_cli from different builds?): $(grep -m1 -v "\"images\":$NP," <<<"$lines")"
  echo "$lines" >>"$RAW"
}

# carflow, one cfrun per iteration count (the iteration rule gives large
# sizes fewer), one image per process; every rank's lines are kept.
run_carflow() {
  local round=$1 coll=$2 b i
  local -A groups=()
  if [ "$coll" = barrier ]; then
    groups[$(iters_for 0)]=8  # carflow bench runs one step of 0 bytes
  elif [ "$coll" = mixed ]; then
    groups[$MIXED_ITERS]=mixed
  else
    for b in "${BYTES[@]}"; do i=$(iters_for "$b"); groups[$i]+="${groups[$i]:+,}$b"; done
  fi
  for i in "${!groups[@]}"; do
    local what="carflow $coll (round $round, sizes ${groups[$i]})"
    echo "== $what" >>"$LOG"
    local rc=0 select=(--sizes "${groups[$i]}" --copy-floor)
    [ "$coll" != mixed ] || select=(--ops "$MIXED_OPS" --seed "$MIXED_SEED")
    "$CFRUN" --timeout "$RUN_TIMEOUT_S" -n "$NP" "$CLI" bench --coll "$coll" --images 1 \
      "${select[@]}" --iters "$i" --json >"$WORK/run.out" 2>&1 || rc=$?
    probe_floor
    cat "$WORK/run.out" >>"$LOG"
    [ "$rc" = 0 ] || run_failed "$what" "$rc"
    local steps=1
    [ "$coll" = barrier ] || [ "$coll" = mixed ] || steps=$(tr , '\n' <<<"${groups[$i]}" | wc -l)
    collect "$what" $((steps * NP)) '^\[\([0-9][0-9]*\)\] {\(.*\)}$' \
      "{\"round\":$round,\"impl\":\"carflow\",\"floor_ns\":$FLOOR,\"rank\":\1,\2}"
  done
}

# carflow's NP images as threads of one process (--threads), one run per
# iteration count as run_carflow; one line per step.
run_threads() {
  local round=$1 coll=$2 b i
  local -A groups=()
  if [ "$coll" = barrier ]; then
    groups[$(iters_for 0)]=8
  elif [ "$coll" = mixed ]; then
    groups[$MIXED_ITERS]=mixed
  else
    for b in "${BYTES[@]}"; do i=$(iters_for "$b"); groups[$i]+="${groups[$i]:+,}$b"; done
  fi
  for i in "${!groups[@]}"; do
    local what="carflow threads $coll (round $round, sizes ${groups[$i]})"
    echo "== $what" >>"$LOG"
    local rc=0 select=(--sizes "${groups[$i]}" --copy-floor)
    [ "$coll" != mixed ] || select=(--ops "$MIXED_OPS" --seed "$MIXED_SEED")
    timeout "$RUN_TIMEOUT_S" "$CLI" bench --coll "$coll" --images "$NP" \
      "${select[@]}" --iters "$i" --json >"$WORK/run.out" 2>&1 || rc=$?
    probe_floor
    cat "$WORK/run.out" >>"$LOG"
    [ "$rc" = 0 ] || run_failed "$what" "$rc"
    local steps=1
    [ "$coll" = barrier ] || [ "$coll" = mixed ] || steps=$(tr , '\n' <<<"${groups[$i]}" | wc -l)
    collect "$what" "$steps" '^{\(.*\)}$' "{\"round\":$round,\"impl\":\"threads\",\"floor_ns\":$FLOOR,\1}"
  done
}

# One MPI (impl mpi-NAME): every size in one launch; rank 0 reports.
run_mpi() {
  local round=$1 impl=$2 coll=$3 m=${2#mpi-} launcher
  if [ "$m" = openmpi ]; then
    launcher=("${MPIRUN[$m]}" --oversubscribe)
    [ "$(id -u)" != 0 ] || launcher+=(--allow-run-as-root)
    local v
    for v in "${MALLOC_VARS[@]}"; do [ "$MALLOC_ENV" = 0 ] || launcher+=(-x "${v%%=*}"); done
  else
    launcher=("${MPIRUN[$m]}")
  fi
  local what="$impl $coll (round $round)" sizes
  sizes=$(IFS=,; echo "${BYTES[*]}")
  echo "== $what" >>"$LOG"
  local rc=0 select=(--sizes "$sizes" --iters "$ITERS")
  [ "$coll" != mixed ] || select=(--ops "$MIXED_OPS" --seed "$MIXED_SEED" --iters "$MIXED_ITERS")
  timeout "$RUN_TIMEOUT_S" "${launcher[@]}" -np "$NP" "$WORK/osu_mpi-$m" --coll "$coll" \
    "${select[@]}" --label "$impl" >"$WORK/run.out" 2>>"$LOG" || rc=$?
  probe_floor
  cat "$WORK/run.out" >>"$LOG"
  [ "$rc" = 0 ] || run_failed "$what" "$rc"
  collect "$what" "$([ "$coll" = barrier ] || [ "$coll" = mixed ] && echo 1 || echo ${#BYTES[@]})" '^{\(.*\)}$' \
    "{\"round\":$round,\"impl\":\"$impl\",\"floor_ns\":$FLOOR,\1}"
}

# Reads the raw lines; prints the markdown table (median over rounds of each
# implementation's avg_us; carflow's per round is the mean over its ranks, as
# osu_mpi reports the mean over MPI ranks) and writes one gnuplot data file
# per collective into WORK/plot. Exit 3 when carflow and an MPI ran a step
# with different iteration counts (the two copies of the rule disagree).
summarize() {
  mkdir -p "$WORK/plot"
  awk -v impls="${IMPLS[*]}" -v colls="${COLL_LIST[*]}" -v sizes="${BYTES[*]}" \
      -v plotdir="$WORK/plot" -v fast="$FAST_FLOOR_NS" -v threads="$THREADS" "$JSON_AWK"'
    # Median over the rounds of impl, coll, bytes; "" when it never ran.
    function median(key,   n, i, j, t, v) {
      n = 0
      for (i = 1; i <= nround[key]; ++i) { v[++n] = sum[key, roundof[key, i]] / cnt[key, roundof[key, i]] }
      if (n == 0) return ""
      for (i = 2; i <= n; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function in_fast(key, r) { return floor_ns[key, r] != "" && floor_ns[key, r] != "null" && floor_ns[key, r] + 0 < fast }
    # The median of the ratios mine / theirs of each round, over the rounds
    # both ran (paired: the two ran back to back), with only_fast over the
    # rounds where both runs ended in a fast phase; sets nfast to their number.
    function round_ratio(mine, theirs, only_fast,   n, i, j, r, t, v) {
      n = 0
      for (i = 1; i <= nround[mine]; ++i) {
        r = roundof[mine, i]
        if (!((theirs, r) in cnt) || sum[theirs, r] <= 0) continue
        if (only_fast && (!in_fast(mine, r) || !in_fast(theirs, r))) continue
        v[++n] = (sum[mine, r] / cnt[mine, r]) / (sum[theirs, r] / cnt[theirs, r])
      }
      nfast = n
      if (n == 0) return ""
      for (i = 2; i <= n; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    # The median of v[1..n] (sorts v).
    function med(v, n,   i, j, t) {
      if (n == 0) return ""
      for (i = 2; i <= n; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    # Paired against the faster MPI: the median over rounds of the carflow
    # time over the fastest MPI of that round.
    function faster_ratio(c, b, who,   n, i, k, r, best, t, v, mine) {
      mine = who SUBSEP c SUBSEP b; n = 0
      for (i = 1; i <= nround[mine]; ++i) {
        r = roundof[mine, i]; best = ""
        for (k = 2; k <= ni; ++k) {
          t = impl_list[k] SUBSEP c SUBSEP b
          if (!((t, r) in cnt) || sum[t, r] <= 0) continue
          if (best == "" || sum[t, r] / cnt[t, r] < best) best = sum[t, r] / cnt[t, r]
        }
        if (best != "") v[++n] = (sum[mine, r] / cnt[mine, r]) / best
      }
      return med(v, n)
    }
    # carflow over the step'"'"'s floor, the median over rounds: one memcpy
    # of what the busiest process must receive (copy_us, timed in the same
    # run), or one cache-line hand-over (half the round trip probed right
    # after the run) when that is more.
    function floor_ratio(c, b,   n, i, r, f, h, v, mine) {
      if (c == "mixed") return ""
      mine = "carflow" SUBSEP c SUBSEP b; n = 0
      for (i = 1; i <= nround[mine]; ++i) {
        r = roundof[mine, i]
        f = csum[mine, r] / cnt[mine, r]
        h = floor_ns[mine, r] != "" && floor_ns[mine, r] != "null" ? floor_ns[mine, r] / 2000 : 0
        if (h > f) f = h
        if (f > 0) v[++n] = (sum[mine, r] / cnt[mine, r]) / f
      }
      return med(v, n)
    }
    {
      impl = field($0, "impl"); r = field($0, "round"); c = field($0, "coll"); b = field($0, "bytes")
      key = impl SUBSEP c SUBSEP b
      if (!((key, r) in cnt)) { roundof[key, ++nround[key]] = r; floor_ns[key, r] = field($0, "floor_ns") }
      sum[key, r] += field($0, "avg_us"); cnt[key, r]++
      csum[key, r] += field($0, "copy_us")
      it = field($0, "iters")
      if ((c, b) in iters && iters[c, b] != it) {
        printf "%s %s bytes ran %s iterations, another implementation %s\n", c, b, it, iters[c, b] > "/dev/stderr"
        bad = 1
      }
      iters[c, b] = it
      if (impl == "carflow") algo[c, b] = field($0, "algo")
    }
    END {
      if (bad) exit 3
      ni = split(impls, impl_list, " "); nc = split(colls, coll_list, " "); ns = split(sizes, size_list, " ")
      head = "| collective | bytes | carflow algorithm | carflow us | over floor"; rule = "|---|---:|---|---:|---:"
      for (i = 2; i <= ni; ++i) {
        head = head " | " impl_list[i] " us | carflow/" impl_list[i] " | paired | same fast phase (rounds)"
        rule = rule "|---:|---:|---:|---:"
      }
      if (ni > 2) { head = head " | carflow/faster MPI, paired"; rule = rule "|---:" }
      if (threads) {
        head = head " | threads us | threads/processes, paired | same fast phase (rounds) | threads/faster MPI, paired"
        rule = rule "|---:|---:|---:|---:"
      }
      print head " |"; print rule "|"
      for (ci = 1; ci <= nc; ++ci) {
        c = coll_list[ci]; dat = plotdir "/" c ".dat"
        if (c == "barrier" || c == "mixed") { n = 1; bytes_list[1] = 0 } else { n = ns; for (s = 1; s <= ns; ++s) bytes_list[s] = size_list[s] }
        if (!(c == "barrier" || c == "mixed")) { printf "bytes" > dat; for (i = 1; i <= ni; ++i) printf " %s", impl_list[i] > dat; print "" > dat }
        for (s = 1; s <= n; ++s) {
          b = bytes_list[s]; mine = median("carflow" SUBSEP c SUBSEP b)
          fl = floor_ratio(c, b)
          line = "| " c " | " human(b) " | " algo[c, b] " | " us(mine) " | " (fl == "" ? "-" : sprintf("%.2f", fl))
          if (fl != "" && (maxfl == "" || fl > maxfl)) { maxfl = fl; maxfl_step = c " " human(b) }
          if (c == "barrier" || c == "mixed") print "carflow", mine == "" ? "-" : mine > dat; else printf "%s %s", b, mine == "" ? "-" : mine > dat
          for (i = 2; i <= ni; ++i) {
            theirs = median(impl_list[i] SUBSEP c SUBSEP b)
            ratio = mine != "" && theirs > 0 ? mine / theirs : ""
            line = line " | " us(theirs) " | " (ratio == "" ? "-" : sprintf("%.2f", ratio))
            if (ratio != "") { steps[i]++; logsum[i] += log(ratio); if (ratio <= 1) wins[i]++ }
            pr = round_ratio("carflow" SUBSEP c SUBSEP b, impl_list[i] SUBSEP c SUBSEP b, 0)
            line = line " | " (pr == "" ? "-" : sprintf("%.2f", pr))
            if (pr != "") { psteps[i]++; plogsum[i] += log(pr); if (pr <= 1) pwins[i]++ }
            fr = round_ratio("carflow" SUBSEP c SUBSEP b, impl_list[i] SUBSEP c SUBSEP b, 1)
            line = line " | " (fr == "" ? "-" : sprintf("%.2f (%d)", fr, nfast))
            if (fr != "") { fsteps[i]++; flogsum[i] += log(fr); if (fr <= 1) fwins[i]++ }
            if (c == "barrier" || c == "mixed") print impl_list[i], theirs == "" ? "-" : theirs > dat; else printf " %s", theirs == "" ? "-" : theirs > dat
          }
          if (!(c == "barrier" || c == "mixed")) print "" > dat
          if (ni > 2) {
            fr2 = faster_ratio(c, b, "carflow")
            line = line " | " (fr2 == "" ? "-" : sprintf("%.2f", fr2))
            if (fr2 != "") {
              bsteps++; blogsum += log(fr2)
              if (fr2 <= 1) bwins++; else above = above (above == "" ? "" : ", ") c " " human(b) " " sprintf("%.2f", fr2)
            }
          }
          if (threads) {
            tk = "threads" SUBSEP c SUBSEP b; tm = median(tk)
            tp = round_ratio(tk, "carflow" SUBSEP c SUBSEP b, 0)
            tq = round_ratio(tk, "carflow" SUBSEP c SUBSEP b, 1)
            tf = ni > 1 ? faster_ratio(c, b, "threads") : ""
            line = line " | " us(tm) " | " (tp == "" ? "-" : sprintf("%.2f", tp)) " | " (tq == "" ? "-" : sprintf("%.2f (%d)", tq, nfast)) " | " (tf == "" ? "-" : sprintf("%.2f", tf))
            if (tq != "") {
              tqsteps++; tqlogsum += log(tq)
              if (tq <= 1) tqwins++; else tqabove = tqabove (tqabove == "" ? "" : ", ") c " " human(b) " " sprintf("%.2f", tq)
            }
            if (tp != "") {
              tsteps++; tlogsum += log(tp)
              if (tp <= 1) twins++; else tabove = tabove (tabove == "" ? "" : ", ") c " " human(b) " " sprintf("%.2f", tp)
            }
            if (tf != "") { tfsteps++; tflogsum += log(tf); if (tf <= 1) tfwins++ }
          }
          print line " |"
        }
        close(dat)
      }
      print ""
      if (bsteps > 0) {
        printf "carflow/the faster MPI, paired (each round against the faster of that round): <= 1.0 in %d of %d steps; geometric mean %.2f\n", bwins, bsteps, exp(blogsum / bsteps)
        if (above != "") printf "above 1.0: %s\n", above
      }
      if (tsteps > 0) {
        printf "threads/processes, paired: <= 1.0 in %d of %d steps; geometric mean %.2f\n", twins, tsteps, exp(tlogsum / tsteps)
        if (tabove != "") printf "threads above processes: %s\n", tabove
      }
      if (tqsteps > 0) {
        printf "threads/processes in the same fast phase (rounds where both ended with the round trip below %d ns): <= 1.0 in %d of %d steps; geometric mean %.2f\n", fast, tqwins, tqsteps, exp(tqlogsum / tqsteps)
        if (tqabove != "") printf "threads above processes in the same fast phase: %s\n", tqabove
      }
      if (tfsteps > 0) printf "threads/the faster MPI, paired: <= 1.0 in %d of %d steps; geometric mean %.2f\n", tfwins, tfsteps, exp(tflogsum / tfsteps)
      if (maxfl != "") printf "largest time over the floor: %.2f (%s)\n", maxfl, maxfl_step
      for (i = 2; i <= ni; ++i) if (steps[i] > 0) {
        printf "carflow/%s: <= 1.0 in %d of %d steps; geometric mean %.2f\n", impl_list[i], wins[i], steps[i], exp(logsum[i] / steps[i])
        if (psteps[i] > 0) {
          printf "carflow/%s paired (the median of each round'"'"'s own ratio): <= 1.0 in %d of %d steps; geometric mean %.2f\n", impl_list[i], pwins[i], psteps[i], exp(plogsum[i] / psteps[i])
        }
        if (fsteps[i] > 0) {
          printf "carflow/%s in the same fast phase (rounds where both runs ended with the cache-line round trip below %d ns): <= 1.0 in %d of %d steps; geometric mean %.2f\n", impl_list[i], fast, fwins[i], fsteps[i], exp(flogsum[i] / fsteps[i])
        }
      }
    }' "$RAW"
}

# compare_mpi.png: one panel per collective, latency against bytes on
# log-log axes (barrier: one bar per implementation), one line per
# implementation in the same colour on every panel.
plot() {
  plot_grid compare_mpi || return 0
  local columns=$PLOT_COLUMNS rows=$PLOT_ROWS c tics=("${PLOT_TICS[@]}")
  {
    echo "set terminal pngcairo noenhanced size $((440 * columns)),$((330 * rows)) font ',9'"
    echo "set output '$OUT/compare_mpi.png'"
    echo "set datafile missing '-'"
    echo "set multiplot layout $rows,$columns title 'carflow vs MPI: median latency (us), $NP processes, $(nproc) cores, $ROUNDS round(s)'"
    for c in "${COLL_LIST[@]}"; do
      echo "reset; set datafile missing '-'; set grid; set title '$c'; set ylabel 'us'"
      if [ "$c" = barrier ] || [ "$c" = mixed ]; then
        echo "set style fill solid 0.6; set boxwidth 0.6; set yrange [0:*]; set xrange [-0.5:$((${#IMPLS[@]} - 1)).5]"
        echo "plot '$WORK/plot/$c.dat' using 0:2:(\$0 + 1):xtic(1) with boxes lc variable notitle"
      else
        echo "set logscale xy; set xlabel 'bytes'; set xtics ($(IFS=,; echo "${tics[*]}")); set key top left"
        echo "plot for [i=2:$((${#IMPLS[@]} + 1))] '$WORK/plot/$c.dat' using 1:i with linespoints lw 1.5 title columnheader(i)"
      fi
    done
    echo "unset multiplot"
  } >"$WORK/compare_mpi.gp"
  gnuplot "$WORK/compare_mpi.gp" 2>>"$LOG" || fail "gnuplot failed; see $LOG"
  WROTE+=("$OUT/compare_mpi.png")
  # And one figure per collective, larger, one line per implementation.
  for c in "${COLL_LIST[@]}"; do
    [ "$c" != barrier ] && [ "$c" != mixed ] || continue
    {
      echo "set terminal pngcairo noenhanced size 720,480 font ',10'"
      echo "set output '$OUT/compare_mpi_$c.png'"
      echo "set datafile missing '-'; set grid; set logscale xy; set key top left"
      echo "set title '$c: median latency (us), $NP processes, $(nproc) cores, $ROUNDS round(s)'"
      echo "set xlabel 'bytes'; set ylabel 'us'; set xtics ($(IFS=,; echo "${tics[*]}")) rotate by -45"
      echo "plot for [i=2:$((${#IMPLS[@]} + 1))] '$WORK/plot/$c.dat' using 1:i with linespoints lw 1.5 title columnheader(i)"
    } >"$WORK/$c.gp"
    gnuplot "$WORK/$c.gp" 2>>"$LOG" || fail "gnuplot failed on $c; see $LOG"
    WROTE+=("$OUT/compare_mpi_$c.png")
  done
}

# The table's heading: what ran, where, with which versions.
describe() {
  local m
  echo "# carflow vs MPI"
  echo
  echo "\`bench/compare_mpi.sh --np $NP --colls $COLLS --sizes $SIZES --iters $ITERS --rounds $ROUNDS$([ "$THREADS" = 0 ] || echo " --threads")\`"
  [[ ",$COLLS," != *,mixed,* ]] || echo "(mixed: $MIXED_OPS ops of bench/mixed_sequence.h, seed $MIXED_SEED, $MIXED_ITERS timed passes a run)"
  echo
  echo "- $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), load average at start $START_LOAD"
  echo "- carflow $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (binaries of $(date -u -r "$CARFLOW_FROM/carflow_cli" +%Y-%m-%dT%H:%MZ)): cfrun -n $NP, one image per process"
  [ "$THREADS" = 0 ] || echo "- threads: carflow bench --images $NP, the $NP images as threads of one process (no cfrun)"
  for m in "${IMPLS[@]:1}"; do
    echo "- $m: $("${MPIRUN[${m#mpi-}]}" --version 2>&1 | grep -m1 -iE 'version|open' | tr -s ' ' | sed 's/^ //')"
  done
  echo "- environment of every run: $([ "$MALLOC_ENV" = 0 ] && echo "the allocator's defaults (--no-malloc-env)" || echo "${MALLOC_VARS[*]}")"
  echo "- avg_us: mean over processes of each one's average per call; the median over rounds;"
  echo "  ratio carflow/MPI <= 1.0: carflow at least as fast"
  echo "- paired: the median over rounds of each round's own ratio (the two ran back to back in it, so"
  echo "  both met the machine's phase of that moment); the first ratio compares medians taken apart"
  echo "- same fast phase: the median of the rounds' own ratios over the rounds where both runs ended"
  echo "  with one cache line's round trip between the cores below $FAST_FLOOR_NS ns (bench/pingpong_floor, timed"
  echo "  right after each run; this VM flips between about 140 and 550 ns), and how many rounds that was"
  echo
}

main() {
  parse_args "$@"
  expand_sizes compare_mpi
  start_run compare_mpi compare_mpi
  install_missing
  find_implementations
  find_carflow
  cd "$WORK"  # what the runs leave behind (a crash's backtrace files) goes with WORK
  [ "$MALLOC_ENV" = 0 ] || export "${MALLOC_VARS[@]}"
  local runs=("${IMPLS[@]}")
  [ "$THREADS" = 0 ] || runs+=(threads)
  local round ci k impl n=${#runs[@]}
  for ((round = 1; round <= ROUNDS; ++round)); do
    for ci in "${!COLL_LIST[@]}"; do
      local order=()
      # The order rotates with round and collective: no implementation
      # always runs first, right after another one's load.
      for ((k = 0; k < n; ++k)); do order+=("${runs[(round + ci + k) % n]}"); done
      local coll=${COLL_LIST[$ci]}
      note "round $round/$ROUNDS: $coll: ${order[*]}"
      for impl in "${order[@]}"; do
        case "$impl" in
          carflow) run_carflow "$round" "$coll" ;;
          threads) run_threads "$round" "$coll" ;;
          *) run_mpi "$round" "$impl" "$coll" ;;
        esac
      done
    done
  done
  local table
  table=$(summarize) || fail "the implementations ran different iteration counts (see above)"
  { describe; echo "$table"; } >"$OUT/compare_mpi.md"
  echo "$table"
  WROTE=("$RAW" "$OUT/compare_mpi.md" "$LOG")
  plot
  note "wrote ${WROTE[*]}"
}

main "$@"
