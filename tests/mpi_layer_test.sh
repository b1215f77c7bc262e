#!/usr/bin/env bash
# libcarflow_mpi under Open MPI's mpirun: tests/mpi_layer_check.c (every
# intercepted collective, blocking and nonblocking, results and the path
# that served each call; a receive waited on while a collective is
# pending; statuses of collectives waited on with point-to-point requests)
# built with mpicc and run on 2, 3 and 4 processes with the layer preloaded
# and on 3 without it; its "threads" mode (another thread waits on the
# collectives, MPI_THREAD_MULTIPLE) on 3 with and without the layer; the
# layer stepping aside when carflow cannot start; mpi4py programs printing
# the same with and without the layer; a Fortran program (use mpi:
# blocking, v and nonblocking collectives, every wait and test, the
# communicator constructors) on 2, 3 and 4 processes, checked and giving
# the same results with and without the layer, every collective on
# carflow.
# tests/mpi_layer_errors.c: every class of erroneous call under
# MPI_ERRORS_RETURN gives the error class it gives without the layer, and
# the next collective works; a call after MPI_Finalize aborts as without it.
# tests/mpi_layer_mpich.c built with MPICH and run under mpirun.mpich with
# the layer preloaded: the layer says it is the wrong MPI, steps aside, and
# the results are right.
# tests/mpi_layer_f08.f90: an mpi_f08 program's collectives, waits and
# tests reach the layer. tests/mpi_layer_spellings.c: every Fortran entry
# point under every spelling is the layer's, and calls through them run.
# Usage (tests/BUILD passes them):
#   mpi_layer_test.sh LIBCARFLOW_MPI CHECK_C MPI4PY_PY FORTRAN_F90 ERRORS_C MPICH_C F08_F90 SPELLINGS_C
set -uo pipefail
LIB="$(realpath "$1")"
WORK="${TEST_TMPDIR:-$(mktemp -d)}"
MPIRUN=(timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe)
fail() { echo "FAIL: $*"; exit 1; }

mpicc.openmpi -O1 -std=c11 -Wall -Wextra -Werror -o "$WORK/mpi_layer_check" "$2" -ldl ||
  fail "mpicc could not build $2 (Debian's libopenmpi-dev; tools/carflow test installs it)"

# run NP ENV...: the check on NP processes; its output in $out.
run() {
  local np=$1; shift
  out=$("${MPIRUN[@]}" -np "$np" "$@" "$WORK/mpi_layer_check" 2>&1)
  local status=$?
  echo "$out" | grep -v "^libcarflow_mpi: rank [0-9]*: MPI_"
  [ "$status" -eq 0 ] || fail "np=$np $*: exited with $status"
}

# count PATTERN: lines of $out matching it.
count() { grep -c -- "$1" <<<"$out"; }

