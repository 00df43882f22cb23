#!/usr/bin/env bash
# The .deb end to end, as a user gets it (docs/install.md):
#   build a Release folder and `cpack -G DEB` (or take CEPBUS_DEB=path),
#   apt-get install ./cepbus_*.deb, check what it installed, start the
#   service (systemctl when systemd is PID 1, else the unit's ExecStart run
#   by this script as the cepbus user with runuser), publish over AMQP with
#   /usr/bin/python3 + python3-qpid-proton and receive a composite event,
#   stop it (by its PID), apt-get purge, check that nothing is left.
#
# Usage: tests/package/deb_test.sh SOURCE_DIR WORK_DIR
# Needs root and apt (it installs and purges the package cepbus). The AMQP
# port is a free one picked at run time, written into the conffile.
set -euo pipefail
src=$(cd "${1:?SOURCE_DIR}" && pwd)
work=${2:?WORK_DIR}
mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { echo "deb_test: $*"; }
die() { echo "deb_test: FAIL: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "must run as root (installs and purges the package)"
if dpkg-query -W -f='${Status}' cepbus 2>/dev/null | grep -q 'installed'; then
  die "a cepbus package is already installed; purge it first (apt-get purge cepbus)"
fi

deb=${CEPBUS_DEB:-}
if [[ -z $deb ]]; then
  log "building the Release folder $work/release"
  cmake -S "$src" -B "$work/release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/usr -DCEPBUS_BUILD_TESTS=OFF -DCEPBUS_BUILD_BENCH=OFF \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
  cmake --build "$work/release" -j "${CEPBUS_JOBS:-2}"
  (cd "$work/release" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
  deb=$(ls "$work"/release/cepbus_*.deb)
fi
deb=$(readlink -f "$deb")
log "package $deb"
dpkg-deb --info "$deb" | sed 's/^/  /'
depends=$(dpkg-deb -f "$deb" Depends)
# Computed by dpkg-shlibdeps, not written by hand: the libraries cepbus links.
for lib in libpoco libqpid-proton-cpp libtinyxml2 libsqlite3 libstdc++6 adduser; do
  [[ $depends == *"$lib"* ]] || die "Depends lacks $lib: $depends"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -tf - | grep -q conffiles || die "no conffiles"

installed=0
bus_pid=""
runner_pid=""
cleanup() {
  local rc=$?
  if [[ -n $bus_pid ]] && kill -0 "$bus_pid" 2>/dev/null; then kill -KILL "$bus_pid" || true; fi
  if ((installed)); then
    [[ -d /run/systemd/system ]] && systemctl stop cepbus.service 2>/dev/null || true
    apt-get purge -y -q -o DPkg::Lock::Timeout=300 cepbus >/dev/null 2>&1 || true
  fi
  exit $rc
}
trap cleanup EXIT

log "apt-get install $deb"
installed=1
apt-get install -y -q -o DPkg::Lock::Timeout=300 "$deb" >"$work/apt-install.log" 2>&1 ||
  { cat "$work/apt-install.log"; die "apt-get install failed"; }

for f in /usr/bin/cepbus /usr/bin/cepbus-amqp-passwd /usr/lib/cepbus/libcepbus_core.so \
  /usr/lib/cepbus/plugins/libcepbus_plugin_nfa.so /usr/lib/cepbus/plugins/libcepbus_plugin_join.so \
  /usr/include/cepbus/bus/core/plugin/plugin_export.h /usr/include/cepbus/bus/core/plugin/version.h \
  /usr/lib/cmake/cepbus/cepbusConfig.cmake /usr/lib/pkgconfig/cepbus.pc \
  /usr/share/man/man1/cepbus.1.gz /usr/share/man/man1/cepbus-run.1.gz \
  /usr/share/doc/cepbus/examples/plugins/threshold/CMakeLists.txt \
  /usr/lib/systemd/system/cepbus.service /etc/cepbus/cepbus.xml; do
  [[ -e $f ]] || die "not installed: $f"
done
getent passwd cepbus >/dev/null || die "no cepbus user"
[[ $(stat -c %U /var/lib/cepbus) == cepbus ]] || die "/var/lib/cepbus is not the cepbus user's"
/usr/bin/cepbus --version
/usr/bin/cepbus plugins | grep -q "plugin nfa" || die "cepbus plugins does not find nfa"
man -w cepbus-plugins >/dev/null 2>&1 || [[ ! -x /usr/bin/man ]] || die "man cannot find cepbus-plugins(1)"

# A free port: the default descriptor's 5672 may be taken on this machine.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "s/port=\"5672\"/port=\"$port\"/" /etc/cepbus/cepbus.xml
grep -q "port=\"$port\"" /etc/cepbus/cepbus.xml || die "cannot set the port"

unit=/usr/lib/systemd/system/cepbus.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
exec_start_pre=$(sed -n 's/^ExecStartPre=//p' "$unit")
[[ -n $exec_start && -n $exec_start_pre ]] || die "no ExecStart/ExecStartPre in $unit"
grep -q '^User=cepbus$' "$unit" && grep -q '^StateDirectory=cepbus$' "$unit" ||
  die "the unit does not run as cepbus with StateDirectory=cepbus"
grep -q '^ExecReload=' "$unit" && die "the unit has an ExecReload but cepbus cannot reload"
if [[ -d /run/systemd/system ]]; then
  log "systemd is the init: systemctl start cepbus"
  systemctl start cepbus.service
  bus_pid=$(systemctl show -p MainPID --value cepbus.service)
else
  # No systemd (a container): what the unit would do, by hand: ExecStart as
  # User=cepbus in WorkingDirectory=/var/lib/cepbus, stderr to a log.
  log "no systemd: running the unit's ExecStartPre and ExecStart as cepbus: $exec_start"
  # shellcheck disable=SC2086  # ExecStartPre is a command line
  (cd /var/lib/cepbus && runuser -u cepbus -- $exec_start_pre) || die "ExecStartPre failed"
  # shellcheck disable=SC2086  # ExecStart is a command line
  (cd /var/lib/cepbus && exec runuser -u cepbus -- $exec_start) 2>"$work/bus.log" &
  runner_pid=$!
  # runuser forks the command and waits for it: the bus is its child.
  for _ in $(seq 100); do
    bus_pid=$(pgrep -P "$runner_pid" || true)
    [[ -n $bus_pid ]] && break
    sleep 0.1
  done
fi
[[ -n $bus_pid && $bus_pid != 0 ]] || die "the bus did not start: $(cat "$work/bus.log" 2>/dev/null)"
[[ $(stat -c %U "/proc/$bus_pid") == cepbus ]] || die "the bus does not run as cepbus"
log "bus PID $bus_pid (user cepbus), AMQP port $port"

out=$(timeout 60 /usr/bin/python3 "$src/tests/package/amqp_roundtrip.py" "$port") ||
  die "AMQP round trip failed: $out $(cat "$work/bus.log" 2>/dev/null)"
log "$out"
[[ $out == "composite EqualPrices IBM ACME INIT" ]] || die "unexpected composite event: $out"
[[ -f /var/lib/cepbus/journal.db ]] || log "note: no journal file (no reliable flow used it)"

log "stopping PID $bus_pid"
if [[ -d /run/systemd/system ]]; then
  systemctl stop cepbus.service
else
  kill -TERM "$bus_pid"
  for _ in $(seq 300); do kill -0 "$bus_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$bus_pid" 2>/dev/null && die "the bus did not stop within 30 s of SIGTERM"
  wait "$runner_pid" || die "the bus exited with status $? after SIGTERM: $(cat "$work/bus.log")"
fi
bus_pid=""
grep -q "draining and stopping" "$work/bus.log" 2>/dev/null || [[ -d /run/systemd/system ]] ||
  die "no clean shutdown in the log: $(cat "$work/bus.log")"

log "apt-get purge cepbus"
apt-get purge -y -q -o DPkg::Lock::Timeout=300 cepbus >"$work/apt-purge.log" 2>&1 ||
  { cat "$work/apt-purge.log"; die "apt-get purge failed"; }
installed=0
left=()
for f in /usr/bin/cepbus /usr/bin/cepbus-amqp-passwd /usr/lib/cepbus /usr/include/cepbus \
  /usr/lib/cmake/cepbus /usr/lib/pkgconfig/cepbus.pc /usr/share/doc/cepbus \
  /usr/share/man/man1/cepbus.1.gz /usr/lib/systemd/system/cepbus.service /etc/cepbus \
  /var/lib/cepbus; do
  [[ -e $f ]] && left+=("$f")
done
getent passwd cepbus >/dev/null && left+=("user cepbus")
getent group cepbus >/dev/null && left+=("group cepbus")
dpkg-query -W -f='${Status}' cepbus 2>/dev/null | grep -qv 'not-installed' && left+=("dpkg status: $(dpkg-query -W -f='${Status}' cepbus)")
((${#left[@]} == 0)) || die "left after purge: ${left[*]}"
log "OK"
