#!/usr/bin/env bash
# Fails when libcepbus_core.so exports more than the plugin SDK, or when a
# plugin carries its own copy of code of the core or of the host library.
#
# libcepbus_core.so is built with hidden visibility and exports what the SDK
# headers (bus/core/plugin/sdk_headers.txt) mark CEPBUS_API. The allowed names
# come from those headers, not from a list kept by hand: every class, struct,
# union and enum they define at namespace scope, and every function they
# declare CEPBUS_API, each with its namespace (a member, a nested class, a
# typeinfo or a vtable belongs to its class). An exported symbol passes when
# every qualified name in it (its own, those of its parameters and template
# arguments) is
#   - in namespace cepbus and starts with an allowed name, or
#   - in std or __gnu_cxx: the standard library's templates instantiated for
#     the SDK's types, exported because libstdc++ declares them visible;
# or when it is one of the symbols the linker defines in every library.
# So a leaked host class (cepbus::descriptor::Parser), an internal one
# (cepbus::pattern::Lexer) or a third-party one (nlohmann::, simdjson::) fails.
#
# Each plugin in BUILD_DIR/plugins/ must use the core's state, not own it: it
# may not define (strongly) a symbol the core exports, which a static copy of
# the core's code linked into it would. Nor may it carry code of the host's
# static library (cepbus_host): a plugin sees the SDK only.
#
# Usage: scripts/check-exports.sh BUILD_DIR [ROOT]   (prints each offence, exit 1)
set -euo pipefail
build=${1:?BUILD_DIR}
root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
lib=$build/bus/core/libcepbus_core.so
[[ -f $lib ]] || {
  echo "check-exports: no $lib" >&2
  exit 1
}

# The allowed names, one fully qualified name a line. The SDK headers follow
# the layout clang-format gives them: namespace-scope declarations start in
# column 0 and a namespace closes with "}  // namespace".
# shellcheck disable=SC2016  # the $ are awk's
allowed=$(
  grep -v -e '^#' -e '^$' "$root/bus/core/plugin/sdk_headers.txt" | grep -v '/version\.h$' |
    sed "s|^|$root/|" | xargs awk '
      FNR == 1 { depth = 0 }
      /^namespace [A-Za-z_:]+ \{/ { ns[++depth] = $2; next }
      /^\}  \/\/ namespace/ { depth--; next }
      function qualified(name,   i, q) {
        q = ""
        for (i = 1; i <= depth; i++) q = q ns[i] "::"
        return q name
      }
      depth > 0 && /^(class|struct|union|enum)[ [].*[{:]/ {
        line = $0
        gsub(/\[\[[^]]*\]\]|CEPBUS_API|enum class|enum struct/, " ", line)
        sub(/^(class|struct|union|enum)/, "", line)
        if (match(line, /[A-Za-z_][A-Za-z0-9_]*/)) print qualified(substr(line, RSTART, RLENGTH))
        next
      }
      /^CEPBUS_API / {
        decl = $0
        sub(/\(.*/, "", decl)
        if (decl ~ /[^A-Za-z0-9_]operator[^A-Za-z0-9_]*$/) name = "operator"
        else { name = decl; sub(/.*[^A-Za-z0-9_]/, "", name) }
        print qualified(name)
      }' | sort -u
)
[[ -n $allowed ]] || {
  echo "check-exports: no allowed name found in the SDK headers" >&2
  exit 1
}

failures=0
offences=$(
  nm -D --defined-only -C "$lib" | cut -d' ' -f3- |
    awk -v allowed="$allowed" '
      BEGIN {
        n = split(allowed, a, "\n")
        for (i = 1; i <= n; i++) ok[a[i]] = 1
        split("_init _fini _edata _end __bss_start", l, " ")
        for (i in l) linker[l[i]] = 1
      }
      function allowedName(q,   parts, k, i, prefix) {
        k = split(q, parts, "::")
        prefix = parts[1]
        for (i = 2; i <= k; i++) {
          prefix = prefix "::" parts[i]
          if (prefix in ok) return 1
        }
        return 0
      }
      {
        if ($0 in linker) next
        rest = $0; qualifiedNames = 0; bad = ""
        while (match(rest, /[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_~][A-Za-z0-9_]*)+/)) {
          q = substr(rest, RSTART, RLENGTH)
          rest = substr(rest, RSTART + RLENGTH)
          qualifiedNames++
          root = q; sub(/::.*/, "", root)
          if (root == "std" || root == "__gnu_cxx") continue
          if (root == "cepbus" && allowedName(q)) continue
          bad = q
          break
        }
        if (bad != "" || qualifiedNames == 0)
          printf "libcepbus_core.so exports %s%s\n", $0, (bad == "" ? "" : " (" bad " is not in the SDK)")
      }'
)
if [[ -n $offences ]]; then
  echo "$offences"
  failures=$((failures + $(wc -l <<<"$offences")))
fi

# Strong definitions only: an inline function or a template instantiation
# (weak) may be emitted by anyone who uses it. In a plugin, built with hidden
# visibility, a global of the host's archive becomes a local (lower case).
strong='^[0-9a-f]+ [TDBR] '
core_defined=$(nm -D --defined-only "$lib" | grep -E "$strong" | cut -d' ' -f3 | sort -u)
host=$build/bus/host/libcepbus_host.a
[[ -f $host ]] || {
  echo "check-exports: no $host" >&2
  exit 1
}
host_defined=$(nm --defined-only -g "$host" 2>/dev/null |
  grep -E "$strong" | cut -d' ' -f3 | sort -u)
shopt -s nullglob
for plugin in "$build"/plugins/*.so; do
  listing=$(nm --defined-only "$plugin" 2>/dev/null || true)
  copies=$(
    grep -E "$strong" <<<"$listing" | cut -d' ' -f3 | sort -u |
      comm -12 - <(echo "$core_defined") | c++filt | sed "s/^/the core's /"
    grep -E '^[0-9a-f]+ [TtDdBbRr] ' <<<"$listing" | cut -d' ' -f3 | sort -u |
      comm -12 - <(echo "$host_defined") | c++filt | sed "s/^/cepbus_host's /"
  )
  if [[ -n $copies ]]; then
    while IFS= read -r name; do echo "$(basename "$plugin") defines $name"; done <<<"$copies"
    failures=$((failures + $(wc -l <<<"$copies")))
  fi
done

if ((failures > 0)); then
  echo "check-exports: $failures offence(s); export only what an SDK header declares CEPBUS_API (bus/core/api.h)" >&2
  exit 1
fi
echo "check-exports: OK ($(nm -D --defined-only "$lib" | wc -l) symbols exported, $(wc -l <<<"$allowed") SDK names)"
