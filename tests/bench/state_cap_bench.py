#!/usr/bin/python3
"""One runaway key against a long window, with and without a cap on the state, in one run.

The scenario of a report to Flink's users (21.6 million partial matches on one key under a
six-hour window): --rate start events per second of event time, all on one key, for --hours
hours (ts in milliseconds), and an end event every --end-every seconds that completes the one
start whose id it names, so completions are rare. The query:

    PATTERN SEQ(Start s, End e) WHERE s.id = e.id WITHIN <hours in ms> PARTITION BY key

(CONTEXT unrestricted on the algebra engine, whose default recent context keeps one start and
so bounds the state by itself). The events are written once to a temporary file; each case runs
the whole `cepbus match --engine ENGINE --count` process on it, for each engine of --engines
(nfa, algebra, petri: the engines with caps on their partial matches):

- capped: the defaults (max_partition_partial_matches=1000000, state_policy=drop_oldest), or
  --cap N;
- uncapped: both caps at 10^12, as before caps existed.

Per case: events/s over the whole process (wall time); its RSS sampled every --sample seconds
with the event time reached (the share of the file the process has read); its CPU time per
event over each quarter of the event time (a cost per event that grows with the state shows
here); the matches; and how many partial matches the cap dropped (the process's own report). A case
that dropped nothing must find the matches of the uncapped case, or the run stops.

    tests/bench/state_cap_bench.py --cepbus build/release/bus/app/cepbus [--hours 6]
        [--rate 1000] [--end-every 600] [--cap N] [--only capped,uncapped] [--sample 1]
        [--engines nfa,algebra,petri]

Prints one JSON object per case, then a markdown table.
"""
import argparse
import json
import os
import re
import tempfile
import subprocess
import sys
import threading
import time


def write_events(path, hours, rate, end_every):
    """Writes the JSON lines in ts order: `rate` starts a second, an end every `end_every` s.
    Returns the number of events."""
    if rate > 1000 or 1000 % rate != 0:
        sys.exit("--rate must divide 1000 (one start per whole number of milliseconds)")
    step = 1000 // rate
    total_ms = int(hours * 3600 * 1000)
    end_ms = int(end_every * 1000)
    start_id = 0
    count = 0
    with open(path, "w") as f:
        chunk = []
        for ts in range(0, total_ms, step):
            chunk.append('{"type":"Start","ts":%d,"key":"hot","attrs":{"id":%d}}\n'
                         % (ts, start_id))
            start_id += 1
            if ts > 0 and ts % end_ms == 0:
                # completes the start of half an interval ago: one match
                chunk.append('{"type":"End","ts":%d,"key":"hot","attrs":{"id":%d}}\n'
                             % (ts, start_id - 1 - (end_ms // 2) // step))
            if len(chunk) >= 65536:
                count += len(chunk)
                f.write("".join(chunk))
                chunk = []
        count += len(chunk)
        f.write("".join(chunk))
    return count


def proc_sample(pid):
    """(RSS in KiB, CPU seconds, bytes read) of a live process, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with open("/proc/%d/io" % pid) as f:
            read = next(int(line.split()[1]) for line in f if line.startswith("rchar:"))
        return rss, cpu, read
    except (OSError, StopIteration):
        return None


def run_case(engine, name, args, options, path, count):
    window = int(args.hours * 3600 * 1000)
    query = "PATTERN SEQ(Start s, End e) WHERE s.id = e.id WITHIN %d PARTITION BY key" % window
    if engine == "algebra":
        query += " CONTEXT unrestricted"
    cmd = [args.cepbus, "match", "--engine", engine, "--count", "--query", query, "--events", path]
    for o in options:
        cmd += ["--option", o]
    size = os.path.getsize(path)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []
    done = threading.Event()

    def sample():
        while not done.wait(args.sample):
            s = proc_sample(proc.pid)
            if s is not None:
                rss, cpu, read = s
                samples.append({"s": round(time.monotonic() - started, 1),
                                "event_time_h": round(min(read / size, 1) * args.hours, 2),
                                "cpu_s": cpu, "rss_mb": round(rss / 1024, 1)})

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit("%s %s: cepbus match failed (%d): %s" % (engine, name, proc.returncode, err))
    matches = re.search(r'"matches":(\d+)', out)
    evicted = re.search(r"dropped or refused (\d+) partial matches", err)
    # CPU per event over each quarter of the event time, from the samples.
    per_quarter = []
    for q in range(4):
        part = [x for x in samples if q / 4 <= x["event_time_h"] / args.hours < (q + 1) / 4]
        if len(part) >= 2 and part[-1]["event_time_h"] > part[0]["event_time_h"]:
            events = (part[-1]["event_time_h"] - part[0]["event_time_h"]) / args.hours * count
            per_quarter.append(round((part[-1]["cpu_s"] - part[0]["cpu_s"]) / events * 1e6, 2))
        else:
            per_quarter.append(None)
    return {
        "engine": engine,
        "case": name,
        "options": options,
        "events": count,
        "event_time_hours": args.hours,
        "wall_s": round(wall, 2),
        "events_per_s": round(count / wall),
        "peak_rss_mb": round(max([x["rss_mb"] for x in samples] or [0]), 1),
        "cpu_us_per_event_by_quarter": per_quarter,
        "matches": int(matches.group(1)) if matches else None,
        "evicted": int(evicted.group(1)) if evicted else 0,
        "rss_samples": [{k: v for k, v in x.items() if k != "cpu_s"} for x in samples],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cepbus", required=True)
    ap.add_argument("--hours", type=float, default=6)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--end-every", type=float, default=600)
    ap.add_argument("--cap", type=int, default=None)
    ap.add_argument("--only", default="capped,uncapped")
    ap.add_argument("--sample", type=float, default=1.0)
    ap.add_argument("--engines", default="nfa,algebra,petri")
    args = ap.parse_args()
    cases = {
        "capped": ["max_partition_partial_matches=%d" % args.cap] if args.cap else [],
        "uncapped": ["max_partition_partial_matches=1000000000000",
                     "max_partial_matches=1000000000000"],
    }
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events.jsonl")
        count = write_events(path, args.hours, args.rate, args.end_every)
        for engine in args.engines.split(","):
            for name in args.only.split(","):
                r = run_case(engine, name, args, cases[name], path, count)
                print(json.dumps(r), flush=True)
                results.append(r)
    uncapped = {r["engine"]: r for r in results if r["case"] == "uncapped"}
    for r in results:
        if r["engine"] in uncapped and r["evicted"] == 0 and \
                r["matches"] != uncapped[r["engine"]]["matches"]:
            sys.exit("%s %s dropped nothing but found %s matches, uncapped %s"
                     % (r["engine"], r["case"], r["matches"], uncapped[r["engine"]]["matches"]))
    print()
    print("| engine | case | events | events/s | RSS at 1/4, 1/2, 3/4, 4/4 of the event time | "
          "CPU µs per event, by quarter | matches | dropped by the cap |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        rss = []
        for q in (0.25, 0.5, 0.75, 1.0):
            reached = [x["rss_mb"] for x in r["rss_samples"]
                       if x["event_time_h"] <= q * args.hours]
            rss.append("%.0f MB" % reached[-1] if reached else "-")
        cost = ", ".join("-" if c is None else "%.2f" % c for c in r["cpu_us_per_event_by_quarter"])
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["engine"], r["case"], f"{r['events']:,}", f"{r['events_per_s']:,}", ", ".join(rss), cost,
            r["matches"], f"{r['evicted']:,}"))


if __name__ == "__main__":
    main()
