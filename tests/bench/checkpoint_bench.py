#!/usr/bin/python3
"""Checkpoints on the engine workloads: how big a snapshot is, how long writing
and reading it back take, per engine that snapshots (docs/checkpoints.md).

For each workload of engine_workloads.py that the nfa engine runs, and the
window workloads of window_bench.py (1 M readings of 1,000 sensors, each
window kind), three `cepbus match --count` processes: the whole file, then
`--checkpoint FILE --stop-after N` at half the events, then `--resume FILE`.
The bytes and the milliseconds come from the lines the two runs print on
stderr (the time to snapshot the detector and write the file; to read the
file, check it and restore the detector). The counts and checksums of the two
halves must add up to the whole run's, or the run stops.

    tests/bench/checkpoint_bench.py --cepbus build/release/bus/app/cepbus
        [--only pileup,p2-uniform,...] [--plugin-path DIR] [--seed 7]

Prints one JSON object per (workload, engine), then the markdown table of
docs/checkpoints.md.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_workloads  # noqa: E402
import window_bench  # noqa: E402

WINDOW_EVENTS = 1_000_000
LINE = re.compile(r"after (\d+) events \((\d+) bytes, ([0-9.e+-]+) ms\)")


def run(args, engine, events, source, extra):
    cmd = [args.cepbus, "match", "--engine", engine, "--events", events, "--count"] + source + extra
    if args.plugin_path:
        cmd += ["--plugin-path", args.plugin_path]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr))
    return [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def totals(counts):
    return {c.get("pattern", ""): (c["matches"], int(c["checksum"], 16)) for c in counts}


def added(a, b):
    return {k: (a[k][0] + b[k][0], (a[k][1] + b[k][1]) % 2**64) for k in a}


def measure(args, tmp, name, engine, events_path, events, source):
    whole, _ = run(args, engine, events_path, source, [])
    snap = os.path.join(tmp, "bench.snap")
    half = events // 2
    first, err1 = run(args, engine, events_path, source,
                      ["--checkpoint", snap, "--stop-after", str(half)])
    second, err2 = run(args, engine, events_path, source, ["--resume", snap])
    w = LINE.search(err1)
    r = LINE.search(err2)
    agree = added(totals(first), totals(second)) == totals(whole)
    row = {"bench": "checkpoint", "workload": name, "engine": engine, "events": events,
           "stop_after": half, "bytes": int(w.group(2)), "snapshot_ms": float(w.group(3)),
           "restore_ms": float(r.group(3)), "matches": sum(c["matches"] for c in whole),
           "agree": agree}
    print(json.dumps(row), flush=True)
    if not agree:
        sys.exit("%s: the two halves' counts do not add up to the whole run's" % name)
    return row


def table(rows):
    lines = ["| workload | engine | events | at | snapshot bytes | snapshot ms | restore ms |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %d | %d | %d | %.1f | %.1f |" % (
            r["workload"], r["engine"], r["events"], r["stop_after"], r["bytes"],
            r["snapshot_ms"], r["restore_ms"]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cepbus", required=True)
    ap.add_argument("--plugin-path", default="")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, events, source, engines in engine_workloads.workloads(tmp, args.seed):
            if "nfa" in engines and (not only or name in only):
                rows.append(measure(args, tmp, name, "nfa", path, events, source))
        readings = window_bench.readings(WINDOW_EVENTS, 1000, 100, args.seed)
        path = os.path.join(tmp, "readings.jsonl")
        window_bench.write(path, readings)
        for name, kind, length, every in window_bench.WINDOWS:
            wname = "window " + name
            if not only or wname in only:
                q = window_bench.query(kind, length, every)
                rows.append(measure(args, tmp, wname, "window", path, WINDOW_EVENTS,
                                    ["--query", q]))
    print(table(rows))


if __name__ == "__main__":
    main()
