#!/usr/bin/python3
"""Soak benchmark: a real `cepbus run` under a steady AMQP load for a long time.

The bus runs a descriptor this program writes: an AMQP listener, the admin
HTTP listener, a journal and a reliable route for stocks.#, and three CEP
queries on stocks.ticks (equal prices on nfa, a SEQ with negation on petri,
a Kleene burst with aggregates on algebra). Two publishers send unsettled
messages at a steady total rate (--rate events/s) and record which message
ids the bus accepted; a durable subscriber records what it receives and is
detached and re-attached every --restart-every seconds (same container id,
link name and address, so the durable subscription and the reliable route
redeliver what it missed); one subscriber per query counts its composites.

Every 10 s it samples the bus's RSS and peak RSS, its open file descriptors,
the journal's size on disk, the event counts and the latency percentiles of
publish -> durable subscriber (the send time travels in the event) and of
the composites (receive time minus the composite's ts, a wall-clock ms,
which includes the queries' reorder slack). At the end it prints one JSON
document: the samples and a summary with the least-squares slopes of RSS
and fds over the second half, the accepted messages the durable subscriber
never received (lost; must be 0) and the duplicates it received.

    /usr/bin/python3 tests/bench/soak_bench.py [--cepbus build/dev/bus/app/cepbus]
        [--minutes 30] [--rate 1000] [--restart-every 60] [--away 2]

The AMQP client is Debian's python3-qpid-proton (for /usr/bin/python3).
"""
import argparse
import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from proton import Message, ulong
from proton.handlers import MessagingHandler
from proton.reactor import Container, DurableSubscription

TICK = os.sysconf("SC_CLK_TCK")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLE_S = 10
SYMBOLS = ["S%d" % i for i in range(8)]
HALT_SHARE = 0.01  # share of Halt events, the petri query's negated type
DURABLE_CONTAINER = "soak-durable"
DURABLE_LINK = "soak-feed"
INPUT = "stocks.ticks"

# Output address -> (engine, query). Prices are 100..599, so each query
# matches a few dozen times per second at 1,000 events/s.
QUERIES = {
    "alerts.equal": ("nfa", """
        PATTERN SEQ(Stock a, Stock b, Stock c)
        WHERE a.price = b.price AND b.price = c.price
          AND a.symbol != b.symbol AND b.symbol != c.symbol AND a.symbol != c.symbol
        WITHIN 100
        RETURN EqualPrices(a.symbol, b.symbol, c.symbol, a.price)"""),
    "alerts.repeat": ("petri", """
        PATTERN SEQ(Stock a, NOT(Halt h), Stock b)
        WHERE b.symbol = a.symbol AND h.symbol = a.symbol AND b.price = a.price
        WITHIN 200
        RETURN Repeat(a.symbol, a.price)"""),
    "alerts.burst": ("algebra", """
        PATTERN SEQ(Halt h, Stock+ b[], Halt e)
        WHERE b[i].symbol = h.symbol AND e.symbol = h.symbol
        WITHIN 200
        CONTEXT recent
        RETURN Burst(h.symbol, count(b[]) AS n, avg(b[].price) AS mean)"""),
}
SLACK = 200  # ms of event time the queries reorder: two publishers interleave


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def descriptor(journal, amqp_port, http_port):
    queries = "".join(
        """
      <query name="%s" engine="%s" input="%s" output="%s">
        <option name="slack" value="%d"/>
        <text><![CDATA[%s]]></text>
      </query>""" % (out.split(".")[1], engine, INPUT, out, SLACK, text)
        for out, (engine, text) in QUERIES.items())
    return """<cepbus name="soak">
  <logging level="information"/>
  <journal path="%s"/>
  <listeners>
    <amqp host="127.0.0.1" port="%d" allow-anonymous="true"/>
    <http host="127.0.0.1" port="%d"/>
  </listeners>
  <plugins><plugin name="nfa"/><plugin name="petri"/><plugin name="algebra"/></plugins>
  <routes default-flow="st">
    <route address="stocks.#" flow="reliable" qos="reliable"/>
  </routes>
  <service-assembly name="soak">
    <service-unit name="detector" type="cep">%s
    </service-unit>
  </service-assembly>
</cepbus>
""" % (journal, amqp_port, http_port, queries)


