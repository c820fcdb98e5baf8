#!/usr/bin/env bash
# The one sanitizer build (issue 56): clang with AddressSanitizer + UndefinedBehaviorSanitizer
# and libFuzzer's coverage instrumentation (-DMMT_BUILD_FUZZERS=ON), without LibTorch (Debian's
# is not built with ASan) or the CUDA backend, in ${SANITIZE_BUILD_DIR:-build-sanitize}. It
# builds the given targets: tests_cpu (the suites of ctest label cpu, which scripts/ci_extra.sh
# runs) and fuzzers (scripts/fuzz.sh) share its objects.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${SANITIZE_BUILD_DIR:-build-sanitize}
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
# Configured every time (seconds once cached), so a folder left by a failed configure or by
# other flags is brought to these.
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="${SANITIZE_CXX:-clang++}" -DMMT_BUILD_FUZZERS=ON -DMMT_WITH_TORCH=OFF \
  -DMMT_WITH_CUDA=OFF -DMMT_BUILD_BENCH=OFF -DMMT_BUILD_EXAMPLES=OFF >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" "${targets[@]}"
