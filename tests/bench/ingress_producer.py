#!/usr/bin/python3
"""An ordinary AMQP 1.0 producer for a cepbus node's cluster ingress.

Sends every event of a JSON-lines file as one message (the plain event
mapping of docs/amqp.md: subject = type, application property ts, a map
body of the attributes, message-id = the line number as a ulong) to ADDRESS
on HOST:PORT, as fast as the node gives credit, and exits once every
message is accepted. Prints {"sent":N,"accepted":N,"released":N,"rejected":N}.

    tests/bench/ingress_producer.py --url 127.0.0.1:5690 --address demo.in --events FILE
"""
import argparse
import json
import sys

from proton import Message, ulong
from proton.handlers import MessagingHandler
from proton.reactor import Container


class Producer(MessagingHandler):
    def __init__(self, url, address, messages):
        super().__init__()
        self.url, self.address, self.messages = url, address, messages
        self.next = 0
        self.counts = {"sent": 0, "accepted": 0, "released": 0, "rejected": 0}

    def on_start(self, event):
        conn = event.container.connect(self.url, allowed_mechs="ANONYMOUS")
        event.container.create_sender(conn, self.address)

    def on_sendable(self, event):
        while event.sender.credit and self.next < len(self.messages):
            event.sender.send(self.messages[self.next])
            self.next += 1
            self.counts["sent"] += 1

    def settled(self, event, outcome):
        self.counts[outcome] += 1
        if sum(self.counts[k] for k in ("accepted", "released", "rejected")) == len(self.messages):
            event.connection.close()

    def on_accepted(self, event):
        self.settled(event, "accepted")

    def on_released(self, event):
        self.settled(event, "released")

    def on_rejected(self, event):
        self.settled(event, "rejected")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--events", required=True)
    args = parser.parse_args()
    messages = []
    with open(args.events) as f:
        for line in f:
            if not line.strip():
                continue
            e = json.loads(line)
            messages.append(Message(id=ulong(len(messages) + 1), subject=e["type"],
                                    properties={"ts": e["ts"]}, body=e["attrs"]))
    producer = Producer(args.url, args.address, messages)
    Container(producer).run()
    print(json.dumps(producer.counts), flush=True)
    sys.exit(0 if producer.counts["accepted"] == len(messages) else 1)


if __name__ == "__main__":
    main()
