#!/usr/bin/python3
"""The window engine against a native hash aggregation and SQLite's GROUP BY, in one run.

The stream: --events readings `{"type":"Temp","ts":T,"attrs":{"sensor":"sN","value":V}}` of
--groups sensors (uniform, random), --per-unit readings per time unit (ts from 0, in order), V a
random number with one decimal in [0, 100). The query, per window:

    FROM Temp t WINDOW <window> GROUP BY t.sensor
    RETURN Stats(t.sensor AS sensor, count(t) AS n, sum(t.value) AS total,
                 avg(t.value) AS mean, min(t.value) AS lo, max(t.value) AS hi)

for TUMBLING 1000, SLIDING 1000 EVERY 100, 10 and 1 (L/S = 10, 100, 1,000) and SESSION GAP 50.
Per window, in one run:

- cepbus: the whole `cepbus match --engine window --count` process (CPU time, user + system, and
  peak RSS from its own resource usage), and the same command with `FROM Nothing t`, which reads
  and decodes every line and aggregates nothing; the engine's own time is the difference (medians
  over --repeat rounds, the two taking turns);
- native: tests/bench/window_native_bench over the same file (the same EventLineReader), its
  aggregation loop alone (events decoded beforehand), best of 3: one unordered_map per open
  window from group to running aggregate, every window holding an event updated;
- sqlite: python3's sqlite3 in memory, the readings loaded into one table (not timed), the
  GROUP BY query alone (CPU of this process; the query wrapped in a count so that no row
  crosses into Python), best of --sqlite-runs. Sliding windows join each reading with the
  L/S windows holding it.

Native and SQLite update every window holding a reading, so at L/S = 1,000 (a billion updates)
they run only with --all.

With --baseline OTHER_CEPBUS (another build's binary, with its own plugins), that binary's whole
process runs the engine query too, taking turns with this one in every round, so that the two
builds are measured side by side under the same load; it must give the same `--count` answer.

Every method must give the same number of results, and cepbus and native the same `--count`
checksum (over the results' ts), or the run stops. Before timing, the first --check readings
are run by all three with every result printed, and the rows (window, group and the five
aggregates) must agree.

    tests/bench/window_bench.py --cepbus build/release/bus/app/cepbus
        [--native build/release/tests/bench/window_native_bench] [--events 1000000]
        [--groups 1000] [--per-unit 100] [--repeat 3] [--only tumbling,session,...]
        [--cpu 0] [--seed 7] [--baseline OTHER_BUILD/bus/app/cepbus]

Prints one JSON object per window, then the markdown table of docs/benchmarks.md.
"""
import argparse
import json
import math
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_sweep import counted, run_measured  # noqa: E402

RETURN = ("RETURN Stats(t.sensor AS sensor, count(t) AS n, sum(t.value) AS total, "
          "avg(t.value) AS mean, min(t.value) AS lo, max(t.value) AS hi)")
# (name, kind, L, S or the gap)
WINDOWS = (
    ("tumbling", "tumbling", 1000, 1000),
    ("sliding L/S=10", "sliding", 1000, 100),
    ("sliding L/S=100", "sliding", 1000, 10),
    ("sliding L/S=1000", "sliding", 1000, 1),
    ("session", "session", 50, 50),
)


def window_clause(kind, length, every):
    if kind == "tumbling":
        return "WINDOW TUMBLING %d" % length
    if kind == "sliding":
        return "WINDOW SLIDING %d EVERY %d" % (length, every)
    return "WINDOW SESSION GAP %d" % length


def query(kind, length, every, type_name="Temp"):
    return "FROM %s t %s GROUP BY t.sensor %s" % (type_name, window_clause(kind, length, every),
                                                  RETURN)


