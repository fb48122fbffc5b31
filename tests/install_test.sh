#!/usr/bin/env bash
# Installs the build to a temporary prefix and uses it as a user would: the library's exported
# symbols, the installed tools, the examples built against the installed copy with CMake
# (find_package) and with pkg-config (examples/Makefile), each linking libaft.so and libaft.a, and
# the Python package, installed by CMake and by pip in a fresh venv, all run from outside the source
# tree.
# Usage: tests/install_test.sh BUILD_DIR SOURCE_DIR C_COMPILER CXX_COMPILER
set -euo pipefail
build=$(realpath "$1")
source=$(realpath "$2")
cc=$3
cxx=$4
model="$source/models/shipped/brown-local-tiny.aft"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for file in include/aft.h lib/libaft.so lib/libaft.a lib/cmake/aft/aftConfig.cmake \
            lib/cmake/aft/aftConfigVersion.cmake lib/pkgconfig/aft.pc bin/aft-run bin/aft-bench; do
  [ -e "$prefix/$file" ] || fail "$file is not installed (libdir must be lib: a non-/usr prefix)"
done

# Symbols: libaft.so and libaft.a define the same aft_* functions and no other global symbol.
exported=$(nm -D --defined-only "$prefix/lib/libaft.so" | awk '{print $3}')
[ -n "$exported" ] || fail "libaft.so exports nothing"
extra=$(grep -v '^aft_' <<< "$exported" || true)
[ -z "$extra" ] || fail "libaft.so exports more than aft_*: $extra"
static_extra=$(nm -g --defined-only "$prefix/lib/libaft.a" | awk 'NF == 3 && $3 !~ /^aft_/')
[ -z "$static_extra" ] || fail "libaft.a has global symbols beyond aft_*: $static_extra"
static_api=$(nm -g --defined-only "$prefix/lib/libaft.a" | awk '$3 ~ /^aft_/ {print $3}' | sort)
[ "$static_api" = "$(sort <<< "$exported")" ] || fail "libaft.a and libaft.so define different aft_* functions"
echo "install_test: libaft.so and libaft.a define $(wc -l <<< "$exported") aft_* functions and no other"

# aft_batch_decode is declared in aft.h before every library defines it: its demo is built and run
# only against a library that has it.
examples="simple_generate state_fork"
if grep -qx aft_batch_decode <<< "$exported"; then
  examples="$examples batch_decode"
else
  echo "install_test: this libaft has no aft_batch_decode: batch_decode is compiled, not linked"
  "$cc" -std=c99 -Wall -Wextra -Werror -I"$prefix/include" -c "$source/examples/batch_decode.c" \
    -o "$work/batch_decode.o" || fail "batch_decode.c does not compile"
fi

