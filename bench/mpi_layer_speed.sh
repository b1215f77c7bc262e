#!/usr/bin/env bash
# bench/mpi_layer_speed.sh: one MPI program, bench/osu_mpi.c, under Open
# MPI's mpirun with and without LD_PRELOAD=libcarflow_mpi.so (api/mpi), in
# one run: what the layer gains or loses a program that changes nothing.
#
#   bench/mpi_layer_speed.sh [--np 2] [--colls barrier,broadcast,...]
#       [--sizes 8:4M] [--iters 1000] [--rounds 3] [--out DIR]
#       [--name NAME] [--lib PATH] [--no-malloc-env]
#
# The collectives are osu_mpi's names for every one the layer serves:
# broadcast (MPI_Bcast), barrier, allreduce, reduce_vec (MPI_Reduce), scan,
# exscan, gather, scatter, gather_all (MPI_Allgather), exchange
# (MPI_Alltoall), reduce_scatter (MPI_Reduce_scatter_block). The same
# binary runs both ways. Per round and collective the two run back to back,
# the order alternating with round and collective (A/B, then B/A), so that
# drift in the machine's load reaches both alike. The table holds, per
# collective and size, the median over rounds of each way's avg_us (mean
# over ranks of each rank's average per call) and the paired ratio
# layer/MPI: the median over rounds of each round's own ratio (the two ran
# back to back, so both met the machine of that moment); <= 1.0 means the
# layer is at least as fast. Every run with the layer sets CF_MPI_REPORT=1
# and must show the collective served by carflow on every rank.
#
# Writes into DIR (default bench/results), NAME defaulting to
# mpi_layer_speed_npNP: NAME.jsonl (every JSON line, tagged with round and
# impl "mpi" or "layer"), NAME.md (the table), NAME.png (gnuplot: latency
# per collective) and NAME_ratio.png (the paired ratios), NAME.log (the
# runs' output). Exit status 0; 1 on a failed run, a result that is not
# verified or a collective the layer did not serve; 2 on a bad argument.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL_COLLS=barrier,broadcast,reduce_vec,allreduce,scan,exscan,gather,scatter,gather_all,exchange,reduce_scatter
NP=2 COLLS=$ALL_COLLS SIZES=8:4M ITERS=1000 ROUNDS=3 OUT="$ROOT/bench/results" NAME='' LIB='' MALLOC_ENV=1
# The allocator knobs bench/compare_mpi.sh sets for every implementation
# (why: there), here for both ways alike.
MALLOC_VARS=(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=67108864)
RUN_TIMEOUT_S=600
declare -A MPI_CALL=([barrier]=MPI_Barrier [broadcast]=MPI_Bcast [reduce_vec]=MPI_Reduce
  [allreduce]=MPI_Allreduce [scan]=MPI_Scan [exscan]=MPI_Exscan [gather]=MPI_Gather [scatter]=MPI_Scatter
  [gather_all]=MPI_Allgather [exchange]=MPI_Alltoall [reduce_scatter]=MPI_Reduce_scatter_block)

# shellcheck source=bench/mpi_bench_shared.sh
. "$ROOT/bench/mpi_bench_shared.sh"

