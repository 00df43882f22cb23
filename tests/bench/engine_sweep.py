#!/usr/bin/python3
"""Engine sweep: how engine="auto" compares with the best engine.

For every query shape and pattern count it writes a patterns file of that
many distinct queries over one generated event stream and runs the real
`cepbus match`, each engine as a user runs it: one whole `cepbus match
--engine E --count` process per engine (nfa, algebra, petri; one that
refuses the queries is skipped) and one of `--engine auto`, --repeat rounds
(auto run between nfa and petri, the order turned around from round to
round). A process's time is its CPU time (user + system, from the child's
own resource usage): reading and decoding the events, loading the plugins,
building the detectors and, for auto, its trial, all included. Per engine
the median of its runs; the best engine is the one with the lowest median.
"auto / best" is the median over the rounds of auto's time divided by the
best engine's in the same round: this machine has spells in which every
process runs up to 1.5x slower, and a ratio of two runs made one after the
other cancels them where a ratio of medians does not (the JSON has that
one too, as auto_vs_best_of_medians). The median, not the best run: auto's
trial may keep another engine from one run to the next, and its best run
would credit it with its luckiest choice.

`--engine all` (nfa, algebra and petri in one process on the same events)
runs once per point to check the matches: the sweep stops unless every
accepting engine reports the same, and each process's `--count` totals are
checked against its engine's there (auto's against the engine its trial
kept, from its stderr; the exit status is 1 on a difference). Its detection
times go to the JSON as `detection_seconds`, not into the comparison: the
engines run one after the other in one process, where an engine run later
finds the caches and the allocator warmed by the ones before.

Auto decides by a trial (nfa against petri on the first events, the cheaper
kept; bus/host/detection/trial_detector.h): the table says over how many
timed events the trials ran, the CPU they measured of the engine they
dropped (the median over the runs; what that engine spent on the warm-up
events before them is not in it) and which engine they kept (with how many
runs each, when they differ). Prints one JSON object per point, a summary
object, then the markdown table of docs/engines.md ("Choosing an engine:
auto").

`--stream dense` replaces the sparse 8-type stream by one of a single type
(`Stock`: 3 symbols, 30 prices, one tick per time unit) and the shapes by
`prices`, P3's equal-prices pattern with windows 20, 21, ... (one per
pattern): where the nfa's partitioned stacks beat the merged net below
about 10 patterns.

    tests/bench/engine_sweep.py --cepbus build/release/bus/app/cepbus
        [--events 200000] [--counts 1,2,5,10,20,50,100]
        [--shapes seq2,seq4,kleene,negation,predicates,equal,chain] [--repeat 21]
        [--seed 7] [--clock cpu|wall] [--stream sparse|dense] [--cpu 0]

Every process runs on one CPU (`--cpu`, 0 by default; -1 lets the kernel
place it): on this 2-vCPU virtual machine the same process takes 70 ms on
one CPU and 95 ms on the other at times, and one that is free to move
lands on either.

`--clock wall` compares the processes' wall times instead (on a loaded
machine far noisier: every engine detects on one thread, so on an idle one
the two agree).

Every query says CONTEXT unrestricted, so the algebra engine reports every
match as nfa and petri do (its default, recent, keeps one per end time).
"""
import argparse
import json
import os
import random
import re
import statistics
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
ENGINES = ("nfa", "algebra", "petri")


def compare(cepbus, patterns, events):
    """`--engine all` once: per engine its matches, checksum and detection CPU time, or its
    refusal. Stops the sweep unless every accepting engine reports the same matches."""
    p = subprocess.run([cepbus, "match", "--engine", "all", "--patterns", patterns, "--events",
                        events], capture_output=True, text=True)
    try:
        summary = json.loads(p.stdout)
    except ValueError:
        raise SystemExit("--engine all failed on %s: %s" % (patterns, p.stderr))
    if p.returncode != 0 or not summary["agree"]:
        raise SystemExit("engines disagree on %s: %s" % (patterns, p.stdout))
    engines = {}
    for e in summary["engines"]:
        if not e["accepted"]:
            engines[e["engine"]] = {"refused": e["refusal"]}
            continue
        engines[e["engine"]] = {"detection_seconds": e["cpu_seconds"],
                                "matches": e["matches"], "checksum": e["checksum"]}
    return engines


def cpu_seconds(pid):
    """The CPU time (user + system) a running process and its running children have used."""
    total = 0.0
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            total += sum(cpu_seconds(int(c)) for c in f.read().split())
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


# A child's ru_maxrss starts at its parent's peak (Linux keeps the high-water
# mark across fork and exec), so this Python process's own would show; GNU
# time forks the command from a small process and reports its peak alone.
GNU_TIME = "/usr/bin/time"


