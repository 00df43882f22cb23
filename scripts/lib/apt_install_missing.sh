# shellcheck shell=bash
# Sourced by the install scripts: installs the Debian packages of a list that
# are not installed yet, from Debian's archive only (apt).
#
#   apt_install_missing LABEL [--no-service-start] PACKAGE...
#
# LABEL prefixes the messages. --no-service-start keeps the services of what
# it installs from running: during the install a policy-rc.d that answers 101
# (Debian's "action forbidden", which invoke-rc.d and deb-systemd-invoke
# honour) keeps the maintainer scripts from starting them, and afterwards
# the systemd units and init scripts of the listed packages it installed are
# disabled, so that a reboot does not start them either. rabbitmq-server is
# why: started as a system service it holds port 5672, where the quickstart
# bus listens, and the tests and benchmarks run their own brokers on
# loopback. A policy-rc.d already in place is put back afterwards. Needs
# root, or sudo.
#
# CEPBUS_POLICY_RC_D names the policy file (default /usr/sbin/policy-rc.d;
# tests/scripts/apt_install_missing_test.sh points it elsewhere).

apt_install_missing() {
  local label=$1
  shift
  local no_start=false
  if [[ ${1:-} == --no-service-start ]]; then
    no_start=true
    shift
  fi

  local missing=() p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "$label: all $# packages present"
    return 0
  fi

  echo "$label: installing ${missing[*]}"
  local sudo=
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  if ! $no_start; then
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    return
  fi
  _apt_forbid_service_starts "$sudo"
  local rc=0
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" || rc=$?
  _apt_allow_service_starts
  ((rc == 0)) || return "$rc"
  _apt_disable_services "$label" "$sudo" "${missing[@]}"
}

# Puts a policy-rc.d that forbids every action in place, keeping the one
# there (if any) aside until _apt_allow_service_starts. A trap puts it back
# should the script die meanwhile.
_apt_forbid_service_starts() {
  local sudo=$1
  _apt_policy=${CEPBUS_POLICY_RC_D:-/usr/sbin/policy-rc.d}
  _apt_policy_saved=
  if [[ -e $_apt_policy ]]; then
    _apt_policy_saved=$_apt_policy.cepbus-saved
    $sudo mv "$_apt_policy" "$_apt_policy_saved"
  fi
  _apt_sudo=$sudo
  trap _apt_allow_service_starts EXIT
  trap '_apt_allow_service_starts; exit 130' INT TERM
  printf '#!/bin/sh\n# cepbus apt_install_missing --no-service-start: no service starts during this install.\nexit 101\n' |
    $sudo tee "$_apt_policy" >/dev/null
  $sudo chmod 755 "$_apt_policy"
}

_apt_allow_service_starts() {
  trap - EXIT INT TERM
  [[ -n ${_apt_policy:-} ]] || return 0
  $_apt_sudo rm -f "$_apt_policy"
  if [[ -n $_apt_policy_saved ]]; then
    $_apt_sudo mv "$_apt_policy_saved" "$_apt_policy"
  fi
  _apt_policy=
}

# Disables at boot the systemd units and SysV init scripts that `packages`
# ship (their services were kept from starting, but Debian enables them).
_apt_disable_services() {
  local label=$1 sudo=$2
  shift 2
  local p file unit
  for p in "$@"; do
    while IFS= read -r file; do
      case $file in
        /lib/systemd/system/*.service | /usr/lib/systemd/system/*.service)
          unit=${file##*/}
          [[ $unit == *@.service ]] && continue
          # Without deb-systemd-helper there is no systemd to start it.
          command -v deb-systemd-helper >/dev/null || continue
          if $sudo deb-systemd-helper disable "$unit" >/dev/null 2>&1; then
            echo "$label: $unit (from $p): not started, not enabled at boot"
          else
            echo "$label: WARNING: cannot disable $unit (from $p); it may start at boot" \
              "(systemctl disable --now $unit)" >&2
          fi
          ;;
        /etc/init.d/*)
          command -v update-rc.d >/dev/null || continue
          if ! $sudo update-rc.d "${file##*/}" disable >/dev/null 2>&1; then
            echo "$label: WARNING: cannot disable the init script $file (from $p)" >&2
          fi
          ;;
      esac
    done < <(dpkg -L "$p" 2>/dev/null)
  done
}
