#!/usr/bin/env bash
# Fails when an #include crosses the one-way layering (docs/concepts.md):
#
#   bus/core <- stages <- flows <- router <- services <- bus/app
#
# A file may include headers of its own layer and of the layers to its left;
# plugins/<name>/ may include its own folder and the plugin SDK headers
# listed in bus/core/plugin/sdk_headers.txt (what is installed for
# third-party plugins) and nothing else of the tree; no source folder
# includes a plugin (plugins are loaded through the ABI). bus/core builds
# two libraries (bus/core/CMakeLists.txt): the SDK headers are those of the
# shared cepbus_core, so one of them includes only the others; the rest of
# bus/core is the host's static cepbus_host. tests/ and examples/ are not
# checked: tests reach into what they test.
#
# Usage: scripts/check-layering.sh [ROOT]   (prints each violation, exit 1)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# One awk pass over every quoted include (system and library headers use <...>).
grep -rn --include='*.h' --include='*.cc' -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
  bus stages flows router services plugins |
  awk -v sdk_file=bus/core/plugin/sdk_headers.txt '
    BEGIN {
      n = split("bus/core stages flows router services bus/app", layers, " ")
      while ((getline h < sdk_file) > 0) if (h !~ /^#/ && h != "") sdk[h] = 1
    }
    function layer_of(path,   i) {
      for (i = 1; i <= n; i++) if (index(path, layers[i] "/") == 1) return i
      return 0
    }
    function fail(why) { printf "%s: includes \"%s\": %s\n", file, inc, why; failures++ }
    {
      file = $0; sub(/:.*/, "", file)
      inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
      if (file ~ /^plugins\//) {
        split(file, parts, "/"); own = parts[1] "/" parts[2] "/"
        if (index(inc, own) != 1 && !(inc in sdk))
          fail("a plugin may include only its own folder and the SDK headers (" sdk_file ")")
        next
      }
      if ((file in sdk) && !(inc in sdk)) {
        fail("an SDK header may include only SDK headers (" sdk_file ")")
        next
      }
      if (inc ~ /^plugins\//) { fail("nothing includes a plugin: plugins are loaded through the ABI"); next }
      from = layer_of(file); to = layer_of(inc)
      if (to == 0) fail("not a header of a layer of the tree")
      else if (to > from)
        fail(layers[from] " must not depend on " layers[to] " (layering: bus/core <- stages <- flows <- router <- services <- bus/app)")
    }
    END {
      if (failures > 0) { printf "check-layering: %d include(s) cross the layering\n", failures > "/dev/stderr"; exit 1 }
      print "check-layering: OK"
    }'