def run_measured(cmd, timeout=None):
    """Runs `cmd`, a whole process, on its own: (cpu, wall, peak_rss_kb, stdout, stderr), its
    CPU time (user + system) from its own resource usage and its peak resident set. Stops the
    sweep when it fails; None when it uses more than `timeout` seconds of CPU (then killed):
    CPU, not wall time, so that a machine busy with other work does not cut runs short."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as rss:
        wrapped = cmd
        if os.path.exists(GNU_TIME):
            wrapped = [GNU_TIME, "-f", "%M", "-o", rss.name] + cmd
        started = time.perf_counter()
        child = subprocess.Popen(wrapped, stdout=out, stderr=err)
        while True:
            pid, status, usage = os.wait4(child.pid, 0 if timeout is None else os.WNOHANG)
            if pid != 0:
                break
            if cpu_seconds(child.pid) > timeout:
                for c in open("/proc/%d/task/%d/children" % (child.pid, child.pid)).read().split():
                    os.kill(int(c), 9)
                child.kill()
                os.wait4(child.pid, 0)
                return None
            time.sleep(0.02)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
        peak_kb = usage.ru_maxrss
        if wrapped is not cmd:
            lines = rss.read().split()
            peak_kb = int(lines[-1]) if lines and lines[-1].isdigit() else peak_kb
    if child.returncode != 0:
        raise SystemExit("%s failed: %s" % (" ".join(cmd), stderr))
    return usage.ru_utime + usage.ru_stime, wall, peak_kb, stdout, stderr


def run_process(cmd, clock):
    """Runs `cmd`, a whole process: its CPU time (user + system, from its own resource usage)
    or its wall time, in seconds, and its stdout and stderr. Stops the sweep when it fails."""
    cpu, wall, _, stdout, stderr = run_measured(cmd)
    return (cpu if clock == "cpu" else wall), stdout, stderr


def counted(stdout):
    """The matches and checksum in total of a `--count` run's per-pattern lines."""
    counts = [json.loads(line) for line in stdout.splitlines()]
    checksum = sum(int(c["checksum"], 16) for c in counts) % (1 << 64)
    return sum(c["matches"] for c in counts), "%016x" % checksum


def auto_run(stderr):
    """What one `--engine auto` process did: its static pick and reason, and the trial (the
    engine kept, how many timed events, each candidate's trial CPU in seconds), or None when
    the stream ended within it."""
    m = CHOICE.search(stderr)
    if not m:
        raise SystemExit("--engine auto said no engine: %s" % stderr)
    trial = TRIAL.search(stderr)
    if trial:
        trial = {"kept": trial.group(1), "events": int(trial.group(3)),
                 "cpu": {e: float(ms) / 1000 for e, ms in MEASURED.findall(trial.group(2))}}
    return m.group(1), m.group(2), trial


