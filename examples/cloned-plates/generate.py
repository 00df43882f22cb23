#!/usr/bin/env python3
"""Checkpoint readings with planted cloned plates, for the join engine (P4).

Writes into --out (default: this folder):
  time_matrix.csv  the fastest travel time in seconds between every two
                   checkpoints (labelled CSV, symmetric, diagonal 0): the
                   checkpoints are random points in a square and the time is
                   the distance at the speed limit;
  readings.jsonl   one Reading per recognised plate, in ts order (seconds):
                   {"type":"Reading","ts":..,"attrs":{"plate":..,"site":..},"prob":..}
                   each passage yields the true plate (prob in [0.75, 1)) and,
                   with --alt-rate, a misread one (one digit changed, 1 - prob);
  planted.txt      the cloned plates, one per line.

Every car drives legally: it reaches its next checkpoint no sooner than the
matrix allows. A cloned plate is carried by two cars driving independently,
so it is seen at two checkpoints closer in time than any car could manage.

  python3 generate.py --checkpoints 12 --cars 400 --cloned 0.02 --seed 7
"""

import argparse
import json
import math
import os
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoints", type=int, default=12)
    ap.add_argument("--cars", type=int, default=400)
    ap.add_argument("--cloned", type=float, default=0.02, help="fraction of plates carried by two cars")
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--trips", type=float, default=20, help="mean checkpoint passages per car")
    ap.add_argument("--alt-rate", type=float, default=0.5, help="share of passages with a misread plate too")
    ap.add_argument("--distribution", choices=["uniform", "gaussian"], default="uniform",
                    help="how plate numbers spread over 10000-99999")
    ap.add_argument("--area-km", type=float, default=30)
    ap.add_argument("--speed-kmh", type=float, default=90)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)

    n = a.checkpoints
    labels = ["C%02d" % (i + 1) for i in range(n)]
    pos = [(rng.uniform(0, a.area_km), rng.uniform(0, a.area_km)) for _ in range(n)]
    time = [[0] * n for _ in range(n)]
    for x in range(n):
        for y in range(x + 1, n):
            km = math.dist(pos[x], pos[y])
            time[x][y] = time[y][x] = max(60, int(km / a.speed_kmh * 3600))
    with open(os.path.join(a.out, "time_matrix.csv"), "w") as f:
        f.write("site," + ",".join(labels) + "\n")
        for x in range(n):
            f.write(labels[x] + "," + ",".join(str(t) for t in time[x]) + "\n")

    plates = set()
    while len(plates) < a.cars:
        if a.distribution == "uniform":
            p = rng.randint(10000, 99999)
        else:
            p = int(rng.gauss(55000, 5000))
            if not 10000 <= p <= 99999:
                continue
        plates.add(p)
    plates = sorted(plates)
    rng.shuffle(plates)
    cloned = plates[: int(round(a.cars * a.cloned))]
    cars = [str(p) for p in plates] + [str(p) for p in cloned]

    horizon = int(a.hours * 3600)
    readings = []  # (ts, order, plate, site, prob)
    for car in cars:
        site = rng.randrange(n)
        ts = rng.randrange(horizon)
        while ts < horizon:
            prob = round(rng.uniform(0.75, 1.0), 3)
            readings.append((ts, len(readings), car, labels[site], prob))
            if rng.random() < a.alt_rate:
                k = rng.randrange(len(car))
                misread = car[:k] + str((int(car[k]) + rng.randint(1, 9)) % 10) + car[k + 1:]
                readings.append((ts, len(readings), misread, labels[site], round(1 - prob, 3)))
            nxt = rng.choice([s for s in range(n) if s != site])
            # A legal trip, then a pause: about `trips` passages a day.
            ts += int(time[site][nxt] * rng.uniform(1.0, 2.0) + rng.expovariate(a.trips / horizon))
            site = nxt
    readings.sort()
    with open(os.path.join(a.out, "readings.jsonl"), "w") as f:
        for ts, _, plate, site, prob in readings:
            f.write(json.dumps({"type": "Reading", "ts": ts, "attrs": {"plate": plate, "site": site},
                                "prob": prob}, separators=(",", ":")) + "\n")
    with open(os.path.join(a.out, "planted.txt"), "w") as f:
        for p in sorted(cloned):
            f.write("%d\n" % p)
    print("%d readings, %d checkpoints, %d cars, %d cloned plates -> %s"
          % (len(readings), n, len(cars), len(cloned), a.out))


if __name__ == "__main__":
    main()
