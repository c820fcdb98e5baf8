#!/usr/bin/env bash
# Builds the CUDA backend's GPU tests and benchmark on a GPU machine, runs them, and writes
# logs and result tables under $OUT (default out/gpu).
#   bash bench/gpu_suite.sh [build] [tests] [suite] [throughput] [repeatability] [cli]
# With no step named, runs them all. A msgpack-cxx unpacked under .deps/msgpack (apt-get
# download libmsgpack-cxx-dev; dpkg -x) is used when the machine has none; LibTorch comes
# from the python3 torch package when there is one.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/out/gpu}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$out"
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(build tests suite throughput repeatability cli)
want() { local s; for s in "${steps[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
status=0

{ echo "date: $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1; nproc; } | tee "$out/machine.txt"

if want build; then
  prefix=""
  if torch_dir=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null); then prefix="$torch_dir"; fi
  [[ -d .deps/msgpack ]] && prefix="$prefix;$root/.deps/msgpack/usr"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DMMT_BUILD_EXAMPLES=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  targets=(cuda_backend_test cuda_kernel_spec_test cuda_kernel_cache_test cuda_driver_api_test cuda_gemm_bench)
  want cli && targets+=(matmul_toolkit)
  ninja -C "$build" -j"$(nproc)" "${targets[@]}" >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; status=1; }
fi

if want tests; then
  for t in cuda_driver_api_test cuda_kernel_spec_test cuda_kernel_cache_test cuda_backend_test; do
    [[ -x $build/tests/collect/$t ]] || { echo "missing $t"; status=1; continue; }
    "$build/tests/collect/$t" >"$out/$t.log" 2>&1 || status=1
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|first:" "$out/$t.log" | head -20
  done
fi

bench=$build/bench/cuda_gemm_bench
for mode in suite throughput repeatability; do
  if want $mode; then
    "$bench" "$mode" --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/$mode.log" | grep -vE "^\(written" || status=1
  fi
done

if want cli && [[ -x $build/src/cli/matmul_toolkit ]]; then
  # The engine end to end on the GPU: a few log-normal problems, DEFAULT configs.
  "$build/src/cli/matmul_toolkit" collect --device cuda --num-shapes 4 --log-normal --seed 1 \
    --output "$out/cli_collect.json" >"$out/cli.log" 2>&1 || status=1
  tail -25 "$out/cli.log"
fi
exit $status
