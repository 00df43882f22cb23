#!/usr/bin/env bash
# Installs the reference brokers the AMQP benchmark (tests/bench/amqp_bench.cc)
# compares cepbus with, from Debian 12 only (apt):
#   - rabbitmq-server, whose rabbitmq_amqp1_0 plugin the benchmark enables;
#   - libqpid-proton11-dev-examples, the Proton C examples (broker.c), which
#     the benchmark builds against libqpid-proton-dev;
#   - openssl, for the self-signed pair of the TLS tests.
# Run as root (or with sudo). The brokers are started by the benchmark on
# loopback only; Debian is kept from enabling them as system services.
set -euo pipefail
# shellcheck source=scripts/lib/apt_install_missing.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt_install_missing.sh"

apt_install_missing install-bench-deps --no-service-start \
  rabbitmq-server libqpid-proton11-dev-examples libqpid-proton11-dev openssl gcc
