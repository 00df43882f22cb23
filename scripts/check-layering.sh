#!/usr/bin/env bash
# Fails when an #include crosses the layering (docs/concepts.md, "Source
# layout"). The layers, and what each may include besides itself:
#
#   bus/core            the plugin SDK: nothing else of the tree
#   bus/base            bus/core
#   stages              bus/core, bus/base
#   flows               ... and stages
#   router              ... and flows
#   bus/host            bus/core, bus/base (it runs detectors; no stage, flow
#                       or router in it)
#   services/protocols  bus/core, bus/base, stages, flows, router, bus/host,
#                       and other protocol libraries
#   services            the above, the service API at services/'s root
#                       (service.h, deployer.h, ...) and its own folder:
#                       services/<a>/ never includes services/<b>/ (what two
#                       services share is a library below them)
#   bus/app             everything above
#
# plugins/<name>/ may include its own folder and the plugin SDK headers listed
# in bus/core/plugin/sdk_headers.txt (what is installed for third-party
# plugins), and nothing else of the tree; no source folder includes a plugin
# (plugins are loaded through the ABI). An SDK header includes only SDK
# headers. tests/ and examples/ are not checked: tests reach into what they
# test.
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
      while ((getline h < sdk_file) > 0) if (h !~ /^#/ && h != "") sdk[h] = 1
      below["bus/core"] = ""
      below["bus/base"] = "bus/core"
      below["stages"] = "bus/core bus/base"
      below["flows"] = "bus/core bus/base stages"
      below["router"] = "bus/core bus/base stages flows"
      below["bus/host"] = "bus/core bus/base"
      below["services/protocols"] = "bus/core bus/base stages flows router bus/host"
      below["services"] = "bus/core bus/base stages flows router bus/host services/protocols"
      below["bus/app"] = "bus/core bus/base stages flows router bus/host services/protocols services"
    }
    # The layer of a path: its longest layer prefix.
    function layer_of(path) {
      if (path ~ /^bus\/(core|base|host|app)\//) { split(path, p, "/"); return p[1] "/" p[2] }
      if (path ~ /^services\/protocols\//) return "services/protocols"
      if (path ~ /^(stages|flows|router|services)\//) { split(path, p, "/"); return p[1] }
      return ""
    }
    # services/<a>/ for a file of a service folder; "" for the service API at
    # the root of services/.
    function service_of(path,   p, n) {
      n = split(path, p, "/")
      return (n > 2 && p[1] == "services" && p[2] != "protocols") ? p[1] "/" p[2] "/" : ""
    }
    function may_include(from, to,   allowed, i, n) {
      if (from == to) return 1
      n = split(below[from], allowed, " ")
      for (i = 1; i <= n; i++) if (allowed[i] == to) return 1
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
      if (to == "") { fail("not a header of a layer of the tree"); next }
      if (!may_include(from, to)) { fail(from " must not depend on " to " (docs/concepts.md, Source layout)"); next }
      if (from == "services" && to == "services") {
        own = service_of(file); theirs = service_of(inc)
        if (own != "" && theirs != "" && own != theirs)
          fail("a service must not include another service (" theirs "): share a library below them")
      }
    }
    END {
      if (failures > 0) { printf "check-layering: %d include(s) cross the layering\n", failures > "/dev/stderr"; exit 1 }
      print "check-layering: OK"
    }'
