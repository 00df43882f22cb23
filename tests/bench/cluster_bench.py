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
broker's own ingest bound is visible. Then the takeover figures: SIGKILL and
SIGSTOP of an active node while events flow, with the replayed messages.
Prints one JSON object per measurement.

    tests/bench/cluster_bench.py --cepbus build/release/bus/app/cepbus
        [--events 20000] [--nodes 1,2,3] [--partitions 1,4,12]

Starts and stops its own 3-node RabbitMQ cluster (scripts/rabbitmq-cluster.sh).
"""
import argparse
import base64
import json
import os
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
        self.mgmt = [int(p) for p in values["RMQ_MGMT_PORTS"].split()]

    def queue_messages(self, name):
        auth = "Basic " + base64.b64encode(b"guest:guest").decode()
        req = urllib.request.Request("http://127.0.0.1:%d/api/queues/%%2F/%s" % (self.mgmt[0], name),
                                     headers={"Authorization": auth})
        return json.load(urllib.request.urlopen(req, timeout=5)).get("messages", 0) or 0

    def stop(self):
        subprocess.run(["bash", os.path.join(ROOT, "scripts/rabbitmq-cluster.sh"), "stop", self.dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Scenario:
    def __init__(self, args, broker, work, name, nodes, partitions):
        self.args, self.broker, self.name = args, broker, name
        self.nodes, self.partitions = nodes, partitions
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        self.procs = {}
        self.http = {}
        for k in range(1, 4):
            self.write_node(k)

    def write_node(self, k):
        brokers = "".join('<broker host="127.0.0.1" port="%d" management-port="%d"/>'
                          % (self.broker.amqp[(k - 1 + i) % 3], self.broker.mgmt[(k - 1 + i) % 3])
                          for i in range(3))
        self.http[k] = free_port()
        text = ('<cepbus name="n%d"><logging level="warning"/><listeners><http host="127.0.0.1" '
                'port="%d"/></listeners><cluster name="%s" node="n%d" partitions="%d" key="price" '
                'heartbeat="300" idle-timeout="2000">%s<query name="q" engine="nfa" output="out">'
                '<text><![CDATA[%s]]></text></query></cluster></cepbus>'
                % (k, self.http[k], self.name, k, self.partitions, brokers, QUERY))
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

    def stats(self, k):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/api/cluster" % self.http[k], timeout=2) as r:
                return json.load(r)["nodes"][0]
        except Exception:
            return {}

    def publish(self, events, rate=0):
        return subprocess.Popen([self.args.cepbus, "cluster", "publish", os.path.join(self.dir, "n1.xml"),
                                 "--events", events, "--rate", str(rate), "--end-of-stream"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def drained(self, timeout=600):
        # Queue lengths are management samples up to a second old
        # (scripts/rabbitmq-cluster.sh): read none from before the last publish.
        time.sleep(1.5)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(self.broker.queue_messages("%s.p%d" % (self.name, p)) == 0
                   for p in range(self.partitions)):
                return True
            time.sleep(0.05)
        return False

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


def throughput(args, broker, work, events, count, nodes, partitions, index):
    s = Scenario(args, broker, work, "tp%d" % index, nodes, partitions)
    s.init()
    for k in range(1, nodes + 1):
        s.start(k)
    time.sleep(2)
    t0 = time.time()
    pub = s.publish(events)
    out, err = pub.communicate()
    if pub.returncode != 0:
        sys.exit(err)
    t_pub = time.time() - t0
    # Done when the nodes accepted every event and end marker (their stats
    # refresh every heartbeat, 300 ms); the queues' emptiness confirms it.
    settled = 0
    while time.time() < t0 + 600:
        settled = sum(s.stats(k).get("settled", 0) for k in range(1, nodes + 1))
        if settled >= count + partitions:
            break
        time.sleep(0.05)
    t_all = time.time() - t0
    ok = s.drained()
    composites = sum(s.stats(k).get("composites", 0) for k in range(1, nodes + 1))
    s.stop()
    print(json.dumps({"bench": "cluster_throughput", "params": {"nodes": nodes, "partitions": partitions,
                      "events": count}, "events_per_s": round(count / t_all), "publish_s": round(t_pub, 2),
                      "total_s": round(t_all, 2), "drained": ok, "composites": composites}), flush=True)


def rabbitmq_only(args, broker, work, events, count, partitions, index):
    s = Scenario(args, broker, work, "rmq%d" % index, 0, partitions)
    s.init()
    t0 = time.time()
    pub = s.publish(events)
    _, err = pub.communicate()
    if pub.returncode != 0:
        sys.exit(err)
    t = time.time() - t0
    print(json.dumps({"bench": "rabbitmq_only_publish", "params": {"partitions": partitions, "events": count},
                      "events_per_s": round(count / t), "total_s": round(t, 2)}), flush=True)


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
        time.sleep(0.05)
    before = s.stats(1).get("replayed", 0)
    t0 = time.time()
    s.procs[2].send_signal(signal.SIGKILL if how == "sigkill" else signal.SIGSTOP)
    while time.time() < t0 + 30 and roles(1).count("active") < 4:
        time.sleep(0.01)
    t_take = time.time() - t0
    # Rebuild: until node 1 settled everything the dead node had held.
    pub.communicate()
    s.drained()
    after = s.stats(1).get("replayed", 0)
    s.stop()
    print(json.dumps({"bench": "cluster_takeover", "params": {"signal": how, "idle_timeout_ms": 2000},
                      "takeover_ms": round(t_take * 1000), "replayed": after - before}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cepbus", default=os.path.join(ROOT, "build/release/bus/app/cepbus"))
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--nodes", default="1,2,3")
    parser.add_argument("--partitions", default="1,4,12")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="cepbus-cluster-bench-")
    os.chmod(work, 0o755)  # the brokers run as the rabbitmq user and keep their data below it
    events = os.path.join(work, "events.jsonl")
    with open(events, "w") as f:
        subprocess.run([sys.executable, os.path.join(ROOT, "examples/quickstart/generate_stocks.py"),
                        "--events", str(args.events), "--every", "16", "--seed", "3"],
                       stdout=f, stderr=subprocess.DEVNULL, check=True)
    broker = Broker(work)
    try:
        index = 0
        for partitions in [int(p) for p in args.partitions.split(",")]:
            index += 1
            rabbitmq_only(args, broker, work, events, args.events, partitions, index)
            for nodes in [int(n) for n in args.nodes.split(",")]:
                index += 1
                throughput(args, broker, work, events, args.events, nodes, partitions, index)
        takeover(args, broker, work, events, "sigkill")
        takeover(args, broker, work, events, "sigstop")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
