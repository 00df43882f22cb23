#!/usr/bin/env python3
"""Generates the quickstart's stock stream (stocks.jsonl).

Three symbols tick in turn on independent random walks, so their prices
almost never meet. Every `--every` ticks the generator plants a moment where
all three trade at one price, one after the other: exactly what the
quickstart's equal-prices query (P3's example) is looking for. The planted
moments are printed on stderr so a run can be checked against them.

    python3 generate_stocks.py --events 600 --seed 7 > stocks.jsonl
"""
import argparse
import json
import random
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=600)
    parser.add_argument("--every", type=int, default=60, help="ticks between planted moments")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    prices = {"IBM": 140.0, "MSFT": 330.0, "ORCL": 110.0}
    symbols = list(prices)
    ts = 0
    n = 0
    planted = 0
    while n < args.events:
        if n > 0 and n % args.every == 0 and n + 3 <= args.events:
            price = round(rng.uniform(50, 400), 2)
            order = symbols[:]
            rng.shuffle(order)
            for s in order:
                ts += rng.randint(1, 20)
                print(json.dumps({"type": "Stock", "ts": ts,
                                  "attrs": {"symbol": s, "price": price, "volume": rng.randint(1, 900)}}))
                n += 1
            planted += 1
            print(f"planted: {order} at {price} ending ts {ts}", file=sys.stderr)
            continue
        s = symbols[n % 3]
        prices[s] = round(max(1.0, prices[s] + rng.gauss(0, 1.5)), 2)
        ts += rng.randint(1, 20)
        print(json.dumps({"type": "Stock", "ts": ts,
                          "attrs": {"symbol": s, "price": prices[s], "volume": rng.randint(1, 900)}}))
        n += 1
    print(f"{n} events, {planted} planted moments", file=sys.stderr)


if __name__ == "__main__":
    main()
