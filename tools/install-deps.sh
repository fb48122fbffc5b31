#!/usr/bin/env bash
# Installs what aft needs to build, test and export models, from Debian 12's packages. Idempotent.
set -euo pipefail

packages=(
  cmake g++ make
  libdnnl-dev ocl-icd-opencl-dev  # oneDNN; its CMake config requires OpenCL headers
  libxsimd-dev nlohmann-json3-dev libgtest-dev
  libcpp-httplib-dev  # aft-server (docs/server.md); without it the rest builds
  libhiredis-dev redis-server  # aft-server --redis, and its tests (docs/server-redis.md)
  pkgconf  # provides pkg-config; tests/install_test.sh builds the examples with it
  clang libomp-dev libclang-rt-14-dev  # tests/run.sh's ThreadSanitizer build (OpenMP: libomp and its archer tool)
  python3-torch python3-numpy libopenblas0-pthread  # the PyTorch reference (without OpenBLAS it is ~20x slower)
  python3-distributed  # examples/dask_eval.py
  python3-venv python3-wheel  # tests/install_test.sh: pip installs the package in a venv, offline
)
# tests/node (Hugging Face's tokenizer, the BPE tokenizer's reference) needs node and npm: Debian's
# packages where neither is there. A machine with another Node.js (NodeSource's nodejs carries its
# own npm, which Debian's npm package conflicts with) keeps its own.
command -v node > /dev/null || packages+=(nodejs)
command -v npm > /dev/null || packages+=(npm)

# The pinned @huggingface/tokenizers of tests/node/package-lock.json (the registry is needed once).
node_reference() {
  local here
  here="$(cd "$(dirname "$0")/.." && pwd)"
  if [ ! -d "$here/tests/node/node_modules/@huggingface/tokenizers" ]; then
    echo "install-deps: npm ci in tests/node"
    (cd "$here/tests/node" && npm ci --no-audit --no-fund)
  fi
}

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  node_reference
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
node_reference
