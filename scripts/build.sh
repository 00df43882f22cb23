#!/usr/bin/env bash
# Configures and builds cepbus: scripts/build.sh BUILD_DIR [extra cmake arguments...]
# CEPBUS_JOBS (default 2) sets the parallelism, CEPBUS_TARGET one target to build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja "$@" >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log"
  exit 1
}
cmake --build "$build" -j "${CEPBUS_JOBS:-2}" ${CEPBUS_TARGET:+--target "$CEPBUS_TARGET"}
