#!/usr/bin/env python3
"""Tables and SVG plots of the join benchmark (tests/bench/join_bench.cc).

  build-rel/tests/bench/join_bench            > join_compare.jsonl
  build-rel/tests/bench/join_bench --sweeps   > join_sweeps.jsonl
  build-rel/tests/bench/join_bench --spill    > join_spill.jsonl
  python3 scripts/plot_join.py --out docs/join join_*.jsonl

Prints Markdown tables on stdout and writes SVG line charts into --out:
P4's readings/s against checkpoints (per worker count), threshold and
deletion interval, and the spill experiment's per-slice result count and
mean probability. Plain python3, no packages.
"""

import argparse
import json
import os
from collections import defaultdict

def series_key(item):
    """Orders "2 workers" after "1 worker" and "30 checkpoints" before "120"."""
    head = item[0].split()[0]
    return (0, float(head), item[0]) if head.replace(".", "", 1).isdigit() else (1, 0, item[0])


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


def nice_max(v):
    if v <= 0:
        return 1
    m = 10 ** len(str(int(v))) / 10
    for k in (1, 2, 2.5, 5, 10):
        if v <= k * m:
            return k * m
    return 10 * m


def svg_chart(path, title, xlabel, ylabel, series, ymin0=True):
    """series: list of (label, [(x, y), ...]); numeric x."""
    W, H, L, R, T, B = 640, 400, 80, 170, 40, 55
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    if not xs:
        return
    x0, x1 = min(xs), max(xs)
    if x0 == x1:
        x1 = x0 + 1
    y0 = 0 if ymin0 else min(ys)
    y1 = nice_max(max(ys))
    px = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    py = lambda y: H - B - (y - y0) / (y1 - y0) * (H - T - B)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="15" text-anchor="middle">%s</text>' % ((W - R + L) // 2, title)]
    for i in range(6):
        y = y0 + (y1 - y0) * i / 5
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, py(y), W - R, py(y)))
        label = ("%.0f" % y) if y1 >= 10 else ("%.2f" % y)
        if y1 >= 1e6:
            label = "%.1fM" % (y / 1e6)
        elif y1 >= 1e4:
            label = "%.0fk" % (y / 1e3)
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (L - 6, py(y) + 4, label))
    for x in sorted(set(xs)):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(x), H - B + 18, x))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((W - R + L) // 2, H - 12, xlabel))
    out.append('<text x="18" y="%d" text-anchor="middle" transform="rotate(-90 18 %d)">%s</text>'
               % ((H - B + T) // 2, (H - B + T) // 2, ylabel))
    for i, (label, pts) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        pts = sorted(pts)
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                   % (c, " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)))
        for x, y in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(x), py(y), c))
        ly = T + 10 + 20 * i
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>'
                   % (W - R + 12, ly, W - R + 32, ly, c))
        out.append('<text x="%d" y="%d">%s</text>' % (W - R + 38, ly + 4, label))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s" % path)


def load(files):
    rows = []
    for name in files:
        for line in open(name):
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = load(a.files)

    ratios = [r for r in rows if r["bench"] == "join_ratio"]
    if ratios:
        # Several runs (files) of the comparison: each method's best rate, so
        # that another process's burst on a shared machine counts least.
        speed = defaultdict(dict)
        for r in rows:
            if r["bench"] != "join_compare":
                continue
            p = r["params"]
            key = (p["checkpoints"], p["plates"], p["threshold"])
            m = p["method"] + ("%d" % p["workers"] if "workers" in p else "")
            speed[key][m] = max(speed[key].get(m, 0), r["events_per_s"])
        same = defaultdict(lambda: True)
        for r in ratios:
            p = r["params"]
            same[(p["checkpoints"], p["plates"], p["threshold"])] &= r["identical_output"]
        print("| checkpoints | plates | threshold | SQLite r/s | native r/s | plugin 1w r/s | plugin 2w r/s "
              "| 1w / SQLite | 2w / SQLite | native / SQLite | 1w / native | 2w / native | same output |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for key in sorted(speed):
            s = speed[key]
            q, n, one, two = s.get("sqlite", 0), s.get("native", 0), s.get("plugin1", 0), s.get("plugin2", 0)
            print("| %d | %s | %.1f | %.2fM | %.2fM | %.2fM | %.2fM | %.1f× | %.1f× | %.1f× | %.2f× | %.2f× | %s |"
                  % (key[0], key[1], key[2], q / 1e6, n / 1e6, one / 1e6, two / 1e6, one / q, two / q, n / q,
                     one / n, two / n, "yes" if same[key] else "NO"))
        print()

    sweep = [r for r in rows if r["bench"] == "join_sweep"]
    if sweep:
        for dist in ("uniform", "gaussian"):
            by_workers = defaultdict(list)
            by_threshold = defaultdict(list)
            by_interval = defaultdict(list)
            for r in sweep:
                p = r["params"]
                if p["plates"] != dist:
                    continue
                if p["method"] == "plugin" and p.get("expiry") == "on_insert":
                    if p["threshold"] == 0.7:
                        by_workers["%d worker%s" % (p["workers"], "s" if p["workers"] > 1 else "")].append(
                            (p["checkpoints"], r["events_per_s"]))
                    if p["workers"] == 1:
                        by_threshold["%d checkpoints" % p["checkpoints"]].append((p["threshold"], r["events_per_s"]))
                if "deletion_interval_min" in p:
                    label = "SQLite" if p["method"] == "sqlite" else "plugin, batch expiry"
                    by_interval[label].append((p["deletion_interval_min"], r["events_per_s"]))
            on_insert_60 = [r["events_per_s"] for r in sweep if r["params"]["plates"] == dist
                            and r["params"]["method"] == "plugin" and r["params"].get("expiry") == "on_insert"
                            and r["params"]["workers"] == 1 and r["params"]["checkpoints"] == 60
                            and r["params"]["threshold"] == 0.7]
            if on_insert_60 and by_interval:
                by_interval["plugin, expiry on insert"] = [(x, on_insert_60[0]) for x, _ in by_interval["SQLite"]]
            for name, series, xl in (("workers", by_workers, "checkpoints"),
                                     ("threshold", by_threshold, "probability threshold"),
                                     ("deletion", by_interval, "deletion interval (min), 60 checkpoints")):
                if not series:
                    continue
                print("readings/s, %s plates, by %s:" % (dist, xl))
                xs = sorted({x for pts in series.values() for x, _ in pts})
                print("| series | " + " | ".join("%g" % x for x in xs) + " |")
                print("|---|" + "---|" * len(xs))
                for label, pts in sorted(series.items(), key=series_key):
                    d = dict(pts)
                    print("| %s | " % label + " | ".join("%.0f" % d[x] if x in d else "" for x in xs) + " |")
                print()
                svg_chart(os.path.join(a.out, "join_%s_%s.svg" % (name, dist)),
                          "Join readings/s (%s plates)" % dist, xl, "readings/s", sorted(series.items(), key=series_key))

    spill = [r for r in rows if r["bench"] == "join_spill"]
    if spill:
        count = defaultdict(list)
        prob = defaultdict(list)
        for r in spill:
            p = r["params"]
            label = {"none": "all in memory"}.get(p["strategy"], p["strategy"])
            x = p["slice"] + 1
            count[label].append((x, r["matches"]))
            if r["matches"]:
                prob[label].append((x, r["avg_prob"]))
        print("spill experiment: results per input slice (slice %d = at flush)" % (spill[0]["params"]["slices"] + 1))
        xs = sorted({x for pts in count.values() for x, _ in pts})
        print("| strategy | " + " | ".join(str(x) for x in xs) + " |")
        print("|---|" + "---|" * len(xs))
        for label in count:
            c, q = dict(count[label]), dict(prob[label])
            print("| %s | " % label + " | ".join("%d (%.3f)" % (c[x], q.get(x, 0)) for x in xs) + " |")
        print()
        svg_chart(os.path.join(a.out, "join_spill_count.svg"), "Spill: results per slice",
                  "input slice (last = flush)", "joined pairs", sorted(count.items()))
        svg_chart(os.path.join(a.out, "join_spill_prob.svg"), "Spill: mean probability per slice",
                  "input slice (last = flush)", "mean pair probability", sorted(prob.items()), ymin0=False)


if __name__ == "__main__":
    main()
