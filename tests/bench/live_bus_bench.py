#!/usr/bin/env python3
"""The live bus as a user runs it, with and without batched detection.

`cepbus run --exit-when-drained` on a generated descriptor:

    replay-source --route (flow seda, stage "dispatch")--> cep query --> replay-sink

for the nfa, petri and join engines. Two measurements per engine, each a
separate process run of a few seconds:

- throughput: the source at full speed; events/s for each value of the cep
  unit's `batch_size` param (64, the default, and 1: the same binary feeding
  its detector one event per call). Stages are sized to hold every event, so
  none is refused and both runs detect the same matches. The start-up and
  shut-down of the process are measured with a one-event file and
  subtracted; each figure is the best of --repeat runs, the two settings
  interleaved. CPU per event (user + system of the process, start-up
  subtracted) is printed too: it is less disturbed by other load than wall
  time.
- latency: the source paced to --rates events/s; the sink also subscribes to
  the input, writes every line to stdout as it is delivered, and this driver
  stamps each line as it reads it. The latency of a composite is its line's
  stamp minus the stamp of its last constituent's line (both leave the bus
  through the same sink and pipe). p50/p99 over every composite, for each
  batch_size.

Prints one JSON object per measurement and, for throughput, the ratio of
batched to per-event events/s.

    tests/bench/live_bus_bench.py --build build/dev [--engines nfa,petri,join]
        [--events 300000] [--rates 1000,10000] [--seconds 3] [--batches 64,1]
        [--repeat 3]
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

QUERIES = {
    "nfa": ("PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 10 "
            "RETURN Pair(a.x, a.ts, b.ts)", ""),
    "petri": ("PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 10 "
              "RETURN Pair(a.x, a.ts, b.ts)", ""),
    "join": ("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate WITHIN 10 "
             "RETURN Clone(a.plate, a.ts, b.ts)",
             '<option name="threshold" value="0.5"/>'),
}


def write_events(path, engine, n, seed=42):
    """One event per time step: A/B/C with x in 0..9 (SEQ), or readings of
    one of 200 plates (join)."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for ts in range(n):
            if engine == "join":
                f.write('{"type":"Reading","ts":%d,"attrs":{"plate":"P%d"}}\n'
                        % (ts, rng.randrange(200)))
            else:
                f.write('{"type":"%s","ts":%d,"attrs":{"x":%d}}\n'
                        % ("ABC"[rng.randrange(3)], ts, rng.randrange(10)))


def descriptor(build, engine, events, sink_file, batch, rate, echo_input):
    text, options = QUERIES[engine]
    library = os.path.join(build, "plugins", "libcepbus_plugin_%s.so" % engine)
    capacity = 1 << 20
    echo = '<subscribe address="in.events"/>' if echo_input else ""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<cepbus name="live-bench">
  <logging level="warning"/>
  <stages>
    <stage name="dispatch" capacity="{capacity}" min-threads="1" max-threads="1"/>
  </stages>
  <plugins><plugin name="{engine}" library="{library}"/></plugins>
  <routes default-flow="st">
    <route address="in.events" flow="seda" stage="dispatch"/>
  </routes>
  <service-assembly name="bench">
    <service-unit name="source" type="replay-source">
      <param name="file" value="{events}"/>
      <param name="rate" value="{rate}"/>
      <publish address="in.events"/>
    </service-unit>
    <service-unit name="cep" type="cep">
      <param name="capacity" value="{capacity}"/>
      <param name="batch_size" value="{batch}"/>
      <query name="q" engine="{engine}" input="in.events" output="out.matches">
        {options}
        <text>{text}</text>
      </query>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="{sink_file}"/>
      <subscribe address="out.matches"/>
      {echo}
    </service-unit>
  </service-assembly>
</cepbus>
"""


def run_bus(cepbus, xml_path, log=None):
    """Wall seconds and CPU seconds (user + system) of one `cepbus run`;
    its stderr goes to the file `log` when given."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    err = open(log, "w") if log else None
    try:
        subprocess.run([cepbus, "run", "--exit-when-drained", xml_path], check=True,
                       stdout=subprocess.DEVNULL, stderr=err)
    finally:
        if err:
            err.close()
    wall = time.monotonic() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return wall, cpu