def percentiles(values):
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None}
    values = sorted(values)
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))], 2)
    return {"n": len(values), "p50_ms": pick(0.50), "p99_ms": pick(0.99)}


def slope_per_minute(points):
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return None
    return round(60 * sum((p[0] - mx) * (p[1] - my) for p in points) / sxx, 2)


class Ledger:
    """What was sent, accepted and received, per message id, shared by the
    container thread (writes) and the sampler (reads, under the lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next_id = 1
        self.accepted = bytearray()   # 1 = the bus accepted this id
        self.received = bytearray()   # receptions by the durable subscriber (capped at 255)
        self.counts = dict(sent=0, accepted=0, released=0, rejected=0, received=0,
                           duplicates=0, marked_redeliveries=0, durable_attaches=0)
        self.rejections = []
        self.latency = []             # ms, publish -> durable subscriber, this interval
        self.composites = {out: 0 for out in QUERIES}
        self.composite_latency = {out: [] for out in QUERIES}

    def new_id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def _grow(self, buf, i):
        if i >= len(buf):
            buf.extend(bytes(max(i + 1 - len(buf), 65536)))

    def accept(self, i):
        with self.lock:
            self._grow(self.accepted, i)
            self.accepted[i] = 1
            self.counts["accepted"] += 1

    def receive(self, i, latency_ms, marked):
        with self.lock:
            self._grow(self.received, i)
            if self.received[i]:
                self.counts["duplicates"] += 1
            self.received[i] = min(255, self.received[i] + 1)
            self.counts["received"] += 1
            self.counts["marked_redeliveries"] += marked
            if latency_ms is not None:
                self.latency.append(latency_ms)

    def composite(self, out, latency_ms):
        with self.lock:
            self.composites[out] += 1
            if latency_ms is not None:
                self.composite_latency[out].append(latency_ms)

    def count(self, name, n=1):
        with self.lock:
            self.counts[name] += n

    def interval(self):
        """Counters now and the latencies since the last call."""
        with self.lock:
            latency, self.latency = self.latency, []
            composite = self.composite_latency
            self.composite_latency = {out: [] for out in QUERIES}
            return dict(self.counts), dict(self.composites), latency, composite

    def missing(self):
        with self.lock:
            self._grow(self.received, len(self.accepted))
            return [i for i in range(len(self.accepted)) if self.accepted[i] and not self.received[i]]


class Publisher(MessagingHandler):
    """Sends `rate` events/s, unsettled, on its own connection; resends what
    the bus released (a retry, as AMQP asks), counts what it rejected."""

    TICK_S = 0.02

    def __init__(self, url, rate, ledger, rng):
        super().__init__(auto_settle=True)
        self.url, self.rate, self.ledger, self.rng = url, rate, ledger, rng
        self.inflight = {}
        self.retry = []
        self.sent = 0
        self.running = False
        self.sender = None

    def on_start(self, event):
        self.sender = event.container.create_sender(self.url, target=INPUT, handler=self)

    def begin(self, container):
        self.started = time.time()
        self.running = True
        container.schedule(self.TICK_S, self)

    def on_timer_task(self, event):
        if not self.running:
            return
        due = int(self.rate * (time.time() - self.started)) - self.sent
        while due > 0 and self.sender.credit > 0:
            self.send(self.retry.pop(0) if self.retry else self.ledger.new_id())
            due -= 1
        event.container.schedule(self.TICK_S, self)

    def send(self, i):
        now = time.time()
        halt = self.rng.random() < HALT_SHARE
        props = {"ts": int(now * 1000), "symbol": self.rng.choice(SYMBOLS), "sent": now}
        if not halt:
            props["price"] = self.rng.randint(100, 599)
        msg = Message(id=ulong(i), subject="Halt" if halt else "Stock", properties=props)
        self.inflight[self.sender.send(msg).tag] = i
        self.sent += 1
        self.ledger.count("sent")

    def on_accepted(self, event):
        self.ledger.accept(self.inflight.pop(event.delivery.tag))

    def on_released(self, event):
        self.retry.append(self.inflight.pop(event.delivery.tag))
        self.ledger.count("released")

    def on_rejected(self, event):
        i = self.inflight.pop(event.delivery.tag)
        self.ledger.count("rejected")
        if len(self.ledger.rejections) < 5:
            cond = event.delivery.remote.condition
            self.ledger.rejections.append({"id": i, "condition": str(cond)})

    def on_transport_error(self, event):
        raise RuntimeError("publisher connection: %s" % event.transport.condition)


class DurableSubscriber(MessagingHandler):
    """A durable subscription to the input, detached and re-attached (same
    container id, link name and address) every `restart_every` seconds after
    `away` seconds without a link."""

    def __init__(self, url, ledger, restart_every, away, on_attached):
        super().__init__(prefetch=500)
        self.url, self.ledger = url, ledger
        self.restart_every, self.away = restart_every, away
        self.on_attached = on_attached
        self.conn = self.receiver = None
        self.cycling = True

    def on_start(self, event):
        self.attach(event.container)

    def attach(self, container):
        # Proton gives a connection its container's id: borrow ours for this one.
        own, container.container_id = container.container_id, DURABLE_CONTAINER
        try:
            self.conn = container.connect(self.url, handler=self)
        finally:
            container.container_id = own
        self.receiver = container.create_receiver(self.conn, INPUT, name=DURABLE_LINK,
                                                  options=DurableSubscription())

    def on_link_opened(self, event):
        if event.link == self.receiver:
            self.ledger.count("durable_attaches")
            if self.on_attached:
                self.on_attached(event.container)
                self.on_attached = None
            if self.cycling:
                event.container.schedule(self.restart_every, Call(self.detach))

    def detach(self, container):
        if not self.cycling or self.receiver is None:
            return
        # Detach, not close: a closed link would end the durable subscription.
        self.receiver.detach()
        self.conn.close()
        self.receiver = self.conn = None
        container.schedule(self.away, Call(self.attach))

    def on_message(self, event):
        msg = event.message
        body = msg.body if isinstance(msg.body, dict) else {}
        sent = body.get("sent")
        latency = (time.time() - sent) * 1000 if isinstance(sent, float) else None
        marked = 1 if (msg.delivery_count or 0) > 0 else 0
        self.ledger.receive(int(msg.id), latency, marked)

    def on_transport_error(self, event):
        if self.conn is not None and event.connection == self.conn:
            raise RuntimeError("durable subscriber connection: %s" % event.transport.condition)


class CompositeSubscriber(MessagingHandler):
    def __init__(self, url, address, ledger):
        super().__init__(prefetch=500)
        self.url, self.address, self.ledger = url, address, ledger

    def on_start(self, event):
        event.container.create_receiver(event.container.connect(self.url, handler=self), self.address)

    def on_message(self, event):
        ts = (event.message.properties or {}).get("ts")
        latency = time.time() * 1000 - ts if isinstance(ts, int) else None
        self.ledger.composite(self.address, latency)


class Call:
    """A container timer task that calls fn(container)."""

    def __init__(self, fn):
        self.fn = fn

    def on_timer_task(self, event):
        self.fn(event.container)


class Load(MessagingHandler):
    """The container's root handler: starts the subscribers, then the
    publishers once the durable subscription exists."""

    def __init__(self, url, args, ledger):
        super().__init__()
        rng = random.Random(args.seed)
        per = args.rate / args.publishers
        self.publishers = [Publisher(url, per, ledger, random.Random(rng.random()))
                           for _ in range(args.publishers)]
        self.durable = DurableSubscriber(url, ledger, args.restart_every, args.away, self.begin)
        self.composites = [CompositeSubscriber(url, out, ledger) for out in QUERIES]
        self.started = threading.Event()
        self.error = None

    def on_start(self, event):
        for h in [self.durable] + self.composites + self.publishers:
            h.on_start(event)

    def begin(self, container):
        for p in self.publishers:
            p.begin(container)
        self.started.set()

    def stop_publishing(self):
        for p in self.publishers:
            p.running = False

    def unsent(self):
        return sum(len(p.inflight) for p in self.publishers)


class Bus:
    """The cepbus process and its temp folder."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="cepbus-soak-")
        self.journal_dir = os.path.join(self.dir, "journal")
        os.mkdir(self.journal_dir)
        self.amqp_port, self.http_port = free_port(), free_port()
        path = os.path.join(self.dir, "soak.xml")
        with open(path, "w") as f:
            f.write(descriptor(os.path.join(self.journal_dir, "journal.db"), self.amqp_port, self.http_port))
        self.log_path = os.path.join(self.dir, "cepbus.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "run", path], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid

    def wait_listening(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.check_alive()
            try:
                socket.create_connection(("127.0.0.1", self.amqp_port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("cepbus did not listen on %d within %d s:\n%s" % (self.amqp_port, timeout, self.tail()))

    def check_alive(self):
        if self.proc.poll() is not None:
            raise RuntimeError("cepbus exited with status %d:\n%s" % (self.proc.returncode, self.tail()))

    def tail(self, chars=3000):
        self.log.flush()
        return open(self.log_path, errors="replace").read()[-chars:]

    def sample(self):
        status = {}
        for line in open("/proc/%d/status" % self.pid):
            key, _, value = line.partition(":")
            status[key] = value.split()
        journal = 0
        for name in os.listdir(self.journal_dir):
            try:
                journal += os.path.getsize(os.path.join(self.journal_dir, name))
            except OSError:
                pass
        return {"rss_kb": int(status["VmRSS"][0]), "peak_rss_kb": int(status["VmHWM"][0]),
                "fds": len(os.listdir("/proc/%d/fd" % self.pid)), "threads": int(status["Threads"][0]),
                "journal_bytes": journal}

    def cpu_s(self):
        fields = open("/proc/%d/stat" % self.pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def admin(self, path):
        try:
            return json.load(urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.http_port, path), timeout=5))
        except (OSError, ValueError) as e:
            return {"error": "%s: %s" % (path, e)}

    def counters(self):
        """The reliable flow's journal and the AMQP listener's counters that
        explain a loss or a slowdown."""
        flows = self.admin("/api/flows").get("flows", [])
        journal = next((f.get("journal") for f in flows if f.get("name") == "reliable"), None)
        listener = self.admin("/api/components/amqp-listener").get("stats", {})
        keep = ("released", "parked_overflow", "parked_subscriptions", "subscriber_stalls",
                "awaiting_commit", "unsettled", "credit_pauses", "redelivered", "connections")
        return {"journal": journal, "listener": {k: int(listener[k]) for k in keep if k in listener}}

    def stop(self, keep_log=None):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        if keep_log:
            shutil.copyfile(self.log_path, keep_log)
        shutil.rmtree(self.dir, ignore_errors=True)


def run(args, bus):
    ledger = Ledger()
    load = Load("amqp://127.0.0.1:%d" % bus.amqp_port, args, ledger)
    container = Container(load)

    def loop():
        try:
            container.run()
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            load.error = e
            load.started.set()

    threading.Thread(target=loop, daemon=True).start()
    if not load.started.wait(30) or load.error:
        raise RuntimeError("the durable subscriber did not attach: %s\n%s" % (load.error, bus.tail()))

    samples = []
    t0 = time.time()
    end = t0 + args.minutes * 60
    prev = None

    def take():
        nonlocal prev
        counts, composites, latency, composite_latency = ledger.interval()
        own = resource.getrusage(resource.RUSAGE_SELF)
        s = dict(t_s=round(time.time() - t0, 1), **bus.sample(), **counts,
                 bus_cpu_s=round(bus.cpu_s(), 1), client_cpu_s=round(own.ru_utime + own.ru_stime, 1),
                 load_avg_1m=os.getloadavg()[0], bus_counters=bus.counters(),
                 composites=composites, latency=percentiles(latency),
                 composite_latency={out: percentiles(v) for out, v in composite_latency.items()})
        if prev is not None:
            s["accepted_per_s"] = round((counts["accepted"] - prev["accepted"]) / (s["t_s"] - prev["t_s"]), 1)
        prev = s
        samples.append(s)
        print(json.dumps({k: s[k] for k in ("t_s", "rss_kb", "fds", "journal_bytes", "accepted", "received")}
                         | {"p99_ms": s["latency"]["p99_ms"]}), file=sys.stderr, flush=True)

    take()
    while time.time() < end:
        time.sleep(min(SAMPLE_S, max(0, end - time.time())))
        bus.check_alive()
        if load.error:
            raise RuntimeError("AMQP client: %s" % load.error)
        take()

    # Drain: stop publishing, keep the durable subscriber attached, wait for
    # every accepted id (and for the publishers' in-flight messages).
    load.stop_publishing()
    load.durable.cycling = False
    drain_end = time.time() + args.drain
    while time.time() < drain_end:
        time.sleep(1)
        bus.check_alive()
        if load.unsent() == 0 and load.durable.receiver is not None and not ledger.missing():
            break
    take()
    missing = ledger.missing()
    admin = {path: bus.admin("/api/" + path) for path in ("flows", "routes", "queries")}
    admin["amqp-listener"] = bus.admin("/api/components/amqp-listener")
    return summary(args, samples, ledger, missing, load.unsent(), admin)


def summary(args, samples, ledger, missing, in_doubt, admin):
    first, last = samples[0], samples[-1]
    half = [s for s in samples if s["t_s"] >= last["t_s"] / 2]
    p99 = [s["latency"]["p99_ms"] for s in samples if s["latency"]["p99_ms"] is not None]
    counts = ledger.counts
    return {
        "bench": "soak",
        "params": {"minutes": args.minutes, "rate": args.rate, "publishers": args.publishers,
                   "restart_every_s": args.restart_every, "away_s": args.away, "sample_s": SAMPLE_S,
                   "slack": SLACK, "seed": args.seed, "cepbus": args.cepbus},
        "summary": {
            "duration_s": last["t_s"],
            "events_sent": counts["sent"], "accepted": counts["accepted"],
            "released": counts["released"], "rejected": counts["rejected"],
            "rejections": ledger.rejections,
            "received": counts["received"], "durable_attaches": counts["durable_attaches"],
            "rss_kb": {"start": first["rss_kb"], "end": last["rss_kb"], "peak": last["peak_rss_kb"],
                       "slope_kb_per_min_second_half": slope_per_minute([(s["t_s"], s["rss_kb"]) for s in half])},
            "fds": {"start": first["fds"], "end": last["fds"],
                    "slope_per_min_second_half": slope_per_minute([(s["t_s"], s["fds"]) for s in half])},
            "journal_bytes": {"start": first["journal_bytes"], "end": last["journal_bytes"],
                              "max": max(s["journal_bytes"] for s in samples)},
            "p99_ms": {"start": p99[0] if p99 else None, "end": p99[-1] if p99 else None,
                       "max": max(p99) if p99 else None},
            "lost": len(missing), "lost_first_ids": missing[:10],
            "in_doubt_unsettled": in_doubt,
            "duplicates": counts["duplicates"], "marked_redeliveries": counts["marked_redeliveries"],
            "composites": dict(ledger.composites),
        },
        "bus_status": admin,
        "samples": samples,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cepbus", default=os.path.join(ROOT, "build/dev/bus/app/cepbus"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--rate", type=float, default=1000, help="total events/s")
    ap.add_argument("--publishers", type=int, default=2)
    ap.add_argument("--restart-every", type=float, default=60, help="s between durable subscriber restarts")
    ap.add_argument("--away", type=float, default=2, help="s the durable subscriber stays away")
    ap.add_argument("--drain", type=float, default=60, help="s to wait for the last deliveries")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", help="keep the bus's log in this file (the temp folder is removed)")
    args = ap.parse_args()
    if args.publishers < 2:
        ap.error("--publishers: at least 2")
    if not os.access(args.cepbus, os.X_OK):
        sys.exit("no cepbus program at %s (--cepbus PATH)" % args.cepbus)

    # SIGTERM ends the run like Ctrl-C: through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    bus = Bus(args.cepbus)
    try:
        bus.wait_listening()
        result = run(args, bus)
    except KeyboardInterrupt:
        sys.exit("interrupted")
    except RuntimeError as e:
        sys.exit("soak_bench: %s" % e)
    finally:
        bus.stop(args.log)
    print(json.dumps(result, indent=1))
    sys.exit(1 if result["summary"]["lost"] else 0)


if __name__ == "__main__":
    main()
