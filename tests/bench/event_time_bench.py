#!/usr/bin/python3
"""What event time costs: out-of-order and late input against the sorted stream, in one run.

Each run is a whole `cepbus match --engine E --count` process, as a user runs it; its CPU time
(user + system) and peak resident set come from the process's own resource usage. For each
workload and engine the same events are given

- sorted by `ts` (`--max-delay 0`): the reference;
- re-ordered within D, for D = 100, 1,000 and 10,000, with `--max-delay D`: each event's arrival
  position is its `ts` plus a uniform delay in [0, D], so no event comes more than D behind the
  newest one before it, and the matches must be exactly those of the sorted stream (the run stops
  when the count or the checksum differs);
- re-ordered within D = 1,000 with 1 % of the events late: those arrive 3·D behind their `ts`,
  so more than D behind the newest; `cepbus match` must report exactly that many late events
  on stderr (the run stops otherwise).

Workloads (CONTEXT unrestricted, so every engine reports every match):
- pileup: `SEQ(A a, B b, X x) WITHIN 1000` over 1 M events of A and B, X never occurs;
- p2: P2's `SEQ(A a, B b, D d) WITHIN 499` over 20 k events of A, B, C, D uniform.

Per engine and stream: the median CPU time over --repeat rounds (the streams take turns within a
round), events/s over it, events/s as a share of the sorted stream's, and the largest peak RSS.

    tests/bench/event_time_bench.py --cepbus build/release/bus/app/cepbus
        [--repeat 3] [--only pileup,p2] [--engines nfa,petri,algebra] [--cpu 0] [--seed 7]

Prints one JSON object per (workload, engine, stream), then the markdown table of docs/time.md.
"""
import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_sweep import counted, run_measured  # noqa: E402

ENGINES = ("nfa", "petri", "algebra")
DELAYS = (100, 1000, 10000)
LATE_DELAY = 1000
LATE_SHARE = 0.01
LATE_COUNT = re.compile(r": (\d+) late events?")


def types_pileup(seed):
    rng = random.Random("pileup/%d" % seed)
    return [rng.choice("AB") for _ in range(1_000_000)]


def types_p2(seed):
    rng = random.Random("p2/%d" % seed)
    return [rng.choice("ABCD") for _ in range(20000)]


WORKLOADS = (
    ("pileup", types_pileup, "PATTERN SEQ(A a, B b, X x) WITHIN 1000 CONTEXT unrestricted"),
    ("p2", types_p2, "PATTERN SEQ(A a, B b, D d) WITHIN 499 CONTEXT unrestricted"),
)


def arrival(types, delay, late_share, seed):
    """The events (ts from 1) in arrival order: each at position ts + U[0, delay]; a share
    `late_share` of them at ts + 3·delay instead, which puts them more than `delay` behind the
    newest event before them. Returns the lines and how many are late."""
    rng = random.Random("arrival/%d/%d/%s" % (seed, delay, late_share))
    keyed = []
    late = 0
    for ts, t in enumerate(types, 1):
        if late_share and rng.random() < late_share and ts + 3 * delay < len(types) - delay:
            # Late for sure: the events before it hold every ts up to ts + 2·delay.
            key = ts + 3 * delay + 0.5
            late += 1
        else:
            key = ts + rng.uniform(0, delay)
        keyed.append((key, ts, t))
    keyed.sort()
    return ['{"type":"%s","ts":%d}\n' % (t, ts) for _, ts, t in keyed], late


def write(path, lines):
    with open(path, "w") as f:
        f.writelines(lines)


