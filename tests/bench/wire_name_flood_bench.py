#!/usr/bin/python3
"""Name flood benchmark: what a real `cepbus run` keeps of a client that
floods it with new names over links it opens and closes, then leaves.

One client ("greedy") publishes batches of 10,000 events, each event with a
new type (its subject) and a new property name, each batch over 100 sending
links to new target addresses, which it closes once the batch is settled;
it stays connected until the end, then disconnects. Between batches a
second client ("other") subscribes to a new address and publishes an event
with a new type and a new property to it: it must be accepted and received
throughout. The listener's max-names (1000) is far below the flood, so only
names given back let it through.

It samples the bus's RSS after a warm-up batch (before), its peak (VmHWM)
and its RSS once the greedy client has gone and the names clients hold are
back to what they were (after), and prints one JSON document. The bound the
tracker asks for: after <= before + 16 MB. CPU time is the bus's user+sys.

    /usr/bin/python3 tests/bench/wire_name_flood_bench.py [--cepbus build/dev/bus/app/cepbus]
        [--names 2000000]

--names counts event types and property names (two per event); the
addresses come on top. The same scenario runs in the suite
(tests/integration/wire_name_flood_test.cc) with 200,000 names. The AMQP
client is Debian's python3-qpid-proton (for /usr/bin/python3).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

TICK = os.sysconf("SC_CLK_TCK")
BATCH = 10_000
LINKS_PER_BATCH = 100


class Bus:
    """The cepbus process and its temp folder."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="cepbus-name-flood-")
        path = os.path.join(self.dir, "bus.xml")
        with open(path, "w") as f:
            f.write("""<cepbus name="flood">
  <listeners>
    <amqp host="127.0.0.1" port="0" allow-anonymous="true" max-names="1000"/>
    <http host="127.0.0.1" port="0"/>
  </listeners>
  <routes default-flow="st"/>
</cepbus>
""")
        self.log_path = os.path.join(self.dir, "cepbus.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "run", path], cwd=self.dir, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        # Both listeners take a free port and log it.
        deadline = time.time() + 30
        while True:
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("cepbus did not start:\n" + self.tail())
            log = self.tail(100_000)
            amqp = re.search(r"AMQP 1\.0 listening on amqp://127\.0\.0\.1:(\d+)", log)
            http = re.search(r"admin listening on http://127\.0\.0\.1:(\d+)/", log)
            if amqp and http:
                self.amqp_port, self.http_port = int(amqp.group(1)), int(http.group(1))
                break
            time.sleep(0.2)

    def tail(self, chars=3000):
        self.log.flush()
        return open(self.log_path, errors="replace").read()[-chars:]

    def status_kb(self, key):
        for line in open("/proc/%d/status" % self.proc.pid):
            if line.startswith(key + ":"):
                return int(line.split()[1])
        return 0

    def cpu_s(self):
        fields = open("/proc/%d/stat" % self.proc.pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def names_held(self):
        scrape = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.http_port, timeout=10).read()
        m = re.search(rb"^cepbus_wire_names_held (\d+)", scrape, re.M)
        return int(m.group(1)) if m else 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Flood(MessagingHandler):
    """Runs the greedy client's batches, the other client's turn after each,
    and a last turn of the other client once the greedy one has gone."""

    def __init__(self, bus, events):
        super().__init__(auto_accept=True)
        self.bus = bus
        self.url = "amqp://127.0.0.1:%d" % bus.amqp_port
        self.events = events + BATCH  # the first batch warms up
        self.sent = self.settled = self.rejected = 0
        self.addresses = 0
        self.queued = {}  # sending link -> messages still to send on it
        self.batch_links = []
        self.other_turns = self.other_accepted = self.other_received = self.other_rejected = 0
        self.rss_before_kb = 0
        self.cpu_before_s = 0.0
        self.error = None

    def on_start(self, event):
        self.container = event.container
        self.greedy = event.container.connect(self.url)
        self.other = event.container.connect(self.url)
        self.next_batch()

    def next_batch(self):
        if self.sent >= self.events:
            self.greedy.close()
            self.greedy = None
            self.other_turn()
            return
        n = min(BATCH, self.events - self.sent)
        per_link = [[] for _ in range(LINKS_PER_BATCH)]
        for i in range(n):
            k = self.sent + i
            per_link[i % LINKS_PER_BATCH].append(
                Message(subject="FloodType%d" % k, properties={"ts": k, "flood_property_%d" % k: k}))
        self.sent += n
        self.batch_links = []
        for messages in per_link:
            sender = self.container.create_sender(self.greedy, "flood.a%d" % self.addresses)
            self.addresses += 1
            self.queued[sender] = messages
            self.batch_links.append(sender)

    def on_sendable(self, event):
        messages = self.queued.get(event.sender)
        while messages and event.sender.credit > 0:
            event.sender.send(messages.pop())

    def on_accepted(self, event):
        self.count(event, rejected=False)

    def on_rejected(self, event):
        self.count(event, rejected=True)

    def on_released(self, event):
        self.count(event, rejected=True)

    def count(self, event, rejected):
        if event.connection == self.other:
            self.other_rejected += rejected
            self.other_accepted += not rejected
            event.link.close()
            self.other_done()
            return
        self.settled += 1
        self.rejected += rejected
        if self.settled == self.sent:
            for sender in self.batch_links:
                self.queued.pop(sender, None)
                sender.close()
            if self.sent == BATCH:  # warmed up
                self.rss_before_kb = self.bus.status_kb("VmRSS")
                self.cpu_before_s = self.bus.cpu_s()
            self.other_turn()

    def other_turn(self):
        address = "other.a%d" % self.other_turns
        self.other_pending = 2  # its event accepted, and received
        self.other_receiver = self.container.create_receiver(self.other, address)
        self.other_address = address

    def on_link_opened(self, event):
        if event.link == getattr(self, "other_receiver", None):
            n = self.other_turns
            sender = self.container.create_sender(self.other, self.other_address)
            self.queued[sender] = [Message(subject="OtherType%d" % n, properties={"ts": 1, "other_%d" % n: 1})]

    def on_message(self, event):
        if event.connection == self.other:
            self.other_received += 1
            event.receiver.close()
            self.other_done()

    def other_done(self):
        self.other_pending -= 1
        if self.other_pending > 0:
            return
        self.other_turns += 1
        if self.greedy is not None:
            self.next_batch()
        else:
            self.other.close()

    def on_transport_error(self, event):
        self.error = str(event.transport.condition)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--cepbus", default=os.path.join(root, "build", "dev", "bus", "app", "cepbus"))
    parser.add_argument("--names", type=int, default=2_000_000)
    args = parser.parse_args()

    bus = Bus(os.path.abspath(args.cepbus))
    try:
        held_at_start = bus.names_held()
        flood = Flood(bus, args.names // 2)
        t0 = time.time()
        Container(flood).run()
        if flood.error:
            raise RuntimeError(flood.error)
        deadline = time.time() + 60
        while bus.names_held() > held_at_start and time.time() < deadline:
            time.sleep(0.5)
        result = {
            "cepbus": args.cepbus,
            "flood_names": 2 * (flood.sent - BATCH) + flood.addresses,
            "flood_events": flood.sent - BATCH,
            "flood_links": flood.addresses,
            "flood_rejected": flood.rejected,
            "other_turns": flood.other_turns,
            "other_accepted": flood.other_accepted,
            "other_received": flood.other_received,
            "other_rejected": flood.other_rejected,
            "names_held_before": held_at_start,
            "names_held_after": bus.names_held(),
            "rss_before_kb": flood.rss_before_kb,
            "rss_peak_kb": bus.status_kb("VmHWM"),
            "rss_after_kb": bus.status_kb("VmRSS"),
            "bus_cpu_s": round(bus.cpu_s() - flood.cpu_before_s, 2),
            "wall_s": round(time.time() - t0, 1),
        }
        result["rss_after_minus_before_kb"] = result["rss_after_kb"] - result["rss_before_kb"]
        result["within_16_mb"] = result["rss_after_minus_before_kb"] <= 16 * 1024
        print(json.dumps(result))
        ok = (result["within_16_mb"] and flood.rejected == 0 and flood.other_rejected == 0
              and result["names_held_after"] <= held_at_start)
        return 0 if ok else 1
    finally:
        bus.stop()


if __name__ == "__main__":
    sys.exit(main())
