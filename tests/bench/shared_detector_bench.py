#!/usr/bin/env python3
"""A cep unit of many queries on one input on the live bus: one shared
detector against one detector per query.

`cepbus run --exit-when-drained` on a generated descriptor (the pipeline of
live_bus_bench.py, whose event files and process timing it reuses):

    replay-source --route (seda "dispatch")--> cep unit of N queries --> replay-sink

four ways, each a separate process run at full speed:

- shared: every query engine="auto", as a unit deploys them: one detector,
  the merged Petri net auto picks for N patterns;
- nfa-shared: engine="nfa": one detector, one NFA per query behind the
  default createMany fan-out (what one endpoint and stage save, without the
  merged net);
- auto-each: engine="auto" with share_detector=false, what a unit ran
  before queries shared detectors: auto decides per query (one Petri net
  each here: every pattern filters its first variable), one endpoint,
  stage and thread per query;
- nfa-each: engine="nfa" with share_detector=false: one NFA, endpoint,
  stage and thread per query.

Events/s over the input (start-up and shut-down measured with a one-event
file and subtracted), CPU per event (user + system, start-up subtracted) and
the composites the sink wrote (equal for all: same matches). Best of
--repeat runs, the settings interleaved. A diagnostic: on a shared machine
single runs move by tens of per cent.

    tests/bench/shared_detector_bench.py --build build/dev [--queries 40]
        [--events 100000] [--repeat 3]
"""

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_bus_bench import run_bus, write_events  # noqa: E402

PAIRS = ["A a, B b", "B a, C b", "A a, C b", "C a, A b", "B a, A b"]
SETTINGS = {
    "shared": ("auto", ""),
    "nfa-shared": ("nfa", ""),
    "auto-each": ("auto", '<option name="share_detector" value="false"/>'),
    "nfa-each": ("nfa", '<option name="share_detector" value="false"/>'),
}


def descriptor(events, sink, queries, setting):
    engine, option = SETTINGS[setting]
    capacity = 1 << 20
    text = []
    for i in range(queries):
        text.append(f"""      <query name="q{i}" engine="{engine}" input="in.events" output="out.matches">
        {option}
        <text>PATTERN SEQ({PAIRS[i % len(PAIRS)]}) WHERE a.x = {i % 10} AND b.x = {(i // 10) % 10}
          WITHIN 10 RETURN M{i}(a.ts, b.ts)</text>
      </query>""")
    queries_xml = "\n".join(text)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<cepbus name="shared-bench">
  <logging level="warning"/>
  <stages>
    <stage name="dispatch" capacity="{capacity}" min-threads="1" max-threads="1"/>
  </stages>
  <routes default-flow="st">
    <route address="in.events" flow="seda" stage="dispatch"/>
  </routes>
  <service-assembly name="bench">
    <service-unit name="source" type="replay-source">
      <param name="file" value="{events}"/>
      <param name="rate" value="0"/>
      <publish address="in.events"/>
    </service-unit>
    <service-unit name="cep" type="cep">
      <param name="capacity" value="{capacity}"/>
{queries_xml}
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="{sink}"/>
      <subscribe address="out.matches"/>
    </service-unit>
  </service-assembly>
</cepbus>
"""


def run(args, tmp, setting, n):
    events = os.path.join(tmp, "events-%d.jsonl" % n)
    if not os.path.exists(events):
        write_events(events, "nfa", n)
    sink = os.path.join(tmp, "out.jsonl")
    xml = os.path.join(tmp, "bus.xml")
    with open(xml, "w") as f:
        f.write(descriptor(events, sink, args.queries, setting))
    seconds, cpu = run_bus(args.cepbus, xml)
    with open(sink) as f:
        matches = sum(1 for _ in f)
    return seconds, cpu, matches


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build/dev")
    p.add_argument("--cepbus", help="default BUILD/bus/app/cepbus")
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    args.cepbus = args.cepbus or os.path.join(args.build, "bus", "app", "cepbus")
    with tempfile.TemporaryDirectory(prefix="shared-detector-bench-") as tmp:
        runs = {setting: [] for setting in SETTINGS}
        startups = {setting: [] for setting in SETTINGS}
        # Interleaved, so that load from elsewhere falls on every setting.
        for _ in range(args.repeat):
            for setting in SETTINGS:
                startups[setting].append(run(args, tmp, setting, 1))
                runs[setting].append(run(args, tmp, setting, args.events))
        for setting in SETTINGS:
            startup = min(r[0] for r in startups[setting])
            startup_cpu = min(r[1] for r in startups[setting])
            seconds, _, matches = min(runs[setting])
            cpu = min(r[1] for r in runs[setting])
            print(json.dumps({"bench": "shared_detector_throughput",
                              "params": {"setting": setting, "queries": args.queries,
                                         "events": args.events},
                              "seconds": round(seconds, 3),
                              "startup_seconds": round(startup, 3),
                              "events_per_s": round(args.events / max(seconds - startup, 1e-9)),
                              "cpu_us_per_event":
                                  round((cpu - startup_cpu) / args.events * 1e6, 2),
                              "matches": matches}), flush=True)


if __name__ == "__main__":
    main()
