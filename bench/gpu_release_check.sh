#!/usr/bin/env bash
# On a GPU machine, in two steps so each fits a 10-minute call:
#   bash bench/gpu_release_check.sh build-and-test   # build everything, run the GPU tests
#   bash bench/gpu_release_check.sh data-and-model   # collect the shipped real dataset, train on the
#                                                    # GPU, load the checkpoint with Python torch,
#                                                    # measure GPU training throughput
# Logs and results go under $OUT (default out/gpu). msgpack-cxx is taken from .deps/msgpack
# when the machine has none (apt-get download libmsgpack-cxx-dev; dpkg -x ... .deps/msgpack).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu}
build=${BUILD_DIR:-build-gpu}
mkdir -p "$out"
status=0
cli=$build/src/cli/matmul_toolkit

step_build_and_test() {
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; nproc; } | tee "$out/machine.txt"
  local prefix
  prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  [[ -d .deps/msgpack ]] && prefix="$prefix;$PWD/.deps/msgpack/usr"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; return 1; }
  ninja -C "$build" -k 0 -j"$(nproc)" >"$out/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$out/build.log" | head -30; status=1; }
  local t
  for t in "$build"/tests/collect/cuda_*_test; do
    timeout "${TEST_TIMEOUT:-300}" "$t" --gtest_brief=1 >"$out/$(basename "$t").log" 2>&1 || status=1
    echo "$(basename "$t"): $(grep -E "^\[  (PASSED|FAILED|SKIPPED)" "$out/$(basename "$t").log" | tr '\n' ' ')"
    grep -E "Failure|SKIPPED \]" "$out/$(basename "$t").log" | head -5
  done
}

step_data_and_model() {
  # The real dataset shipped under data/ (see data/README.md).
  timeout 300 "$cli" --seed 42 collect --device cuda --log-normal --num-shapes "${NUM_SHAPES:-300}" \
    --search-space DEFAULT --dtypes float16 bfloat16 --ops mm addmm bmm \
    --output "$out/h100_default_lognormal.msgpack" --quiet >"$out/collect.log" 2>&1 || status=1
  tail -25 "$out/collect.log"
  timeout 150 "$cli" --seed 42 train --device cuda --dataset "$out/h100_default_lognormal.msgpack" \
    --num-epochs 30 --model "$out/gpu_model.pt" --log-dir "$out/logs" >"$out/train.log" 2>&1 || status=1
  tail -8 "$out/train.log"
  python3 tests/model/check_checkpoint.py "$out/gpu_model.pt" 2>&1 | tee "$out/check_checkpoint.log" || status=1
  timeout 120 "$build/bench/train_bench" --device cuda 2>&1 | tee "$out/train_bench_cuda.log" || status=1
}

case "${1:-}" in
  build-and-test) step_build_and_test ;;
  data-and-model) step_data_and_model ;;
  *) echo "usage: $0 build-and-test|data-and-model" >&2; exit 2 ;;
esac
exit $status
