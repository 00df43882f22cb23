#!/usr/bin/python3
"""Engine sweep: how engine="auto" compares with the best engine.

For every query shape and pattern count it writes a patterns file of that
many distinct queries over one generated event stream and runs the real
`cepbus match`: `--engine all` (nfa, algebra and petri in one process on
the same events; each engine's detection time, the best of --repeat runs;
the run fails unless every accepting engine reports the same matches), then
`--engine auto --count` (the engine it picks, from its stderr, and its
matches, checked equal to that engine's). Auto's time is the time of the
engine it picked; "auto / best" divides it by the fastest engine's. Prints
one JSON object per point, a summary object, then the markdown table of
docs/engines.md ("Choosing an engine: auto").

Auto decides by a trial (nfa against petri on the first events, the cheaper
kept; plugin/trial_detector.h): its engine is the one the trial kept (the
static pick when the stream ends within the trial), and its time is that
engine's plus what the dropped engine spent in the trial (both from the
"cepbus match: trial kept ..." line), so the trial's overhead is counted.
--process-cpu also times whole `cepbus match --count` processes (reading
the events included), auto against the engine it kept, best of --repeat.

`--stream dense` replaces the sparse 8-type stream by one of a single type
(`Stock`: 3 symbols, 30 prices, one tick per time unit) and the shapes by
`prices`, P3's equal-prices pattern with windows 20, 21, ... (one per
pattern): where the nfa's partitioned stacks beat the merged net below
about 10 patterns.

    tests/bench/engine_sweep.py --cepbus build/dev/bus/app/cepbus
        [--events 50000] [--counts 1,2,5,10,20,50,100]
        [--shapes seq2,seq4,kleene,negation,predicates,equal,chain] [--repeat 5]
        [--seed 7]
        [--clock cpu|wall] [--stream sparse|dense] [--process-cpu]

Engines are compared by the process's CPU time during detection (`--clock
cpu`, the default: every pattern engine detects on one thread, so on an idle
machine it equals the wall time, and on a loaded one it is far steadier);
`--clock wall` compares wall times.

Every query says CONTEXT unrestricted, so the algebra engine reports every
match as nfa and petri do (its default, recent, keeps one per end time).
"""
import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TYPES = ["T%d" % i for i in range(8)]
WITHIN = 20


def shape_query(shape, rng, k, index=0):
    """One query of `shape`; `k` and the drawn types make it distinct."""
    t = rng.sample(TYPES, 4)
    if shape == "prices":
        # P3's equal-prices pattern on the dense stream; the window makes it distinct.
        return ("PATTERN SEQ(Stock a, Stock b, Stock c) WHERE a.price = b.price AND "
                "b.price = c.price AND a.symbol != b.symbol AND b.symbol != c.symbol AND "
                "a.symbol != c.symbol WITHIN %d CONTEXT unrestricted" % (WITHIN + index))
    if shape == "equal":
        # P3's equal-prices pattern: three events of one type, equal on x,
        # pairwise different on v; nothing filters where a match starts.
        body = ("SEQ(%s a, %s b, %s c) WHERE a.x = b.x AND b.x = c.x AND a.v != b.v "
                "AND b.v != c.v AND a.v != c.v AND c.v != %d" % (t[0], t[0], t[0], k))
    elif shape == "chain":
        # An equality chain over three types, unfiltered start.
        body = "SEQ(%s a, %s b, %s c) WHERE a.x = b.x AND b.x = c.x AND c.v != %d" % (
            t[0], t[1], t[2], k)
    elif shape == "seq2":
        body = "SEQ(%s a, %s b) WHERE a.x = %d" % (t[0], t[1], k)
    elif shape == "seq4":
        body = "SEQ(%s a, %s b, %s c, %s d) WHERE a.x = %d" % (t[0], t[1], t[2], t[3], k)
    elif shape == "kleene":
        body = "SEQ(%s a, %s+ b[], %s c) WHERE a.x = %d AND b[i].v > b[i-1].v" % (
            t[0], t[1], t[2], k)
    elif shape == "negation":
        body = "SEQ(%s a, NOT(%s n), %s b) WHERE a.x = %d AND n.x = %d" % (
            t[0], t[2], t[1], k, (k + 1) % 10)
    elif shape == "predicates":
        body = "SEQ(%s a, %s b, %s c) WHERE a.x = %d AND a.x = b.x AND b.v < c.v" % (
            t[0], t[1], t[2], k)
    else:
        raise SystemExit("unknown shape " + shape)
    return "PATTERN %s WITHIN %d CONTEXT unrestricted" % (body, WITHIN)


