#!/usr/bin/env bash
# The whole test suite: a Release build and an ASan+UBSan build, each running every C++ test,
# then the Python reference's tests and the Python package's (over the Release build's libaft.so).
# Usage: tests/run.sh [jobs]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-$(nproc)}"

for type in Release Sanitize; do
  dir="build-tests-${type,,}"
  echo "== $type build ($dir)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" > /dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== $type tests"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"
done

echo "== Python reference tests"
/usr/bin/python3 -m unittest discover -s tests/python -v

echo "== Python package tests (python/aft, examples/dask_eval.py)"
AFT_LIBRARY=build-tests-release/engine/libaft.so \
  /usr/bin/python3 -m unittest discover -s tests/python_package -v
