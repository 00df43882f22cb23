#!/usr/bin/env bash
# A private 3-node RabbitMQ cluster on loopback, for the cluster tests and the
# scale-out walk-through. No systemd and nothing shared with a system broker:
# every node has its own ports, data, logs, config and plugins file under DIR,
# the nodes find each other through a private epmd, and `stop` ends exactly
# the processes `start` made (by PID and process group, never by name: other
# brokers may run on this machine).
#
#   scripts/rabbitmq-cluster.sh start   [DIR]  start, cluster, print DIR/cluster.env
#   scripts/rabbitmq-cluster.sh stop    [DIR]  stop everything, remove DIR (idempotent)
#   scripts/rabbitmq-cluster.sh status  [DIR]  exit 0 iff the 3 nodes run clustered
#   scripts/rabbitmq-cluster.sh kill N  [DIR]  SIGKILL node N (1..3)
#   scripts/rabbitmq-cluster.sh restart N [DIR]  start node N again, wait until it rejoined
#   scripts/rabbitmq-cluster.sh ctl N [DIR] -- ARGS...  rabbitmqctl ARGS against node N
#   scripts/rabbitmq-cluster.sh streams N [DIR] -- ARGS...  rabbitmq-streams ARGS against node N
#
# DIR defaults to $CEPBUS_RMQ_DIR, else ${TMPDIR:-/tmp}/cepbus-rabbitmq.
# CEPBUS_RMQ_TIMEOUT (seconds, default 180) bounds each wait.
# CEPBUS_RMQ_OWNER_PID: `start` leaves a watchdog that runs `stop` once that
# process is gone, so a test killed by a timeout leaves no cluster behind.
# Installs rabbitmq-server with apt when it is missing (root or sudo).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly here
readonly rmq_bin=/usr/lib/rabbitmq/bin
readonly plugins='rabbitmq_amqp1_0,rabbitmq_management,rabbitmq_consistent_hash_exchange,rabbitmq_stream'
readonly timeout_s=${CEPBUS_RMQ_TIMEOUT:-180}
readonly nodes=(1 2 3)

die() {
  echo "rabbitmq-cluster: $*" >&2
  exit 1
}
log() { echo "rabbitmq-cluster: $*" >&2; }

# --- arguments ---------------------------------------------------------------
cmd=${1:-}
shift || true
node_arg=
case $cmd in
  kill | restart | ctl | streams)
    node_arg=${1:-}
    [[ $node_arg =~ ^[123]$ ]] || die "$cmd needs a node number 1..3"
    shift
    ;;
  start | stop | status) ;;
  *) die "usage: $0 start|stop|status [DIR] | kill N [DIR] | restart N [DIR] | ctl|streams N [DIR] -- ARGS" ;;