def write_patterns(path, shape, count, seed):
    rng = random.Random("%s/%d" % (shape, seed))
    seen = set()
    with open(path, "w") as f:
        while len(seen) < count:
            # Shapes whose k sits in `c.v != k` draw it from v's range, so
            # that 100 of them can be distinct.
            q = shape_query(shape, rng, rng.randrange(100 if shape in ("equal", "chain") else 10),
                            len(seen))
            if q in seen:
                continue
            seen.add(q)
            f.write("p%d: %s\n" % (len(seen), q))


def write_events(path, n, seed, stream):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for ts in range(1, n + 1):
            if stream == "dense":
                f.write('{"type":"Stock","ts":%d,"attrs":{"symbol":"%s","price":%d}}\n' % (
                    ts, rng.choice(("IBM", "MSFT", "ORCL")), rng.randrange(30)))
                continue
            f.write('{"type":"%s","ts":%d,"attrs":{"x":%d,"v":%d}}\n' % (
                rng.choice(TYPES), ts, rng.randrange(10), rng.randrange(100)))


CHOICE = re.compile(r"cepbus match: engine (\w+) \((.*)\)")
# "cepbus match: trial kept nfa: petri 5.51 ms, nfa 1.84 ms CPU on 4096 events after the first 256"
TRIAL = re.compile(r"cepbus match: trial kept (\w+): (.*) CPU on (\d+) events")
MEASURED = re.compile(r"(\w+) ([0-9.]+) ms")


def compare(cepbus, patterns, events, repeat, clock):
    """`--engine all`, `repeat` times: per engine the best detection time, or its refusal."""
    cmd = [cepbus, "match", "--engine", "all", "--patterns", patterns, "--events", events]
    engines = {}
    for _ in range(repeat):
        p = subprocess.run(cmd, capture_output=True, text=True)
        summary = json.loads(p.stdout)
        if not summary["agree"]:
            raise SystemExit("engines disagree on %s: %s" % (patterns, p.stdout))
        for e in summary["engines"]:
            if not e["accepted"]:
                engines[e["engine"]] = {"refused": e["refusal"]}
                continue
            t = e["cpu_seconds" if clock == "cpu" else "seconds"]
            best = engines.get(e["engine"], {}).get("seconds", t)
            engines[e["engine"]] = {"seconds": min(best, t),
                                    "matches": e["matches"], "checksum": e["checksum"]}
    return engines


def auto_choice(cepbus, patterns, events):
    """What `--engine auto` did: its static pick and reason, the trial (the engine kept and each
    candidate's trial CPU in seconds, or None when the stream ended within it), and its
    matches and checksum in total."""
    p = subprocess.run([cepbus, "match", "--engine", "auto", "--patterns", patterns, "--events",
                        events, "--count"], capture_output=True, text=True)
    m = CHOICE.search(p.stderr)
    if p.returncode != 0 or not m:
        raise SystemExit("--engine auto failed on %s: %s" % (patterns, p.stderr))
    trial = TRIAL.search(p.stderr)
    if trial:
        trial = {"kept": trial.group(1), "events": int(trial.group(3)),
                 "cpu": {e: float(ms) / 1000 for e, ms in MEASURED.findall(trial.group(2))}}
    counts = [json.loads(line) for line in p.stdout.splitlines()]
    checksum = sum(int(c["checksum"], 16) for c in counts) % (1 << 64)
    return (m.group(1), m.group(2), trial, sum(c["matches"] for c in counts),
            "%016x" % checksum)


