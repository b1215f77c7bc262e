#!/usr/bin/env bash
# libcarflow_mpi under real MPI programs nobody here wrote, unmodified, from
# Debian: hpcc (HPL, PTRANS, FFT, RandomAccess... with their own checks),
# ScaLAPACK's BLACS testers (derived types, user ops, splits: the layer's
# fallback paths) with and without the layer, and NetPIPE's integrity mode
# (point-to-point through the layer). A missing package says SKIPPED and why.
# Usage (tests/BUILD passes it): mpi_programs_test.sh LIBCARFLOW_MPI
set -uo pipefail
LIB="$(realpath "$1")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
MPIRUN=(timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe)
LAYER=(-x LD_PRELOAD="$LIB" -x CF_MPI_REPORT=1)
fail() { echo "FAIL: $*"; exit 1; }
skipped=0
skip() { echo "SKIPPED: $*"; skipped=$((skipped + 1)); }

# oncarflow OUT FN NP: every rank's report line for FN has a nonzero carflow count.
oncarflow() {
  [ "$(grep -c "rank [0-9]*: $2: [1-9][0-9]* on carflow" <<<"$1")" -eq "$3" ] ||
    fail "$2 did not run on carflow on all $3 ranks"
}

# hpcc: its own verifications pass; its Bcast / Allreduce / Reduce / Alltoall on carflow.
if command -v hpcc >/dev/null && [ -f /usr/share/doc/hpcc/examples/_hpccinf.txt ]; then
  mkdir "$WORK/hpcc"
  # Problem size 1000 -> 400, block 80 -> 40: seconds, not minutes, on 2 cores.
  sed -e '6s/^1000 /400  /' -e '8s/^80 /40 /' /usr/share/doc/hpcc/examples/_hpccinf.txt >"$WORK/hpcc/hpccinf.txt"
  out=$(cd "$WORK/hpcc" && "${MPIRUN[@]}" -np 4 "${LAYER[@]}" hpcc 2>&1) || fail "hpcc with the layer: $out"
  f="$WORK/hpcc/hpccoutf.txt"
  [ -f "$f" ] || fail "hpcc wrote no hpccoutf.txt: $out"
  grep -q "End of HPC Challenge tests" "$f" || fail "hpcc did not finish: $(tail -20 "$f")"
  if grep -E "FAILED|[Ff]ailure" "$f" | grep -v -E "Failure *: *0|[Ff]ailure.*= *0" | grep -q .; then
    fail "hpcc reported failures: $(grep -E "FAILED|[Ff]ailure" "$f")"
  fi
  grep -q "PASSED" "$f" || fail "hpcc: no check PASSED: $(grep -E 'PASS|FAIL' "$f")"
  for fn in MPI_Bcast MPI_Allreduce MPI_Reduce MPI_Alltoall; do oncarflow "$out" "$fn" 4; done
  echo "hpcc: $(grep -c PASSED "$f") checks PASSED, none failed; Bcast, Allreduce, Reduce, Alltoall on carflow"
else
  skip "hpcc is not installed (apt-get install hpcc)"
fi

# BLACS testers: every test passes with the layer, as it does without.
BT=/usr/lib/x86_64-linux-gnu/scalapack/openmpi-tests/BLACS
if [ -x "$BT/xCbtest" ] && [ -f "$BT/bt.dat" ]; then
  for t in xCbtest xFbtest; do
    for mode in plain layered; do
      d="$WORK/$t.$mode"; mkdir "$d"; cp "$BT"/*.dat "$d"/
      # AUX ends with BLACS_ABORT, which kills the job by design: left out.
      sed -i "7s/'T'/'F'/" "$d/bt.dat"
      extra=(); [ "$mode" = layered ] && extra=("${LAYER[@]}")
      out=$(cd "$d" && "${MPIRUN[@]}" -np 4 "${extra[@]}" "$BT/$t" 2>&1) || fail "$t $mode: exited: $out"
      grep -E "TESTS: +[0-9]+ TESTS;" <<<"$out" >"$d.summary"
      [ "$(wc -l <"$d.summary")" -ge 20 ] || fail "$t $mode: too few test summaries: $out"
      grep -v " 0 FAILED\.$" "$d.summary" | grep -q . && fail "$t $mode: $(grep -v " 0 FAILED\.$" "$d.summary")"
      [ "$mode" = layered ] && layered_out=$out
    done
    oncarflow "$layered_out" MPI_Allreduce 4
    cmp -s "$WORK/$t.plain.summary" "$WORK/$t.layered.summary" ||
      fail "$t: summaries differ with the layer: $(diff "$WORK/$t.plain.summary" "$WORK/$t.layered.summary")"
    echo "$t: $(wc -l <"$WORK/$t.layered.summary") test groups, 0 failed, the same counts without the layer"
  done
else
  skip "ScaLAPACK's BLACS testers are not installed (apt-get install scalapack-mpi-test scalapack-test-common)"
fi

# NetPIPE: point-to-point, integrity checked, 1 B to 64 KiB.
if command -v NPopenmpi >/dev/null; then
  out=$(cd "$WORK" && "${MPIRUN[@]}" -np 2 "${LAYER[@]}" NPopenmpi -i -u 65536 -n 3 2>&1) || fail "NPopenmpi: $out"
  grep -qi "error\|fail" <<<"$out" && fail "NPopenmpi integrity: $out"
  [ "$(grep -c "Integrity check passed" <<<"$out")" -ge 20 ] || fail "NPopenmpi: too few sizes checked: $out"
  echo "NPopenmpi: $(grep -c "Integrity check passed" <<<"$out") sizes, 1 B to 64 KiB, integrity checked with the layer"
else
  skip "netpipe-openmpi is not installed (apt-get install netpipe-openmpi)"
fi
[ "$skipped" -eq 0 ] && echo "mpi_programs_test: all passed" || echo "mpi_programs_test: passed, $skipped SKIPPED"
