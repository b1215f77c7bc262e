#!/usr/bin/env bash
# CF_HANG_DUMP_S: image 1 holds back from a broadcast it roots
# (tests/hang_report.c); the report must name what image 0 waits for, and
# its DAG file must load with image 0's states (the receive from image 1
# waiting for its message); the viewer opens it. SIGUSR1 reports before the
# limit. A sync that returns CF_ERR_PEER_LOST writes the same report (two
# processes under cfrun; one kills itself). A bad CF_HANG_DUMP_S is refused
# naming the variable.
# Usage (tests/BUILD passes them): hang_test.sh HANG_REPORT CARFLOW_CLI CFRUN
set -uo pipefail
prog=$(realpath "$1") cli=$(realpath "$2") cfrun=$(realpath "$3")
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/hang.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

err=$(CF_TRACE=$work CF_HANG_DUMP_S=0.2 timeout 120 "$prog" "$work" 2>&1 >"$work/out") ||
  { cat "$work/out"; echo "$err"; fail "the program failed"; }
echo "$err"
grep -q "hang_report: 0 failures, cf_finalize 0" "$work/out" || fail "program summary: $(cat "$work/out")"
line=$(grep "carflow: hang report: image 0: broadcast #0 (" <<<"$err") || fail "no report line for image 0"
grep -Eq "waits for 8 bytes from image 1, tag [0-9]+; " <<<"$line" || fail "the line does not say what image 0 waits for"
grep -q "outstanding past CF_HANG_DUMP_S" <<<"$line" || fail "the line does not say why"
file=$(ls "$work"/carflow-hang-node0-image0-seq*.json) || fail "no DAG file for image 0"
# The file is graph JSON that loads (dot), with image 0's run state.
timeout 30 "$cli" dot "$file" >/dev/null || fail "carflow dot cannot load $file"
grep -q '"run_state"' "$file" || fail "no run_state in $file"
tr -d ' \n' <"$file" | grep '"run_state":{"image":0,"cars":\[[^]]*"waiting_message"' >/dev/null ||
  fail "image 0's receive is not waiting_message"
timeout 30 "$cli" view "$file" -o "$work/hang.html" >/dev/null || fail "view of the hang report"

# SIGUSR1 reports every outstanding collective at once, long before the
# limit: sent once the images run, it lets image 1 go on.
rm -f "$work"/carflow-hang-*.json
CF_TRACE=$work CF_HANG_DUMP_S=600 timeout 120 "$prog" "$work" >"$work/out2" 2>"$work/err2" &
pid=$!
for _ in $(seq 600); do grep -q "images started" "$work/out2" && break; sleep 0.1; done
grep -q "images started" "$work/out2" || fail "the program did not start"
child=$(pgrep -P "$pid") || fail "no program under timeout"
kill -USR1 "$child"
wait "$pid" || { cat "$work/out2" "$work/err2"; fail "the program failed after SIGUSR1"; }
grep -q "carflow: hang report: image 0: broadcast .*(SIGUSR1)" "$work/err2" || fail "no SIGUSR1 report: $(cat "$work/err2")"

# A lost peer: node 1 dies instead of entering; node 0's sync returns
# CF_ERR_PEER_LOST and reports what it waited for, with its DAG file. The
# limit is far away, so the report can only come from the lost peer.
rm -f "$work"/carflow-hang-*.json
CF_TRACE=$work CF_HANG_DUMP_S=600 CF_PEER_TIMEOUT=2 CF_EXIT_TIMEOUT=3 timeout 120 \
  "$cfrun" -n 2 "$prog" "$work" lost >"$work/out3" 2>&1
grep -q "^\[0\] lost: status .* (CF_ERR_PEER_LOST)" "$work/out3" || fail "node 0 did not see CF_ERR_PEER_LOST: $(cat "$work/out3")"
line=$(grep "carflow: hang report: image 0: broadcast #0 (" "$work/out3") || fail "no report line for image 0: $(cat "$work/out3")"
grep -Eq "waits for 8 bytes from image 1, tag [0-9]+; .*a peer was lost" <<<"$line" || fail "the line does not say what image 0 waited for and why: $line"
file=$(ls "$work"/carflow-hang-node0-image0-seq*.json) || fail "no DAG file for image 0 after the lost peer"
timeout 30 "$cli" dot "$file" >/dev/null || fail "carflow dot cannot load $file"
tr -d ' \n' <"$file" | grep '"run_state":{"image":0,"cars":\[[^]]*"waiting_message"' >/dev/null ||
  fail "image 0's receive is not waiting_message after the lost peer"

# A bad value is refused, naming the variable.
msg=$(CF_HANG_DUMP_S=-1 timeout 30 "$prog" "$work" 2>&1) && fail "CF_HANG_DUMP_S=-1 accepted"
grep -q "CF_HANG_DUMP_S='-1': expected seconds" <<<"$msg" || fail "bad value message: $msg"
echo PASS
