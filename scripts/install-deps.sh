#!/usr/bin/env bash
# Installs the Debian 12 packages cepbus needs, only those that are missing.
# Run as root (or with sudo). Nothing is downloaded from anywhere but Debian.
set -euo pipefail
# shellcheck source=scripts/lib/apt_install_missing.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt_install_missing.sh"

packages=(
  g++ cmake ninja-build pkg-config
  ccache  # scripts/build.sh compiles through it: unchanged files are not compiled twice
  libqpid-proton-cpp12-dev python3-qpid-proton
  libboost-dev libtinyxml2-dev libpoco-dev nlohmann-json3-dev libsimdjson-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openssl  # the AMQP TLS tests make a self-signed pair with the openssl command
  chromium  # the admin dashboard's end-to-end test drives it headless
  # Packaging and the plugin SDK checks (docs/install.md, tests/package/):
  dpkg-dev file  # cpack -G DEB computes Depends with dpkg-shlibdeps, finding ELF files with file
  clang-14       # the out-of-tree plugin build checks the SDK headers under clang++-14 too
  libclang-rt-14-dev  # the libFuzzer targets (CEPBUS_FUZZ=ON): clang's fuzzer and sanitizer runtimes
  # Scale-out (docs/cluster.md): the cluster tests and the walk-through start a
  # private 3-node RabbitMQ 3.10 cluster on loopback (scripts/rabbitmq-cluster.sh).
  rabbitmq-server
)

# --no-service-start: Debian would start rabbitmq-server as a system service,
# which holds port 5672, where the quickstart bus listens.
apt_install_missing install-deps --no-service-start "${packages[@]}"