def process_cpu(cmd, repeat):
    """The best CPU time (user + system) of `repeat` runs of `cmd`, a whole process."""
    best = None
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = t if best is None else min(best, t)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cepbus", default=os.path.join(ROOT, "build/dev/bus/app/cepbus"))
    ap.add_argument("--events", type=int, default=50000)
    ap.add_argument("--counts", default="1,2,5,10,20,50,100")
    ap.add_argument("--shapes", default="seq2,seq4,kleene,negation,predicates,equal,chain")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="compare engines by the process's CPU time or by wall time")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--stream", choices=["sparse", "dense"], default="sparse")
    ap.add_argument("--process-cpu", action="store_true",
                    help="also time whole --count processes: auto against the engine it kept")
    args = ap.parse_args()
    if args.stream == "dense":
        if "--shapes" not in sys.argv:
            args.shapes = "prices"
        if "--counts" not in sys.argv:
            args.counts = "1,2,5,10,20"
    counts = [int(c) for c in args.counts.split(",")]
    shapes = args.shapes.split(",")

    rows = []
    ok = True
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engine_sweep.") as work:
        events = os.path.join(work, "events.jsonl")
        write_events(events, args.events, args.seed, args.stream)
        for shape in shapes:
            for count in counts:
                patterns = os.path.join(work, "%s-%d.patterns" % (shape, count))
                write_patterns(patterns, shape, count, args.seed)
                engines = compare(args.cepbus, patterns, events, args.repeat, args.clock)
                prior, reason, trial, matches, checksum = auto_choice(args.cepbus, patterns,
                                                                      events)
                chose = trial["kept"] if trial else prior
                timed = {e: r["seconds"] for e, r in engines.items() if "seconds" in r}
                best = min(timed, key=timed.get)
                same = (engines[chose].get("matches"), engines[chose].get("checksum")) == (
                    matches, checksum)
                # The kept engine's whole run, plus the dropped ones' work in the trial.
                auto_seconds = timed[chose] + (sum(
                    t for e, t in trial["cpu"].items() if e != chose) if trial else 0)
                point = {
                    "bench": "engine_sweep",
                    "params": {"shape": shape, "patterns": count, "events": args.events,
                               "clock": args.clock, "stream": args.stream},
                    "seconds": timed,
                    "refused": sorted(e for e, r in engines.items() if "refused" in r),
                    "matches": matches,
                    "best": best,
                    "auto_prior": prior,
                    "auto_engine": chose,
                    "auto_reason": reason,
                    "auto_trial": trial,
                    "auto_seconds": auto_seconds,
                    "auto_same_matches": same,
                    "auto_vs_best": auto_seconds / timed[best],
                }
                if args.process_cpu:
                    run = [args.cepbus, "match", "--patterns", patterns, "--events", events,
                           "--count", "--engine"]
                    point["process_cpu"] = {e: process_cpu(run + [e], args.repeat)
                                            for e in ("auto", chose)}
                ok &= same
                rows.append(point)
                print(json.dumps(point), flush=True)
    ratios = [p["auto_vs_best"] for p in rows]
    print(json.dumps({"bench": "engine_sweep", "points": len(rows),
                      "auto_vs_best_max": max(ratios),
                      "within_10_percent": sum(r <= 1.10 for r in ratios),
                      "total_seconds": round(time.perf_counter() - started, 1)}))

    def ms(point, engine):
        t = point["seconds"].get(engine)
        return "refused" if t is None else "%.1f" % (t * 1000)

    print()
    def trial(point):
        t = point["auto_trial"]
        if not t:
            return "ended within it"
        return ", ".join("%s %.1f" % (e, s * 1000) for e, s in t["cpu"].items()) + (
            " ms / %d" % t["events"])

    print("| shape | patterns | matches | nfa ms | algebra ms | petri ms | rule | trial | "
          "auto kept | auto ms | auto / best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in rows:
        print("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %.1f | %.2f |" % (
            p["params"]["shape"], p["params"]["patterns"], p["matches"], ms(p, "nfa"),
            ms(p, "algebra"), ms(p, "petri"), p["auto_prior"], trial(p), p["auto_engine"],
            p["auto_seconds"] * 1000, p["auto_vs_best"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