for np in 2 3 4; do
  run "$np" -x LD_PRELOAD="$LIB" -x CF_MPI_REPORT=1
  [ "$(count "layer on, [0-9]* checks, 0 failures")" -eq "$np" ] || fail "np=$np: not every rank passed on the layer"
  # The report: per rank, allreduces on carflow and user ops on MPI.
  [ "$(count "rank [0-9]*: MPI_Allreduce: [1-9][0-9]* on carflow, [1-9][0-9]* on MPI (.*op [1-9]")" -eq "$np" ] ||
    fail "np=$np: CF_MPI_REPORT did not give every rank's MPI_Allreduce line"
  [ "$(count "rank [0-9]*: MPI_Iallreduce: [1-9][0-9]* on carflow, [1-9][0-9]* on MPI (.*op [1-9]")" -eq "$np" ] ||
    fail "np=$np: CF_MPI_REPORT did not give every rank's MPI_Iallreduce line"
  [ "$(count "rank [0-9]*: MPI_Ialltoallv: [1-9][0-9]* on carflow, [1-9][0-9]* on MPI (communicator without")" \
    -eq "$np" ] || fail "np=$np: CF_MPI_REPORT did not give every rank's MPI_Ialltoallv line"
done

run 3
[ "$(count "layer off, [0-9]* checks, 0 failures")" -eq 3 ] || fail "without the layer: not every rank passed"

# MPI_THREAD_MULTIPLE: another thread waits on the nonblocking collectives
# the first starts, with the layer and without.
for preload in "$LIB" ""; do
  out=$("${MPIRUN[@]}" -np 3 -x LD_PRELOAD="$preload" "$WORK/mpi_layer_check" threads 2>&1) ||
    fail "threads (LD_PRELOAD=$preload): $out"
  state=$([ -n "$preload" ] && echo on || echo off)
  [ "$(count "layer $state, [0-9]* checks, 0 failures")" -eq 3 ] || fail "threads (LD_PRELOAD=$preload): $out"
done

# carflow refuses to start (a bad knob): every call goes to MPI, said once.
run 2 -x LD_PRELOAD="$LIB" -x CF_MPI_VERBOSE=1 -x CF_PEER_TIMEOUT=0
[ "$(count "layer off, [0-9]* checks, 0 failures")" -eq 2 ] || fail "stepped aside: not every rank passed"
[ "$(count "every collective goes to MPI: rank 0: cf_init: CF_PEER_TIMEOUT")" -eq 1 ] ||
  fail "stepped aside: the reason was not said exactly once"

mpicc.openmpi -O1 -std=c11 -Wall -Wextra -Werror -o "$WORK/mpi_layer_errors" "$5" || fail "mpicc could not build $5"
for np in 2 3; do
  out=$("${MPIRUN[@]}" -np "$np" "$WORK/mpi_layer_errors" 2>&1) || fail "errors np=$np without the layer: $out"
  plain=$(grep "^errors: rank" <<<"$out" | sort)
  [ "$(grep -c "rank [0-9]*: [0-9]* checks, 0 failures" <<<"$plain")" -eq "$np" ] ||
    fail "errors np=$np: Open MPI alone did not give the classes the test expects: $out"
  out=$("${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="$LIB" -x CF_MPI_REPORT=1 "$WORK/mpi_layer_errors" 2>&1) ||
    fail "errors np=$np with the layer: $out"
  [ "$(grep "^errors: rank" <<<"$out" | sort)" = "$plain" ] || fail "errors np=$np: classes differ with the layer: $out"
  [ "$(count "rank [0-9]*: MPI_Bcast: .*erroneous arguments")" -eq "$np" ] ||
    fail "errors np=$np: the report does not show erroneous calls left to MPI: $out"
  # After MPI_Finalize: Open MPI's own message and abort, with or without the
  # layer. The first rank to abort may take the others down before they
  # print, so at least one message, and a failed job.
  # Each call's own name, also for the calls the layer checks rank and size
  # for (at -np 2; one is enough at the others).
  calls=(barrier:MPI_Barrier)
  [ "$np" -eq 2 ] && calls+=(gather:MPI_Gather scatter:MPI_Scatter reduce_scatter:MPI_Reduce_scatter
                             allgatherv:MPI_Allgatherv)
  for call in "${calls[@]}"; do
    for preload in "" "$LIB"; do
      out=$("${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="$preload" "$WORK/mpi_layer_errors" after-finalize "${call%%:*}" 2>&1)
      status=$?
      [ "$status" -ne 0 ] && [ "$status" -ne 124 ] &&
        [ "$(count "${call#*:}() function was called after MPI_FINALIZE")" -ge 1 ] ||
        fail "errors np=$np after MPI_Finalize, ${call#*:} (LD_PRELOAD=$preload): exit $status: $out"
    done
  done
done

if /usr/bin/python3 -c "import mpi4py" 2>/dev/null; then
  "${MPIRUN[@]}" -np 3 /usr/bin/python3 "$3" "$WORK/plain" || fail "mpi4py without the layer"
  layered=$("${MPIRUN[@]}" -np 3 -x LD_PRELOAD="$LIB" -x CF_MPI_REPORT=1 /usr/bin/python3 "$3" "$WORK/layered" 2>&1) ||
    fail "mpi4py with the layer: $layered"
  echo "$layered"
  cat "$WORK"/layered.*
  [ "$(cat "$WORK"/plain.*)" = "$(cat "$WORK"/layered.*)" ] || fail "mpi4py: results differ with the layer"
  for fn in MPI_Bcast MPI_Allreduce MPI_Allgather MPI_Gatherv MPI_Scatterv MPI_Alltoallv MPI_Ibarrier MPI_Ibcast \
    MPI_Iallreduce MPI_Ireduce MPI_Iscan MPI_Iexscan MPI_Ireduce_scatter_block MPI_Ireduce_scatter MPI_Igather \
    MPI_Iallgather MPI_Ialltoall MPI_Iscatter MPI_Iallgatherv MPI_Igatherv MPI_Iscatterv MPI_Ialltoallv; do
    [ "$(grep -c "rank [0-9]: $fn: [1-9][0-9]* on carflow" <<<"$layered")" -eq 3 ] ||
      fail "mpi4py: $fn did not run on carflow on every rank"
  done
else
  echo "mpi4py: skipped (python3-mpi4py is not installed)"
fi
if command -v mpifort.openmpi >/dev/null && command -v gfortran >/dev/null; then
  mpifort.openmpi -O1 -o "$WORK/mpi_layer_fortran" "$4" || fail "mpifort could not build $4"
  for np in 2 3 4; do
    out=$("${MPIRUN[@]}" -np "$np" "$WORK/mpi_layer_fortran" 2>&1) || fail "Fortran np=$np without the layer: $out"
    plain=$(grep "^mpi_layer_fortran: rank" <<<"$out" | sort)
    [ "$(grep -c "rank [0-9]*: 0 failures" <<<"$plain")" -eq "$np" ] || fail "Fortran np=$np without the layer: $out"
    out=$("${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="$LIB" -x CF_MPI_REPORT=1 "$WORK/mpi_layer_fortran" 2>&1) ||
      fail "Fortran np=$np with the layer: $out"
    [ "$(count "mpi_layer_fortran: rank [0-9]*: 0 failures")" -eq "$np" ] || fail "Fortran np=$np: $out"
    # Every result's checksum, rank by rank, as without the layer.
    [ "$(grep "^mpi_layer_fortran: rank" <<<"$out" | sort)" = "$plain" ] ||
      fail "Fortran np=$np: results differ with the layer: $out"
    for fn in MPI_Barrier MPI_Bcast MPI_Allreduce MPI_Reduce MPI_Scan MPI_Exscan MPI_Reduce_scatter_block \
      MPI_Reduce_scatter MPI_Allgather MPI_Alltoall MPI_Gather MPI_Scatter MPI_Allgatherv MPI_Gatherv \
      MPI_Scatterv MPI_Alltoallv MPI_Ibarrier MPI_Ibcast MPI_Ireduce MPI_Iallreduce MPI_Iscan MPI_Iexscan \
      MPI_Igather MPI_Iscatter MPI_Iallgather MPI_Ialltoall MPI_Ireduce_scatter_block MPI_Ireduce_scatter \
      MPI_Iallgatherv MPI_Igatherv MPI_Iscatterv MPI_Ialltoallv; do
      [ "$(count "rank [0-9]*: $fn: [1-9][0-9]* on carflow")" -eq "$np" ] ||
        fail "Fortran np=$np: $fn did not run on carflow on every rank: $out"
    done
  done
  # mpi_f08: through Open MPI's back ends ompi_x_f and its pmpi_test_ ...
  mpifort.openmpi -O1 -o "$WORK/mpi_layer_f08" "$7" || fail "mpifort could not build $7"
  out=$("${MPIRUN[@]}" -np 3 -x LD_PRELOAD="$LIB" -x CF_MPI_REPORT=1 "$WORK/mpi_layer_f08" 2>&1) ||
    fail "mpi_f08 with the layer: $out"
  [ "$(count "mpi_layer_f08: rank [0-9]*: 0 failures")" -eq 3 ] || fail "mpi_f08: $out"
  # Calls per rank: one per communicator (world, duplicate, Cartesian), the nonblocking barrier two.
  for fn in MPI_Barrier:3 MPI_Bcast:3 MPI_Allreduce:3 MPI_Allgather:3 MPI_Iallreduce:3 MPI_Ibcast:3 MPI_Ibarrier:6; do
    [ "$(count "rank [0-9]*: ${fn%%:*}: ${fn#*:} on carflow, 0 on MPI")" -eq 3 ] ||
      fail "mpi_f08: ${fn%%:*} did not run on carflow on every communicator of every rank: $out"
  done
else
  echo "Fortran: skipped (gfortran is not installed)"
fi
# Every spelling of every Fortran entry point is the layer's (mpi_x, mpi_x__,
# MPI_X, ompi_x_f beside gfortran's mpi_x_), and calls through them run.
mpicc.openmpi -O1 -std=c11 -Wall -Wextra -Werror -o "$WORK/mpi_layer_spellings" "$8" -ldl ||
  fail "mpicc could not build $8"
names=$(nm -D --defined-only "$LIB" | awk '$3 ~ /^mpi_[a-z_]*[a-z]_$/ {print $3}')
[ "$(wc -w <<<"$names")" -ge 51 ] || fail "spellings: the layer exports only these gfortran names: $names"
out=$("${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$LIB" "$WORK/mpi_layer_spellings" $names 2>&1) || fail "spellings: $out"
[ "$(count "mpi_layer_spellings: rank [0-9]*: [0-9]* checks, 0 failures")" -eq 2 ] || fail "spellings: $out"

if command -v mpicc.mpich >/dev/null && command -v mpirun.mpich >/dev/null; then
  mpicc.mpich -O1 -std=c11 -Wall -Wextra -Werror -o "$WORK/mpi_layer_mpich" "$6" || fail "mpicc.mpich could not build $6"
  for np in 2 3; do
    out=$(timeout 120 mpirun.mpich -np "$np" -genv LD_PRELOAD "$LIB" "$WORK/mpi_layer_mpich" 2>&1) ||
      fail "MPICH np=$np with the layer preloaded: $out"
    echo "$out"
    [ "$(count "mpi_layer_mpich: rank [0-9]*: 0 failures")" -eq "$np" ] || fail "MPICH np=$np: wrong results: $out"
    [ "$(count "^libcarflow_mpi: the program's MPI is .*libmpich.*, not the Open MPI this layer is built for")" \
      -eq "$np" ] || fail "MPICH np=$np: the layer did not say once per process that it steps aside: $out"
  done
else
  echo "MPICH: skipped (mpich is not installed)"
fi
echo "mpi_layer_test: all passed"