fail() { echo "mpi_layer_speed: $*" >&2; exit 1; }
note() { echo "mpi_layer_speed: $*" >&2; }
usage() { echo usage: >&2; sed -n '6,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,2\}//' >&2; exit 2; }
bad() { echo "mpi_layer_speed: $*" >&2; exit 2; }

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --np) NP="${2:?--np: missing value}"; shift 2 ;;
      --colls) COLLS="${2:?--colls: missing value}"; shift 2 ;;
      --sizes) SIZES="${2:?--sizes: missing value}"; shift 2 ;;
      --iters) ITERS="${2:?--iters: missing value}"; shift 2 ;;
      --rounds) ROUNDS="${2:?--rounds: missing value}"; shift 2 ;;
      --out) OUT="${2:?--out: missing value}"; shift 2 ;;
      --name) NAME="${2:?--name: missing value}"; shift 2 ;;
      --lib) LIB="${2:?--lib: missing value}"; shift 2 ;;
      --no-malloc-env) MALLOC_ENV=0; shift ;;
      -h|--help) usage ;;
      *) echo "mpi_layer_speed: unknown argument '$1'" >&2; usage ;;
    esac
  done
  [[ "$NP" =~ ^[0-9]+$ ]] && [ "$NP" -ge 2 ] && [ "$NP" -le 64 ] ||
    bad "--np: 2..64 processes (the layer leaves a job of one process to MPI), got '$NP'"
  [[ "$ITERS" =~ ^[0-9]+$ ]] && [ "$ITERS" -ge 1 ] || bad "--iters: a positive count, got '$ITERS'"
  [[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] || bad "--rounds: a positive count, got '$ROUNDS'"
  [[ "${NAME:-x}" =~ ^[A-Za-z0-9_.-]+$ ]] || bad "--name: letters, digits, _ . -; got '$NAME'"
  [ -n "$NAME" ] || NAME=mpi_layer_speed_np$NP
  IFS=, read -ra COLL_LIST <<<"$COLLS"
  [ ${#COLL_LIST[@]} -gt 0 ] || bad "--colls: empty"
  local c
  for c in "${COLL_LIST[@]}"; do
    [[ ",$ALL_COLLS," == *",$c,"* ]] || bad "--colls: '$c' is not one of $ALL_COLLS"
  done
}

# OSU: bench/osu_mpi.c built with Open MPI's compiler; PRELOAD: a copy of the
# layer (--lib, else Bazel's optimized build), so a build during the run
# cannot swap it.
prepare() {
  command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null ||
    fail "Open MPI's mpicc.openmpi and mpirun.openmpi are needed (Debian: apt-get install libopenmpi-dev)"
  mpicc.openmpi -O2 -std=c11 -Wall -Wextra -o "$WORK/osu_mpi" "$ROOT/bench/osu_mpi.c" 2>>"$LOG" ||
    fail "mpicc.openmpi could not build bench/osu_mpi.c; see $LOG"
  local lib=$LIB
  if [ -z "$lib" ]; then
    lib=$(compgen -G "$ROOT/bazel-out/*-opt/bin/api/mpi/libcarflow_mpi.so" | head -1 || true)
    if [ -z "$lib" ]; then
      note "building //api/mpi:libcarflow_mpi.so"
      (cd "$ROOT" && nice -n 19 bazel build -c opt //api/mpi:libcarflow_mpi.so >&2) || fail "bazel build failed"
      lib="$(cd "$ROOT" && bazel info -c opt bazel-bin)/api/mpi/libcarflow_mpi.so"
    fi
  fi
  [ -f "$lib" ] || fail "--lib: no file $lib"
  cp "$lib" "$WORK/libcarflow_mpi.so"
  PRELOAD="$WORK/libcarflow_mpi.so"
  LIB_BUILT=$(date -u -r "$lib" +%Y-%m-%dT%H:%MZ)
  # The code measured: HEAD, and whether the layer's sources differ from it.
  COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
  [ -z "$(git -C "$ROOT" status --porcelain -- 'api/mpi/*.cc' 'api/mpi/*.h' 2>/dev/null)" ] || COMMIT="$COMMIT with api/mpi changed"
  LAUNCHER=(mpirun.openmpi --oversubscribe -np "$NP")
  [ "$(id -u)" != 0 ] || LAUNCHER+=(--allow-run-as-root)
  local v
  if [ "$MALLOC_ENV" = 1 ]; then for v in "${MALLOC_VARS[@]}"; do LAUNCHER+=(-x "$v"); done; fi
}

# One run of osu_mpi, impl "mpi" (plain) or "layer" (preloaded); every size
# in one launch; rank 0's lines go to the raw file, tagged.
run_one() {
  local round=$1 impl=$2 coll=$3 sizes rc=0 extra=()
  sizes=$(IFS=,; echo "${BYTES[*]}")
  [ "$impl" = mpi ] || extra=(-x "LD_PRELOAD=$PRELOAD" -x CF_MPI_REPORT=1)
  local what="$impl $coll (round $round)"
  echo "== $what" >>"$LOG"
  timeout "$RUN_TIMEOUT_S" "${LAUNCHER[@]}" "${extra[@]}" "$WORK/osu_mpi" --coll "$coll" --sizes "$sizes" \
    --iters "$ITERS" --label "$impl" >"$WORK/run.out" 2>"$WORK/run.err" || rc=$?
  cat "$WORK/run.out" "$WORK/run.err" >>"$LOG"
  [ "$rc" != 124 ] || fail "$what timed out after $RUN_TIMEOUT_S s; see $LOG"
  [ "$rc" = 0 ] || fail "$what failed with status $rc; see $LOG"
  local expected=${#BYTES[@]} lines
  [ "$coll" != barrier ] || expected=1
  lines=$(sed -n "s/^{\(.*\)}$/{\"round\":$round,\"impl\":\"$impl\",\1}/p" "$WORK/run.out")
  [ -n "$lines" ] && [ "$(wc -l <<<"$lines")" -eq "$expected" ] ||
    fail "$what: expected $expected JSON lines; see $LOG"
  ! grep -q '"verified":false' <<<"$lines" || fail "$what reported verified=false; see $LOG"
  if [ "$impl" = layer ]; then
    # Every rank reports "<call>: N on carflow, M on MPI"; N must be > 0.
    local served
    served=$(grep -c "libcarflow_mpi: rank [0-9]*: ${MPI_CALL[$coll]}: [1-9][0-9]* on carflow" "$WORK/run.err" || true)
    [ "$served" -eq "$NP" ] || fail "$what: ${MPI_CALL[$coll]} not served by carflow on every rank; see $LOG"
  fi
  echo "$lines" >>"$RAW"
}

# The table from the raw lines, and one gnuplot data file per collective
# (bytes, mpi, layer, paired ratio) in WORK/plot.
summarize() {
  mkdir -p "$WORK/plot"
  awk -v colls="${COLL_LIST[*]}" -v sizes="${BYTES[*]}" -v plotdir="$WORK/plot" "$JSON_AWK"'
    function med(v, n,   i, j, t) {
      if (n == 0) return ""
      for (i = 2; i <= n; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    {
      c = field($0, "coll"); b = field($0, "bytes"); r = field($0, "round"); im = field($0, "impl")
      t[im, c, b, r] = field($0, "avg_us"); rounds[r] = 1
    }
    END {
      nc = split(colls, clist, " "); ns = split(sizes, slist, " ")
      print "| collective | bytes | MPI us | with the layer us | paired layer/MPI |"
      print "|---|---:|---:|---:|---:|"
      for (ci = 1; ci <= nc; ++ci) {
        c = clist[ci]; dat = plotdir "/" c ".dat"
        print "bytes mpi layer ratio" > dat
        for (si = 1; si <= ns; ++si) {
          b = c == "barrier" ? 0 : slist[si]
          if (c == "barrier" && si > 1) break
          na = nb = np = 0; delete va; delete vb; delete vp
          for (r in rounds) {
            a = t["mpi", c, b, r]; l = t["layer", c, b, r]
            if (a != "") va[++na] = a
            if (l != "") vb[++nb] = l
            if (a != "" && l != "" && a > 0) vp[++np] = l / a
          }
          ma = med(va, na); mb = med(vb, nb); mp = med(vp, np)
          print "| " c " | " human(b) " | " us(ma) " | " us(mb) " | " (mp == "" ? "-" : sprintf("%.2f", mp)) " |"
          printf "%s %s %s %s\n", (c == "barrier" ? 1 : b), (ma == "" ? "-" : ma), (mb == "" ? "-" : mb), (mp == "" ? "-" : mp) > dat
          if (mp != "") {
            steps++; logsum += log(mp); if (mp <= 1) wins++
            else above = above (above == "" ? "" : ", ") c " " human(b) " " sprintf("%.2f", mp)
          }
        }
        close(dat)
      }
      print ""
      if (steps > 0) printf "layer/MPI paired: <= 1.0 in %d of %d steps; geometric mean %.2f\n", wins, steps, exp(logsum / steps)
      print "above 1.0 (the layer slower): " (above == "" ? "none" : above)
    }' "$RAW"
}

plot() {
  plot_grid mpi_layer_speed || return 0
  local columns=$PLOT_COLUMNS rows=$PLOT_ROWS c tics=("${PLOT_TICS[@]}")
  local head="set terminal pngcairo noenhanced size"
  {
    echo "$head $((440 * columns)),$((330 * rows)) font ',9'"
    echo "set output '$OUT/$NAME.png'"
    echo "set multiplot layout $rows,$columns title 'Open MPI with and without libcarflow_mpi: median latency (us), $NP processes, $(nproc) cores, $ROUNDS round(s)'"
    for c in "${COLL_LIST[@]}"; do
      echo "reset; set datafile missing '-'; set grid; set title '$c'; set ylabel 'us'"
      if [ "$c" = barrier ]; then
        echo "set style fill solid 0.6; set boxwidth 0.6; set yrange [0:*]; set xrange [0.5:2.5]; set xtics ('MPI' 1, 'layer' 2)"
        echo "plot '$WORK/plot/$c.dat' using (1):2 with boxes lc 1 notitle, '' using (2):3 with boxes lc 2 notitle"
      else
        echo "set logscale xy; set xlabel 'bytes'; set xtics ($(IFS=,; echo "${tics[*]}")) rotate by -45; set key top left"
        echo "plot '$WORK/plot/$c.dat' using 1:2 with linespoints lw 1.5 title 'MPI', '' using 1:3 with linespoints lw 1.5 title 'with the layer'"
      fi
    done
    echo "unset multiplot"
  } >"$WORK/latency.gp"
  {
    echo "$head 900,560 font ',10'"
    echo "set output '$OUT/${NAME}_ratio.png'"
    echo "set datafile missing '-'; set grid; set logscale xy; set key outside right"
    echo "set title 'paired time ratio with/without libcarflow_mpi (below 1: the layer faster), $NP processes, $ROUNDS round(s)'"
    echo "set xlabel 'bytes'; set ylabel 'layer / MPI'; set xtics ($(IFS=,; echo "${tics[*]}")) rotate by -45"
    local parts=()
    for c in "${COLL_LIST[@]}"; do
      [ "$c" != barrier ] && parts+=("'$WORK/plot/$c.dat' using 1:4 with linespoints title '$c'")
    done
    parts+=("1 with lines lc black dt 2 notitle")
    echo "plot $(IFS=,; echo "${parts[*]}")"
  } >"$WORK/ratio.gp"
  gnuplot "$WORK/latency.gp" 2>>"$LOG" && gnuplot "$WORK/ratio.gp" 2>>"$LOG" || fail "gnuplot failed; see $LOG"
  WROTE+=("$OUT/$NAME.png" "$OUT/${NAME}_ratio.png")
}

describe() {
  echo "# Open MPI with and without libcarflow_mpi"
  echo
  echo "\`bench/mpi_layer_speed.sh --np $NP --colls $COLLS --sizes $SIZES --iters $ITERS --rounds $ROUNDS\`"
  echo
  echo "- $START_TIME to $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)),"
  echo "  load average at start $START_LOAD, at end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- carflow $COMMIT at the start, libcarflow_mpi.so built $LIB_BUILT"
  echo "- $(mpirun.openmpi --version 2>&1 | head -1); bench/osu_mpi.c built with mpicc.openmpi -O2"
  echo "- environment of both ways: $([ "$MALLOC_ENV" = 0 ] && echo "the allocator's defaults" || echo "${MALLOC_VARS[*]}")"
  echo "- us: median over rounds of the mean over ranks of each rank's average per call;"
  echo "  paired: the median over rounds of each round's own ratio layer/MPI (<= 1.0: the layer at least as fast)"
  echo
}

main() {
  parse_args "$@"
  expand_sizes mpi_layer_speed
  start_run "$NAME" mpi_layer_speed
  START_TIME=$(date -u +%Y-%m-%dT%H:%MZ)
  prepare
  cd "$WORK"
  local round ci impl order
  for ((round = 1; round <= ROUNDS; ++round)); do
    for ci in "${!COLL_LIST[@]}"; do
      # A/B, then B/A: neither way always runs first, right after the other's load.
      if (( (round + ci) % 2 )); then order=(layer mpi); else order=(mpi layer); fi
      note "round $round/$ROUNDS: ${COLL_LIST[$ci]}: ${order[*]}"
      for impl in "${order[@]}"; do run_one "$round" "$impl" "${COLL_LIST[$ci]}"; done
    done
  done
  local table
  table=$(summarize)
  { describe; echo "$table"; } >"$OUT/$NAME.md"
  echo "$table"
  WROTE=("$RAW" "$OUT/$NAME.md" "$LOG")
  plot
  note "wrote ${WROTE[*]}"
}

main "$@"
