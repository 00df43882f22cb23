#!/usr/bin/env bash
# Installs the reference brokers the AMQP benchmark (tests/bench/amqp_bench.cc)
# compares cepbus with, from Debian 12 only (apt):
#   - rabbitmq-server, whose rabbitmq_amqp1_0 plugin the benchmark enables;
#   - libqpid-proton11-dev-examples, the Proton C examples (broker.c), which
#     the benchmark builds against libqpid-proton-dev;
#   - openssl, for the self-signed pair of the TLS tests.
# Run as root (or with sudo). The brokers are started by the benchmark on
# loopback only; this script does not enable them as system services.
set -euo pipefail

packages=(rabbitmq-server libqpid-proton11-dev-examples libqpid-proton11-dev openssl gcc)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-bench-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-bench-deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
# Debian starts services on install; the benchmark runs its own instance.
echo exit 101 | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
$SUDO chmod +x /usr/sbin/policy-rc.d
trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
