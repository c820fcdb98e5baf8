#!/usr/bin/env bash
# Installs the Debian 12 packages matmul_toolkit builds against (skips what is there).
set -euo pipefail

packages=(build-essential cmake ninja-build git
          libtorch-dev libcli11-dev nlohmann-json3-dev libmsgpack-cxx-dev
          libspdlog-dev libgtest-dev libopenblas-dev
          jq   # workflows/ci_benchmark.sh reads the tools' JSON with jq (or python3)
          python3-pytest   # tests/python (ctest label python)
          mypy)            # its type check (python_mypy)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all packages present"
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
echo "install_deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
