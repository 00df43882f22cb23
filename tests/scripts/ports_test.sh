#!/usr/bin/env bash
# scripts/lib/ports.sh: a port of a descriptor that another program holds is
# named with the program and its pid before the bus would fail to listen;
# free ports and port="0" pass.
#
# Usage: tests/scripts/ports_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?SOURCE_DIR}" && pwd)
work=$(mktemp -d)
holder_pid=
cleanup() {
  [[ -n $holder_pid ]] && kill "$holder_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "ports_test: FAIL: $*" >&2
  exit 1
}
# shellcheck source=scripts/lib/ports.sh
source "$src/scripts/lib/ports.sh"

# A listener on a port of the kernel's choice, which it writes down.
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(600)
' "$work/port" &
holder_pid=$!
for _ in $(seq 200); do [[ -s $work/port ]] && break; sleep 0.05; done
port=$(cat "$work/port")
[[ -n $port ]] || fail "the test's listener did not start"

holder=$(port_holder "$port") || fail "port_holder found nothing on port $port"
if command -v ss >/dev/null; then
  [[ $holder == "python3 (pid $holder_pid"* ]] || fail "port_holder named \"$holder\", not python3 $holder_pid"
fi

printf '<cepbus name="t">\n  <listeners>\n    <amqp port="%s"/>\n    <http port="0"/>\n  </listeners>\n</cepbus>\n' \
  "$port" >"$work/bus.xml"
rc=0
check_descriptor_ports t "$work/bus.xml" 2>"$work/err" || rc=$?
((rc == 1)) || fail "a held port passed the check"
grep -q "t: port $port, where $work/bus.xml listens, is held by $holder." "$work/err" ||
  fail "the message does not name the port and its holder: $(cat "$work/err")"
grep -q "change port=\"$port\" in $work/bus.xml" "$work/err" || fail "no advice: $(cat "$work/err")"

kill "$holder_pid"
wait "$holder_pid" 2>/dev/null || true
holder_pid=
port_holder "$port" >/dev/null && fail "port_holder still finds a holder of $port"
check_descriptor_ports t "$work/bus.xml" 2>"$work/err" || fail "free ports failed: $(cat "$work/err")"
echo "ports_test: OK"