esac
dir_arg=
if [[ $# -gt 0 && $1 != -- ]]; then
  dir_arg=$1
  shift
fi
[[ ${1:-} == -- ]] && shift
dir=${dir_arg:-${CEPBUS_RMQ_DIR:-${TMPDIR:-/tmp}/cepbus-rabbitmq}}
dir=$(realpath -m "$dir")
[[ $dir != / && $dir != "$HOME" ]] || die "refusing DIR=$dir"

# --- who runs the broker -----------------------------------------------------
# Debian's wrappers run the server as `rabbitmq`; do the same when root (the
# node folders then belong to it), else run as the calling user.
as_broker=()
broker_user=$(id -un)
if [[ $(id -u) -eq 0 ]] && id rabbitmq >/dev/null 2>&1; then
  as_broker=(setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups --)
  broker_user=rabbitmq
fi

ensure_installed() {
  [[ -x $rmq_bin/rabbitmq-server ]] && return 0
  # shellcheck source=lib/apt_install_missing.sh disable=SC1091
  source "$here/lib/apt_install_missing.sh"
  # --no-service-start: Debian would otherwise start a system broker on 5672.
  apt_install_missing rabbitmq-cluster --no-service-start rabbitmq-server
  [[ -x $rmq_bin/rabbitmq-server ]] || die "rabbitmq-server is not installed"
}

# --- ports -------------------------------------------------------------------
# One block of 100 consecutive free loopback ports below the ephemeral range
# (so no outgoing connection takes one meanwhile), never 5672/15672/5552:
#   +0 epmd, +1..+9 the CLI tools' distribution ports,
#   +10i+0 AMQP, +1 Erlang distribution, +2 management HTTP, +3 stream,
#   +4 AMQP over TLS, +5 management HTTPS (node i),
#   +40+20(i-1) .. +59+20(i-1) the node's stream-replication (osiris) range.
pick_port_block() {
  /usr/bin/python3 - <<'EOF'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(200):
    base = random.randrange(20000, 32000, 100)
    if 5552 in range(base, base + 100):
        continue
    if all(free(p) for p in range(base, base + 100)):
        print(base); break
else:
    raise SystemExit("no block of 100 free ports")
EOF
}

# --- per-node environment ----------------------------------------------------
nodename() { echo "cepbus$1@localhost"; }
node_dir() { echo "$dir/node$1"; }

# Writes DIR/nodeN/env.sh: everything both the server and rabbitmqctl need.
write_node_env() {
  local i=$1 base=$2 nd
  nd=$(node_dir "$i")
  local amqp=$((base + 10 * i)) dist=$((base + 10 * i + 1))
  local mgmt=$((base + 10 * i + 2)) stream=$((base + 10 * i + 3))
  local amqps=$((base + 10 * i + 4)) mgmts=$((base + 10 * i + 5))
  local osiris_lo=$((base + 40 + 20 * (i - 1))) osiris_hi=$((base + 59 + 20 * (i - 1)))
  local tls=$dir/tls
  mkdir -p "$nd/mnesia" "$nd/log"
  echo "[${plugins}]." >"$nd/enabled_plugins"
  cat >"$nd/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$amqp
management.tcp.ip = 127.0.0.1
management.tcp.port = $mgmt
stream.listeners.tcp.1 = 127.0.0.1:$stream
# TLS beside plain TCP, with the certificate of write_tls (clients are not
# asked for certificates: they authenticate with SASL PLAIN inside TLS).
listeners.ssl.default = 127.0.0.1:$amqps
ssl_options.cacertfile = $tls/ca.pem
ssl_options.certfile = $tls/broker.pem
ssl_options.keyfile = $tls/broker.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
management.ssl.ip = 127.0.0.1
management.ssl.port = $mgmts
management.ssl.cacertfile = $tls/ca.pem
management.ssl.certfile = $tls/broker.pem
management.ssl.keyfile = $tls/broker.key
loopback_users = none
heartbeat = 5
vm_memory_high_watermark.relative = 0.1
# Queue lengths in the management API are samples this old at most (the
# default is 5 s): the tests and the walk-through wait on them.
collect_statistics_interval = 1000
log.console = false
log.file.level = info
EOF
  # Sourced by rabbitmq-env instead of /etc/rabbitmq/rabbitmq-env.conf.
  cat >"$nd/rabbitmq-env.conf" <<EOF
# cepbus node $i: generated by scripts/rabbitmq-cluster.sh
EOF
  cat >"$nd/env.sh" <<EOF
export HOME='$dir/home'
export ERL_EPMD_PORT=$base
export ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_NODENAME='$(nodename "$i")'
export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
export RABBITMQ_NODE_PORT=$amqp
export RABBITMQ_DIST_PORT=$dist
export RABBITMQ_MNESIA_BASE='$nd/mnesia'
export RABBITMQ_LOG_BASE='$nd/log'
export RABBITMQ_PID_FILE='$nd/beam.pid'
export RABBITMQ_CONFIG_FILE='$nd/rabbitmq.conf'
export RABBITMQ_ENABLED_PLUGINS_FILE='$nd/enabled_plugins'
export RABBITMQ_CONF_ENV_FILE='$nd/rabbitmq-env.conf'
export RABBITMQ_CTL_DIST_PORT_MIN=$((base + 1))
export RABBITMQ_CTL_DIST_PORT_MAX=$((base + 9))
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1} -osiris port_range {$osiris_lo,$osiris_hi}'
export RMQ_AMQP_PORT=$amqp RMQ_MGMT_PORT=$mgmt RMQ_STREAM_PORT=$stream RMQ_DIST_PORT=$dist
export RMQ_AMQPS_PORT=$amqps RMQ_MGMTS_PORT=$mgmts
EOF
}

# DIR/tls: a CA made for this cluster alone and the certificate every node
# serves (CN and subjectAltName localhost and 127.0.0.1), valid for two days
# so that nothing checked in can expire. Clients trust DIR/tls/ca.pem.
write_tls() {
  local tls=$dir/tls
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cepbus-test-ca \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" >"$tls/openssl.log" 2>&1 ||
    die "openssl could not make the CA: $(cat "$tls/openssl.log")"
  openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
    -keyout "$tls/broker.key" -out "$tls/broker.csr" >>"$tls/openssl.log" 2>&1 ||
    die "openssl could not make the broker key: $(cat "$tls/openssl.log")"
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$tls/san.ext"
  openssl x509 -req -in "$tls/broker.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/san.ext" -out "$tls/broker.pem" \
    >>"$tls/openssl.log" 2>&1 ||
    die "openssl could not sign the broker certificate: $(cat "$tls/openssl.log")"
}

# Runs a command in node i's environment, as the broker user.
in_node_env() {
  local i=$1
  shift
  (
    # shellcheck source=/dev/null
    source "$(node_dir "$i")/env.sh"
    cd "$dir"
    "${as_broker[@]}" "$@"
  )
}

ctl() {
  local i=$1
  shift
  in_node_env "$i" "$rmq_bin/rabbitmqctl" -q -n "$(nodename "$i")" "$@"
}

# rabbitmq-streams on node $1, e.g. `streams 2 -- stream_status demo.p0.log`.
streams() {
  local i=$1
  shift
  in_node_env "$i" "$rmq_bin/rabbitmq-streams" -q -n "$(nodename "$i")" "$@"
}

alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
beam_pid() { cat "$(node_dir "$1")/beam.pid" 2>/dev/null || true; }
group_pid() { cat "$(node_dir "$1")/group.pid" 2>/dev/null || true; }

# --- epmd --------------------------------------------------------------------
start_epmd() {
  local port=$1
  # Own session, so the caller's terminal signals do not reach it; without
  # -daemon so that $! is epmd itself.
  setsid "${as_broker[@]}" /usr/bin/epmd -address 127.0.0.1 -port "$port" \
    </dev/null >"$dir/epmd.log" 2>&1 &
  echo $! >"$dir/epmd.pid"
  local t=0
  until (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    alive "$(cat "$dir/epmd.pid")" || die "epmd on port $port exited: $(cat "$dir/epmd.log")"
    ((t++ < 100)) || die "epmd on port $port did not listen"
    sleep 0.1
  done
}

# --- nodes -------------------------------------------------------------------
launch_node() {
  local i=$1 nd
  nd=$(node_dir "$i")
  rm -f "$nd/beam.pid"
  # setsid: the node is its own process group (its PID), which `stop` ends
  # as a whole; the beam's own PID comes from RABBITMQ_PID_FILE.
  (
    # shellcheck source=/dev/null
    source "$nd/env.sh"
    cd "$dir"
    exec setsid "${as_broker[@]}" "$rmq_bin/rabbitmq-server" </dev/null >>"$nd/stdout.log" 2>&1
  ) &
  echo $! >"$nd/group.pid"
}

# Waits until node i's pid file exists and the rabbit app runs.
wait_node_up() {
  local i=$1 nd
  nd=$(node_dir "$i")
  local deadline=$((SECONDS + timeout_s))
  until [[ -s $nd/beam.pid ]]; do
    alive "$(group_pid "$i")" || die "node $i exited during start; see $nd/stdout.log and $nd/log"
    ((SECONDS < deadline)) || die "node $i wrote no pid file within ${timeout_s}s"
    sleep 0.2
  done
  ctl "$i" wait --timeout "$timeout_s" "$nd/beam.pid" >/dev/null ||
    die "node $i did not start; see $nd/log/$(nodename "$i").log"
}

# `rabbitmqctl ARG` on several nodes at once; fails if any fails.
parallel_ctl() {
  local arg=$1 i pids=() failed=0
  shift
  for i in "$@"; do
    ctl "$i" "$arg" >/dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || failed=1; done
  ((failed == 0)) || die "rabbitmqctl $arg failed on one of nodes $*"
}

running_count() {
  ctl "$1" cluster_status --formatter json 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["running_nodes"]))' 2>/dev/null ||
    echo 0
}

