#!/usr/bin/env bash
# Configures and builds cepbus: scripts/build.sh BUILD_DIR [extra cmake arguments...]
# CEPBUS_JOBS (default 2) sets the parallelism, CEPBUS_TARGET one target to build.
#
# With ccache installed (scripts/install-deps.sh installs it), compilations
# go through it, keyed on paths relative to the checkout, so a rebuild of
# unchanged files, in this tree or in another checkout of the same sources,
# costs a cache lookup. CEPBUS_CCACHE=0 turns that off.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
mkdir -p "$build"
launcher=()
if [[ ${CEPBUS_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
fi
cmake -S "$root" -B "$build" -G Ninja "${launcher[@]}" "$@" >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log"
  exit 1
}
cmake --build "$build" -j "${CEPBUS_JOBS:-2}" ${CEPBUS_TARGET:+--target "$CEPBUS_TARGET"}