def streams(tmp, name, types, seed):
    """(stream label, file, max delay, late events expected)."""
    out = []
    path = os.path.join(tmp, name + "-sorted.jsonl")
    write(path, ['{"type":"%s","ts":%d}\n' % (t, ts) for ts, t in enumerate(types, 1)])
    out.append(("sorted", path, 0, 0))
    for d in DELAYS:
        lines, _ = arrival(types, d, 0, seed)
        path = os.path.join(tmp, "%s-d%d.jsonl" % (name, d))
        write(path, lines)
        out.append(("reordered D=%d" % d, path, d, 0))
    lines, late = arrival(types, LATE_DELAY, LATE_SHARE, seed)
    path = os.path.join(tmp, "%s-late.jsonl" % name)
    write(path, lines)
    out.append(("reordered D=%d, 1%% late" % LATE_DELAY, path, LATE_DELAY, late))
    return out


def run(args, engine, query, path, delay):
    cmd = [args.cepbus, "match", "--engine", engine, "--events", path, "--count",
           "--max-delay", str(delay), "--query", query]
    if args.cpu >= 0:
        cmd = ["taskset", "-c", str(args.cpu)] + cmd
    got = run_measured(cmd)
    cpu, _, rss_kb, stdout, stderr = got
    m = LATE_COUNT.search(stderr)
    return cpu, rss_kb, counted(stdout), int(m.group(1)) if m else 0


def measure(args, name, events, query, engine, variants):
    samples = {label: [] for label, *_ in variants}
    for r in range(args.repeat):
        order = variants if r % 2 == 0 else list(reversed(variants))
        for label, path, delay, late in order:
            cpu, rss, answer, seen_late = run(args, engine, query, path, delay)
            if seen_late != late:
                raise SystemExit("%s %s %s: %d late events reported, %d made late" % (
                    name, engine, label, seen_late, late))
            samples[label].append((cpu, rss, answer))
    sorted_answer = samples["sorted"][0][2]
    rows = []
    for label, _, delay, late in variants:
        answer = samples[label][0][2]
        if late == 0 and answer != sorted_answer:
            raise SystemExit("%s %s %s: matches %s differ from the sorted stream's %s" % (
                name, engine, label, answer, sorted_answer))
        cpu = statistics.median(s[0] for s in samples[label])
        rows.append({"bench": "event_time", "workload": name, "engine": engine,
                     "stream": label, "max_delay": delay, "events": events, "late": late,
                     "matches": answer[0], "seconds": round(cpu, 4),
                     "events_per_s": round(events / cpu),
                     "peak_rss_mb": round(max(s[1] for s in samples[label]) / 1024, 1)})
    base = rows[0]["events_per_s"]
    for row in rows:
        row["share_of_sorted"] = round(row["events_per_s"] / base, 3)
        print(json.dumps(row), flush=True)
    return rows


def rate(per_s):
    return "%.2fM" % (per_s / 1e6) if per_s >= 1e6 else "%dk" % round(per_s / 1e3)


def table(rows):
    labels = list(dict.fromkeys(r["stream"] for r in rows))
    out = ["| workload | engine | " + " | ".join(labels) + " |",
           "|---|---|" + "---|" * len(labels)]
    for (workload, engine) in dict.fromkeys((r["workload"], r["engine"]) for r in rows):
        cells = []
        for label in labels:
            r = next(x for x in rows if (x["workload"], x["engine"], x["stream"]) ==
                     (workload, engine, label))
            share = "" if label == "sorted" else " (%d %%)" % round(100 * r["share_of_sorted"])
            cells.append("%s ev/s%s, %.0f MB" % (rate(r["events_per_s"]), share, r["peak_rss_mb"]))
        out.append("| %s | %s | %s |" % (workload, engine, " | ".join(cells)))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cepbus", default=os.path.join("build", "release", "bus", "app", "cepbus"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--cpu", type=int, default=0, help="run every process on this CPU; -1: any")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, query in WORKLOADS:
            if only and name not in only:
                continue
            types = make(args.seed)
            variants = streams(tmp, name, types, args.seed)
            for engine in args.engines.split(","):
                rows += measure(args, name, len(types), query, engine, variants)
    print(table(rows))


if __name__ == "__main__":
    main()