wait_clustered() {
  local i=$1 deadline=$((SECONDS + timeout_s))
  until [[ $(running_count "$i") -eq 3 ]]; do
    ((SECONDS < deadline)) || die "cluster_status on node $i does not show 3 running nodes after ${timeout_s}s"
    sleep 0.5
  done
}

# The PIDs of a process tree: beam's helpers (erl_child_setup, inet_gethost,
# the shells of os:cmd) run in process groups of their own, so neither the
# node's group nor the beam PID alone reaches them.
tree_of() {
  local roots=("$@")
  [[ ${#roots[@]} -gt 0 ]] || return 0
  ps -e -o pid=,ppid= | awk -v roots="${roots[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END {
      do { grew = 0
        for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; grew = 1 }
      } while (grew)
      for (p in keep) if (p in parent) print p
    }'
}

# Stops the given nodes together: SIGTERM (a graceful stop for RabbitMQ 3.10)
# to every beam, a bounded wait, then SIGKILL to whatever is left of their
# process trees and groups. The data goes with DIR, so no more grace is due.
stop_nodes() {
  local i roots=() groups=() beams=()
  for i in "$@"; do
    local beam group
    beam=$(beam_pid "$i")
    group=$(group_pid "$i")
    alive "$beam" && beams+=("$beam") && roots+=("$beam")
    alive "$group" && roots+=("$group")
    [[ -n $group ]] && groups+=("$group")
  done
  local tree=()
  mapfile -t tree < <(tree_of "${roots[@]}")
  local b
  for b in "${beams[@]}"; do kill -TERM "$b" 2>/dev/null || true; done
  local t=0
  while ((t++ < 100)); do
    local left=0
    for b in "${beams[@]}"; do alive "$b" && left=1; done
    ((left)) || break
    sleep 0.1
  done
  local g p
  for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  for p in "${tree[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  t=0
  while ((t++ < 50)); do
    local left=0
    for p in "${tree[@]}"; do alive "$p" && left=1; done
    for g in "${groups[@]}"; do pgrep -g "$g" >/dev/null 2>&1 && left=1; done
    ((left)) || break
    sleep 0.1
  done
}

write_cluster_env() {
  local amqp=() mgmt=() amqps=() mgmts=() names=() pids=() i
  for i in "${nodes[@]}"; do
    # shellcheck source=/dev/null
    amqp+=("$(source "$(node_dir "$i")/env.sh" && echo "$RMQ_AMQP_PORT")")
    # shellcheck source=/dev/null
    mgmt+=("$(source "$(node_dir "$i")/env.sh" && echo "$RMQ_MGMT_PORT")")
    # shellcheck source=/dev/null
    amqps+=("$(source "$(node_dir "$i")/env.sh" && echo "$RMQ_AMQPS_PORT")")
    # shellcheck source=/dev/null
    mgmts+=("$(source "$(node_dir "$i")/env.sh" && echo "$RMQ_MGMTS_PORT")")
    names+=("$(nodename "$i")")
    pids+=("$(beam_pid "$i")")
  done
  {
    echo "# cepbus RabbitMQ cluster; source this file. Written by $0."
    echo "RMQ_DIR='$dir'"
    echo "RMQ_AMQP_PORTS='${amqp[*]}'"
    echo "RMQ_MGMT_PORTS='${mgmt[*]}'"
    echo "RMQ_AMQPS_PORTS='${amqps[*]}'"
    echo "RMQ_MGMTS_PORTS='${mgmts[*]}'"
    echo "RMQ_TLS_CA='$dir/tls/ca.pem'"
    echo "RMQ_NODES='${names[*]}'"
    echo "RMQ_PIDS='${pids[*]}'"
    # shellcheck source=/dev/null
    echo "RMQ_EPMD_PORT=$(source "$(node_dir 1)/env.sh" && echo "$ERL_EPMD_PORT")"
    echo "RMQ_USER=guest RMQ_PASSWORD=guest"
    for i in "${nodes[@]}"; do
      echo "RMQ_PID_$i=${pids[i - 1]}"
      echo "RMQ_AMQP_PORT_$i=${amqp[i - 1]}"
      echo "RMQ_MGMT_PORT_$i=${mgmt[i - 1]}"
      echo "RMQ_AMQPS_PORT_$i=${amqps[i - 1]}"
      echo "RMQ_MGMTS_PORT_$i=${mgmts[i - 1]}"
      echo "RMQ_NODE_$i='${names[i - 1]}'"
      # rabbitmqctl against node i: source the file, then rabbitmqctl -n NODE
      # (or: $0 ctl $i $dir -- ARGS).
      echo "RMQ_ENV_$i='$(node_dir "$i")/env.sh'"
    done
  } >"$dir/cluster.env.tmp"
  mv "$dir/cluster.env.tmp" "$dir/cluster.env"
}

# A failed start removes DIR; its logs are what explain the failure.
keep_logs() {
  local keep=$dir.failed-logs
  rm -rf "$keep"
  mkdir -p "$keep"
  local i
  for i in "${nodes[@]}"; do
    [[ -d $(node_dir "$i") ]] || continue
    mkdir -p "$keep/node$i"
    cp -r "$(node_dir "$i")/log" "$(node_dir "$i")/stdout.log" "$keep/node$i/" 2>/dev/null || true
  done
  log "logs of the failed start kept in $keep"
}

any_alive() {
  local i
  alive "$(cat "$dir/epmd.pid" 2>/dev/null || true)" && return 0
  for i in "${nodes[@]}"; do
    alive "$(beam_pid "$i")" && return 0
    alive "$(group_pid "$i")" && return 0
  done
  return 1
}

start_watchdog() {
  local owner=$1 self
  self=$(realpath "${BASH_SOURCE[0]}")
  # shellcheck disable=SC2016  # expanded by the watchdog's shell
  setsid bash -c 'while kill -0 "$1" 2>/dev/null && [[ -d $3 ]]; do sleep 2; done
                  [[ -d $3 ]] && exec "$2" stop "$3"' watchdog "$owner" "$self" "$dir" \
    </dev/null >>"$dir/watchdog.log" 2>&1 &
  echo $! >"$dir/watchdog.pid"
}

# --- subcommands -------------------------------------------------------------
do_start() {
  ensure_installed
  if [[ -d $dir ]]; then
    any_alive && die "a cluster already runs in $dir (stop it first)"
    rm -rf "$dir"
  fi
  local t0=$SECONDS t0ns
  t0ns=$(date +%s%N)
  mkdir -p "$dir/home"
  # If anything below fails (die exits), leave nothing behind.
  trap 'log "start failed; cleaning up"; keep_logs; do_stop >/dev/null 2>&1 || true' EXIT
  local base
  base=$(pick_port_block)
  # The shared Erlang cookie (the nodes and the CLI read it from $HOME).
  head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$dir/home/.erlang.cookie"
  chmod 400 "$dir/home/.erlang.cookie"
  local i
  write_tls
  for i in "${nodes[@]}"; do write_node_env "$i" "$base"; done
  [[ $broker_user == rabbitmq ]] && chown -R rabbitmq:rabbitmq "$dir"
  "${as_broker[@]}" test -w "$dir/node1/mnesia" ||
    die "$broker_user cannot write $dir (is a parent folder private?)"
  start_epmd "$base"
  # All three boot in parallel; the joins are then short.
  for i in "${nodes[@]}"; do launch_node "$i"; done
  for i in "${nodes[@]}"; do wait_node_up "$i"; done
  log "3 nodes up after $((SECONDS - t0))s; clustering"
  # Stopping and starting the apps of nodes 2 and 3 are independent, so they
  # run side by side (each CLI call alone costs seconds on a loaded box); the
  # joins themselves, which change node 1's cluster membership, go one by one.
  parallel_ctl stop_app 2 3
  for i in 2 3; do
    ctl "$i" join_cluster "$(nodename 1)" >/dev/null
    log "node $i joined $(nodename 1) after $((SECONDS - t0))s"
  done
  parallel_ctl start_app 2 3
  wait_clustered 1
  trap - EXIT
  [[ -n ${CEPBUS_RMQ_OWNER_PID:-} ]] && start_watchdog "$CEPBUS_RMQ_OWNER_PID"
  write_cluster_env
  local ms=$((($(date +%s%N) - t0ns) / 1000000))
  echo "RMQ_START_MS=$ms" >>"$dir/cluster.env"
  log "cluster of 3 running after ${ms} ms"
  cat "$dir/cluster.env"
}

do_stop() {
  [[ -d $dir ]] || return 0
  # The watchdog, unless it is the one stopping (then it is this process).
  local watchdog
  watchdog=$(cat "$dir/watchdog.pid" 2>/dev/null || true)
  if alive "$watchdog" && [[ $watchdog != "$$" ]]; then
    kill -TERM -- "-$watchdog" 2>/dev/null || true # its group: the shell and its sleep
  fi
  stop_nodes "${nodes[@]}"
  local epmd
  epmd=$(cat "$dir/epmd.pid" 2>/dev/null || true)
  if alive "$epmd"; then
    kill -TERM "$epmd" 2>/dev/null || true
    local t=0
    while alive "$epmd" && ((t++ < 30)); do sleep 0.1; done
    if alive "$epmd"; then kill -KILL "$epmd" 2>/dev/null || true; fi
  fi
  any_alive && die "processes of $dir survived stop"
  rm -rf "$dir"
  log "stopped; $dir removed"
}

do_status() {
  [[ -f $dir/cluster.env ]] || {
    echo "no cluster in $dir"
    return 1
  }
  local i ok=0
  for i in "${nodes[@]}"; do
    local beam
    beam=$(beam_pid "$i")
    if alive "$beam"; then
      echo "node $i $(nodename "$i") pid $beam: running"
    else
      echo "node $i $(nodename "$i"): down"
      ok=1
    fi
  done
  for i in "${nodes[@]}"; do
    if alive "$(beam_pid "$i")"; then
      local n
      n=$(running_count "$i")
      echo "cluster_status on node $i: $n running nodes"
      [[ $n -eq 3 ]] || ok=1
      break
    fi
  done
  cat "$dir/cluster.env"
  return $ok
}

# A crash, not a stop: SIGKILL to the beam alone, as a dying machine would
# do; its helpers and the wrapper shell then exit by themselves.
do_kill() {
  local i=$1 beam
  beam=$(beam_pid "$i")
  alive "$beam" || die "node $i is not running"
  kill -KILL "$beam"
  local t=0
  while alive "$beam" && ((t++ < 100)); do sleep 0.1; done
  log "node $i (pid $beam) killed"
}

do_restart() {
  local i=$1 t0
  t0=$(date +%s%N)
  [[ -f $dir/cluster.env ]] || die "no cluster in $dir"
  alive "$(beam_pid "$i")" && die "node $i is still running (pid $(beam_pid "$i"))"
  stop_nodes "$i" # whatever is left of its old process tree
  # RabbitMQ 3.10 sometimes fails the boot of a node just killed (its
  # management agent stops on a case_clause in rabbit_net:dist_info when it
  # finds two distribution connections to one peer): once more.
  if ! (launch_node "$i" && wait_node_up "$i"); then
    log "node $i failed to boot; starting it once more"
    stop_nodes "$i"
    launch_node "$i"
    wait_node_up "$i"
  fi
  wait_clustered "$i"
  write_cluster_env
  log "node $i rejoined after $((($(date +%s%N) - t0) / 1000000)) ms (pid $(beam_pid "$i"))"
  cat "$dir/cluster.env"
}

case $cmd in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  kill) do_kill "$node_arg" ;;
  restart) do_restart "$node_arg" ;;
  ctl) ctl "$node_arg" "$@" ;;
  streams) streams "$node_arg" "$@" ;;
esac
