#!/bin/bash
# The checks and figures that the matrix-unit kernels (the avx512amx table: q8_0 on AMX's int8
# tiles, bf16 on its bf16 tiles) need on a machine that has them, in one run:
#   1. the tests of the table (ctest -R ISA: kernels against the scalar reference, golden,
#      sessions, batches);
#   2. the GEMV micro-kernels of ISA against those of AGAINST (aft-gemv-bench);
#   3. prompts, one sequence and batches of 16 on random enwik8 models in bf16 and q8_0
#      (aft-bench), with AFT_ISA=ISA and AFT_ISA=AGAINST alternated round by round.
# Without the units it says so and stops (exit 0); --isa and --against run the same flow for
# other tables on any machine (docs/benchmarks.md, "How to measure").
#
#   tools/bench_matrix_units.sh [--build DIR] [--models DIR] [--isa ISA] [--against ISA]
#                               [--threads LIST] [--rounds N]
set -euo pipefail

build=build
models=bench-models
isa=avx512amx
against=avx512bf16
threads="1,2,$(nproc)"
rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    --against) against=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | cut -c3-; exit 0 ;;
    *) echo "bench_matrix_units.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

for tool in aft-bench aft-gemv-bench; do
  if [ ! -x "$build/tools/$tool" ]; then
    echo "bench_matrix_units.sh: $build/tools/$tool not found: build first (README.md)" >&2
    exit 1
  fi
done
if [ "$isa" = avx512amx ] && ! grep -qw amx_int8 /proc/cpuinfo; then
  echo "skipped: CPU has no AMX (amx_int8 and amx_bf16 in /proc/cpuinfo)"
  exit 0
fi
kernels=$("$build/tools/aft-gemv-bench" 64 64 "$isa")
if ! grep -q "| $isa |" <<< "$kernels"; then
  echo "skipped: this CPU cannot run the $isa kernels"
  exit 0
fi

echo "## $isa against $against on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
echo
echo "### Tests of $isa"
(cd "$build" && ctest --output-on-failure -R "$isa" 2>&1 | tail -3)
echo

echo "### GEMV micro-kernels (aft-gemv-bench 512 2048 ISA)"
for i in $(seq "$rounds"); do
  for table in "$isa" "$against"; do
    "$build/tools/aft-gemv-bench" 512 2048 "$table" | grep -E "\| (q8_0|bf16x) \|"
  done
done
echo

mkdir -p "$models"
for dtype in bf16 q8_0; do
  model="$models/enwik8-local.$dtype.aft"
  if [ ! -f "$model" ]; then
    python3 tools/aft_export.py --random --preset enwik8 --dtype "$dtype" --out "$model" > /dev/null
  fi
done

echo "### aft-bench, medians of $rounds alternated rounds (tokens/s)"
for dtype in bf16 q8_0; do
  model="$models/enwik8-local.$dtype.aft"
  for i in $(seq "$rounds"); do
    for table in "$isa" "$against"; do
      AFT_ISA=$table "$build/tools/aft-bench" "$model" -p 512 -n 32 -b 1,16 -t "$threads" -r 1 \
        --no-limits -o json > "$models/.round-$dtype-$table-$i.json"
    done
  done
  python3 - "$models" "$dtype" "$isa" "$against" "$rounds" <<'EOF'
import json, statistics, sys
models, dtype, isa, against, rounds = sys.argv[1:6]
rows = {}
for table in (isa, against):
    for i in range(1, int(rounds) + 1):
        with open(f"{models}/.round-{dtype}-{table}-{i}.json") as f:
            for r in json.load(f)["results"]:
                key = (r["test"], r["threads"])
                rows.setdefault(key, {}).setdefault(table, []).append(
                    r["tokens_per_second"]["mean"])
print(f"\n| enwik8-local {dtype} | threads | {isa} | {against} | ratio |")
print("|---|---:|---:|---:|---:|")
for (test, threads), by in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    a, b = statistics.median(by[isa]), statistics.median(by[against])
    print(f"| {test} | {threads} | {a:,.1f} | {b:,.1f} | {a / b:.2f}x |")
EOF
done
rm -f "$models"/.round-*.json
echo
echo "Limits of this machine: $build/tools/aft-bench $models/enwik8-local.q8_0.aft -p 512 -n 0 -t $threads -r 1"
