#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ (clang, the engine under ASan+UBSan) if needed, then
# runs each for SECONDS, up to AFT_FUZZ_JOBS (default: the CPUs) at a time, each on one thread, and
# prints each one's executions, executions per second and coverage. Fails on a crash, leak, timeout
# or broken contract: the input is kept in build-fuzz/crashes/<target>/. New inputs go to build-fuzz/corpus/<target>/ (the seeds in
# tests/fuzz/corpus/ are only read), so a later run continues from there. docs/reliability.md.
# Usage: tests/fuzz.sh SECONDS [TARGET...]   (targets: model tokenizer config state)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:?usage: tests/fuzz.sh SECONDS [TARGET...]}"
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(model tokenizer config state)
dir="${AFT_FUZZ_BUILD:-build-fuzz}"
jobs="${AFT_FUZZ_JOBS:-$(nproc)}"

# clang and libFuzzer, from Debian's packages (as tools/install-deps.sh installs the rest).
missing=()
for package in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "fuzz: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DAFT_FUZZ=ON -DCMAKE_UNITY_BUILD=ON > /dev/null
fi
cmake --build "$dir" -j "$jobs" --target "${targets[@]/#/fuzz_}"

# One thread: oneDNN's OpenMP pool would otherwise take every core for inputs this small.
export OMP_NUM_THREADS=1
# One target, in a subshell of its own: its exit status to its log's .status.
fuzz() {
  local target=$1 log="$dir/fuzz-$1.log" status=0
  local dict=()
  [ -f "tests/fuzz/$target.dict" ] && dict=(-dict="tests/fuzz/$target.dict")
  "$dir/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$dir/crashes/$target/" "${dict[@]}" \
    "$dir/corpus/$target" "tests/fuzz/corpus/$target" > "$log" 2>&1 || status=$?
  echo "$status" > "$log.status"
}
for target in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$target" "$dir/crashes/$target"
  rm -f "$dir/fuzz-$target.log.status"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  echo "== fuzz_$target: $seconds s (log: $dir/fuzz-$target.log)"
  fuzz "$target" &
done
wait
summary=()
for target in "${targets[@]}"; do
  log="$dir/fuzz-$target.log"
  status="$(cat "$log.status" 2> /dev/null || echo "none")"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  line="fuzz_$target: ${runs:-?} executions, ${speed:-?} exec/s, ${cov:-cov: ?}"
  echo "$line"
  summary+=("$line")
  if [ "$status" != 0 ]; then
    grep -E "ERROR|contract broken|SUMMARY|Test unit written" "$log" | head -20 || true
    echo "fuzz: fuzz_$target failed (exit $status); its log: $log" >&2
    exit 1
  fi
done
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
