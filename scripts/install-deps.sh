#!/usr/bin/env bash
# Installs the Debian 12 packages cepbus needs, only those that are missing.
# Run as root (or with sudo). Nothing is downloaded from anywhere but Debian.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config
  libqpid-proton-cpp12-dev python3-qpid-proton
  libboost-dev libtinyxml2-dev libpoco-dev nlohmann-json3-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openssl  # the AMQP TLS tests make a self-signed pair with the openssl command
  chromium  # the admin dashboard's end-to-end test drives it headless
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