def readings(n, groups, per_unit, seed):
    rng = random.Random("window/%d" % seed)
    return [(i // per_unit, "s%d" % rng.randrange(groups), rng.randrange(1000) / 10)
            for i in range(n)]


def write(path, rows):
    with open(path, "w") as f:
        for ts, sensor, value in rows:
            f.write('{"type":"Temp","ts":%d,"attrs":{"sensor":"%s","value":%.1f}}\n' % (
                ts, sensor, value))


def cepbus_cmd(args, q, path, extra, binary=None):
    cmd = [binary or args.cepbus, "match", "--engine", "window", "--events", path, "--query",
           q] + extra
    if args.plugin_path and binary is None:
        cmd += ["--plugin-path", args.plugin_path]
    return (["taskset", "-c", str(args.cpu)] + cmd) if args.cpu >= 0 else cmd


def native_cmd(args, kind, length, every, path, extra):
    cmd = [args.native, "--events", path, "--window", kind, "--length", str(length),
           "--every", str(every)] + extra
    return (["taskset", "-c", str(args.cpu)] + cmd) if args.cpu >= 0 else cmd


def sqlite_db(rows, kind, length, every):
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE readings (ts INTEGER, sensor TEXT, value REAL)")
    db.executemany("INSERT INTO readings VALUES (?, ?, ?)", rows)
    if kind == "sliding":
        db.execute("CREATE TABLE offsets (j INTEGER)")
        db.executemany("INSERT INTO offsets VALUES (?)", [(j,) for j in range(length // every)])
    db.commit()
    return db


AGGS = "count(*), sum(value), avg(value), min(value), max(value)"


def sqlite_query(kind, length, every):
    """(start, last ts, sensor, count, sum, avg, min, max) per result."""
    if kind == "tumbling":
        return ("SELECT ts / %d * %d AS s, ts / %d * %d + %d, sensor, %s FROM readings "
                "GROUP BY s, sensor" % (length, length, length, length, length - 1, AGGS))
    if kind == "sliding":
        # The window k = ts/S - j (j < L/S) holds ts: kS <= ts < kS + L.
        return ("SELECT (ts / %d - j) * %d AS s, (ts / %d - j) * %d + %d, sensor, %s "
                "FROM readings, offsets GROUP BY s, sensor" % (
                    every, every, every, every, length - 1, AGGS))
    # A session starts at a group's first reading and at each one more than the gap after
    # the one before it.
    return ("WITH marked AS (SELECT ts, sensor, value, CASE WHEN ts - LAG(ts) OVER "
            "(PARTITION BY sensor ORDER BY ts) > %d THEN 1 ELSE 0 END AS brk FROM readings), "
            "numbered AS (SELECT ts, sensor, value, SUM(brk) OVER (PARTITION BY sensor "
            "ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid FROM marked) "
            "SELECT min(ts), max(ts), sensor, %s FROM numbered GROUP BY sensor, sid" % (
                length, AGGS))


def sqlite_time(db, sql, runs):
    best = math.inf
    count = None
    for _ in range(runs):
        started = time.process_time()
        count = db.execute("SELECT count(*) FROM (%s)" % sql).fetchone()[0]
        best = min(best, time.process_time() - started)
    return best, count


def norm(rows):
    """Result rows comparable across methods: {(start, last ts, sensor): (count, sum, avg, min,
    max)}, numbers as floats (compared with a tolerance: the methods add in other orders)."""
    out = {}
    for start, end, sensor, *values in rows:
        out[(int(start), int(end), sensor)] = tuple(None if v is None else float(v)
                                                    for v in values)
    return out


def same(a, b):
    return a.keys() == b.keys() and all(
        all((x is None and y is None) or (x is not None and y is not None and
                                          math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9))
            for x, y in zip(a[k], b[k])) for k in a)


def check(args, tmp, rows, name, kind, length, every):
    """The first --check readings through all three, every result compared."""
    part = rows[:args.check]
    path = os.path.join(tmp, "check.jsonl")
    write(path, part)
    out = subprocess.run(cepbus_cmd(args, query(kind, length, every), path, ["--format", "full"]),
                         check=True, capture_output=True, text=True).stdout
    got = []
    for line in out.splitlines():
        e = json.loads(line)
        a = e["attrs"]
        got.append((e.get("start", e["ts"]), e["ts"], a["sensor"], a["n"], a["total"],
                    a.get("mean"), a.get("lo"), a.get("hi")))
    got = norm(got)
    printed = os.path.join(tmp, "native.jsonl")
    subprocess.run(native_cmd(args, kind, length, every, path, ["--runs", "1", "--print", printed]),
                   check=True, capture_output=True)
    native = []
    with open(printed) as f:
        for line in f:
            r = json.loads(line)
            native.append((r["start"], r["ts"], r["group"], r["count"], r["sum"],
                           r.get("avg"), r.get("min"), r.get("max")))
    db = sqlite_db(part, kind, length, every)
    lite = norm(db.execute(sqlite_query(kind, length, every)))
    for label, other in (("native", norm(native)), ("sqlite", lite)):
        if not same(got, other):
            diff = [(k, got.get(k), other.get(k)) for k in sorted(got.keys() | other.keys())
                    if k not in got or k not in other or not same({k: got[k]}, {k: other[k]})]
            raise SystemExit("%s: cepbus and %s differ on the first %d readings (%d results): %s"
                             % (name, label, len(part), len(got), diff[:3]))
    return len(got)


def measure(args, path, n, name, kind, length, every, rows):
    engine_q = query(kind, length, every)
    idle_q = query(kind, length, every, "Nothing")
    runs = {"engine": [], "idle": []}
    if args.baseline:
        runs["baseline"] = []
    for r in range(args.repeat):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for which in order:
            q = idle_q if which == "idle" else engine_q
            binary = args.baseline if which == "baseline" else None
            cpu, _, rss_kb, stdout, _ = run_measured(cepbus_cmd(args, q, path, ["--count"], binary))
            runs[which].append((cpu, rss_kb, counted(stdout)))
    answer = runs["engine"][0][2]
    if any(s[2] != answer for which in ("engine", "baseline") for s in runs.get(which, [])):
        raise SystemExit("%s: cepbus runs disagree" % name)
    whole = statistics.median(s[0] for s in runs["engine"])
    idle = statistics.median(s[0] for s in runs["idle"])
    row = {"bench": "window", "window": name, "events": n, "results": answer[0],
           "cepbus_s": round(whole, 4), "events_per_s": round(n / whole),
           "idle_s": round(idle, 4), "engine_s": round(whole - idle, 4),
           "peak_rss_mb": round(max(s[1] for s in runs["engine"]) / 1024, 1)}
    if args.baseline:
        row["baseline_s"] = round(statistics.median(s[0] for s in runs["baseline"]), 4)
        row["baseline_peak_rss_mb"] = round(max(s[1] for s in runs["baseline"]) / 1024, 1)
    if kind == "sliding" and length // every > 100 and not args.all:
        print(json.dumps(row), flush=True)
        return row
    native = json.loads(subprocess.run(native_cmd(args, kind, length, every, path, []),
                                       check=True, capture_output=True, text=True).stdout)
    if (native["results"], native["checksum"]) != answer:
        raise SystemExit("%s: native %s/%s, cepbus %s/%s" % (
            name, native["results"], native["checksum"], answer[0], answer[1]))
    row["native_s"] = native["cpu_s"]
    row["engine_over_native"] = round((whole - idle) / native["cpu_s"], 2)
    db = sqlite_db(rows, kind, length, every)
    lite_s, lite_n = sqlite_time(db, sqlite_query(kind, length, every), args.sqlite_runs)
    db.close()
    if lite_n != answer[0]:
        raise SystemExit("%s: sqlite %d results, cepbus %d" % (name, lite_n, answer[0]))
    row["sqlite_s"] = round(lite_s, 4)
    row["cepbus_over_sqlite"] = round(whole / lite_s, 2)
    print(json.dumps(row), flush=True)
    return row


def table(rows):
    out = ["| window | results | `cepbus match` (whole) | events/s | engine's own | native loop "
           "| engine / native | SQLite query | whole / SQLite |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ref = ("%.3f s" % r["native_s"], "%.2f" % r["engine_over_native"],
               "%.2f s" % r["sqlite_s"], "%.2f" % r["cepbus_over_sqlite"]) \
            if "sqlite_s" in r else ("—",) * 4
        out.append("| %s | %d | %.3f s | %.2fM | %.3f s | %s | %s | %s | %s |" % (
            (r["window"], r["results"], r["cepbus_s"], r["events_per_s"] / 1e6, r["engine_s"]) +
            ref))
    tumbling = next((r for r in rows if r["window"] == "tumbling"), None)
    if tumbling:
        for r in rows:
            if r["window"].startswith("sliding"):
                out.append("\n%s: engine %.2f× tumbling's, whole process %.2f×" % (
                    r["window"], r["engine_s"] / tumbling["engine_s"],
                    r["cepbus_s"] / tumbling["cepbus_s"]))
                if "baseline_s" in r and "baseline_s" in tumbling:
                    out[-1] += " (the baseline's %.3f s, %.2f× its tumbling)" % (
                        r["baseline_s"], r["baseline_s"] / tumbling["baseline_s"])
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cepbus", default=os.path.join("build", "release", "bus", "app", "cepbus"))
    ap.add_argument("--native", default=None)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--per-unit", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sqlite-runs", type=int, default=2)
    ap.add_argument("--all", action="store_true", help="native and SQLite at L/S = 1,000 too")
    ap.add_argument("--plugin-path", default=None,
                    help="cepbus loads the window plugin from DIR first (another build's)")
    ap.add_argument("--baseline", default=None,
                    help="another build's cepbus, run beside this one on each window")
    ap.add_argument("--check", type=int, default=20000)
    ap.add_argument("--only", default="", help="comma-separated window names")
    ap.add_argument("--cpu", type=int, default=0, help="run every process on this CPU; -1: any")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if args.native is None:
        args.native = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(args.cepbus)))), "tests", "bench", "window_native_bench")
    only = set(filter(None, args.only.split(",")))
    rows = readings(args.events, args.groups, args.per_unit, args.seed)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "readings.jsonl")
        write(path, rows)
        for name, kind, length, every in WINDOWS:
            if only and name not in only:
                continue
            check(args, tmp, rows, name, kind, length, every)
            out.append(measure(args, path, len(rows), name, kind, length, every, rows))
    print(table(out))


if __name__ == "__main__":
    main()
