#!/usr/bin/python3
"""One hostile AMQP client that pushes a per-client limit of cepbus until it is stopped.

    hostile_client.py ATTACK PORT

ATTACK is one of:
  names      messages with 20 new property names each, to an address whose
             subscriber (on the same connection) never settles, so the
             events and their names stay held: max-names
  links      receiving links to new addresses, one more for each that is
             refused: max-links
  sessions   sessions, one more for each that is refused: max-sessions
  unsettled  small unsettled messages on 8 links, as fast as credit allows,
             to a reliable address with a subscriber: max-unsettled
  bytes      the same with 60 KiB messages: max-bytes-in-flight
  large      messages of 96 KiB: max-message-size
  invalid    messages that are no event (no timestamp), as fast as credit
             allows: each is rejected, the connection stays

It runs until SIGTERM, then prints one JSON object: what it sent or opened,
and the refusals it heard, counted by AMQP condition, with one description
each (the limit the bus named).
"""

import json
import signal
import sys

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

ADDRESS = "bench.hostile"
ATTACKS = ("names", "links", "sessions", "unsettled", "bytes", "large", "invalid")


class Hostile(MessagingHandler):
    def __init__(self, attack, port):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.attack = attack
        self.url = "127.0.0.1:%d" % port
        self.stopping = False
        self.sent = 0
        self.opened = 0
        self.accepted = 0
        self.refused = {}
        self.said = {}
        self.next_name = 0
        self.conn = None

    def refusal(self, condition):
        name = condition.name if condition else "none"
        self.refused[name] = self.refused.get(name, 0) + 1
        if condition and condition.description and name not in self.said:
            self.said[name] = condition.description

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(self.url, reconnect=False)
        self.container.schedule(0.1, self)
        if self.attack == "names":
            self.container.create_receiver(self.conn, ADDRESS + ".names").flow(100000)
            self.container.create_sender(self.conn, ADDRESS + ".names")
        elif self.attack in ("unsettled", "bytes"):
            receiver = self.container.create_receiver(self.conn, ADDRESS + "." + self.attack)
            receiver.flow(100000)
            for i in range(8):  # link names must differ: Python names them by address
                self.container.create_sender(self.conn, ADDRESS + "." + self.attack,
                                             name="publisher-%d" % i)
        elif self.attack in ("large", "invalid"):
            self.container.create_sender(self.conn, ADDRESS + "." + self.attack)
        elif self.attack == "links":
            for _ in range(32):
                self.open_link()
        elif self.attack == "sessions":
            for _ in range(16):
                self.open_session()

    def on_timer_task(self, event):
        if self.stopping:
            if self.conn is not None:
                self.conn.close()
            self.container.stop()
            return
        self.container.schedule(0.1, self)

    def open_link(self):
        self.opened += 1
        receiver = self.container.create_receiver(self.conn, "%s.l%d" % (ADDRESS, self.opened))
        receiver.flow(10)

    def open_session(self):
        self.opened += 1
        session = self.conn.session()
        session.open()

    def message(self):
        if self.attack == "names":
            props = {}
            for _ in range(20):
                self.next_name += 1
                props["h%d" % self.next_name] = 1
            return Message(subject="Noise", body={}, properties=dict(props, ts=self.sent))
        if self.attack == "invalid":
            return Message(subject="Noise", body={"seq": self.sent})
        size = {"bytes": 60 * 1024, "large": 96 * 1024}.get(self.attack, 16)
        return Message(subject="Noise", properties={"ts": self.sent}, body={"pad": "x" * size})

    def on_sendable(self, event):
        while event.sender.credit > 0 and not self.stopping:
            event.sender.send(self.message())
            self.sent += 1

    def on_accepted(self, event):
        self.accepted += 1

    def on_rejected(self, event):
        self.refusal(event.delivery.remote.condition)

    def on_link_error(self, event):
        self.refusal(event.link.remote_condition)
        if self.attack == "links" and not self.stopping:
            event.link.close()
            self.open_link()

    def on_connection_error(self, event):
        self.refusal(event.connection.remote_condition)

    def on_session_error(self, event):
        self.refusal(event.session.remote_condition)
        if self.attack == "sessions" and not self.stopping:
            event.session.close()
            self.open_session()

    def on_message(self, event):
        if self.attack != "names":
            self.accept(event.delivery)

    def report(self):
        return {
            "bench": "hostile_client",
            "attack": self.attack,
            "sent": self.sent,
            "accepted": self.accepted,
            "opened": self.opened,
            "refused": self.refused,
            "descriptions": self.said,
        }


def main():
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.exit(__doc__)
    if sys.argv[1] not in ATTACKS:
        sys.exit("hostile_client.py: unknown attack '%s' (known: %s)" %
                 (sys.argv[1], ", ".join(ATTACKS)))
    hostile = Hostile(sys.argv[1], int(sys.argv[2]))

    def stop(signum, frame):
        hostile.stopping = True

    signal.signal(signal.SIGTERM, stop)
    Container(hostile).run()
    print(json.dumps(hostile.report()), flush=True)


if __name__ == "__main__":
    main()