def round_order(names, r):
    """The order of round `r`: auto between nfa and petri, the two engines it chooses from, so
    that a spell of the machine running slower hits auto and its pick alike; which of the two
    goes first, and whether the others (algebra) run before or after them, alternates from
    round to round so that drift hits every engine alike."""
    pick = [e for e in ("nfa", "petri") if e in names]
    core = pick[:1] + ["auto"] + pick[1:]
    if r % 2:
        core.reverse()
    others = [e for e in names if e not in core]
    return core + others if (r // 2) % 2 == 0 else others + core


# After this many rounds an engine whose median is OUT_OF_RACE times the fastest engine's or
# more runs no more: it cannot be the best, and the slowest (algebra on kleene, 10 s a run)
# would take most of the sweep's time.
RACE_ROUNDS = 5
OUT_OF_RACE = 1.5


def processes(cepbus, patterns, events, engines, repeat, clock):
    """Each accepting engine's and auto's whole `cepbus match --count` process, `repeat` rounds
    (round_order; an engine out of the race after RACE_ROUNDS, fewer). Each run's matches are
    checked against its engine's in `--engine all` (auto's against the engine it kept). Per
    name the times of its runs, round by round; for auto also what each run chose; and whether
    every run reported its engine's matches."""
    names = [e for e in ENGINES if "matches" in engines[e]] + ["auto"]
    run = [cepbus, "match", "--patterns", patterns, "--events", events, "--count", "--engine"]
    times = {name: [] for name in names}
    auto = []
    same = True
    for r in range(repeat):
        if r == RACE_ROUNDS:
            medians = {e: statistics.median(times[e]) for e in names if e != "auto"}
            fastest = min(medians.values())
            names = [e for e in names if e == "auto" or medians[e] < OUT_OF_RACE * fastest]
        for name in round_order(names, r):
            seconds, stdout, stderr = run_process(run + [name], clock)
            times[name].append(seconds)
            engine = name
            if name == "auto":
                prior, reason, trial = auto_run(stderr)
                engine = trial["kept"] if trial else prior
                auto.append({"prior": prior, "reason": reason, "trial": trial, "kept": engine,
                             "seconds": seconds})
            matches, checksum = counted(stdout)
            # An engine --engine all does not run (join): unchecked, which fails the sweep.
            reference = engines.get(engine, {})
            if (reference.get("matches"), reference.get("checksum")) != (matches, checksum):
                print("%s: --engine %s reported %d matches (%s), %s in --engine all %s" % (
                    patterns, name, matches, checksum, engine, reference), file=sys.stderr)
                same = False
    return times, auto, same


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cepbus", default=os.path.join(ROOT, "build/dev/bus/app/cepbus"))
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--counts", default="1,2,5,10,20,50,100")
    ap.add_argument("--shapes", default="seq2,seq4,kleene,negation,predicates,equal,chain")
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="compare the processes by their CPU time or by wall time")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--stream", choices=["sparse", "dense"], default="sparse")
    ap.add_argument("--cpu", type=int, default=0,
                    help="run every process on this CPU (-1: wherever the kernel puts it)")
    args = ap.parse_args()
    if args.cpu >= 0:
        if args.cpu not in os.sched_getaffinity(0):
            raise SystemExit("--cpu %d: not a CPU this process may run on (%s)" % (
                args.cpu, ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))))
        os.sched_setaffinity(0, {args.cpu})  # the processes inherit it
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
                engines = compare(args.cepbus, patterns, events)
                times, auto, same = processes(args.cepbus, patterns, events, engines,
                                              args.repeat, args.clock)
                seconds = {name: statistics.median(t) for name, t in times.items()}
                timed = {e: seconds[e] for e in ENGINES if e in seconds}
                best = min(timed, key=timed.get)
                kept = {}
                for a in auto:
                    kept[a["kept"]] = kept.get(a["kept"], 0) + 1
                point = {
                    "bench": "engine_sweep",
                    "params": {"shape": shape, "patterns": count, "events": args.events,
                               "clock": args.clock, "stream": args.stream,
                               "repeat": args.repeat, "cpu": args.cpu},
                    "seconds": timed,
                    "runs": {name: t for name, t in times.items()},
                    "detection_seconds": {e: r["detection_seconds"] for e, r in engines.items()
                                          if "detection_seconds" in r},
                    "refused": sorted(e for e, r in engines.items() if "refused" in r),
                    "matches": engines[best]["matches"],
                    "best": best,
                    "auto_prior": auto[0]["prior"],
                    "auto_reason": auto[0]["reason"],
                    "auto_kept": kept,
                    "auto_runs": auto,
                    "auto_seconds": seconds["auto"],
                    "auto_same_matches": same,
                    "auto_vs_best": statistics.median(
                        a / b for a, b in zip(times["auto"], times[best])),
                    "auto_vs_best_of_medians": seconds["auto"] / timed[best],
                }
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

    def kept(point):
        # The engine each auto run kept, most often first.
        k = sorted(point["auto_kept"].items(), key=lambda item: (-item[1], item[0]))
        return k[0][0] if len(k) == 1 else ", ".join("%s %d" % item for item in k)

    def trial(point):
        # How many timed events the trials took, over the runs.
        lengths = [a["trial"]["events"] for a in point["auto_runs"] if a["trial"]]
        if "trial against" not in point["auto_reason"]:
            return "none"  # the other of nfa and petri refuses the queries
        if not lengths:
            return "ended within it"
        low, high = min(lengths), max(lengths)
        return ("%d" % low if low == high else "%d–%d" % (low, high)) + (
            "" if len(lengths) == len(point["auto_runs"]) else " (else ended within it)")

    def dropped(point):
        # The median over the runs of what the trial measured of the engines it dropped.
        cpu = [sum(t for e, t in a["trial"]["cpu"].items() if e != a["kept"])
               for a in point["auto_runs"] if a["trial"]]
        return "%.1f" % (statistics.median(cpu) * 1000) if cpu else "-"

    print()
    print("| shape | patterns | matches | nfa ms | algebra ms | petri ms | rule | trial events | "
          "dropped ms | auto kept | auto ms | auto / best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in rows:
        print("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %.1f | %.2f |" % (
            p["params"]["shape"], p["params"]["patterns"], p["matches"], ms(p, "nfa"),
            ms(p, "algebra"), ms(p, "petri"), p["auto_prior"], trial(p), dropped(p), kept(p),
            p["auto_seconds"] * 1000, p["auto_vs_best"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
