#!/usr/bin/env bash
# CI after the README's test command (issue 7): one clang build with AddressSanitizer +
# UndefinedBehaviorSanitizer and libFuzzer's coverage (scripts/sanitizer_build.sh), which
# runs the suites of ctest label cpu (the libraries' own tests) and then each libFuzzer
# target for a short time.
#
# Not in it: LibTorch (Debian's is not built with ASan), so neither the training side nor its
# tests are defined there; the CUDA backend; the cli and python labels, which run the binary
# and need its training library.
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

export SANITIZE_BUILD_DIR=${SANITIZE_BUILD_DIR:-build-sanitize}
if [[ "${SKIP_SANITIZERS:-0}" != 1 ]]; then
  bash scripts/sanitizer_build.sh tests_cpu
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$SANITIZE_BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}" -L '^cpu$'
fi

if [[ "${SKIP_FUZZ:-0}" != 1 ]]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash scripts/fuzz.sh
fi
