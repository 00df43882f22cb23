#!/usr/bin/python3
"""What checkpointing a query once a second costs the running bus.

`cepbus run --exit-when-drained` on a generated descriptor, the whole process
as a user runs it:

    replay-source --(reliable route, the <journal>)--> cep query --> replay-sink

The same stream and query run twice per round: `checkpoint_interval=0` (the
reliable input acknowledged as the query takes it) and
`checkpoint_interval=MS` (its state stored with the acknowledgements every MS
milliseconds, docs/checkpoints.md "On the bus"), the two taking turns within a
round so that a slow spell of the machine hits both. Per setting the median
over --repeat rounds of wall-clock events/s and of CPU per event (user +
system; less disturbed by other load than wall time), the start-up of the
process measured with a one-event file and subtracted. Both runs must write
the same number of composites, or the run stops.

The replay source publishes as fast as it reads, and what the reliable
route's stage refuses under that flood is dropped (logged per event, counted
here as `refused`, median over the rounds): a run that refused many events
detected fewer, so its figures flatter it. The pile-up runs refuse some in
both settings, more when checkpointed.

Workloads (from engine_workloads.py): pileup, `SEQ(A a, B b, X x) WITHIN 1000`
over A and B (X never comes: partial matches pile up, the state a checkpoint
writes is at its largest); p2-uniform, P2's `SEQ(A a, B b, D d) WITHIN 499`
over A, B, C, D uniform (many composites, each held until its checkpoint).

    tests/bench/checkpoint_cost_bench.py --build build/test
        [--engines nfa,algebra,petri] [--only pileup,p2-uniform]
        [--scale 1.0] [--interval 1000] [--repeat 3] [--compare OTHER_BUILD]

--compare runs a second build (say, of the commit before a change) in the
same rounds, its runs taking turns with those of --build, and reports it as
well: a before/after under the same load.

Prints one JSON object per (workload, engine, build) with the slowdown of
the checkpointed run, then the markdown table of docs/checkpoints.md.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_workloads  # noqa: E402
from live_bus_bench import run_bus  # noqa: E402

# The query and the events of each workload (p2-uniform's 20,000 events make
# about 2.6 M composites, which the bus publishes one by one).
WORKLOADS = {
    "pileup": ("PATTERN SEQ(A a, B b, X x) WITHIN 1000 CONTEXT unrestricted", 1_000_000),
    "p2-uniform": ("PATTERN SEQ(A a, B b, D d) WITHIN 499 CONTEXT unrestricted", 20_000),
}


def write_stream(path, workload, n, seed):
    if workload == "pileup":
        types = engine_workloads.pileup_types(n, seed)
    else:
        rng = random.Random("p2/%d" % seed)
        types = [rng.choice("ABCD") for _ in range(n)]
    engine_workloads.write_types(path, types)


def descriptor(build, engine, query, events, sink, interval, journal):
    library = os.path.join(build, "plugins", "libcepbus_plugin_%s.so" % engine)
    capacity = 1 << 20
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<cepbus name="checkpoint-cost">
  <logging level="warning"/>
  <journal path="{journal}"/>
  <plugins><plugin name="{engine}" library="{library}"/></plugins>
  <routes default-flow="st">
    <route address="in.events" flow="reliable" qos="reliable"/>
  </routes>
  <service-assembly name="bench">
    <service-unit name="source" type="replay-source">
      <param name="file" value="{events}"/>
      <publish address="in.events"/>
    </service-unit>
    <service-unit name="cep" type="cep">
      <param name="capacity" value="{capacity}"/>
      <query name="q" engine="{engine}" input="in.events" output="out.matches">
        <option name="checkpoint_interval" value="{interval}"/>
        <text>{query}</text>
      </query>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="{sink}"/>
      <subscribe address="out.matches"/>
    </service-unit>
  </service-assembly>
</cepbus>
"""


