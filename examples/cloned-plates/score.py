#!/usr/bin/env python3
"""Compares the plates `cepbus join` (or the bus) flagged with planted.txt.

  cepbus join ... | python3 score.py planted.txt

Reads joined pairs ({"key":..., ...} lines) or composite events with an
attribute a_plate on stdin; prints every flagged plate with its best
probability and whether it was planted, then precision and recall.
"""

import json
import sys


def main():
    planted = {line.strip() for line in open(sys.argv[1]) if line.strip()}
    best = {}
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        j = json.loads(line)
        if "key" in j:
            plate, prob = str(j["key"]), j["prob"]
        else:
            attrs = j.get("attrs", {})
            plate, prob = str(attrs.get("a_plate")), attrs.get("prob", j.get("prob", 1))
        best[plate] = max(prob, best.get(plate, 0))
    for plate in sorted(best, key=lambda p: -best[p]):
        print("%-8s best prob %.3f  %s" % (plate, best[plate], "planted" if plate in planted else "NOT planted"))
    found = planted & set(best)
    precision = len(found) / len(best) if best else 1.0
    recall = len(found) / len(planted) if planted else 1.0
    print("flagged %d plates, %d of %d planted: precision %.2f, recall %.2f"
          % (len(best), len(found), len(planted), precision, recall))


if __name__ == "__main__":
    main()
