#!/usr/bin/env bash
# scripts/lib/apt_install_missing.sh and scripts/install-deps.sh against a
# fake apt: no root, no network, no systemd. The fakes on PATH log what they
# are asked; the fake apt-get plays the maintainer scripts of the packages it
# "installs" as Debian's do: deb-systemd-helper enables a package's units and
# deb-systemd-invoke starts them unless policy-rc.d answers 101.
#
# Checks that install-deps.sh keeps rabbitmq-server from starting (it would
# hold port 5672, the quickstart's) and from being enabled at boot, that a
# policy-rc.d already there is put back even when apt-get fails, and that
# without --no-service-start the service would have started (so the fake
# shows what the guard prevents).
#
# Usage: tests/scripts/apt_install_missing_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?SOURCE_DIR}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "apt_install_missing_test: FAIL: $*" >&2
  echo "--- log:" >&2
  cat "$work/log" >&2 || true
  exit 1
}

mkdir -p "$work/bin"
export FAKE_LOG=$work/log CEPBUS_POLICY_RC_D=$work/policy-rc.d
cat >"$work/bin/id" <<'FAKE'
#!/bin/sh
[ "$1" = -u ] && { echo 0; exit 0; }
exec /usr/bin/id "$@"
FAKE
# Nothing is installed, but the packages named in $FAKE_INSTALLED.
cat >"$work/bin/dpkg-query" <<'FAKE'
#!/bin/sh
for p in $FAKE_INSTALLED; do
  [ "$p" = "$3" ] && { printf 'install ok installed'; exit 0; }
done
exit 1
FAKE
# rabbitmq-server ships a systemd unit and an init script, as Debian's does.
cat >"$work/bin/dpkg" <<'FAKE'
#!/bin/sh
[ "$1" = -L ] || exit 2
if [ "$2" = rabbitmq-server ]; then
  echo /lib/systemd/system/rabbitmq-server.service
  echo /etc/init.d/rabbitmq-server
fi
echo "/usr/share/doc/$2"
FAKE
cat >"$work/bin/apt-get" <<'FAKE'
#!/bin/sh
echo "apt-get $*" >>"$FAKE_LOG"
[ "$1" = install ] || exit 0
[ -n "${FAKE_APT_FAIL:-}" ] && exit 100
for p in "$@"; do
  [ "$p" = rabbitmq-server ] || continue
  # postinst: deb-systemd-helper enable, then deb-systemd-invoke start.
  echo "enabled rabbitmq-server.service" >>"$FAKE_LOG"
  code=0
  if [ -x "$CEPBUS_POLICY_RC_D" ]; then "$CEPBUS_POLICY_RC_D" rabbitmq-server.service start || code=$?; fi
  if [ "$code" = 101 ]; then
    echo "policy-rc.d refused: start rabbitmq-server.service" >>"$FAKE_LOG"
  else
    echo "started rabbitmq-server.service" >>"$FAKE_LOG"
  fi
done
FAKE
for tool in deb-systemd-helper update-rc.d; do
  # shellcheck disable=SC2016  # $* and $FAKE_LOG belong to the fake
  printf '#!/bin/sh\necho "%s $*" >>"$FAKE_LOG"\n' "$tool" >"$work/bin/$tool"
done
chmod +x "$work/bin/"*
export PATH=$work/bin:$PATH

# 1. install-deps.sh itself: the broker is installed, neither started nor
# enabled at boot, and no policy-rc.d is left behind.
: >"$FAKE_LOG"
bash "$src/scripts/install-deps.sh" >"$work/out" 2>&1 || fail "install-deps.sh failed: $(cat "$work/out")"
grep -q "apt-get install .*rabbitmq-server" "$FAKE_LOG" || fail "rabbitmq-server was not installed"
grep -q "policy-rc.d refused: start rabbitmq-server.service" "$FAKE_LOG" ||
  fail "install-deps.sh let Debian start rabbitmq-server"
grep -q "^started" "$FAKE_LOG" && fail "a service started during install-deps.sh"
grep -q "deb-systemd-helper disable rabbitmq-server.service" "$FAKE_LOG" ||
  fail "rabbitmq-server.service was left enabled at boot"
grep -q "update-rc.d rabbitmq-server disable" "$FAKE_LOG" ||
  fail "the rabbitmq-server init script was left enabled"
grep -q "rabbitmq-server.service (from rabbitmq-server): not started, not enabled at boot" \
  "$work/out" || fail "install-deps.sh did not say what it did: $(cat "$work/out")"
[[ -e $CEPBUS_POLICY_RC_D ]] && fail "install-deps.sh left a policy-rc.d behind"

# 2. A site's own policy-rc.d is put back as it was, also when apt-get fails.
# shellcheck source=scripts/lib/apt_install_missing.sh
source "$src/scripts/lib/apt_install_missing.sh"
printf '#!/bin/sh\n# the site policy\nexit 0\n' >"$CEPBUS_POLICY_RC_D"
chmod 755 "$CEPBUS_POLICY_RC_D"
cp "$CEPBUS_POLICY_RC_D" "$work/site-policy"
: >"$FAKE_LOG"
apt_install_missing t --no-service-start rabbitmq-server >/dev/null
grep -q "policy-rc.d refused: start rabbitmq-server.service" "$FAKE_LOG" ||
  fail "the guard did not replace the site's policy during the install"
cmp -s "$CEPBUS_POLICY_RC_D" "$work/site-policy" || fail "the site's policy-rc.d was not put back"
: >"$FAKE_LOG"
rc=0
FAKE_APT_FAIL=1 apt_install_missing t --no-service-start rabbitmq-server >/dev/null 2>&1 || rc=$?
((rc == 100)) || fail "apt-get's failure (100) came back as $rc"
cmp -s "$CEPBUS_POLICY_RC_D" "$work/site-policy" ||
  fail "the site's policy-rc.d was not put back after apt-get failed"
[[ -e $CEPBUS_POLICY_RC_D.cepbus-saved ]] && fail "the saved policy was left beside it"

# 3. Without the guard the fake starts the broker: what the guard prevents.
rm -f "$CEPBUS_POLICY_RC_D"
: >"$FAKE_LOG"
apt_install_missing t rabbitmq-server >/dev/null
grep -q "^started rabbitmq-server.service" "$FAKE_LOG" ||
  fail "the fake apt-get does not start services unguarded: the checks above prove nothing"

# 4. Nothing missing: apt is not called at all.
: >"$FAKE_LOG"
FAKE_INSTALLED="rabbitmq-server g++" apt_install_missing t --no-service-start rabbitmq-server g++ |
  grep -q "all 2 packages present" || fail "present packages were not recognised"
[[ -s $FAKE_LOG ]] && fail "apt-get ran with nothing missing"
echo "apt_install_missing_test: OK"