def run_checkpointed(build, tmp, engine, query, events, interval):
    """Wall seconds, CPU seconds (user + system), composites and events
    refused of one run of `build` (its directory and its cepbus first)."""
    journal = os.path.join(tmp, "journal.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(journal + suffix):
            os.remove(journal + suffix)
    sink = os.path.join(tmp, "out.jsonl")
    xml = os.path.join(tmp, "bus.xml")
    with open(xml, "w") as f:
        f.write(descriptor(build[0], engine, query, events, sink, interval, journal))
    log = os.path.join(tmp, "bus.log")
    wall, cpu = run_bus(build[1], xml, log)
    with open(sink) as f:
        composites = sum(1 for _ in f)
    with open(log) as f:
        refused = sum(1 for line in f if ": refused by " in line)
    return wall, cpu, composites, refused


def measure(args, tmp, workload, engine):
    """One row per build: its runs take turns with the other build's."""
    query, n = WORKLOADS[workload]
    n = max(1, int(n * args.scale))
    events = os.path.join(tmp, "%s.jsonl" % workload)
    if not os.path.exists(events):
        write_stream(events, workload, n, args.seed)
    one = os.path.join(tmp, "%s-one.jsonl" % workload)
    if not os.path.exists(one):
        write_stream(one, workload, 1, args.seed)
    settings = [(b, s) for b in args.builds for s in (0, args.interval)]
    startup = {k: min(run_checkpointed(k[0], tmp, engine, query, one, k[1])[:2]
                      for _ in range(2))
               for k in settings}
    runs = {k: [] for k in settings}
    for _ in range(args.repeat):
        for k in settings:
            runs[k].append(run_checkpointed(k[0], tmp, engine, query, events, k[1]))
    composites = set()
    for k in settings:
        composites |= {r[2] for r in runs[k]}
    if len(composites) != 1:
        sys.exit("%s/%s: the runs disagree on the composites: %s" % (workload, engine, composites))
    rows = []
    for build in args.builds:
        row = {"bench": "checkpoint_cost", "workload": workload, "engine": engine,
               "build": build[2], "events": n, "interval_ms": args.interval,
               "repeat": args.repeat, "composites": next(iter(composites))}
        for s in (0, args.interval):
            wall = statistics.median(r[0] for r in runs[(build, s)]) - startup[(build, s)][0]
            cpu = statistics.median(r[1] for r in runs[(build, s)]) - startup[(build, s)][1]
            if wall <= 0 or cpu <= 0:
                sys.exit("%s/%s: the runs are no longer than the start-up; raise --scale"
                         % (workload, engine))
            key = "checkpointed" if s else "plain"
            row[key] = {"events_per_s": round(n / wall),
                        "cpu_us_per_event": round(cpu / n * 1e6, 3),
                        "refused": round(statistics.median(r[3] for r in runs[(build, s)]))}
        row["events_per_s_lost_pct"] = round(
            100 * (1 - row["checkpointed"]["events_per_s"] / row["plain"]["events_per_s"]), 1)
        row["cpu_added_pct"] = round(
            100 * (row["checkpointed"]["cpu_us_per_event"] / row["plain"]["cpu_us_per_event"]
                   - 1), 1)
        rows.append(row)
    return rows


def table(rows):
    lines = ["| workload | engine | build | events/s plain | events/s checkpointed | lost | "
             "CPU/event plain | CPU/event checkpointed | refused plain | refused checkpointed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %.1f %% | %.2f µs | %.2f µs | %s | %s |" % (
            r["workload"], r["engine"], r["build"], f"{r['plain']['events_per_s']:,}",
            f"{r['checkpointed']['events_per_s']:,}", r["events_per_s_lost_pct"],
            r["plain"]["cpu_us_per_event"], r["checkpointed"]["cpu_us_per_event"],
            f"{r['plain']['refused']:,}", f"{r['checkpointed']['refused']:,}"))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build/release")
    p.add_argument("--cepbus", help="default BUILD/bus/app/cepbus")
    p.add_argument("--compare", help="another build to run in the same rounds")
    p.add_argument("--engines", default="nfa,algebra,petri")
    p.add_argument("--only", default="pileup,p2-uniform")
    p.add_argument("--scale", type=float, default=1.0, help="times each workload's events")
    p.add_argument("--interval", type=int, default=1000, help="checkpoint_interval, ms")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    given = args.build
    args.build = os.path.abspath(args.build)
    args.cepbus = args.cepbus or os.path.join(args.build, "bus", "app", "cepbus")
    # (directory, cepbus, the name given on the command line)
    args.builds = [(args.build, args.cepbus, given)]
    if args.compare:
        other = os.path.abspath(args.compare)
        args.builds.append((other, os.path.join(other, "bus", "app", "cepbus"), args.compare))
    rows = []
    with tempfile.TemporaryDirectory(prefix="checkpoint-cost-") as tmp:
        for workload in args.only.split(","):
            for engine in args.engines.split(","):
                for row in measure(args, tmp, workload, engine):
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    print(table(rows))


if __name__ == "__main__":
    main()