def throughput(args, tmp, engine, batch, n):
    events = os.path.join(tmp, "%s-%d.jsonl" % (engine, n))
    if not os.path.exists(events):
        write_events(events, engine, n)
    sink = os.path.join(tmp, "out.jsonl")
    xml = os.path.join(tmp, "bus.xml")
    with open(xml, "w") as f:
        f.write(descriptor(args.build, engine, events, sink, batch, 0, False))
    seconds, cpu = run_bus(args.cepbus, xml)
    with open(sink) as f:
        matches = sum(1 for _ in f)
    return seconds, cpu, matches


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def latency(args, tmp, engine, rate, batch):
    n = int(rate * args.seconds)
    events = os.path.join(tmp, "%s-paced-%d.jsonl" % (engine, n))
    if not os.path.exists(events):
        write_events(events, engine, n)
    xml = os.path.join(tmp, "bus.xml")
    with open(xml, "w") as f:
        f.write(descriptor(args.build, engine, events, "-", batch, rate, True))
    arrived = {}  # input ts -> when its line was read
    composites = []  # (when its line was read, ts of its last constituent)
    proc = subprocess.Popen([args.cepbus, "run", "--exit-when-drained", xml],
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    for line in proc.stdout:
        now = time.monotonic()
        event = json.loads(line)
        attrs = event.get("attrs", {})
        if "a_ts" in attrs:
            composites.append((now, max(attrs["a_ts"], attrs["b_ts"])))
        else:
            arrived[event["ts"]] = now
    if proc.wait() != 0:
        sys.exit("cepbus run failed for %s at %d events/s" % (engine, rate))
    # The sink may write a composite before the input line of its last
    # constituent (both leave the dispatch stage's worker): latency 0 then.
    samples = sorted(max(0.0, when - arrived[last]) for when, last in composites)
    return {"bench": "live_bus_latency",
            "params": {"engine": engine, "rate": rate, "events": n, "batch_size": batch},
            "composites": len(samples),
            "composite_before_input": sum(1 for when, last in composites
                                          if when < arrived[last]),
            "p50_us": round(percentile(samples, 0.50) * 1e6) if samples else None,
            "p99_us": round(percentile(samples, 0.99) * 1e6) if samples else None}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build/dev")
    p.add_argument("--cepbus", help="default BUILD/bus/app/cepbus")
    p.add_argument("--engines", default="nfa,petri,join")
    p.add_argument("--events", type=int, default=300_000)
    p.add_argument("--batches", default="64,1")
    p.add_argument("--rates", default="1000,10000")
    p.add_argument("--seconds", type=float, default=3)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    args.cepbus = args.cepbus or os.path.join(args.build, "bus", "app", "cepbus")
    args.batches = [int(b) for b in args.batches.split(",")]
    with tempfile.TemporaryDirectory(prefix="live-bus-bench-") as tmp:
        for engine in args.engines.split(","):
            startups = [throughput(args, tmp, engine, args.batches[0], 1)
                        for _ in range(args.repeat)]
            startup = min(r[0] for r in startups)
            startup_cpu = min(r[1] for r in startups)
            # Interleaved, so that load from elsewhere falls on both settings.
            runs = {batch: [] for batch in args.batches}
            for _ in range(args.repeat):
                for batch in args.batches:
                    runs[batch].append(throughput(args, tmp, engine, batch, args.events))
            rates = {}
            for batch in args.batches:
                seconds, _, matches = min(runs[batch])
                cpu = min(r[1] for r in runs[batch])
                rates[batch] = args.events / max(seconds - startup, 1e-9)
                print(json.dumps({"bench": "live_bus_throughput",
                                  "params": {"engine": engine, "events": args.events,
                                             "batch_size": batch},
                                  "seconds": round(seconds, 3),
                                  "startup_seconds": round(startup, 3),
                                  "events_per_s": round(rates[batch]),
                                  "cpu_us_per_event":
                                      round((cpu - startup_cpu) / args.events * 1e6, 2),
                                  "matches": matches}), flush=True)
            if len(args.batches) > 1:
                print(json.dumps({"bench": "live_bus_throughput_ratio",
                                  "params": {"engine": engine,
                                             "batch_sizes": args.batches[:2]},
                                  "ratio": round(rates[args.batches[0]] /
                                                 rates[args.batches[1]], 3)}), flush=True)
            for rate in (int(r) for r in args.rates.split(",")):
                for batch in args.batches:
                    print(json.dumps(latency(args, tmp, engine, rate, batch)), flush=True)


if __name__ == "__main__":
    main()