# The installed tools run from the prefix; their text is the reference for simple_generate.
cd "$work"
prompt="The jury said"
"$prefix/bin/aft-run" "$model" --prompt "$prompt" -n 24 --seed 1 > aft-run.out 2> /dev/null
[ "$(wc -c < aft-run.out)" -gt $((${#prompt} + 10)) ] || fail "aft-run generated no text"
"$prefix/bin/aft-bench" --help > /dev/null || fail "aft-bench --help failed"
# aft-server is built (and installed) only where cpp-httplib was found.
if [ -e "$build/tools/aft-server" ]; then
  "$prefix/bin/aft-server" --help > /dev/null || fail "aft-server is not installed, or --help failed"
fi

# A C++ program with its own copies of inline library code that the engine uses too (shared_ptr's
# tag, to_chars' digit table) links libaft.a: the engine's copies are local to it.
cat > mixed.cpp <<'CPP'
#include <memory>
#include <string>
#include "aft.h"
int main() {
  auto text = std::make_shared<std::string>(std::to_string(123456789ul));
  return *text == "123456789" && aft_status_string(AFT_OK)[0] == 'o' ? 0 : 1;
}
CPP
"$cxx" -std=c++17 -I"$prefix/include" mixed.cpp "$prefix/lib/libaft.a" -ldnnl -lgomp -o mixed ||
  fail "a C++ program with its own inline copies does not link with libaft.a"
./mixed || fail "the C++ program linked with libaft.a failed"

# The Python package: `import aft` finds the library installed with it, with no AFT_LIBRARY.
python_generates() {  # $1: where the loaded library must lie; the rest: a command running Python
  local want=$1 out
  shift
  out=$(env -u AFT_LIBRARY "$@" -c 'import sys, aft
print(aft.library_path())
print("".join(aft.generate(aft.Model(sys.argv[1]), "The jury said", 24)))' "$model") ||
    fail "import aft and generate failed: $*"
  [[ $(head -n 1 <<< "$out") == "$want"* ]] || fail "aft loaded $(head -n 1 <<< "$out"), not the library in $want"
  [ "$(tail -n +2 <<< "$out" | wc -c)" -gt 10 ] || fail "aft.generate generated no text: $*"
}
pydir=$(sed -n 's/^AFT_INSTALL_PYTHONDIR:PATH=//p' "$build/CMakeCache.txt")
[ -f "$prefix/$pydir/aft/_install_location.py" ] || fail "the Python package is not installed in $pydir"
python_generates "$prefix/lib/" env PYTHONPATH="$prefix/$pydir" /usr/bin/python3
# pip, offline as docs/python.md says, in a venv that the library is then installed into. pip builds
# in the source tree: a copy of it.
/usr/bin/python3 -m venv --system-site-packages venv || fail "python3 -m venv failed (python3-venv)"
cp -r "$source/python" python
venv/bin/pip install --no-index --no-build-isolation ./python > pip.log 2>&1 ||
  fail "pip install of the package failed (python3-wheel?): $(cat pip.log)"
cmake --install "$build" --prefix "$work/venv" > /dev/null
python_generates "$work/venv/lib/" venv/bin/python
echo "install_test: the Python package, installed by CMake and by pip: ok"

cp -r "$source/examples" "$work/src"
run_examples() {  # $1: directory of the built examples, $2: what links libaft.so, if any
  local dir=$1 linked
  linked=$(readelf -d "$dir/simple_generate" | grep -o 'libaft\.so[^]]*' || true)
  [ "$linked" = "${2:-}" ] || fail "$dir/simple_generate: NEEDED '$linked', expected '${2:-}'"
  "$dir/simple_generate" "$model" "$prompt" 24 > "$dir/generate.out"
  cmp -s aft-run.out "$dir/generate.out" ||
    fail "$dir: simple_generate's text differs from aft-run's: $(cat "$dir/generate.out")"
  "$dir/state_fork" "$model" "$prompt" 32 > "$dir/state_fork.out" || fail "$dir: state_fork failed"
  if [[ $examples == *batch_decode* ]]; then
    "$dir/batch_decode" "$model" 16 "$prompt" "It was" "Mr. and Mrs." > "$dir/batch.out" ||
      fail "$dir: batch_decode failed"
  fi
  echo "install_test: $dir: ok"
}

for variant in shared static; do
  flag=OFF
  [ $variant = static ] && flag=ON
  cmake -S src -B "cmake-$variant" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
    -DAFT_EXAMPLES_STATIC=$flag -DCMAKE_C_FLAGS=-Werror > "cmake-$variant.log" || fail "configuring the examples ($variant)"
  # shellcheck disable=SC2086
  cmake --build "cmake-$variant" --target $examples > "cmake-$variant-build.log" ||
    fail "building the examples with CMake ($variant): $(cat "cmake-$variant-build.log")"

  mkdir "make-$variant"
  static=0
  [ $variant = static ] && static=1
  # shellcheck disable=SC2086
  PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -C "make-$variant" -f "$work/src/Makefile" \
    CC="$cc" CFLAGS="-O2 -Werror" STATIC=$static $examples || fail "building the examples with pkg-config ($variant)"
done
run_examples cmake-shared libaft.so.0.5
run_examples make-shared libaft.so.0.5
run_examples cmake-static
run_examples make-static
cat make-shared/state_fork.out
