#!/usr/bin/env bash
# carflow view, opened in a real headless Chromium: the page of a 16-image
# allreduce shows every CAR and edge, a 4096-image broadcast opens collapsed
# within the time limit, hostile names stay text, bad files fail cleanly and
# leave nothing behind. The page reports what it drew, and any error it
# caught, in <pre id="status">, which --dump-dom lets us read.
# With CFRUN, also a real trace: a 2-process allreduce traced (CF_TRACE),
# merged, drawn as a timeline with its flows between the processes.
# Usage (tests/BUILD passes them): view_test.sh CARFLOW_CLI [CFRUN]
# Without a Chromium it prints SKIPPED and passes: nothing else may skip it.
set -uo pipefail
CLI="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
CFRUN="${2:+$(cd "$(dirname "$2")" && pwd)/$(basename "$2")}"
OPEN_LIMIT_MS="${CF_VIEW_OPEN_LIMIT_MS:-5000}"

browser=""
for b in chromium chromium-browser google-chrome-stable google-chrome headless_shell; do
  if command -v "$b" >/dev/null 2>&1; then browser="$(command -v "$b")"; break; fi
done
if [ -z "$browser" ]; then
  echo "**************************************************************"
  echo "SKIPPED view_test: no Chromium found (apt-get install chromium)"
  echo "**************************************************************"
  exit 0
fi

