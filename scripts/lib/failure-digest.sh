#!/usr/bin/env bash
# Prints, after a failed ctest run, what failed and why: each GoogleTest
# assertion failure, sanitizer report and timeout in the run's log, then the
# names of the failed GoogleTest cases last. ctest prints a failing test's
# output when it fails, which in a long run scrolls far above the summary;
# a CI log read from its end shows this digest.
# Usage: failure-digest.sh BUILD_DIR
set -uo pipefail
log="$1/Testing/Temporary/LastTest.log"
[[ -f "$log" ]] || exit 0
echo "== why (from $log)"
grep -E -A4 ': Failure$|^(==[0-9]+==)?(ERROR|WARNING): [A-Za-z]*Sanitizer|runtime error:|\*\*\*Timeout|^Timeout$' \
  "$log" | cut -c1-300 | head -n 80
echo "== failed GoogleTest cases"
grep -E '^\[  FAILED  \] [A-Za-z0-9_/]+\.[A-Za-z0-9_/]+' "$log" | sed 's/ ([0-9]* ms)$//' | sort -u
