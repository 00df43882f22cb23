#!/usr/bin/env bash
# Installs what is missing, builds everything (tests and benchmarks) and runs
# every test with ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" "$root/build/test" -DCMAKE_BUILD_TYPE=RelWithDebInfo
ctest --test-dir "$root/build/test" --output-on-failure -j2 --timeout 300 || {
  status=$?
  bash "$root/scripts/lib/failure-digest.sh" "$root/build/test"
  exit "$status"
}
