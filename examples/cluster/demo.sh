#!/usr/bin/env bash
# The scale-out walk-through: examples/cluster/demo.sh OUTDIR
#
# Starts a 3-node RabbitMQ cluster on loopback, declares the topology, starts
# 3 cepbus nodes running the equal-prices query partitioned by price,
# publishes a stock stream over AMQP, and while it flows SIGKILLs one cepbus
# node and one RabbitMQ node (both are restarted a few seconds later). When
# everything is delivered it stops what it started and compares the distinct
# composite events the cluster produced with what `cepbus match` finds
# offline on the same stream. Exit 0 only when they are equal.
#
# Leaves in OUTDIR: events.jsonl (the stream, in publish order), query.txt
# (the query, one line), composites.jsonl (one line per distinct composite:
# the array of its constituents' ts in pattern order) and summary.json.
# Uses $CEPBUS when set, else the program scripts/quickstart.sh builds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
cepbus=${CEPBUS:-$root/build/release/bus/app/cepbus}
[ -x "$cepbus" ] || { echo "no cepbus at $cepbus: run scripts/quickstart.sh first, or set CEPBUS" >&2; exit 1; }
partitions=${DEMO_PARTITIONS:-12}
events=${DEMO_EVENTS:-8000}
rate=${DEMO_RATE:-600}
work=$out/work
rm -rf "$work"
mkdir -p "$work"
rmq_dir=$work/rabbitmq
say() { printf '[demo %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

declare -A node_pid=()
collector_pid=""
publisher_pid=""
cleanup() {
  for n in "${!node_pid[@]}"; do kill -KILL "${node_pid[$n]}" 2>/dev/null || true; done
  [ -n "$collector_pid" ] && kill "$collector_pid" 2>/dev/null || true
  [ -n "$publisher_pid" ] && kill "$publisher_pid" 2>/dev/null || true
  bash "$root/scripts/rabbitmq-cluster.sh" stop "$rmq_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT

started=$(date +%s)
say "starting a 3-node RabbitMQ cluster on loopback"
# The cluster's watchdog stops it should this script die without its trap.
CEPBUS_RMQ_OWNER_PID=$$ bash "$root/scripts/rabbitmq-cluster.sh" start "$rmq_dir" \
  >"$work/rabbitmq-start.log"
# shellcheck disable=SC1091
source "$rmq_dir/cluster.env"
read -r -a amqp_ports <<<"$RMQ_AMQP_PORTS"
read -r -a mgmt_ports <<<"$RMQ_MGMT_PORTS"
brokers_csv=$(printf '127.0.0.1:%s,' "${amqp_ports[@]}")
brokers_csv=${brokers_csv%,}

query=$(tr -d '\n' <"$here/equal-prices.query")
printf '%s\n' "$query" >"$out/query.txt"
python3 "$root/examples/quickstart/generate_stocks.py" --events "$events" --every 16 --seed 11 \
  >"$out/events.jsonl" 2>/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# node K's descriptor: its broker list starts at broker K.
write_node() {
  local k=$1 brokers="" i j
  for ((i = 0; i < 3; i++)); do
    j=$(((k - 1 + i) % 3))
    brokers+="    <broker host=\"127.0.0.1\" port=\"${amqp_ports[$j]}\" management-port=\"${mgmt_ports[$j]}\"/>"$'\n'
  done
  python3 - "$here/node.xml.in" "$work/node$k.xml" "node$k" "$(free_port)" "$partitions" "$brokers" "$query" <<'PY'
import sys
src, dst, node, http, parts, brokers, query = sys.argv[1:]
text = open(src).read()
for key, value in (("@NODE@", node), ("@HTTP@", http), ("@PARTITIONS@", parts),
                   ("@BROKERS@", brokers.rstrip("\n")), ("@QUERY@", query)):
    text = text.replace(key, value)
open(dst, "w").write(text)
PY
}
for k in 1 2 3; do write_node "$k"; done

say "declaring the topology: $partitions partition quorum queues"
"$cepbus" cluster init "$work/node1.xml"

start_node() {
  local k=$1
  "$cepbus" run "$work/node$k.xml" >>"$work/node$k.log" 2>&1 &
  node_pid[$k]=$!
  say "cepbus node$k started (pid ${node_pid[$k]})"
}

"/usr/bin/python3" "$here/collect.py" --brokers "$brokers_csv" --queue demo.composites \
  --out "$out/composites.jsonl" --summary "$work/collector.json" --stop-file "$work/done" &
collector_pid=$!
for k in 1 2 3; do start_node "$k"; done
sleep 3

say "publishing $events events at $rate/s, partitioned by price"
"$cepbus" cluster publish "$work/node1.xml" --events "$out/events.jsonl" --rate "$rate" \
  --end-of-stream >"$work/publish.json" 2>"$work/publish.log" &
publisher_pid=$!
publish_started=$(date +%s.%N)
since() { python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" "$(date +%s.%N)" "$publish_started"; }
kills=()
sleep 4
kill -KILL "${node_pid[2]}"
say "SIGKILL cepbus node2 (pid ${node_pid[2]})"
kills+=("{\"what\":\"cepbus node2\",\"signal\":\"SIGKILL\",\"after_s\":$(since)}")
sleep 3
bash "$root/scripts/rabbitmq-cluster.sh" kill 2 "$rmq_dir" >/dev/null
say "SIGKILL RabbitMQ node 2"
kills+=("{\"what\":\"rabbitmq node 2\",\"signal\":\"SIGKILL\",\"after_s\":$(since)}")
sleep 2
start_node 2
say "restarting RabbitMQ node 2"
bash "$root/scripts/rabbitmq-cluster.sh" restart 2 "$rmq_dir" >/dev/null
say "RabbitMQ node 2 rejoined"
if ! wait "$publisher_pid"; then
  publisher_pid=""
  say "the publisher failed:"
  cat "$work/publish.log" >&2
  exit 1
fi
publisher_pid=""
say "published: $(cat "$work/publish.json")"

# Everything is processed once every partition queue is empty: a node
# accepts a message only after its windows are closed and its composites
# were accepted by the broker.
say "waiting until every partition queue is empty"
# Queue lengths are management samples up to a second old: none from before
# the publisher's last message may be read.
sleep 2
python3 - "${mgmt_ports[0]}" "$partitions" <<'PY'
import base64, json, sys, time, urllib.request
port, parts = sys.argv[1], int(sys.argv[2])
auth = "Basic " + base64.b64encode(b"guest:guest").decode()
deadline = time.time() + 180
while True:
    left = 0
    for p in range(parts):
        req = urllib.request.Request("http://127.0.0.1:%s/api/queues/%%2F/demo.p%d" % (port, p),
                                     headers={"Authorization": auth})
        q = json.load(urllib.request.urlopen(req, timeout=5))
        left += q.get("messages", 0) or 0
    if left == 0:
        break
    if time.time() > deadline:
        sys.exit("still %d messages in the partition queues" % left)
    time.sleep(1)
PY
touch "$work/done"
wait "$collector_pid"
collector_pid=""

say "stopping the cepbus nodes"
for k in "${!node_pid[@]}"; do kill -TERM "${node_pid[$k]}" 2>/dev/null || true; done
for k in "${!node_pid[@]}"; do wait "${node_pid[$k]}" 2>/dev/null || true; done
node_pid=()
bash "$root/scripts/rabbitmq-cluster.sh" stop "$rmq_dir" >/dev/null
say "RabbitMQ cluster stopped"

"$cepbus" match --engine nfa --query "$query" --events "$out/events.jsonl" | sort >"$work/offline.sorted"
sort "$out/composites.jsonl" >"$work/cluster.sorted"
equal=false
if cmp -s "$work/offline.sorted" "$work/cluster.sorted"; then equal=true; fi
python3 - "$out" "$work" "$partitions" "$equal" "$(($(date +%s) - started))" "${kills[@]}" <<'PY'
import json, sys
out, work, parts, equal, seconds = sys.argv[1:6]
kills = [json.loads(k) for k in sys.argv[6:]]
collector = json.load(open(work + "/collector.json"))
published = json.load(open(work + "/publish.json"))
offline = sum(1 for _ in open(work + "/offline.sorted"))
summary = {
    "nodes": 3, "brokers": 3, "partitions": int(parts), "kills": kills,
    "restarted": ["cepbus node2", "rabbitmq node 2"],
    "published": published["published"], "publisher_resent": published["resent"],
    "publisher_reconnects": published["reconnects"],
    "composites_received": collector["composites"], "duplicates": collector["duplicates"],
    "late": collector["late"], "offline_matches": offline, "equal": equal == "true",
    "seconds": int(seconds),
}
json.dump(summary, open(out + "/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
if [ "$equal" = true ]; then
  say "the cluster's composites equal cepbus match offline: OK"
  exit 0
fi
say "the cluster's composites DIFFER from cepbus match offline:"
diff "$work/offline.sorted" "$work/cluster.sorted" | head -20 >&2
exit 1
