#!/bin/sh
# The embedding example (runtime/example/) built against an installed kvtier:
# `cmake --install` into a temporary prefix, then the example's own project
# with find_package(kvtier), and once more with pkg-config; both binaries
# must run and pass their checks. Arguments: BUILD_DIR SOURCE_DIR CMAKE
# [EXTRA_FLAGS, e.g. the sanitizer flags the library was built with].
set -eu
build=$1
src=$2
cmake=$3
flags=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { # NAME LOG COMMAND...: run, show the log when it fails
  name=$1; log=$2; shift 2
  if ! "$@" > "$log" 2>&1; then
    echo "installed_example: $name failed:"; cat "$log"; exit 1
  fi
}
step "cmake --install" "$work/install.log" \
  "$cmake" --install "$build" --prefix "$work/prefix"
for f in include/kvtier/runtime/service.hpp include/kvtier/messages/common.capnp.h \
         lib/libkvtier.so lib/cmake/kvtier/kvtier-config.cmake \
         lib/cmake/kvtier/kvtier-targets.cmake lib/pkgconfig/kvtier.pc bin/kvtier; do
  test -e "$work/prefix/$f" || { echo "installed_example: $f not installed"; exit 1; }
done
step "configure (find_package)" "$work/configure.log" \
  "$cmake" -S "$src/runtime/example" -B "$work/example" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags"
# The warning flags stay kvtier's own: the consumer's compile line has none.
if grep -q -- "-Wpedantic" "$work/example/CMakeFiles/embed.dir/flags.make"; then
  echo "installed_example: kvtier's warning flags leaked to the consumer"; exit 1
fi
step "build (find_package)" "$work/build.log" "$cmake" --build "$work/example"
"$work/example/embed"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
step "build (pkg-config)" "$work/pc.log" \
  c++ -O1 $flags "$src/runtime/example/embed.cpp" -o "$work/embed-pc" \
  $(pkg-config --cflags --libs kvtier)
"$work/embed-pc"
