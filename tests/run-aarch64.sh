#!/usr/bin/env bash
# The NEON kernels without ARM hardware, on an x86-64 Debian 12 host: cross-builds kernels_test,
# quantized_kernels_test, matmul_test, golden_test and crc32_test for aarch64 and runs them under
# qemu-aarch64, first on the NEON kernels, then with AFT_ISA=scalar. Installs the cross toolchain
# and the arm64 libraries from Debian's packages first (through sudo unless run as root); does no
# apt work when they are present.
# The binaries run side by side, up to `jobs` at a time, the longest first (they are mostly
# single-threaded under the emulator: on 2 cores the three paths took 188 s one after the other);
# their output is printed once all are done, path by path.
# Usage: tests/run-aarch64.sh [jobs]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-$(nproc)}"
dir=build-aarch64
sysroot="$PWD/$dir/sysroot"
tests=(matmul_test quantized_kernels_test golden_test kernels_test crc32_test)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

phase_start=$SECONDS
phase_done() {
  echo "-- $1: $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

echo "== aarch64: install"
packages=(
  cmake make libxsimd-dev nlohmann-json3-dev  # header-only: the host's copies serve the arm64 build
  g++-aarch64-linux-gnu qemu-user
  libgtest-dev:arm64 libgomp1:arm64 libdnnl2:arm64
)
dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# libdnnl-dev:arm64 cannot be installed beside the host's libdnnl-dev (both ship a different
# /usr/include/oneapi/dnnl/dnnl_config.h), so it is unpacked into the build directory, with the
# library its CMake config points at, at the version of the installed runtime.
version="$(dpkg-query -W -f='${Version}' libdnnl2:arm64)"
if [ "$(cat "$sysroot/version" 2>/dev/null)" != "$version" ]; then
  echo "unpacking libdnnl-dev:arm64 $version into $dir/sysroot"
  debs="$(mktemp -d)"
  trap 'rm -rf "$debs"' EXIT
  download() {
    # Sandbox user root: apt's own user cannot write to a private temporary folder.
    (cd "$debs" && apt-get download -q -o APT::Sandbox::User=root \
      "libdnnl-dev:arm64=$version" "libdnnl2:arm64=$version")
  }
  download || { $sudo apt-get update -q && download; }  # package lists may have been cleaned
  rm -rf "$sysroot" && mkdir -p "$sysroot"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
  echo "$version" > "$sysroot/version"
fi
phase_done install

echo "== aarch64: configure and build ${tests[*]} ($dir)"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/tests/aarch64-toolchain.cmake" \
  -Ddnnl_DIR="$sysroot/usr/lib/aarch64-linux-gnu/cmake/dnnl" \
  -DGTest_DIR=/usr/lib/aarch64-linux-gnu/cmake/GTest \
  -Dxsimd_DIR=/usr/lib/x86_64-linux-gnu/cmake/xsimd \
  -Dnlohmann_json_DIR=/usr/share/cmake/nlohmann_json > /dev/null
cmake --build "$dir" -j "$jobs" --target "${tests[@]}"
phase_done "configure and build"

# One binary on one path, in a subshell of its own: its output to $log, the count of its tests
# that ran to $log.total and its failures (a line each) to $log.failures.
run_test() {
  local isa=$1 test=$2 log="$dir/logs/$2.$1.txt"
  local failures=() total=0
  # AFT_TEST_EMULATED: the long-run tests check fewer positions (tests/long_run.h).
  if AFT_ISA="$isa" AFT_TEST_EMULATED=1 qemu-aarch64 "$dir/tests/$test" > "$log" 2>&1; then
    check_log
  else
    failures+=("$test, AFT_ISA=$isa: failed")
  fi
  echo "$total" > "$log.total"
  printf '%s\n' "${failures[@]}" > "$log.failures"
}
# Each binary runs directly under the emulator (no ctest), so the checks that the forced path is
# the one tested are made here. When the CPU cannot run the forced path, tests/forced_paths.cpp
# skips in gtest's global set-up: then no test runs, yet gtest reports them all as PASSED and exits
# 0. kernels_test skips each table this CPU lacks: only the x86 ones may be missing, and the tests of
# x86 matrix units (`*OnMatrixUnits*`, AVX512-BF16's `*Vdpbf*`).
# What a run that exited 0 must show (check_log reads run_test's variables).
check_log() {
  local passed ran
  passed="$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\.$/\1/p' "$log")"
  ran="$(grep -c '^\[       OK \] ' "$log" || true)"
  total=$((total + ran))
  if [ "${passed:-0}" -eq 0 ] || [ "$ran" -ne "$passed" ]; then
    failures+=("$test, AFT_ISA=$isa: $ran of ${passed:-0} passed tests ran (skipped in set-up?)")
  fi
  if grep -E '^\[  SKIPPED \] [^ ]+ \(' "$log" |
    grep -Evq '/(avx512amx|avx512bf16|avx512vnni|avx512|avx2|sse2) \(|OnMatrixUnits|Vdpbf'; then
    failures+=("$test, AFT_ISA=$isa: tests skipped")
  fi
  if [[ "$test" == *kernels_test ]] &&
    ! grep -Eq '^\[       OK \] AllIsas/[A-Za-z]*IsaTest\.[^ ]+/neon \(' "$log"; then
    failures+=("$test, AFT_ISA=$isa: the NEON kernel tests did not run")
  fi
  # qemu-aarch64's default CPU has armv8.2's dot product extension: the neondot table must run.
  if [[ "$test" == *quantized_kernels_test ]] &&
    ! grep -Eq '^\[       OK \] AllIsas/QuantizedIsaTest\.[^ ]+/neondot \(' "$log"; then
    failures+=("$test, AFT_ISA=$isa: the neondot kernel tests did not run")
  fi
}
mkdir -p "$dir/logs"
paths=(neondot neon scalar)
for test in "${tests[@]}"; do
  for isa in "${paths[@]}"; do
    rm -f "$dir/logs/$test.$isa.txt"{,.total,.failures}
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    run_test "$isa" "$test" &
  done
done
wait
failures=()
total=0
for isa in "${paths[@]}"; do
  echo "== aarch64: tests on the $isa kernels (AFT_ISA=$isa, under qemu-aarch64)"
  for test in "${tests[@]}"; do
    log="$dir/logs/$test.$isa.txt"
    echo "-- $test, AFT_ISA=$isa"
    cat "$log" 2> /dev/null || true
    total=$((total + $(cat "$log.total" 2> /dev/null || echo 0)))
    while IFS= read -r line; do
      [ -z "$line" ] || failures+=("$line")
    done < <(cat "$log.failures" 2> /dev/null || echo "$test, AFT_ISA=$isa: did not finish")
  done
done
phase_done "tests on ${paths[*]}, ${jobs} at a time"

if [ ${#failures[@]} -gt 0 ]; then
  echo "== aarch64: FAILED"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "== aarch64: all tests passed on the neondot, neon and scalar kernel paths"
echo "aarch64: $total passed, 0 failed"
