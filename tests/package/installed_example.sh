#!/bin/sh
# The package as an engine gets it (docs/embedding.md): `cmake --install
# --strip` into a temporary prefix, then
#   - the install tree is under 50 MB (printed), the library stripped and
#     versioned, the program runs from it;
#   - the headers installed are exactly the public API: the closure of
#     <kvtier/runtime/service.hpp>, nothing else, each compiling alone
#     against the install tree with only <prefix>/include on the path;
#   - the embedding example (runtime/example/) builds with find_package(kvtier)
#     and with pkg-config, links only libkvtier.so, CAF's core and threads,
#     and runs its checks;
#   - the `debug` component holds the library's debug info by build id.
# Arguments: BUILD_DIR SOURCE_DIR CMAKE [EXTRA_FLAGS, e.g. the sanitizer
# flags the library was built with].
set -eu
build=$1
src=$2
cmake=$3
flags=${4:-}
limit_mb=50
work=$(realpath "$(mktemp -d)")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() {
  echo "installed_example: $*"
  exit 1
}
step() { # NAME LOG COMMAND...: run, show the log when it fails
  name=$1; log=$2; shift 2
  if ! "$@" > "$log" 2>&1; then
    echo "installed_example: $name failed:"; cat "$log"; exit 1
  fi
}
step "cmake --install --strip" "$work/install.log" \
  "$cmake" --install "$build" --prefix "$prefix" --strip
for f in include/kvtier/runtime/service.hpp lib/libkvtier.so \
         lib/cmake/kvtier/kvtier-config.cmake \
         lib/cmake/kvtier/kvtier-targets.cmake lib/pkgconfig/kvtier.pc bin/kvtier; do
  test -e "$prefix/$f" || fail "$f not installed"
done

# --- size, stripping, SONAME, the program ---------------------------------
bytes=$(du -sb "$prefix" | cut -f1)
mb=$(awk "BEGIN { printf \"%.1f\", $bytes / 1000000 }")
echo "installed_example: install tree $mb MB ($bytes bytes; limit $limit_mb MB)"
du -sb "$prefix"/* | sed "s|$prefix/|  |"
if [ -n "$flags" ]; then
  # A sanitizer build's instrumented, unoptimized code is not what ships:
  # the limit is for the release install.
  echo "installed_example: size limit not applied (built with $flags)"
else
  test "$bytes" -lt $((limit_mb * 1000000)) ||
    fail "the install tree is $mb MB, over $limit_mb MB"
fi
lib=$(readlink -f "$prefix/lib/libkvtier.so")
if readelf -S "$lib" | grep -q '\.debug_'; then
  fail "lib/libkvtier.so carries debug info (installed without --strip?)"
fi
readelf -d "$lib" | grep -q 'SONAME.*\[libkvtier\.so\.[0-9]*\.[0-9]*\]' ||
  fail "lib/libkvtier.so has no versioned SONAME"
step "bin/kvtier version" "$work/version.log" "$prefix/bin/kvtier" version

# --- the headers: exactly the public API, each compiling alone ------------
# What <kvtier/runtime/service.hpp> pulls from the install tree ...
printf '#include <kvtier/runtime/service.hpp>\n' > "$work/api.cpp"
step "the public API's header closure" "$work/mm.log" \
  c++ -std=c++20 -MM -I"$prefix/include" "$work/api.cpp" -MF "$work/api.d"
tr ' \\' '\n\n' < "$work/api.d" | grep "^$prefix/include/" |
  xargs realpath -m | sed "s|^$prefix/include/||" | sort -u > "$work/needed"
# ... is what is installed: no internal header, no generated one.
(cd "$prefix/include" && find . -type f | sed 's|^\./||' | sort) > "$work/installed"
if ! cmp -s "$work/needed" "$work/installed"; then
  echo "installed_example: installed headers differ from the public API's:"
  diff "$work/needed" "$work/installed" | sed 's/^</  needed, missing:/; s/^>/  installed, not needed:/'
  exit 1
fi
echo "installed_example: $(wc -l < "$work/needed") public headers installed"
while read -r h; do
  printf '#include <%s>\n' "$h" > "$work/one.cpp"
  step "$h alone" "$work/one.log" \
    c++ -std=c++20 -Wall -Wextra -Wpedantic -Werror -fsyntax-only \
    -I"$prefix/include" "$work/one.cpp"
done < "$work/needed"

# --- find_package(kvtier) -------------------------------------------------
step "configure (find_package)" "$work/configure.log" \
  "$cmake" -S "$src/runtime/example" -B "$work/example" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags"
step "build (find_package)" "$work/build.log" "$cmake" --build "$work/example"
# The consumer's compile line: <prefix>/include and nothing of kvtier's own
# (no warning flags, no definitions, no include/kvtier); its link line:
# libkvtier.so, CAF's core and threads, nothing libkvtier.so links itself.
# (The temporary directory's own name is left out of what is searched.)
compile=$(cat "$work/example/CMakeFiles/embed.dir/flags.make")
link=$(sed "s|$work||g" "$work/example/CMakeFiles/embed.dir/link.txt")
for leak in -Wpedantic -DKVTIER "include/kvtier"; do
  case $compile in *"$leak"*) fail "the consumer compiles with $leak";; esac
done
for leak in capnp libkj caf_io caf_openssl libssl libcrypto xxhash uring \
            spdlog fmt prometheus libz; do
  case $link in *"$leak"*) fail "the consumer links $leak";; esac
done
case $link in *libcaf_core*) ;; *) fail "the consumer does not link caf_core";; esac
"$work/example/embed" > "$work/embed.out" || {
  cat "$work/embed.out"; fail "the example (find_package) failed"; }

# --- pkg-config ----------------------------------------------------------
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# Its compile flags: C++20 and <prefix>/include, nothing else.
cflags=$(pkg-config --cflags kvtier)
set -- $cflags
test $# -eq 2 && test "$1" = "-std=c++20" &&
  test "$(realpath -m "${2#-I}")" = "$prefix/include" ||
  fail "pkg-config --cflags kvtier: '$cflags'"
# (Outside the system's directories the engine names the library's place
# itself, here as an RPATH.)
# shellcheck disable=SC2046
step "build (pkg-config)" "$work/pc.log" \
  c++ -O1 $flags "$src/runtime/example/embed.cpp" -o "$work/embed-pc" \
  $(pkg-config --cflags --libs kvtier) \
  -Wl,-rpath,"$(pkg-config --variable=libdir kvtier)"
"$work/embed-pc" > "$work/embed-pc.out" || {
  cat "$work/embed-pc.out"; fail "the example (pkg-config) failed"; }
cat "$work/embed-pc.out"

# --- the debug component (a build with debug info) -------------------------
if ! readelf -S "$(readlink -f "$build/libkvtier.so")" | grep -q '\.debug_info'; then
  echo "installed_example: ok (no debug info built)"
  exit 0
fi
step "cmake --install --component debug" "$work/debug.log" \
  "$cmake" --install "$build" --prefix "$work/debug" --component debug
id=$(readelf -n "$lib" | sed -n 's/.*Build ID: *//p')
test -n "$id" || fail "lib/libkvtier.so has no build id"
debug=$work/debug/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug
test -s "$debug" || fail "no debug info at $debug"
readelf -S "$debug" | grep -q '\.debug_info' || fail "$debug holds no .debug_info"
echo "installed_example: ok"
