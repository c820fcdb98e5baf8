#!/usr/bin/env bash
# Configures and builds matmul_toolkit in ${BUILD_DIR:-build} (Release, ninja when present);
# BUILD_TARGETS="a b" builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" ${CMAKE_ARGS:-}
fi
targets=()
for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done  # default: everything
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" "${targets[@]}"
