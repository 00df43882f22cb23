# shellcheck shell=bash
# Sourced by scripts/quickstart.sh: says, before a bus starts, which of the
# ports its descriptor listens on another program holds, and who that is.
#
#   port_holder PORT
#       prints what listens on TCP PORT, e.g. "beam.smp (pid 812, the system
#       service rabbitmq-server.service)", and returns 0; returns 1 when
#       nothing does
#   check_descriptor_ports LABEL DESCRIPTOR.xml
#       returns 1, after saying on stderr who holds which, when a port="N"
#       of the descriptor is taken; 0 when all are free

port_holder() {
  local port=$1 line
  if ! command -v ss >/dev/null; then
    # No iproute2: a connection tells that something listens, not what.
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || return 1
    echo "another program"
    return 0
  fi
  line=$(ss -Hltnp "sport = :$port" 2>/dev/null | head -n 1)
  [[ -n $line ]] || return 1
  if [[ $line =~ users:\(\(\"([^\"]+)\",pid=([0-9]+) ]]; then
    local name=${BASH_REMATCH[1]} pid=${BASH_REMATCH[2]} unit=
    unit=$(grep -o '[^/]*\.service' "/proc/$pid/cgroup" 2>/dev/null | tail -n 1) || true
    echo "$name (pid $pid${unit:+, the system service $unit})"
  else
    echo "a process of another user"
  fi
}

check_descriptor_ports() {
  local label=$1 descriptor=$2 port holder taken=0
  for port in $(grep -o 'port="[0-9]*"' "$descriptor" | tr -dc '0-9\n'); do
    ((port != 0)) || continue
    holder=$(port_holder "$port") || continue
    taken=1
    echo "$label: port $port, where $descriptor listens, is held by $holder." >&2
    if [[ $holder == *rabbitmq-server.service* ]]; then
      echo "$label: stop that broker (systemctl disable --now rabbitmq-server): cepbus's" \
        "tests and walk-throughs start their own on other ports." >&2
    else
      echo "$label: stop it, or change port=\"$port\" in $descriptor." >&2
    fi
  done
  return "$taken"
}
