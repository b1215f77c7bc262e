"""Checks a carflow trace file (CF_TRACE, engine/trace.h): every event has
its format's fields, each SEND's flow start meets exactly one receive's
flow end, and on one host's clock a receive never ends before its SEND
started. Options: --min-x N / --max-x N (CAR events), --dropped (otherData
must count dropped CARs), --flows-across-pids (every flow joins two
processes), --one-host (every file on node 0's clock, not shifted)."""
import json
import sys


def main(argv):
    path, opts = argv[1], argv[2:]
    doc = json.load(open(path))
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    for e in events:
        assert e["ph"] in ("M", "X", "s", "f"), e
        assert isinstance(e["pid"], int), e
        if e["ph"] == "X":
            for key in ("tid", "ts", "dur", "name", "args"):
                assert key in e, (key, e)
            assert e["dur"] >= 0, e
            for key in ("kind", "bytes", "coll", "algorithm", "seq", "ready_us"):
                assert key in e["args"], (key, e)
            assert e["args"]["ready_us"] <= e["ts"] + 1e-3, ("ready after start", e)
            if e["args"]["kind"] in ("SEND", "RECV", "RECV_REDUCE"):
                assert "peer" in e["args"] and "tag" in e["args"], e
    names = {(e["pid"], e.get("tid")) for e in events if e["ph"] == "M"}
    for e in xs:
        assert (e["pid"], e["tid"]) in names, ("no thread_name for", e)
    starts, ends = {}, {}
    for e in events:
        if e["ph"] == "s":
            assert e["id"] not in starts, ("flow started twice", e)
            starts[e["id"]] = e
        elif e["ph"] == "f":
            assert e["id"] not in ends, ("flow ended twice", e)
            assert e.get("bp") == "e", e
            ends[e["id"]] = e
    dropped = doc.get("otherData", {}).get("dropped", 0)
    if "sources" in doc.get("otherData", {}):
        dropped = sum(s.get("dropped", 0) for s in doc["otherData"]["sources"])
    # Every process's file says how its clock relates to node 0's; on one
    # host it is the same clock and nothing was shifted.
    other = doc.get("otherData", {})
    for source in other.get("sources", [other]):
        clock = source.get("clock_of_node0")
        assert isinstance(clock, dict), ("no clock_of_node0", source)
        for key in ("same_clock", "offset_ns", "error_ns", "samples", "applied"):
            assert key in clock, (key, clock)
        if "--one-host" in opts:
            assert clock["same_clock"] and not clock["applied"], ("one host, yet another clock", clock)
            assert abs(clock["offset_ns"]) <= clock["error_ns"], ("estimate outside its bound", clock)
            if source.get("node", 0) != 0:
                assert clock["samples"] > 0, ("node 0's clock never asked", source)
    if dropped == 0:
        assert set(starts) == set(ends), ("unmatched flows", len(set(starts) ^ set(ends)))
    for fid, s in starts.items():
        if fid in ends:
            assert ends[fid]["ts"] + 1e-3 >= s["ts"], ("a receive ended before its send started", s, ends[fid])
            if "--flows-across-pids" in opts:
                assert ends[fid]["pid"] != s["pid"], ("flow within one process", s)
    if "--min-x" in opts:
        assert len(xs) >= int(opts[opts.index("--min-x") + 1]), len(xs)
    if "--max-x" in opts:
        assert len(xs) <= int(opts[opts.index("--max-x") + 1]), len(xs)
    if "--dropped" in opts:
        assert dropped > 0, "no dropped count"
    print(f"{path}: {len(xs)} CARs, {len(starts)} flows, dropped {dropped}: ok")


if __name__ == "__main__":
    main(sys.argv)
