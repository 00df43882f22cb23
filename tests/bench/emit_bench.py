#!/usr/bin/python3
"""Output control on a burst-heavy stream: a pattern with and without EMIT FIRST EVERY, in one run.

Each run is a whole `cepbus match --engine E --count` process, as a user runs it; its CPU time
(user + system) comes from the process's own resource usage (engine_sweep.run_measured).

The stream: --sensors sensors, each reading once per time unit; mostly calm (value 50), with
bursts of --burst consecutive readings above 80 (rising) starting at random times, about one
burst per sensor per --gap time units. The query alerts on every rising pair of high readings of
one sensor within 60 time units:

    PATTERN SEQ(Temp a, Temp b) WHERE a.value > 80 AND b.value > a.value
    WITHIN 60 PARTITION BY sensor

run as is (every pair of a burst: burst·(burst-1)/2 alerts) and with
`EMIT FIRST EVERY 60 PER a.sensor` (one alert per sensor per minute of event time), on each
engine. Per run: the median CPU time over --repeat rounds, events/s over it, the composites out
(the --count) and composites out per second of CPU; the two queries take turns within a round.

    tests/bench/emit_bench.py --cepbus build/release/bus/app/cepbus
        [--events 1000000] [--sensors 100] [--burst 7] [--gap 300] [--repeat 3]
        [--engines nfa,petri,algebra] [--seed 7]

Prints one JSON object per (engine, query), then the markdown table of docs/pattern-language.md.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_sweep import counted, run_measured  # noqa: E402

BASE = ("PATTERN SEQ(Temp a, Temp b) WHERE a.value > 80 AND b.value > a.value "
        "WITHIN 60 PARTITION BY sensor")
QUERIES = (("all", BASE), ("emit_first", BASE + " EMIT FIRST EVERY 60 PER a.sensor"))


def stream(path, events, sensors, burst, gap, seed):
    """Writes the readings; returns how many are high."""
    rng = random.Random("emit/%d" % seed)
    left = [0] * sensors  # readings of the current burst still to come, per sensor
    high = 0
    with open(path, "w") as f:
        ts = 0
        n = 0
        while n < events:
            ts += 1
            for s in range(sensors):
                if n == events:
                    break
                if left[s] == 0 and rng.random() < 1.0 / gap:
                    left[s] = burst
                if left[s] > 0:
                    value = 81 + burst - left[s]
                    left[s] -= 1
                    high += 1
                else:
                    value = 50
                f.write('{"type":"Temp","ts":%d,"attrs":{"sensor":"s%d","value":%d}}\n'
                        % (ts, s, value))
                n += 1
    return high


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cepbus", required=True)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--sensors", type=int, default=100)
    ap.add_argument("--burst", type=int, default=7)
    ap.add_argument("--gap", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", default="nfa,petri,algebra")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    engines = args.engines.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "burst.jsonl")
        high = stream(path, args.events, args.sensors, args.burst, args.gap, args.seed)
        cpu = {}
        out = {}
        for r in range(args.repeat):
            order = list(QUERIES) if r % 2 == 0 else list(reversed(QUERIES))
            for engine in engines:
                for name, query in order:
                    if engine == "algebra":
                        query += " CONTEXT unrestricted"
                    c, _, _, stdout, _ = run_measured(
                        [args.cepbus, "match", "--engine", engine, "--query", query,
                         "--events", path, "--count"])
                    cpu.setdefault((engine, name), []).append(c)
                    matches, checksum = counted(stdout)
                    if out.setdefault((engine, name), (matches, checksum)) != (matches, checksum):
                        raise SystemExit("%s %s: the count changed between rounds" % (engine, name))
        rows = []
        for engine in engines:
            for name, _ in QUERIES:
                t = statistics.median(cpu[(engine, name)])
                matches = out[(engine, name)][0]
                row = {"bench": "emit", "params": {"engine": engine, "query": name,
                                                   "events": args.events, "sensors": args.sensors,
                                                   "burst": args.burst, "gap": args.gap,
                                                   "high": high, "repeat": args.repeat},
                       "cpu_s": round(t, 3), "events_per_s": round(args.events / t),
                       "composites": matches, "composites_per_s": round(matches / t)}
                rows.append(row)
                print(json.dumps(row))
        print()
        print("| engine | query | events/s | composites out | composites/s |")
        print("|---|---|---:|---:|---:|")
        for row in rows:
            p = row["params"]
            print("| %s | %s | %s | %s | %s |" % (
                p["engine"], "EMIT FIRST EVERY 60 PER a.sensor" if p["query"] == "emit_first"
                else "every match", "{:,}".format(row["events_per_s"]),
                "{:,}".format(row["composites"]), "{:,}".format(row["composites_per_s"])))


if __name__ == "__main__":
    main()
