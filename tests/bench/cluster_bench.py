#!/usr/bin/python3
"""Scale-out benchmark: events/s through a cepbus cluster on RabbitMQ.

For every (nodes, partitions) point it declares a fresh topology, starts the
cepbus nodes (equal-prices query partitioned by price), publishes a stock
stream as fast as the broker takes it (`cepbus cluster publish
--end-of-stream`), and measures the time until the nodes have accepted every
message (every event processed, every composite accepted by the broker:
/api/cluster's settled counts, then the partition queues are checked empty).
Beside it, in the same run, the RabbitMQ-only figure for the same path: the
same publisher into the same partition queues with no consumer, so the
broker's own ingest bound is visible. Each is measured with one event per
message and with batches (--batches), for each partition input (--inputs:
quorum queues, and streams with lease tokens) and for each way in (--via:
`cepbus cluster publish`, or an ordinary AMQP 1.0 producer sending one event
per message into node 1's <ingress>, which batches them), and for each
bound on the composites the nodes pack into one message to <name>.out
(--out-batches: <output batch-events=N>; 1 is a message per composite).
Then the takeover figures: SIGKILL and
SIGSTOP of an active node while events flow, with the replayed messages and
the time the survivor took to replay them (rebuild).
Every throughput point also says where the time went: the CPU seconds of
each RabbitMQ node, each cepbus node (per thread) and the publisher, per
event, and how busy the machine was; with --profile, `perf record` samples
the cepbus nodes and the brokers during the point and the report names the
top functions. The last line is the model those per-event costs give for N
machines (cluster_model). With --latency-rate, the latency the ingress's
linger adds: the C++ producer sends one event per message at that rate into
node 1's ingress (1 node, queue input, --latency-partitions) and reports its
send-to-accept percentiles per <ingress linger-ms> of --latency-lingers, the
0 ms linger being what the brokers' confirm costs without waiting
(cluster_ingress_latency). Prints one JSON object per measurement.

    tests/bench/cluster_bench.py --cepbus build/release/bus/app/cepbus
        [--events 20000] [--nodes 1,2,3] [--partitions 1,4,12] [--batches 1,32]
        [--inputs queue,stream] [--via publish,ingress] [--out-batches 1,256]
        [--no-takeover] [--profile]
        [--latency-rate 1000 --ingress-producer build/.../ingress_producer
         [--latency-lingers 0,5,50] [--latency-seconds 15] [--no-throughput]]

Starts and stops its own 3-node RabbitMQ cluster (scripts/rabbitmq-cluster.sh).
"""
import argparse
import base64
import collections
import json
import os
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
QUERY = open(os.path.join(ROOT, "examples/cluster/equal-prices.query")).read().strip()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Broker:
    def __init__(self, work):
        self.dir = os.path.join(work, "rabbitmq")
        env = dict(os.environ, CEPBUS_RMQ_OWNER_PID=str(os.getpid()))
        subprocess.run(["bash", os.path.join(ROOT, "scripts/rabbitmq-cluster.sh"), "start", self.dir],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        values = {}
        for line in open(os.path.join(self.dir, "cluster.env")):
            if not line.startswith("#"):
                for item in shlex.split(line):
                    if "=" in item:
                        k, v = item.split("=", 1)
                        values[k] = v
        self.amqp = [int(p) for p in values["RMQ_AMQP_PORTS"].split()]
        self.pids = [int(p) for p in values["RMQ_PIDS"].split()]
        self.mgmt = [int(p) for p in values["RMQ_MGMT_PORTS"].split()]

    def queue_messages(self, name):
        auth = "Basic " + base64.b64encode(b"guest:guest").decode()
        req = urllib.request.Request("http://127.0.0.1:%d/api/queues/%%2F/%s" % (self.mgmt[0], name),
                                     headers={"Authorization": auth})
        return json.load(urllib.request.urlopen(req, timeout=5)).get("messages", 0) or 0

    def stop(self):
        subprocess.run(["bash", os.path.join(ROOT, "scripts/rabbitmq-cluster.sh"), "stop", self.dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(stat_path):
    """utime + stime of a process or thread, from its /proc stat line."""
    try:
        fields = open(stat_path).read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def thread_cpu(pid):
    """CPU seconds per thread name (digits folded: a pool's workers are one row)."""
    rows = collections.Counter()
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return rows
    for tid in tids:
        try:
            name = open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip()
        except OSError:
            continue
        rows[re.sub(r"\d+", "N", name)] += cpu_seconds("/proc/%d/task/%s/stat" % (pid, tid))
    return rows


class CpuMeter:
    """CPU spent by the brokers, the cepbus nodes and the publisher between start() and stop()."""

    def __init__(self, brokers, nodes):
        self.brokers, self.nodes = brokers, nodes

    def sample(self):
        return ([cpu_seconds("/proc/%d/stat" % p) for p in self.brokers],
                [thread_cpu(p) for p in self.nodes],
                resource.getrusage(resource.RUSAGE_CHILDREN), time.time())

    def start(self):
        self.first = self.sample()

    def stop(self, events):
        (b0, n0, c0, t0), (b1, n1, c1, t1) = self.first, self.sample()
        per_event = lambda seconds: round(seconds * 1e6 / events, 1)
        brokers = [b - a for a, b in zip(b0, b1)]
        threads = collections.Counter()
        for before, after in zip(n0, n1):
            for name, seconds in after.items():
                threads[name] += seconds - before.get(name, 0.0)
        nodes = sum(threads.values())
        # Children reaped in between: only the publisher (the nodes run on).
        publisher = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        wall = t1 - t0
        return {"broker_us_per_event": per_event(sum(brokers)),
                "each_broker_us_per_event": [per_event(b) for b in brokers],
                "nodes_us_per_event": per_event(nodes),
                "node_threads_us_per_event": {n: per_event(t) for n, t in threads.most_common(6) if t > 0},
                "publisher_us_per_event": per_event(publisher),
                "machine_busy": round((sum(brokers) + nodes + publisher) / (wall * os.cpu_count()), 2)}


class Profiler:
    """perf record over some processes; report() gives the top symbols and the share per program."""

    def __init__(self, work, name, pids):
        self.data = os.path.join(work, name + ".perf")
        self.proc = subprocess.Popen(["perf", "record", "-q", "-F", "499", "-g", "-o", self.data,
                                      "-p", ",".join(str(p) for p in pids)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def report(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        def rows(sort, limit):
            out = subprocess.run(["perf", "report", "-i", self.data, "--stdio", "--no-children",
                                  "-g", "none", "--percent-limit", "1", "--sort", sort],
                                 capture_output=True, text=True).stdout
            found = []
            for line in out.splitlines():
                m = re.match(r"\s*([\d.]+)%\s+(.*\S)", line)
                if m:
                    found.append([float(m.group(1)), re.sub(r"\s+", " ", m.group(2))])
            return found[:limit]
        return {"by_program_and_library": rows("comm,dso", 12), "top_functions": rows("comm,sym", 20)}


class Scenario:
    def __init__(self, args, broker, work, name, nodes, partitions, input="queue", ingress_batch=0,
                 out_batch=None, ingress_linger_ms=None):
        self.args, self.broker, self.name = args, broker, name
        self.ingress_linger_ms = (args.ingress_linger_ms if ingress_linger_ms is None
                                  else ingress_linger_ms)
        # <output batch-events>: composites per message to <name>.out (None: the default).
        self.out_batch = out_batch
        self.nodes, self.partitions, self.input = nodes, partitions, input
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        self.procs = {}
        self.http = {}
        # With ingress_batch, node 1 takes the producers' events (<ingress>),
        # in batches of at most that many events.
        self.ingress_batch = ingress_batch
        self.ingress_port = free_port() if ingress_batch else 0
        for k in range(1, 4):
            self.write_node(k)

    def write_node(self, k):
        brokers = "".join('<broker host="127.0.0.1" port="%d" management-port="%d"/>'
                          % (self.broker.amqp[(k - 1 + i) % 3], self.broker.mgmt[(k - 1 + i) % 3])
                          for i in range(3))
        self.http[k] = free_port()
        if self.out_batch is not None:
            brokers += '<output batch-events="%d"/>' % self.out_batch
        if k == 1 and self.ingress_port:
            brokers += ('<ingress port="%d" batch-events="%d" linger-ms="%d"%s/>'
                        % (self.ingress_port, self.ingress_batch, self.ingress_linger_ms,
                           ' credit="%d"' % self.args.ingress_credit if self.args.ingress_credit else ""))
        text = ('<cepbus name="n%d"><logging level="warning"/><listeners><http host="127.0.0.1" '
                'port="%d"/></listeners><cluster name="%s" node="n%d" partitions="%d" key="price" '
                'heartbeat="300" idle-timeout="2000" input="%s"%s>%s<query name="q" engine="nfa" '
                'output="out"><text><![CDATA[%s]]></text></query></cluster></cepbus>'
                % (k, self.http[k], self.name, k, self.partitions, self.input,
                   ' retention="1h"' if self.input == "stream" else "", brokers, QUERY))
        open(os.path.join(self.dir, "n%d.xml" % k), "w").write(text)

    def cepbus(self, *argv, **kw):
        return subprocess.run([self.args.cepbus] + list(argv), capture_output=True, text=True, **kw)

    def init(self):
        r = self.cepbus("cluster", "init", os.path.join(self.dir, "n1.xml"))
        if r.returncode != 0:
            sys.exit(r.stderr)

    def start(self, k):
        log = open(os.path.join(self.dir, "n%d.log" % k), "a")
        self.procs[k] = subprocess.Popen([self.args.cepbus, "run", os.path.join(self.dir, "n%d.xml" % k)],
                                         stdout=log, stderr=log)

    def check_alive(self):
        """A node that exited (a plugin that does not load, say) ends the benchmark with its log."""
        for k, p in self.procs.items():
            if p.poll() is not None:
                self.stop()
                log = open(os.path.join(self.dir, "n%d.log" % k)).read()[-2000:]
                sys.exit("cepbus node %d exited with status %d:\n%s" % (k, p.returncode, log))

    def stats(self, k):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/api/cluster" % self.http[k], timeout=2) as r:
                return json.load(r)["nodes"][0]
        except Exception:
            return {}

    def publish(self, events, rate=0, batch=1):
        return subprocess.Popen([self.args.cepbus, "cluster", "publish", os.path.join(self.dir, "n1.xml"),
                                 "--events", events, "--rate", str(rate), "--batch", str(batch),
                                 "--end-of-stream"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ingress_produce(self, events, *options):
        """One event per message through node 1's ingress (an ordinary AMQP
        1.0 producer): the producer's JSON line."""
        program = ([self.args.ingress_producer] if self.args.ingress_producer else
                   ["/usr/bin/python3", os.path.join(ROOT, "tests/bench/ingress_producer.py")])
        producer = subprocess.run(program + ["--url", "127.0.0.1:%d" % self.ingress_port,
                                   "--address", self.name + ".in", "--events", events] + list(options),
                                  capture_output=True, text=True)
        if producer.returncode != 0:
            self.stop()
            sys.exit("ingress producer: " + producer.stdout + producer.stderr)
        return json.loads(producer.stdout)

    def ingress_publish(self, events):
        """The events through node 1's ingress, then the end-of-stream markers
        through `cluster publish`."""
        self.ingress_produce(events)
        none = os.path.join(self.dir, "none.jsonl")
        open(none, "w").close()
        return self.publish(none)

    def drained(self, timeout=600):
        # Queue lengths are management samples up to a second old
        # (scripts/rabbitmq-cluster.sh): read none from before the last publish.
        time.sleep(1.5)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.input == "stream" and self.streams_done():
                return True
            if self.input == "queue" and all(
                    self.broker.queue_messages("%s.p%d" % (self.name, p)) == 0
                    for p in range(self.partitions)):
                return True
            time.sleep(0.05)
        return False

    def streams_done(self):
        """Streams keep every event: done is every partition past its end
        marker with nothing held and its lease caught up (docs/cluster.md)."""
        done = set()
        for k in self.procs:
            for p in self.stats(k).get("partitions", []):
                if (p.get("role") == "active" and p.get("stream_ended") and p.get("held") == 0
                        and p.get("lease_offset") is not None
                        and p.get("lease_offset") == p.get("resume_from")):
                    done.add(p["partition"])
        return len(done) == self.partitions

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def throughput(args, broker, work, events, count, nodes, partitions, batch, index, input, via="publish",
               out_batch=None):
    s = Scenario(args, broker, work, "tp%d" % index, nodes, partitions, input,
                 ingress_batch=batch if via == "ingress" else 0, out_batch=out_batch)
    s.init()
    for k in range(1, nodes + 1):
        s.start(k)
    time.sleep(2)
    meter = CpuMeter(broker.pids, [s.procs[k].pid for k in range(1, nodes + 1)])
    profiler = (Profiler(work, s.name, broker.pids + [s.procs[k].pid for k in range(1, nodes + 1)])
                if args.profile else None)
    meter.start()
    t0 = time.time()
    pub = s.ingress_publish(events) if via == "ingress" else s.publish(events, batch=batch)
    out, err = pub.communicate()
    if pub.returncode != 0:
        sys.exit(err)
    t_pub = time.time() - t0
    # Done when the nodes accepted every event and end marker (their stats
    # refresh every heartbeat, 300 ms); the queues' emptiness confirms it.
    settled = 0
    while time.time() < t0 + 600:
        s.check_alive()
        settled = sum(s.stats(k).get("settled", 0) for k in range(1, nodes + 1))
        if settled >= count + partitions:
            break
        time.sleep(0.05)
    t_all = time.time() - t0
    cpu = meter.stop(count)
    profile = profiler.report() if profiler else None
    ok = s.drained()
    composites = sum(s.stats(k).get("composites", 0) for k in range(1, nodes + 1))
    s.stop()
    result = {"bench": "cluster_throughput", "params": {"via": via, "input": input, "nodes": nodes,
              "partitions": partitions, "batch": batch, "out_batch": out_batch, "events": count,
              "producer": ("c++" if args.ingress_producer else "python") if via == "ingress" else "publish",
              "ingress_credit": args.ingress_credit or None, "ingress_linger_ms": args.ingress_linger_ms}, "events_per_s": round(count / t_all), "publish_s": round(t_pub, 2),
              "total_s": round(t_all, 2), "drained": ok, "composites": composites, "cpu": cpu}
    if profile:
        result["profile"] = profile
    print(json.dumps(result), flush=True)
    return result


def ingress_latency(args, broker, work, events, count, linger_ms, index):
    """The C++ producer paced at --latency-rate through node 1's ingress: its
    send-to-accept times, i.e. the batch's linger plus the brokers' confirm."""
    partitions = args.latency_partitions
    s = Scenario(args, broker, work, "lat%d" % index, 1, partitions, "queue",
                 ingress_batch=args.latency_batch, ingress_linger_ms=linger_ms)
    s.init()
    s.start(1)
    time.sleep(2)
    s.check_alive()
    meter = CpuMeter(broker.pids, [s.procs[1].pid])
    meter.start()
    producer = s.ingress_produce(events, "--rate", str(args.latency_rate))
    cpu = meter.stop(count)
    s.stop()
    print(json.dumps({"bench": "cluster_ingress_latency", "params": {
        "input": "queue", "nodes": 1, "partitions": partitions, "rate": args.latency_rate,
        "events": count, "ingress_linger_ms": linger_ms, "ingress_batch": args.latency_batch,
        "ingress_credit": args.ingress_credit or None},
        "latency_ms": producer["latency_ms"], "behind_max_ms": producer["behind_max_ms"],
        "accepted": producer["accepted"],
        "p99_within_linger_plus_5ms": producer["latency_ms"]["p99"] <= linger_ms + 5,
        "cpu": cpu}), flush=True)


def rabbitmq_only(args, broker, work, events, count, partitions, batch, index, input):
    s = Scenario(args, broker, work, "rmq%d" % index, 0, partitions, input)
    s.init()
    meter = CpuMeter(broker.pids, [])
    meter.start()
    t0 = time.time()
    pub = s.publish(events, batch=batch)
    _, err = pub.communicate()
    if pub.returncode != 0:
        sys.exit(err)
    t = time.time() - t0
    cpu = meter.stop(count)
    print(json.dumps({"bench": "rabbitmq_only_publish", "params": {"input": input, "partitions": partitions,
                                                                    "batch": batch, "events": count},
                      "events_per_s": round(count / t), "total_s": round(t, 2), "cpu": cpu}), flush=True)


def takeover(args, broker, work, events, how):
    s = Scenario(args, broker, work, "take-" + how, 2, 4)
    s.init()
    s.start(1)
    s.start(2)
    time.sleep(2)
    pub = s.publish(events, rate=1000)

    def roles(k):
        return [p["role"] for p in s.stats(k).get("partitions", [])]

    deadline = time.time() + 30
    while time.time() < deadline and not ("active" in roles(1) and "active" in roles(2)):
        s.check_alive()
        time.sleep(0.05)
    before = s.stats(1).get("replayed", 0)
    t0 = time.time()
    s.procs[2].send_signal(signal.SIGKILL if how == "sigkill" else signal.SIGSTOP)
    while time.time() < t0 + 30 and roles(1).count("active") < 4:
        time.sleep(0.01)
    t_take = time.time() - t0
    # Rebuild: the survivor replays what the other node held; it is done
    # when its replayed count stops growing (sampled every 50 ms, settled
    # once it held still for 2 s or the publisher finished).
    replayed, last_change = s.stats(1).get("replayed", 0), time.time()
    while time.time() - last_change < 2 and (pub.poll() is None or time.time() - last_change < 0.5):
        now = s.stats(1).get("replayed", replayed)
        if now != replayed:
            replayed, last_change = now, time.time()
        time.sleep(0.05)
    t_rebuild = max(0.0, last_change - (t0 + t_take))
    pub.communicate()
    s.drained()
    after = s.stats(1).get("replayed", 0)
    s.stop()
    print(json.dumps({"bench": "cluster_takeover", "params": {"signal": how, "idle_timeout_ms": 2000},
                      "takeover_ms": round(t_take * 1000), "rebuild_ms": round(t_rebuild * 1000),
                      "replayed": after - before}), flush=True)


def model(points, cores):
    """What N machines would sustain, from the per-event CPU costs measured here.

    Each event costs b CPU-µs summed over the broker nodes (a quorum queue
    keeps three replicas: the leader's and two followers' work, wherever they
    run), c CPU-µs in the cepbus node that owns its partition, and u in its
    publisher. Spread over M broker machines, N cepbus machines and Q
    publishers of K cores each, and with r the rate one partition sustained
    here (a quorum queue's leader is one Erlang process, a partition's
    detectors run on one node: both are serial; the best rate of the fewest
    partitions measured, per partition), the cluster sustains
        min(M*K/b, N*K/c, Q/u, P*r)   events/s (b, c, u in seconds).
    r is a lower bound (measured on a shared machine), so P*r is pessimistic.
    """
    widest = max(p["params"]["partitions"] for p in points)
    at_widest = [p for p in points if p["params"]["partitions"] == widest]
    median = lambda xs: sorted(xs)[len(xs) // 2]
    b = median([p["cpu"]["broker_us_per_event"] for p in at_widest])
    c = median([p["cpu"]["nodes_us_per_event"] for p in at_widest])
    u = median([p["cpu"]["publisher_us_per_event"] for p in at_widest])
    narrowest = min(p["params"]["partitions"] for p in points)
    r = max(p["events_per_s"] for p in points if p["params"]["partitions"] == narrowest) / narrowest
    rows = []
    for m, n, q, partitions in [(3, 1, 1, 12), (3, 3, 3, 12), (6, 6, 6, 24), (9, 12, 12, 48)]:
        bounds = {"brokers": m * cores * 1e6 / b, "cepbus_nodes": n * cores * 1e6 / c,
                  "publishers": q * 1e6 / u, "partitions": partitions * r}
        binding = min(bounds, key=bounds.get)
        rows.append({"broker_machines": m, "cepbus_machines": n, "publishers": q, "partitions": partitions,
                     "events_per_s": round(bounds[binding]), "bound_by": binding,
                     "bounds": {k: round(v) for k, v in bounds.items()}})
    print(json.dumps({"bench": "cluster_model", "params": {"cores_per_machine": cores,
                      "measured_at_partitions": widest, "batch": points[0]["params"]["batch"],
                      "via": points[0]["params"]["via"], "out_batch": points[0]["params"]["out_batch"],
                      "input": points[0]["params"]["input"]},
                      "broker_us_per_event": b, "node_us_per_event": c, "publisher_us_per_event": u,
                      "partition_events_per_s": round(r), "machines": rows}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cepbus", default=os.path.join(ROOT, "build/release/bus/app/cepbus"))
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--nodes", default="1,2,3")
    parser.add_argument("--partitions", default="1,4,12")
    parser.add_argument("--batches", default="1,32",
                        help="events per message (cepbus cluster publish --batch), each measured")
    parser.add_argument("--inputs", default="queue,stream",
                        help="partition inputs (<cluster input=...>), each measured")
    parser.add_argument("--via", default="publish",
                        help="how events enter, each measured: publish (cepbus cluster publish "
                             "--batch N) or ingress (one event per message from an AMQP 1.0 "
                             "producer into node 1's <ingress batch-events=N>)")
    parser.add_argument("--out-batches", default="",
                        help="composites per message to <name>.out (<output batch-events=N>), each "
                             "measured; empty: the nodes' default")
    parser.add_argument("--ingress-producer", default="",
                        help="the producer for --via ingress: the C++ one (build/.../tests/bench/"
                             "ingress_producer); default tests/bench/ingress_producer.py")
    parser.add_argument("--ingress-credit", type=int, default=0,
                        help="<ingress credit>: the events a producer may have unsettled (default: "
                             "the node's); one producer sends at most that many per broker round trip")
    parser.add_argument("--ingress-linger-ms", type=int, default=5,
                        help="<ingress linger-ms>: how long a partition's batch waits for more events")
    parser.add_argument("--no-takeover", action="store_true", help="skip the takeover points")
    parser.add_argument("--no-throughput", action="store_true",
                        help="skip the throughput points (and so the model)")
    parser.add_argument("--latency-rate", type=int, default=0,
                        help="events/s of the ingress latency points (needs the C++ "
                             "--ingress-producer); 0: none")
    parser.add_argument("--latency-lingers", default="0,5,50",
                        help="<ingress linger-ms> of each latency point; 0 is the reference")
    parser.add_argument("--latency-seconds", type=int, default=15, help="how long each latency point sends")
    parser.add_argument("--latency-partitions", type=int, default=12)
    parser.add_argument("--latency-batch", type=int, default=256,
                        help="<ingress batch-events> of the latency points")
    parser.add_argument("--profile", action="store_true",
                        help="sample the nodes and brokers with perf record during every throughput point")
    parser.add_argument("--cores", type=int, default=os.cpu_count(),
                        help="cores per machine in the N-machine model (default: this machine's)")
    args = parser.parse_args()
    if args.latency_rate and not args.ingress_producer:
        parser.error("--latency-rate needs --ingress-producer (the C++ producer paces and times)")
    out_batches = [int(b) for b in args.out_batches.split(",")] if args.out_batches else [None]
    work = tempfile.mkdtemp(prefix="cepbus-cluster-bench-")
    os.chmod(work, 0o755)  # the brokers run as the rabbitmq user and keep their data below it
    events = os.path.join(work, "events.jsonl")
    with open(events, "w") as f:
        subprocess.run([sys.executable, os.path.join(ROOT, "examples/quickstart/generate_stocks.py"),
                        "--events", str(args.events), "--every", "16", "--seed", "3"],
                       stdout=f, stderr=subprocess.DEVNULL, check=True)
    latency_count = args.latency_rate * args.latency_seconds
    if latency_count:
        latency_events = os.path.join(work, "latency-events.jsonl")
        with open(latency_events, "w") as f:
            subprocess.run([sys.executable, os.path.join(ROOT, "examples/quickstart/generate_stocks.py"),
                            "--events", str(latency_count), "--every", "16", "--seed", "3"],
                           stdout=f, stderr=subprocess.DEVNULL, check=True)
    broker = Broker(work)
    try:
        index = 0
        points = []
        for input in [] if args.no_throughput else args.inputs.split(","):
            for batch in [int(b) for b in args.batches.split(",")]:
                for partitions in [int(p) for p in args.partitions.split(",")]:
                    index += 1
                    rabbitmq_only(args, broker, work, events, args.events, partitions, batch, index, input)
                    for nodes in [int(n) for n in args.nodes.split(",")]:
                        for via in args.via.split(","):
                            for out_batch in out_batches:
                                index += 1
                                points.append(throughput(args, broker, work, events, args.events,
                                                         nodes, partitions, batch, index, input, via,
                                                         out_batch))
        for linger_ms in [int(m) for m in args.latency_lingers.split(",")] if latency_count else []:
            index += 1
            ingress_latency(args, broker, work, latency_events, latency_count, linger_ms, index)
        if not args.no_takeover:
            takeover(args, broker, work, events, "sigkill")
            takeover(args, broker, work, events, "sigstop")
        group = lambda p: tuple(p["params"][k] for k in ("via", "input", "batch", "out_batch"))
        for key in dict.fromkeys(group(p) for p in points):
            model([p for p in points if group(p) == key], args.cores)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
