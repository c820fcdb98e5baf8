#!/usr/bin/env bash
# CI after the README's test command (issue 7): the CPU test suites built with
# AddressSanitizer + UndefinedBehaviorSanitizer, then each libFuzzer target for a short time.
#
# The sanitizer build holds the suites of src/core and src/collect (CPU backend; the CUDA
# backend is off) and the fuzz-regression replay.
# Left out: everything that links LibTorch (tests/model, and the tests/cli,
# tests/workflows and kill-safety / output-failure tests, which run the binary): Debian's
# LibTorch is not built with ASan, and compiling src/model's LibTorch-heavy sources a second
# time would take most of the CI budget. The checkpoint loader does run under both
# sanitizers: fuzz_checkpoint compiles src/model/inference (torch-free) with them
# (scripts/fuzz.sh).
#   SKIP_SANITIZERS=1 / SKIP_FUZZ=1 skip a part; FUZZ_SECONDS sets the time per target.
set -euo pipefail
cd "$(dirname "$0")/.."

# clang and its libFuzzer/sanitizer runtimes, only for this script.
extra=(clang libclang-rt-14-dev)
missing=()
for p in "${extra[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  echo "ci_extra: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ "${SKIP_SANITIZERS:-0}" != 1 ]]; then
  asan_dir=${ASAN_BUILD_DIR:-build-asan}
  tests=(core_types_test core_dataset_test core_json_codec_test core_dataset_io_test core_meta_sidecar_test
         core_dataset_stats_test reliability_fuzz_regression_test)
  for name in backend backend_factory config_space cpu_backend cpu_gemm dataset_collector dataset_merge engine \
              interrupt output_files problem_generator progress random sharding timing_stats trace; do
    tests+=("collect_${name}_test")
  done
  # CMake takes CXXFLAGS / LDFLAGS from the environment on the first configure.
  CXXFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  LDFLAGS="-fsanitize=address,undefined" \
  BUILD_DIR="$asan_dir" BUILD_TYPE=RelWithDebInfo BUILD_TARGETS="${tests[*]}" \
    CMAKE_ARGS="-DMMT_WITH_CUDA=OFF -DMMT_BUILD_BENCH=OFF -DMMT_BUILD_EXAMPLES=OFF" \
    bash scripts/build.sh
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Suites not in the list above are not built here; ctest lists them as *_NOT_BUILT.
  ctest --test-dir "$asan_dir" --output-on-failure -j "${JOBS:-$(nproc)}" -E '_NOT_BUILT$'
fi

if [[ "${SKIP_FUZZ:-0}" != 1 ]]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-45} bash scripts/fuzz.sh
fi
