#!/usr/bin/env bash
# Runs every fuzz target for SECONDS from its seed corpus, one at a time, each
# in one process (no -jobs: the CPU is shared): tests/fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]
# New inputs go to a scratch folder (the committed seeds stay as they are);
# a crash leaves its reproducer in BUILD_DIR/fuzz-artifacts/ and fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR [SECONDS] [TARGET...]}
seconds=${2:-20}
shift 2 || shift $#
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pattern patterns_file descriptor event_json amqp_message
  admin_api time_matrix journal engines)
artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
status=0
for t in "${targets[@]}"; do
  dict=()
  case $t in
    pattern | patterns_file) dict=(-dict="$root/tests/fuzz/query.dict") ;;
    descriptor) dict=(-dict="$root/tests/fuzz/descriptor.dict") ;;
  esac
  scratch=$build/fuzz-corpus/$t
  mkdir -p "$scratch"
  echo "-- fuzz_$t (${seconds}s)"
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" \
      -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "${dict[@]}" \
      "$scratch" "$root/tests/fuzz/corpus/$t" >"$build/fuzz-$t.log" 2>&1; then
    tail -n 60 "$build/fuzz-$t.log"
    status=1
  else
    grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' \
      "$build/fuzz-$t.log" || true
  fi
done
exit $status
