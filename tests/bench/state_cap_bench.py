#!/usr/bin/python3
"""One runaway key against a long window, with and without a cap on the state, in one run.

The scenario of a report to Flink's users (21.6 million partial matches on one key under a
six-hour window): --rate start events per second of event time, all on one key, for --hours
hours (ts in milliseconds), and an end event every --end-every seconds that completes the one
start whose id it names, so completions are rare. The query:

    PATTERN SEQ(Start s, End e) WHERE s.id = e.id WITHIN <hours in ms> PARTITION BY key

Each case runs the whole `cepbus match --engine nfa --count` process on the events, piped from
this script as they are generated (nothing is written to disk):

- capped: the defaults (max_partition_partial_matches=1000000, state_policy=drop_oldest), or
  --cap N;
- uncapped: both caps at 10^12, as before caps existed.

Per case: events/s over the whole process (wall time), its CPU time, its peak RSS, its RSS
sampled every --sample seconds with the event time reached (read off the generator), the
matches, and how many partial matches the cap dropped (from the process's own report). A case
that dropped nothing must find the matches of the uncapped case, or the run stops.

    tests/bench/state_cap_bench.py --cepbus build/release/bus/app/cepbus [--hours 6]
        [--rate 1000] [--end-every 600] [--cap N] [--only capped,uncapped] [--sample 1]

Prints one JSON object per case, then a markdown table.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time


def events(hours, rate, end_every):
    """Yields the JSON lines in ts order: `rate` starts a second, an end every `end_every` s."""
    step = 1000 // rate if rate <= 1000 else None
    if step is None or 1000 % rate != 0:
        sys.exit("--rate must divide 1000 (one start per whole number of milliseconds)")
    total_ms = int(hours * 3600 * 1000)
    end_ms = int(end_every * 1000)
    start_id = 0
    chunk = []
    for ts in range(0, total_ms, step):
        chunk.append('{"type":"Start","ts":%d,"key":"hot","attrs":{"id":%d}}\n' % (ts, start_id))
        start_id += 1
        if ts > 0 and ts % end_ms == 0:
            # completes the start of half an interval ago: within the window, one match
            chunk.append('{"type":"End","ts":%d,"key":"hot","attrs":{"id":%d}}\n'
                         % (ts, start_id - 1 - (end_ms // 2) // step))
        if len(chunk) >= 8192:
            yield ts, "".join(chunk)
            chunk = []
    if chunk:
        yield total_ms, "".join(chunk)


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run_case(name, args, options):
    window = int(args.hours * 3600 * 1000)
    query = "PATTERN SEQ(Start s, End e) WHERE s.id = e.id WITHIN %d PARTITION BY key" % window
    cmd = [args.cepbus, "match", "--engine", "nfa", "--count", "--query", query, "--events", "-"]
    for o in options:
        cmd += ["--option", o]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    reached = [0]
    samples = []
    done = threading.Event()

    def sample():
        while not done.wait(args.sample):
            kib = rss_kib(proc.pid)
            if kib is not None:
                samples.append({"s": round(time.monotonic() - started, 1),
                                "event_time_h": round(reached[0] / 3.6e6, 2),
                                "rss_mb": round(kib / 1024, 1)})

    sampler = threading.Thread(target=sample)
    sampler.start()
    count = 0
    for ts, text in events(args.hours, args.rate, args.end_every):
        proc.stdin.write(text)
        count += text.count("\n")
        reached[0] = ts
    proc.stdin.close()
    out = proc.stdout.read()
    err = proc.stderr.read()
    proc.wait()
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit("%s: cepbus match failed (%d): %s" % (name, proc.returncode, err))
    matches = re.search(r'"matches":(\d+)', out)
    evicted = re.search(r"dropped or refused (\d+) partial matches", err)
    return {
        "case": name,
        "options": options,
        "events": count,
        "event_time_hours": args.hours,
        "wall_s": round(wall, 2),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
        "events_per_s": round(count / wall),
        "peak_rss_mb": round(after.ru_maxrss / 1024, 1),
        "matches": int(matches.group(1)) if matches else None,
        "evicted": int(evicted.group(1)) if evicted else 0,
        "rss_samples": samples,
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
    args = ap.parse_args()
    cases = {
        "capped": ["max_partition_partial_matches=%d" % args.cap] if args.cap else [],
        "uncapped": ["max_partition_partial_matches=1000000000000",
                     "max_partial_matches=1000000000000"],
    }
    results = []
    for name in args.only.split(","):
        r = run_case(name, args, cases[name])
        print(json.dumps(r), flush=True)
        results.append(r)
    by_name = {r["case"]: r for r in results}
    if "uncapped" in by_name:
        for r in results:
            if r["evicted"] == 0 and r["matches"] != by_name["uncapped"]["matches"]:
                sys.exit("%s dropped nothing but found %s matches, uncapped %s"
                         % (r["case"], r["matches"], by_name["uncapped"]["matches"]))
    print()
    print("| case | events | events/s | CPU s | peak RSS | RSS at 1/4, 1/2, 3/4 of the run | "
          "matches | dropped by the cap |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        s = r["rss_samples"]
        quarters = ", ".join("%.0f MB" % s[int(len(s) * q)]["rss_mb"] for q in (0.25, 0.5, 0.75)) \
            if len(s) >= 4 else "-"
        print("| %s | %s | %s | %.1f | %.0f MB | %s | %s | %s |" % (
            r["case"], f"{r['events']:,}", f"{r['events_per_s']:,}", r["cpu_s"],
            r["peak_rss_mb"], quarters, r["matches"], f"{r['evicted']:,}"))


if __name__ == "__main__":
    main()
