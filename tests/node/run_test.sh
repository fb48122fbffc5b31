#!/usr/bin/env bash
# Runs one of tests/node's scripts for ctest. Exits 77 (ctest's SKIP_RETURN_CODE) when node or a
# package the script needs is not installed, saying which and how to install it; otherwise the
# script's own status.
# Usage: tests/node/run_test.sh PACKAGE[,PACKAGE...] SCRIPT.mjs [ARGUMENTS...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
packages="$1"
script="$2"
shift 2
skip() {
  echo "skipped: $1 (tools/install-deps.sh installs it)"
  exit 77
}
command -v node > /dev/null || skip "node is not installed"
IFS=, read -r -a needed <<< "$packages"
for package in "${needed[@]}"; do
  [ -d "$here/node_modules/$package" ] ||
    skip "tests/node/node_modules/$package is missing: npm ci in tests/node"
done
exec node "$here/$script" "$@"