work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/view.XXXXXX")"
shots="${TEST_UNDECLARED_OUTPUTS_DIR:-$work}"
export HOME="$work"  # Chromium writes its profile and caches under HOME
failures=0
check() {  # check DESCRIPTION COMMAND...: runs the command, counts a failure
  local what="$1"
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

# Opens a page and sets $status (the page's status line and errors) and
# $dom (the document after the scripts ran); $open_ms is the browser's
# whole run. A PNG goes to $shots when a second argument names it.
open_page() {
  local page="$1" shot="${2:-}" start end
  start=$(date +%s%N)
  timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/profile" --window-size=1400,900 --virtual-time-budget=10000 \
    --dump-dom "file://$page" >"$work/dom.html" 2>"$work/chromium.log"
  end=$(date +%s%N)
  open_ms=$(((end - start) / 1000000))
  dom="$(cat "$work/dom.html")"
  status="$(tr '\n' '\r' <"$work/dom.html" | sed -E 's|.*<pre id="status">([^<]*)</pre>.*|\1|' | tr '\r' '\n')"
  echo "  status: $status"
  if [ -n "$shot" ]; then
    timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --no-first-run \
      --user-data-dir="$work/profile" --window-size=1400,900 --virtual-time-budget=10000 \
      --screenshot="$shots/$shot" "file://$page" >/dev/null 2>&1
  fi
}
field() { grep -o "\b$1=[0-9a-z]*" <<<"$status" | head -1 | cut -d= -f2; }
has() { grep -qF -- "$2" <<<"$1"; }
lacks() { ! grep -qF -- "$2" <<<"$1"; }
equals() { [ "$1" = "$2" ] || { echo "  expected '$2', got '$1'"; false; }; }
leftovers() { find "$work/in" -name '*.html.*' | wc -l; }  # temporary files of the writer
self_contained() { ! grep -Eiq '<(script|link|img|iframe)[^>]* (src|href)=' "$1"; }
mkdir -p "$work/in"
cd "$work/in"

echo "== a 16-image allreduce, every CAR drawn"
plan_out="$("$CLI" plan --coll allreduce --images 16 --bytes 64 --out a16.json)"
cars=$(sed -E 's/.*: ([0-9]+) CARs, ([0-9]+) messages.*/\1/' <<<"$plan_out")
messages=$(sed -E 's/.*: ([0-9]+) CARs, ([0-9]+) messages.*/\2/' <<<"$plan_out")
deps=$(grep -o '"car":' a16.json | wc -l)
check "view writes a16.html" "$CLI" view a16.json
check "the page loads nothing from outside" self_contained a16.html
open_page "$work/in/a16.html" view_allreduce16.png
check "no error in the page" equals "$(field errors)" 0
check "the page rendered" equals "$(field rendered)" 1
check "counts: $cars CARs" equals "$(field cars)" "$cars"
check "counts: $messages messages" equals "$(field messages)" "$messages"
check "nodes: the CARs and 16 images" equals "$(field nodes)" $((cars + 16))
check "edges: $deps dependencies and $messages messages" equals "$(field edges)" $((deps + messages))
check "all 16 images expanded" equals "$(field expanded)" 16
check "the critical path as plan measures it" has "$plan_out" "critical path $(field critical) CARs"
check "screenshot written" test -s "$shots/view_allreduce16.png"

echo "== a 4096-image broadcast opens collapsed"
"$CLI" plan --coll broadcast --images 4096 --bytes 8 --algo binomial --out b4096.json >/dev/null
check "view writes b4096.html" "$CLI" view b4096.json -o big.html
open_page "$work/in/big.html" view_broadcast4096.png
check "no error in the page" equals "$(field errors)" 0
check "one node per image" equals "$(field nodes)" 4096
check "one edge per image pair with messages" equals "$(field edges)" 4095
check "all collapsed" equals "$(field collapsed)" 4096
render_ms=$(field render_ms)
echo "4096-image page: first frame ${render_ms:-?} ms after navigation; chromium ran ${open_ms} ms in all"
if [ "${render_ms:-999999}" -gt "$OPEN_LIMIT_MS" ]; then  # a busy machine: the better of two opens counts
  open_page "$work/in/big.html"
  again=$(field render_ms)
  echo "opened again: first frame ${again:-?} ms"
  [ "${again:-999999}" -lt "${render_ms:-999999}" ] && render_ms="$again"
fi
check "first frame within ${OPEN_LIMIT_MS} ms" test "${render_ms:-999999}" -le "$OPEN_LIMIT_MS"
# big.html#car=I:J expands image I in place (what a click does) and selects CAR J.
open_page "$work/in/big.html#car=5:1"
image5_cars=$(sed -n '/"image": 5,/,/"image": 6,/p' b4096.json | grep -c '"kind": "[A-Z_]*"')
check "no error after expanding image 5" equals "$(field errors)" 0
check "image 5 expanded, the others not" equals "$(field expanded) $(field collapsed)" "1 4095"
check "nodes: 4095 images, image 5's box and its $image5_cars CARs" equals "$(field nodes)" $((4096 + image5_cars))
check "its CAR 1 is shown" has "$dom" "image 5, car 1</h2>"
check "--collapse-above 8192 opens it expanded" "$CLI" view b4096.json -o big.html --collapse-above 8192

echo "== hostile text stays text"
sed 's/"algorithm": "reduce_bcast"/"algorithm": "<\/script><script>alert(1)<\/script>"/' a16.json >hostile.json
out="$("$CLI" view hostile.json 2>&1)"
check "a hostile algorithm name is refused (exit 2)" equals "$?" 2
check "the error names the field" has "$out" "hostile.json: collective.algorithm:"
check "nothing written" test ! -e hostile.html -a "$(leftovers)" -eq 0
# File names are free text, and the page shows them.
name='<img src=x onerror=document.body.dataset.pwned=1><!--.json'
cp a16.json "$name"
check "view of a hostile file name" "$CLI" view "$name" -o named.html
open_page "$work/in/named.html"
check "no error in the page" equals "$(field errors)" 0
check "the name is shown as text" has "$dom" '&lt;img src=x onerror=document.body.dataset.pwned=1&gt;&lt;!--.json'
check "no element was injected" lacks "$dom" "<img"
check "no injected handler ran" lacks "$dom" "data-pwned"
rm -f named.html "$name"
cat >trace.json <<'EOF'
{"traceEvents": [
 {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "image 0"}},
 {"ph": "X", "name": "allreduce", "cat": "coll", "pid": 0, "tid": 1, "ts": 0, "dur": 100, "args": {"bytes": 64}},
 {"ph": "X", "name": "SEND", "pid": 0, "tid": 1, "ts": 10, "dur": 20},
 {"ph": "B", "name": "RECV", "pid": 1, "tid": 1, "ts": 15},
 {"ph": "E", "pid": 1, "tid": 1, "ts": 40},
 {"ph": "s", "id": 1, "cat": "msg", "name": "m", "pid": 0, "tid": 1, "ts": 20},
 {"ph": "f", "id": 1, "cat": "msg", "name": "m", "pid": 1, "tid": 1, "ts": 35},
 {"ph": "X", "name": "</script><script>document.body.dataset.pwned=1</script><!--", "pid": 1, "tid": 1,
  "ts": 50, "dur": 10},
 {"ph": "i", "name": "mark", "pid": 0, "tid": 1, "ts": 60, "s": "t"},
 {"ph": "C", "name": "counter", "pid": 0, "ts": 0, "args": {"v": 1}}
]}
EOF
check "view of a trace" "$CLI" view trace.json
check "the inlined data cannot end its script element" lacks "$(cat trace.html)" "</script><script>document"
open_page "$work/in/trace.html" view_trace.png
check "no error in the page" equals "$(field errors)" 0
check "a timeline" equals "$(field mode)" trace
check "5 events (B/E paired, the counter skipped)" equals "$(field events)" 5
check "1 flow" equals "$(field flows)" 1
check "2 threads" equals "$(field rows)" 2
check "no injected script ran" lacks "$dom" "data-pwned"
rm -f trace.html

