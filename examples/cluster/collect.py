#!/usr/bin/python3
"""Collects a cepbus cluster's composite events from RabbitMQ.

An independent AMQP 1.0 client (Debian's python3-qpid-proton) that consumes
the queue NAME.composites, where every node publishes its composite events,
and writes each distinct composite once: every composite carries its
deterministic id (query + constituent event ids; in its line of a batch
message, or as the message-id of a message of its own), so a composite
replayed after a failover is recognised and only counted. Events re-published
as late (application property "late") are counted, not written. Fails over
along the broker list when a broker dies.

    collect.py --brokers 127.0.0.1:5672,127.0.0.1:5673 --queue demo.composites \\
               --out composites.jsonl --summary collector.json --stop-file DONE

It stops once the stop file exists and no message came for --quiet seconds.
Each output line is the JSON array of the constituents' ts (as `cepbus match`
prints a match).
"""
import argparse
import json
import os
import time

from proton.handlers import MessagingHandler
from proton.reactor import Container

# Nodes publish composites in batches (docs/cluster.md, "Composites on
# <name>.out"): one JSON line per composite, its id in the line; with
# <output batch-events="1">, one composite per message, its id the message-id.
COMPOSITE_BATCH = "cepbus.composites"
EVENT_BATCH = "cepbus.events"


class Collector(MessagingHandler):
    def __init__(self, args):
        super().__init__(prefetch=500, auto_accept=True)
        self.args = args
        self.brokers = args.brokers.split(",")
        self.broker = 0
        self.seen = set()
        self.duplicates = 0
        self.late = 0
        self.reconnects = 0
        self.last_message = time.monotonic()
        self.out = open(args.out, "w")
        self.connection = None
        self.done = False

    def on_start(self, event):
        self.container = event.container
        self.connect()
        self.container.schedule(0.5, self)

    def connect(self):
        url = "amqp://%s:%s@%s" % (self.args.user, self.args.password, self.brokers[self.broker])
        self.connection = self.container.connect(url, reconnect=False, heartbeat=5)
        self.container.create_receiver(self.connection, "/amq/queue/" + self.args.queue)

    def on_message(self, event):
        self.last_message = time.monotonic()
        message = event.message
        props = message.properties or {}
        if message.subject == COMPOSITE_BATCH:
            for line in message.body.splitlines():
                if line:
                    composite = json.loads(line)
                    self.take(composite["id"], json.dumps(composite["match_ts"], separators=(",", ":")))
        elif props.get("late"):
            # A batch of late events (subject cepbus.events), or one.
            self.late += len(message.body.splitlines()) if message.subject == EVENT_BATCH else 1
        else:
            self.take(message.id, props["match-ts"])
        self.out.flush()

    def take(self, composite_id, match_ts):
        if composite_id in self.seen:
            self.duplicates += 1
            return
        self.seen.add(composite_id)
        self.out.write(match_ts + "\n")

    def on_timer_task(self, event):
        quiet = time.monotonic() - self.last_message
        if os.path.exists(self.args.stop_file) and quiet >= self.args.quiet:
            self.finish()
            return
        self.container.schedule(0.5, self)

    def on_transport_closed(self, event):
        if self.done:
            return
        self.broker = (self.broker + 1) % len(self.brokers)
        self.reconnects += 1
        self.container.schedule(0.2, ReconnectTask(self))

    def on_connection_error(self, event):
        pass

    def finish(self):
        self.done = True
        self.out.close()
        with open(self.args.summary, "w") as f:
            json.dump({"composites": len(self.seen), "duplicates": self.duplicates,
                       "late": self.late, "reconnects": self.reconnects}, f)
        if self.connection is not None:
            self.connection.close()
        self.container.stop()


class ReconnectTask:
    def __init__(self, collector):
        self.collector = collector

    def on_timer_task(self, event):
        self.collector.connect()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", required=True, help="host:port,host:port,... (failover order)")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--user", default="guest")
    parser.add_argument("--password", default="guest")
    parser.add_argument("--out", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--quiet", type=float, default=3.0)
    args = parser.parse_args()
    Container(Collector(args)).run()


if __name__ == "__main__":
    main()
