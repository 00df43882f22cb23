#!/usr/bin/env bash
# The plugin SDK as a third party sees it, against an installed prefix
# (cmake --install BUILD --prefix PREFIX):
#   - every installed header compiles on its own, from the prefix only, with
#     g++ and clang++-14 under -Wall -Wextra -Werror;
#   - examples/plugins/threshold builds out of tree with find_package(cepbus)
#     under both compilers, and with pkg-config alone;
#   - the installed cepbus finds its bundled plugins without --plugin-path,
#     loads the g++-built example with --plugin-path, runs a query through
#     it and prints the expected matches; `cepbus plugins` lists it;
#   - the clang-built one (another build tag) is refused with a message
#     naming what differs.
#
# Usage: tests/package/sdk_test.sh SOURCE_DIR PREFIX WORK_DIR
set -euo pipefail
src=$(cd "${1:?SOURCE_DIR}" && pwd)
prefix=$(cd "${2:?PREFIX}" && pwd)
work=${3:?WORK_DIR}
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
log() { echo "sdk_test: $*"; }
die() { echo "sdk_test: FAIL: $*" >&2; exit 1; }
cepbus=$prefix/bin/cepbus
example=$src/examples/plugins/threshold
query='PATTERN Login l WHERE l.ok = false WITHIN 60 RETURN Alert(l.user)'

log "headers compile alone from $prefix/include/cepbus"
mapfile -t headers < <(cd "$prefix/include/cepbus" && find . -name '*.h' | sed 's|^\./||' | sort)
((${#headers[@]} > 0)) || die "no headers installed"
for cxx in g++ clang++-14; do
  for h in "${headers[@]}"; do
    echo "#include \"$h\"" | $cxx -std=c++20 -Wall -Wextra -Werror -fsyntax-only \
      -I"$prefix/include/cepbus" -x c++ - || die "$h does not compile alone with $cxx"
  done
done

for cxx in g++ clang++-14; do
  log "out-of-tree build of examples/plugins/threshold with $cxx"
  cmake -S "$example" -B "$work/$cxx" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/$cxx.configure.log" 2>&1 ||
    { cat "$work/$cxx.configure.log"; die "configure with $cxx"; }
  cmake --build "$work/$cxx" || die "build with $cxx"
  [[ -f $work/$cxx/libcepbus_plugin_threshold.so ]] || die "no plugin built with $cxx"
done

log "pkg-config build"
mkdir -p "$work/pkgconfig"
# shellcheck disable=SC2046  # pkg-config prints several flags
g++ -std=c++20 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror \
  -o "$work/pkgconfig/libcepbus_plugin_threshold.so" "$example/threshold_plugin.cc" \
  $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs cepbus) ||
  die "pkg-config build"

log "the installed cepbus"
"$cepbus" --version | tee "$work/version.txt"
grep -q "^plugin ABI [0-9]" "$work/version.txt" || die "--version lacks the plugin ABI"
grep -q "^build tag " "$work/version.txt" || die "--version lacks the build tag"
"$cepbus" plugins >"$work/plugins.txt" || { cat "$work/plugins.txt"; die "cepbus plugins"; }
grep -q "^  $prefix/lib/cepbus/plugins\$" "$work/plugins.txt" ||
  { cat "$work/plugins.txt"; die "the default search path lacks $prefix/lib/cepbus/plugins"; }
for engine in nfa algebra petri join; do
  grep -q "    engine $engine " "$work/plugins.txt" || { cat "$work/plugins.txt"; die "no $engine"; }
done
# A bundled engine, found without --plugin-path.
echo '{"type":"A","ts":1}' >"$work/a.jsonl"
[[ $("$cepbus" match --engine nfa --query 'PATTERN A a' --events "$work/a.jsonl") == "[1]" ]] ||
  die "the installed cepbus does not run its bundled nfa plugin"

log "the g++ plugin, loaded with --plugin-path"
"$cepbus" match --plugin-path "$work/g++" --engine threshold --option count=3 --query "$query" \
  --events "$example/logins.jsonl" >"$work/matches.txt" || die "match through the plugin"
diff -u "$example/expected.txt" "$work/matches.txt" || die "unexpected matches"
"$cepbus" match --plugin-path "$work/pkgconfig" --engine threshold --option count=3 \
  --query "$query" --events "$example/logins.jsonl" --format full >"$work/full.txt"
grep -q '"type":"Alert"' "$work/full.txt" && grep -q '"l_user":"eve"' "$work/full.txt" ||
  { cat "$work/full.txt"; die "unexpected composite event"; }
"$cepbus" plugins --plugin-path "$work/g++" >"$work/plugins2.txt"
grep -q "engine threshold" "$work/plugins2.txt" && grep -q "^      count=N >= 1: " "$work/plugins2.txt" ||
  { cat "$work/plugins2.txt"; die "cepbus plugins does not describe the example"; }
if "$cepbus" match --plugin-path "$work/g++" --engine threshold --option count=0 \
  --query "$query" --events "$example/logins.jsonl" 2>"$work/bad.txt"; then
  die "count=0 accepted"
fi
grep -q "count=0: expected an integer >= 1" "$work/bad.txt" || { cat "$work/bad.txt"; die "message"; }
# PROBABILITY: (1,2,3) is 0.5 * 0.9 * 0.9 = 0.405, no alert; (2,3,4) is 0.729.
for t in 1:0.5 2:0.9 3:0.9 4:0.9; do
  echo "{\"type\":\"Login\",\"ts\":${t%:*},\"attrs\":{\"user\":\"u\",\"ok\":false},\"prob\":${t#*:}}"
done >"$work/uncertain.jsonl"
[[ $("$cepbus" match --plugin-path "$work/g++" --engine threshold --option count=3 \
  --query "$query PROBABILITY >= 0.5" --events "$work/uncertain.jsonl") == "[2,3,4]" ]] ||
  die "the threshold plugin does not apply PROBABILITY >= 0.5"
[[ $("$cepbus" match --plugin-path "$work/g++" --engine threshold --option count=3 \
  --query "$query" --events "$work/uncertain.jsonl") == "[1,2,3]" ]] ||
  die "the threshold plugin without PROBABILITY"

log "the clang++-14 plugin: another build tag, refused"
if "$cepbus" match --plugin-path "$work/clang++-14" --engine threshold --query "$query" \
  --events "$example/logins.jsonl" 2>"$work/refused.txt"; then
  die "a plugin built with another compiler was loaded"
fi
cat "$work/refused.txt"
grep -q "compiler differs: the plugin has 'clang 14" "$work/refused.txt" ||
  die "the refusal does not say that the compiler differs"
grep -q "rebuild it against the cepbus" "$work/refused.txt" || die "the refusal does not say what to do"
log "OK"
