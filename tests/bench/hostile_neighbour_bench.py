#!/usr/bin/python3
"""What one hostile client costs the others: a well-behaved publisher and
subscriber pair's rate and latency on a real `cepbus run`, alone and beside
a client that pushes each per-client limit.

For each attack of tests/bench/hostile_client.py (and "none", the pair
alone), amqp_bench starts the bus with the listener limits below, runs the
hostile client beside it, and measures the pair: an at-least-once publisher
at a fixed rate on a reliable route, its subscriber accepting each message
(amqp_bench's "cepbus" target). Attacks and "none" alternate, round after
round, so that the machine's load falls on all of them alike.

    /usr/bin/python3 tests/bench/hostile_neighbour_bench.py \\
        [--amqp-bench build/test/tests/bench/amqp_bench] [--rate 2000] \\
        [--seconds 10] [--rounds 3] [--attacks names,links,...]

One JSON line per attack: the pair's events/s (median over rounds), its
p50/p99 latency (median), what of its publishes the bus refused (rejected,
released: summed; the pair must lose nothing and be refused nothing), the
messages it did not get, and the hostile client's refusals by AMQP
condition with the limit the bus named.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ATTACKS = ["names", "links", "sessions", "unsettled", "bytes", "large", "invalid"]
# Low enough for the hostile client to reach each quickly; the pair, at its
# rate, needs one link each, one session and a few unsettled publishes.
LIMITS = ('max-names="500" max-links="20" max-sessions="4" max-unsettled="200" '
          'max-bytes-in-flight="200000" max-message-size="65536"')


def run(bench, attack, rate, seconds):
    command = [bench, "--targets", "cepbus", "--modes", "at-least-once", "--rates", str(rate),
               "--seconds", str(seconds), "--listener", LIMITS]
    if attack != "none":
        command += ["--beside",
                    "/usr/bin/python3 %s %s {port}" % (os.path.join(HERE, "hostile_client.py"),
                                                       attack)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("hostile_neighbour_bench: %s failed (%d): %s" %
                 (attack, done.returncode, done.stderr.strip()))
    out = done.stdout
    pair, hostile = None, None
    for line in out.splitlines():
        record = json.loads(line)
        if record["bench"] == "amqp_end_to_end":
            pair = record
        elif record["bench"] == "hostile_client":
            hostile = record
    if pair is None:
        sys.exit("hostile_neighbour_bench: amqp_bench measured nothing for %s: %s" %
                 (attack, done.stderr.strip()))
    if attack != "none" and hostile is None:
        sys.exit("hostile_neighbour_bench: the %s client reported nothing (did it start? "
                 "/usr/bin/python3 needs python3-qpid-proton)" % attack)
    return pair, hostile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--amqp-bench", default=os.path.join("build", "test", "tests", "bench",
                                                             "amqp_bench"))
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    args = parser.parse_args()
    unknown = [a for a in args.attacks.split(",") if a not in ATTACKS]
    if unknown:
        parser.error("unknown attack %s (known: %s)" % (", ".join(unknown), ", ".join(ATTACKS)))
    attacks = ["none"] + args.attacks.split(",")
    results = {attack: [] for attack in attacks}
    for _ in range(args.rounds):
        for attack in attacks:
            results[attack].append(run(args.amqp_bench, attack, args.rate, args.seconds))
    for attack in attacks:
        pairs = [pair for pair, _ in results[attack]]
        refused, said, hostile_sent, hostile_opened = {}, {}, 0, 0
        for _, hostile in results[attack]:
            if hostile is None:
                continue
            hostile_sent += hostile["sent"]
            hostile_opened += hostile["opened"]
            for condition, count in hostile["refused"].items():
                refused[condition] = refused.get(condition, 0) + count
            said.update(hostile["descriptions"])
        print(json.dumps({
            "bench": "hostile_neighbour",
            "attack": attack,
            "params": {"rate": args.rate, "seconds": args.seconds, "rounds": args.rounds,
                       "listener": LIMITS},
            "pair_events_per_s": statistics.median(p["events_per_s"] for p in pairs),
            "pair_p50_us": statistics.median(p["p50_us"] for p in pairs),
            "pair_p99_us": statistics.median(p["p99_us"] for p in pairs),
            "pair_rejected": sum(p["rejected"] for p in pairs),
            "pair_released": sum(p["released"] for p in pairs),
            "pair_missing": sum(p["params"]["messages"] - p["received"] for p in pairs),
            "hostile_sent": hostile_sent,
            "hostile_opened": hostile_opened,
            "hostile_refused": refused,
            "hostile_refusals_said": said,
        }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