if [ -n "$CFRUN" ]; then
  echo "== a real trace: 2 processes, merged"
  CF_TRACE="$work/in/traced" timeout 120 "$CFRUN" --timeout 100 -n 2 --images 1 \
    "$CLI" bench --coll allreduce --images 1 --sizes 8 --iters 20 >/dev/null 2>&1
  check "a traced 2-process run" test -e "$work/in/traced/carflow-trace-node1-run0.json"
  check "trace merge" "$CLI" trace merge "$work/in/traced" -o merged.json
  check "view of the merged trace" "$CLI" view merged.json
  open_page "$work/in/merged.html" view_trace_2proc.png
  check "no error in the page" equals "$(field errors)" 0
  check "a timeline" equals "$(field mode)" trace
  check "2 rows, one per process's image" equals "$(field rows)" 2
  check "flows between them" test "$(field flows)" -gt 0
  rm -f merged.html
fi

echo "== bad input fails naming where, writing nothing"
sed '0,/"peer": 1,/s//"peer": 99,/' a16.json >badpeer.json
out="$("$CLI" view badpeer.json 2>&1)"
check "a bad peer is refused (exit 2)" equals "$?" 2
check "the error names the CAR: $out" has "$out" "badpeer.json: images[0].cars[0].peer:"
head -c 500 a16.json >truncated.json
out="$("$CLI" view truncated.json 2>&1)"
check "truncated JSON is refused: $out" has "$out" "truncated.json: not valid JSON"
printf '{"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 1, "dur": -5}]}' >badtrace.json
out="$("$CLI" view badtrace.json 2>&1)"
check "a negative duration is refused: $out" has "$out" "badtrace.json: traceEvents[0].dur: not a number >= 0"
out="$("$CLI" view missing.json 2>&1)"
check "a missing file is refused: $out" has "$out" "missing.json: cannot open"
out="$("$CLI" view a16.json -o a16.json 2>&1)"
check "the input is never the output: $out" has "$out" "is the input file"
check "nothing written" test ! -e badpeer.html -a ! -e truncated.html -a ! -e badtrace.html -a "$(leftovers)" -eq 0

echo "screenshots in $shots"
[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
