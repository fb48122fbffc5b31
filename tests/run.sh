#!/usr/bin/env bash
# The whole test suite: a Release build running every C++ test, an ASan+UBSan build (clang) running
# every C++ test but the repeats on forced CPU paths, a ThreadSanitizer build (clang) running those of
# them that start threads (tests/CMakeLists.txt, AFT_SINGLE_THREADED_TESTS), then
# the Python reference's tests (their fixture check again under each OpenBLAS kernel family the
# CPU runs) and the Python package's (over the Release build's libaft.so).
# Usage: tests/run.sh [jobs]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-$(nproc)}"

phase_start=$SECONDS
phase_done() {
  echo "-- $1: $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

# The Release build builds everything (install_test installs it), file by file as a developer's
# build does; the sanitizer builds only what the tests run (aft_test_programs: not libaft.so nor the
# merged libaft.a), as unity builds: each library's files compiled together, which parses the
# headers they share (nlohmann_json's, the server's cpp-httplib) once per library rather than once
# per file. Measured from clean trees on 2 cores: the Sanitize build 420 -> 353 s.
# The Sanitize build is clang's: it compiles the suite under the sanitizers in about half GCC's
# time (server_test.cpp 12 s against 24), and its UBSan also reports an offset applied to a null
# pointer, which GCC's does not. GCC's code is tested by the Release build.
unity=(-DCMAKE_UNITY_BUILD=ON)
for type in Release Sanitize; do
  dir="build-tests-${type,,}"
  targets=()
  options=()
  compilers=()
  if [ "$type" = Sanitize ]; then
    targets=(--target aft_test_programs)
    options=("${unity[@]}")
    compilers=(CC=clang CXX=clang++)
  fi
  echo "== $type build ($dir)"
  env "${compilers[@]}" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" "${options[@]}" > /dev/null
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
  phase_done "$type build"
  echo "== $type tests"
  # Under the sanitizers, the forced-path repeats (names with a dot) are left out: they run the
  # same engine code as the plain tests, and every kernel table is exercised in-process by
  # kernels_test and quantized_kernels_test, which run under the sanitizers too.
  skip=()
  [ "$type" = Release ] || skip=(-E '\.(avx|sse|scalar|neon|onednn)')
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" "${skip[@]}"
  phase_done "$type tests"
done

# TSan sees OpenMP's synchronization through clang's archer tool; reports inside the libraries
# built without TSan are suppressed by library (tests/tsan.supp). The forced-path repeats (names
# with a dot) run the same code as the plain tests; the programs that start no thread are not built.
echo "== Tsan build (build-tests-tsan, clang)"
CC=clang CXX=clang++ cmake -S . -B build-tests-tsan -DCMAKE_BUILD_TYPE=Tsan "${unity[@]}" > /dev/null
cmake --build build-tests-tsan -j "$jobs" --target aft_test_programs
phase_done "Tsan build"
echo "== Tsan tests"
archer="/usr/lib/llvm-$(clang -dumpversion | cut -d. -f1)/lib/libarcher.so"
[ -f "$archer" ] || { echo "tests/run.sh: $archer is missing (libomp-dev)" >&2; exit 1; }
OMP_TOOL_LIBRARIES="$archer" TSAN_OPTIONS="halt_on_error=1 ignore_noninstrumented_modules=1 suppressions=$PWD/tests/tsan.supp" \
  ctest --test-dir build-tests-tsan --output-on-failure -j "$jobs" -E '\.(avx|sse|scalar|neon|onednn)'
phase_done "Tsan tests"

echo "== Python reference tests"
/usr/bin/python3 -m unittest discover -s tests/python -v
phase_done "Python reference tests"

# PyTorch's BLAS (OpenBLAS) picks its kernels by CPU, so fixtures made on one machine are checked
# on another with other rounding: regenerate them under every kernel family this CPU can run.
openblas_cores=()
flags=" $(grep -m1 '^flags' /proc/cpuinfo || true) "
[[ $flags == *" avx2 "* ]] && openblas_cores+=(Haswell Zen)
[[ $flags == *" avx512bw "* && $flags == *" avx512vl "* ]] && openblas_cores+=(SkylakeX)
[[ $flags == *" avx512_bf16 "* ]] && openblas_cores+=(Cooperlake SapphireRapids)
for core in "${openblas_cores[@]}"; do
  echo "== The fixtures regenerated with OpenBLAS's $core kernels"
  OPENBLAS_CORETYPE="$core" /usr/bin/python3 -m unittest discover -s tests/python -k FixturesUpToDate
done
phase_done "fixtures under each OpenBLAS kernel family"

echo "== Python package tests (python/aft, examples/dask_eval.py)"
AFT_LIBRARY=build-tests-release/engine/libaft.so \
  /usr/bin/python3 -m unittest discover -s tests/python_package -v
phase_done "Python package tests"
