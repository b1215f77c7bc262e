#!/usr/bin/env bash
# carflow calibrate, tune and CF_MODEL / CF_TUNING end to end: a quick
# calibration on the inproc transport writes a model that loads back
# (simulate), tune turns it into a table of the documented structure, the
# engine follows the table and the model (cf_coll_algorithm, through
# model_select_check), and bad files fail naming the field.
set -euo pipefail
CLI="$1"
CHECK="$2"
T="${TEST_TMPDIR:-$(mktemp -d)}"
die() { echo "FAIL: $*" >&2; exit 1; }

"$CLI" calibrate --transport inproc --iters 100 --out "$T/model.json" > "$T/calibrate.txt"
cat "$T/calibrate.txt"
python3 - "$T/model.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for k in ("L", "o", "g", "G", "S", "gamma", "beta"):
    assert k in m, k
    assert isinstance(m[k], (int, float)) and m[k] >= 0, (k, m[k])
for k in ("o", "S", "gamma", "beta"):
    assert m[k] > 0, (k, m[k])
assert m["G"] + m["O"] > 0, m   # a byte is never free: on the way (G) or at the CPUs (O)
for b in m.get("bands", []):
    assert b["G"] >= 0 and b["O"] >= 0, b   # a flat stretch (noise) may leave both 0
    # Every band's own REDUCE and COPY costs, measured over arrays of its size.
    assert b["gamma"] > 0 and b["beta"] > 0, b
# The eager limit splits the sweep: the rendezvous's band starts at S + 1,
# and no band starts at S (its stretch would be the handshake's one byte).
froms = [b["from"] for b in m["bands"]]
assert froms == sorted(froms) and m["S"] + 1 in froms and m["S"] not in froms, (m["S"], froms)
assert m["L"] + 2 * m["o"] < 1e8, m   # an 8-byte round trip under 0.2 s
PY
"$CLI" simulate --coll broadcast --images 8 --bytes 8 --model-file "$T/model.json" --json > /dev/null \
  || die "the calibrated model does not load back"

# --calls K: K back-to-back calls. Flat broadcast on 2 images, 8 bytes,
# o=2 g=4 L=6 G=O=0 beta=0.25: the root's call (SEND 2 + COPY 2) and its
# NIC's gap both take 4, so calls start 4 apart; the last message is
# received a hop (2 + 6 + 2) after its send: 4 (K - 1) + 10.
"$CLI" simulate --coll broadcast --images 2 --bytes 8 --algo flat --calls 50 \
  --model L=6,o=2,g=4,G=0,O=0,beta=0.25,gamma=0 --json > "$T/calls.json"
python3 - "$T/calls.json" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["calls"] == 50 and r["messages"] == 50, r
assert r["time_ns"] == 4 * 49 + 10, r
assert abs(r["per_call_ns"] - r["time_ns"] / 50) < 1e-9, r
PY
# Past the simulator's CAR limit: refused before anything is built, naming both options.
if "$CLI" simulate --coll allreduce --images 65536 --bytes 8 --algo recursive_doubling --calls 10000 \
    > "$T/big.txt" 2>&1; then
  die "a DAG of 10000 calls past the CAR limit was simulated"
fi
grep -q -- "--calls" "$T/big.txt" && grep -q -- "--images" "$T/big.txt" \
  || die "the CAR limit's error does not name --images and --calls: $(cat "$T/big.txt")"
for bad in 0 100001 x; do
  if "$CLI" simulate --coll broadcast --images 2 --bytes 8 --calls "$bad" > "$T/bad.txt" 2>&1; then
    die "--calls $bad accepted"
  fi
  grep -q -- "--calls" "$T/bad.txt" || die "--calls $bad: the error does not name --calls: $(cat "$T/bad.txt")"
done

"$CLI" tune --model-file "$T/model.json" --images 4 --max-bytes 1M --out "$T/table.json" > "$T/tune.txt"
python3 - "$T/table.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
assert t["schema"] == "carflow.tuning/1", t
assert t["images"] == 4 and t["images_per_node"] == 0, t
assert set(t) <= {"schema", "images", "images_per_node", "kinds", "model"}, t.keys()
assert "permute" not in t["kinds"] and "reduce" not in t["kinds"]
for kind in ("broadcast", "barrier", "allreduce", "gather_all", "exchange", "reduce_scatter"):
    ranges = t["kinds"][kind]
    assert ranges[0]["from_bytes"] == 0, (kind, ranges)
    starts = [r["from_bytes"] for r in ranges]
    assert starts == sorted(set(starts)), (kind, starts)
    for a, b in zip(ranges, ranges[1:]):
        assert a["algorithm"] != b["algorithm"], (kind, ranges)   # merged
    for r in ranges:
        assert set(r) == {"from_bytes", "algorithm", "time_ns"} and r["time_ns"] > 0, r
PY

# A table the engine must follow, whatever the model says.
cat > "$T/forced.json" <<'JSON'
{"schema": "carflow.tuning/1", "images": 4,
 "kinds": {"broadcast": [{"from_bytes": 0, "algorithm": "chain"}, {"from_bytes": 4096, "algorithm": "binary"}],
           "barrier": [{"from_bytes": 0, "algorithm": "kary"}]}}
JSON
CF_TUNING="$T/forced.json" "$CHECK" table || die "CF_TUNING's choices not followed"
CF_TUNING="$T/table.json" "$CHECK" tuned "$T/table.json" || die "tune's table not followed"
CF_MODEL="$T/model.json" "$CHECK" model "$T/model.json" || die "CF_MODEL's choices not followed"
CF_MODEL="$T/model.json" CF_ALGO_BROADCAST=chain "$CHECK" forced || die "CF_ALGO_BROADCAST does not win over CF_MODEL"

# Bad files: cf_init fails naming the variable and the field.
echo '{"schema": "carflow.tuning/1", "images": 4, "kinds": {"broadcast": [{"from_bytes": 0, "algorithm": "nope"}]}}' > "$T/bad.json"
if CF_TUNING="$T/bad.json" "$CLI" info > "$T/out.txt" 2>&1; then die "a bad table was accepted"; fi
grep -q "CF_TUNING: .*kinds.broadcast\[0\].algorithm: 'nope'" "$T/out.txt" || { cat "$T/out.txt"; die "error text"; }
echo '{"L": 1, "o": "x"}' > "$T/bad_model.json"
if CF_MODEL="$T/bad_model.json" "$CLI" info > "$T/out.txt" 2>&1; then die "a bad model was accepted"; fi
grep -q "CF_MODEL: .*o: expected a number" "$T/out.txt" || { cat "$T/out.txt"; die "error text"; }
if "$CLI" tune --model-file "$T/bad_model.json" --images 4 --out "$T/x.json" > "$T/out.txt" 2>&1; then die "tune took a bad model"; fi
grep -q "o: expected a number" "$T/out.txt" || { cat "$T/out.txt"; die "tune's error text"; }
[ ! -e "$T/x.json" ] || die "tune wrote a table from a bad model"
echo PASS
