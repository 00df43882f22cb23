#!/usr/bin/python3
"""Every engine on the workloads CEP engines are judged by, in one run.

Each workload is a stream and a query (or a patterns file) run as a user runs
it: one whole `cepbus match --engine E --count` process per engine and round,
its CPU time (user + system) and peak resident set taken from the process's
own resource usage. Per engine the median time over --repeat rounds (the
engines take turns within a round, so a slow spell of the machine hits them
alike) and the largest peak RSS; events/s and matches/s over that median.
Every engine must report the same matches and checksum as the first one, or
the run stops: a faster engine with other answers measures nothing.

Workloads (every query says CONTEXT unrestricted, so algebra reports every
match as nfa and petri do):
- pileup: `SEQ(A a, B b, X x) WITHIN 1000` over 1 M events of A and B (half
  each, random), X never occurs: partial matches pile up, none completes.
  pileup-quarter runs the first quarter of the same stream, so that peak RSS
  of the two shows whether memory follows the window or the stream.
- p2-uniform: P2's `SEQ(A a, B b, D d) WITHIN 499` over 20 k events of A, B,
  C, D uniform; p2-effective / p2-ineffective: P2's clustering-effective
  (a b b b d d d d d d ...) and -ineffective (a b d b d ...) streams, 10 k
  events, `WITHIN 999` (P2's window 1000). p2-kleene-any / -next: P2's
  query with a Kleene element, `SEQ(A a, B+ b[], D d) WITHIN 20`, over the
  uniform stream under skip-till-any-match (every subset of the B's between
  an A and a D) and skip-till-next-match.
- rising-any / rising-next / rising-strict: docs/pattern-language.md's rising
  run (`Stock+ b[]` with `b[i].price > b[i-1].price`, PARTITION BY symbol)
  under each strategy, over 100 ticks of three symbols whose prices take
  random steps (a Kleene run under skip-till-any-match has exponentially
  many subsets). quickstart-any / -next / -strict: the same query over the
  600 ticks of examples/quickstart/stocks.jsonl (the stream the docs run it
  on).
- stock-xN: P3's experiment, SASE's equal-price pattern over three stocks
  (rounds of IBM, SUN, ORCL at one price each, WITHIN 10) replicated N times
  in one patterns file: nfa runs one NFA per pattern, petri one merged net.
  100,000 rounds rather than P3's 3,000, so that a process's time is not
  its start-up.
- pileup-xN: N pile-up-shaped patterns `SEQ(A a, B b, Xi x) WITHIN 1000`
  (Xi absent) over the pile-up stream.
- absence: trailing negation `SEQ(A a, NOT(B b)) WITHIN 1000` over 1 M
  events, 5 % B (random), each A's match waiting until time passes
  a.ts + 1000; absence-quarter runs the first quarter of the same stream, so
  that events/s and peak RSS of the two show whether they follow the window
  or the stream. On every pattern engine: the nfa runs the NOT itself, the
  host runs it around algebra and petri.

    tests/bench/engine_workloads.py --cepbus build/release/bus/app/cepbus
        [--repeat 3] [--only pileup,p2-uniform,...] [--engines nfa,algebra,petri]
        [--timeout 120] [--cpu 0] [--seed 7] [--plugin-path DIR]

Prints one JSON object per (workload, engine), then the markdown table of
docs/engines.md ("Engines on the hard workloads"). A process that runs past
--timeout seconds of CPU is killed and reported as such ("timeout": true).
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

ENGINES = ("nfa", "petri", "algebra")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PILEUP_EVENTS = 1_000_000
STOCK_QUERY = ("PATTERN SEQ(Stock a, Stock b, Stock c) WHERE a.price = b.price AND "
               "b.price = c.price AND a.symbol != b.symbol AND b.symbol != c.symbol AND "
               "a.symbol != c.symbol WITHIN 10 CONTEXT unrestricted "
               "RETURN EqualPrices(a.symbol, b.symbol, c.symbol, a.price)")
P2_KLEENE_QUERY = ("PATTERN SEQ(A a, B+ b[], D d) WITHIN 20 CONTEXT unrestricted "
                   "STRATEGY %s")
RISING_QUERY = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) "
                "WHERE b[i].price > b[i-1].price AND b[i].symbol = a.symbol "
                "AND c.symbol = a.symbol AND c.price < b[1].price AND count(b[]) >= 3 "
                "WITHIN 500 PARTITION BY symbol CONTEXT unrestricted STRATEGY %s "
                "RETURN Run(a.symbol, b[last].price AS top, avg(b[].price) AS mean)")


def write_types(path, types):
    with open(path, "w") as f:
        for ts, t in enumerate(types, 1):
            f.write('{"type":"%s","ts":%d}\n' % (t, ts))


def pileup_types(n, seed):
    rng = random.Random("pileup/%d" % seed)
    return [rng.choice("AB") for _ in range(n)]


def motif(m, n):
    return [m[i % len(m)].upper() for i in range(n)]


def write_stocks(path, rounds):
    with open(path, "w") as f:
        for i in range(3 * rounds):
            f.write('{"type":"Stock","ts":%d,"attrs":{"symbol":"%s","price":%d}}\n' % (
                i + 1, ("IBM", "SUN", "ORCL")[i % 3], 100 + i // 3))


def write_rising(path, ticks, seed):
    rng = random.Random("rising/%d" % seed)
    price = {"IBM": 100, "SUN": 100, "ORCL": 100}
    with open(path, "w") as f:
        for ts in range(1, ticks + 1):
            s = rng.choice(sorted(price))
            price[s] = max(1, price[s] + rng.choice((-3, -2, -1, 1, 2, 3)))
            f.write('{"type":"Stock","ts":%d,"attrs":{"symbol":"%s","price":%d}}\n' % (
                ts, s, price[s]))


def write_patterns(path, queries):
    with open(path, "w") as f:
        for i, q in enumerate(queries, 1):
            f.write("p%d: %s\n" % (i, q))


def workloads(tmp, seed):
    """(name, events file, event count, ["--query", q] or ["--patterns", file], engines)."""
    out = []
    pileup = os.path.join(tmp, "pileup.jsonl")
    types = pileup_types(PILEUP_EVENTS, seed)
    write_types(pileup, types)
    quarter = os.path.join(tmp, "pileup-quarter.jsonl")
    write_types(quarter, types[:PILEUP_EVENTS // 4])
    pq = "PATTERN SEQ(A a, B b, X x) WITHIN 1000 CONTEXT unrestricted"
    out.append(("pileup", pileup, PILEUP_EVENTS, ["--query", pq], ENGINES))
    out.append(("pileup-quarter", quarter, PILEUP_EVENTS // 4, ["--query", pq], ENGINES))

    p2 = "PATTERN SEQ(A a, B b, D d) WITHIN %d CONTEXT unrestricted"
    uniform = os.path.join(tmp, "p2-uniform.jsonl")
    rng = random.Random("p2/%d" % seed)
    write_types(uniform, [rng.choice("ABCD") for _ in range(20000)])
    out.append(("p2-uniform", uniform, 20000, ["--query", p2 % 499], ENGINES))
    for name, strategy in (("p2-kleene-any", "skip-till-any-match"),
                           ("p2-kleene-next", "skip-till-next-match")):
        out.append((name, uniform, 20000, ["--query", P2_KLEENE_QUERY % strategy], ENGINES))
    for name, m in (("p2-effective", "abbbdddddd"), ("p2-ineffective", "abdbd")):
        path = os.path.join(tmp, name + ".jsonl")
        write_types(path, motif(m, 10000))
        out.append((name, path, 10000, ["--query", p2 % 999], ENGINES))

    rising = os.path.join(tmp, "rising.jsonl")
    write_rising(rising, 100, seed)
    for name, strategy in (("rising-any", "skip-till-any-match"),
                           ("rising-next", "skip-till-next-match"),
                           ("rising-strict", "strict-contiguity")):
        out.append((name, rising, 100, ["--query", RISING_QUERY % strategy], ENGINES))
    ticks = os.path.join(REPO, "examples", "quickstart", "stocks.jsonl")
    with open(ticks) as f:
        n_ticks = sum(1 for _ in f)
    for name, strategy in (("quickstart-any", "skip-till-any-match"),
                           ("quickstart-next", "skip-till-next-match"),
                           ("quickstart-strict", "strict-contiguity")):
        out.append((name, ticks, n_ticks, ["--query", RISING_QUERY % strategy], ENGINES))

    stocks = os.path.join(tmp, "stocks.jsonl")
    write_stocks(stocks, 100000)
    for n in (10, 20, 50):
        path = os.path.join(tmp, "stock-x%d.txt" % n)
        write_patterns(path, [STOCK_QUERY] * n)
        out.append(("stock-x%d" % n, stocks, 300000, ["--patterns", path], ("nfa", "petri")))
    for n in (20, 50):
        path = os.path.join(tmp, "pileup-x%d.txt" % n)
        write_patterns(path, ["PATTERN SEQ(A a, B b, X%d x) WITHIN 1000 CONTEXT unrestricted" % i
                              for i in range(1, n + 1)])
        out.append(("pileup-x%d" % n, pileup, PILEUP_EVENTS, ["--patterns", path],
                    ("nfa", "petri")))
    absence = os.path.join(tmp, "absence.jsonl")
    rng = random.Random("absence/%d" % seed)
    types = ["B" if rng.random() < 0.05 else "A" for _ in range(PILEUP_EVENTS)]
    write_types(absence, types)
    absence_quarter = os.path.join(tmp, "absence-quarter.jsonl")
    write_types(absence_quarter, types[:PILEUP_EVENTS // 4])
    aq = "PATTERN SEQ(A a, NOT(B b)) WITHIN 1000"
    out.append(("absence", absence, PILEUP_EVENTS, ["--query", aq], ("nfa", "petri", "algebra")))
    out.append(("absence-quarter", absence_quarter, PILEUP_EVENTS // 4, ["--query", aq],
                ("nfa", "petri", "algebra")))
    return out


def measure(args, name, events_path, events, source, engines):
    """Each engine's median over the rounds; stops when two engines' answers differ."""
    runs = {e: [] for e in engines}
    answer = {}
    timed_out = set()
    for r in range(args.repeat):
        order = engines if r % 2 == 0 else tuple(reversed(engines))
        for engine in order:
            if engine in timed_out:
                continue
            cmd = [args.cepbus, "match", "--engine", engine, "--events", events_path,
                   "--count"] + source
            if args.plugin_path:
                cmd += ["--plugin-path", args.plugin_path]
            if args.cpu >= 0:
                cmd = ["taskset", "-c", str(args.cpu)] + cmd
            got = run_measured(cmd, args.timeout)
            if got is None:
                timed_out.add(engine)
                continue
            cpu, wall, rss_kb, stdout, _ = got
            answer[engine] = counted(stdout)
            runs[engine].append((cpu, wall, rss_kb))
    answers = set(answer.values())
    if len(answers) > 1:
        raise SystemExit("%s: the engines disagree: %s" % (name, answer))
    rows = []
    for engine in engines:
        row = {"bench": "engine_workloads", "workload": name, "engine": engine,
               "events": events}
        if engine in timed_out:
            row.update({"timeout": True, "seconds": args.timeout})
        else:
            matches, checksum = answer[engine]
            cpu = statistics.median(r[0] for r in runs[engine])
            row.update({
                "matches": matches, "checksum": checksum, "seconds": round(cpu, 4),
                "wall_seconds": round(statistics.median(r[1] for r in runs[engine]), 4),
                "events_per_s": round(events / cpu), "matches_per_s": round(matches / cpu),
                "peak_rss_mb": round(max(r[2] for r in runs[engine]) / 1024, 1),
                "rounds": len(runs[engine])})
        rows.append(row)
    base = next((r for r in rows if r["engine"] == "nfa" and not r.get("timeout")), None)
    for row in rows:
        if base is not None and not row.get("timeout"):
            row["time_vs_nfa"] = round(row["seconds"] / base["seconds"], 2)
        print(json.dumps(row), flush=True)
    return rows


def cell(row):
    if row is None:
        return "—"
    if row.get("timeout"):
        return "> %d s" % row["seconds"]
    rate = row["events_per_s"]
    text = "%.2f s, %s ev/s, %.0f MB" % (
        row["seconds"], "%.2fM" % (rate / 1e6) if rate >= 1e6 else
        "%.0fk" % (rate / 1e3) if rate >= 1e4 else "%d" % rate,
        row["peak_rss_mb"])
    if row["engine"] != "nfa" and "time_vs_nfa" in row:
        text += " (×%.1f)" % row["time_vs_nfa"]
    return text


def table(all_rows):
    lines = ["| workload | events | matches | nfa | petri | algebra |", "|---|---|---|---|---|---|"]
    for name, rows in all_rows:
        by = {r["engine"]: r for r in rows}
        matches = next((r["matches"] for r in rows if "matches" in r), None)
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            name, "{:,}".format(rows[0]["events"]),
            "—" if matches is None else "{:,}".format(matches),
            cell(by.get("nfa")), cell(by.get("petri")), cell(by.get("algebra"))))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cepbus", default=os.path.join("build", "release", "bus", "app", "cepbus"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--cpu", type=int, default=0, help="run every process on this CPU; -1: any")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--plugin-path", default="", help="load the engines from this directory")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    wanted = set(args.engines.split(","))
    all_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, events, source, engines in workloads(tmp, args.seed):
            if only and name not in only:
                continue
            engines = tuple(e for e in engines if e in wanted)
            all_rows.append((name, measure(args, name, path, events, source, engines)))
    print(table(all_rows))


if __name__ == "__main__":
    main()
