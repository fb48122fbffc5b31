#!/usr/bin/env bash
# Installs what aft needs to build, test and export models, from Debian 12's packages. Idempotent.
set -euo pipefail

packages=(
  cmake g++ make
  libdnnl-dev ocl-icd-opencl-dev  # oneDNN; its CMake config requires OpenCL headers
  libxsimd-dev nlohmann-json3-dev libgtest-dev
  libcpp-httplib-dev  # aft-server (docs/server.md); without it the rest builds
  curl  # tests/server_curl_test.sh
  libhiredis-dev redis-server  # aft-server --redis, and its tests (docs/server.md)
  pkgconf  # provides pkg-config; tests/install_test.sh builds the examples with it
  clang libomp-dev libclang-rt-14-dev  # tests/run.sh's ThreadSanitizer build (OpenMP: libomp and its archer tool)
  clang-format-14  # tests/format_test.cmake: the sources as .clang-format says
  python3-torch python3-numpy libopenblas0-pthread  # the PyTorch reference (without OpenBLAS it is ~20x slower)
  python3-distributed  # examples/dask_eval.py
  python3-venv python3-wheel  # tests/install_test.sh: pip installs the package in a venv, offline
)
# tests/node (Hugging Face's tokenizer, the BPE tokenizer's reference; OpenAI's client and
# autocannon, aft-server's tests) needs node and npm: Debian's packages where neither is there. A
# machine with another Node.js (NodeSource's nodejs carries its own npm, which Debian's npm package
# conflicts with) keeps its own. The openai package supports Node.js 20 or later.
command -v node > /dev/null || packages+=(nodejs)
command -v npm > /dev/null || packages+=(npm)

# The packages pinned in tests/node/package.json, at their versions (the registry is needed once):
# npm ci when one is missing or another version.
node_reference() {
  local here
  here="$(cd "$(dirname "$0")/.." && pwd)"
  if ! (cd "$here/tests/node" && node -e '
      const fs = require("fs");
      for (const [name, version] of Object.entries(require("./package.json").dependencies)) {
        const installed = `node_modules/${name}/package.json`;
        if (!fs.existsSync(installed) || JSON.parse(fs.readFileSync(installed)).version !== version) {
          process.exit(1);
        }
      }'); then
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
