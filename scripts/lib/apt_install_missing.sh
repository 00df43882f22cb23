# shellcheck shell=bash
# Sourced by the install scripts: installs the Debian packages of a list that
# are not installed yet, from Debian's archive only (apt).
#
#   apt_install_missing LABEL [--no-service-start] PACKAGE...
#
# LABEL prefixes the messages. --no-service-start keeps Debian from starting
# the services of the installed packages (the benchmarks run their own
# instances on loopback). Needs root, or sudo.

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
  if $no_start; then
    echo exit 101 | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
    # shellcheck disable=SC2064  # expand $sudo now: the trap outlives this function's locals
    trap "$sudo rm -f /usr/sbin/policy-rc.d" EXIT
  fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
