#!/usr/bin/env bash
# Builds the CUDA backend's GPU tests and benchmark on a GPU machine, runs them, and writes
# logs and result tables under $OUT (default out/gpu).
#   bash bench/gpu_suite.sh [build] [tests] [suite] [throughput] [repeatability] [ab] [sass] [cli] [triton]
# With no step named, runs them all but the optional ones, run only when named:
#   triton       Inductor's Triton GEMMs vs cuBLAS with python3 torch (bench/triton_suite.py,
#                under $OUT/triton; TRITON_ARGS passes options; with the suite step's
#                $OUT/suite.csv present it adds the ours/Triton/cuBLAS table);
#   coldcollect  `collect --device cuda` over COLD_SHAPES (300) log-normal problems x DEFAULT
#                configs with an empty kernel cache, then again warm: configs/s of each. STEP_TIMEOUT_<step>=seconds caps a step (its log so
# far stays under $OUT), so one slow step cannot starve the others of a time-limited run. A msgpack-cxx unpacked under .deps/msgpack (apt-get
# download libmsgpack-cxx-dev; dpkg -x) is used when the machine has none; LibTorch comes
# from the python3 torch package when there is one.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/out/gpu}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$out"
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(build tests suite throughput repeatability ab sass cli)
cap() { local v="STEP_TIMEOUT_$1"; echo "${!v:-3600}"; }
want() { local s; for s in "${steps[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
status=0

{ echo "date: $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1; nproc; } | tee "$out/machine.txt"

if want build; then
  prefix=""
  if torch_dir=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null); then prefix="$torch_dir"; fi
  [[ -d .deps/msgpack ]] && prefix="$prefix;$root/.deps/msgpack/usr"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DMMT_BUILD_EXAMPLES=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  targets=(cuda_backend_test cuda_kernel_spec_test cuda_kernel_cache_test cuda_kernel_plan_test cuda_driver_api_test
           cuda_compile_worker_test cuda_gemm_kernel_sm90_test cuda_gemm_bench)
  { want cli || want coldcollect; } && targets+=(matmul_toolkit)
  # -k 0: another area's broken file must not keep the CUDA targets from building.
  ninja -C "$build" -k 0 -j"$(nproc)" "${targets[@]}" >"$out/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$out/build.log" | head -30; status=1; }
fi

if want tests; then
  for t in cuda_driver_api_test cuda_kernel_spec_test cuda_kernel_cache_test cuda_kernel_plan_test cuda_compile_worker_test \
           cuda_gemm_kernel_sm90_test cuda_backend_test; do
    [[ -x $build/tests/collect/$t ]] || { echo "missing $t"; status=1; continue; }
    t0=$SECONDS
    timeout "$(cap tests)" "$build/tests/collect/$t" >"$out/$t.log" 2>&1 || status=1
    echo "$t: $((SECONDS - t0)) s"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK \] .* \([0-9]{4,} ms\)|Failure|first:" "$out/$t.log" | head -20
  done
fi

bench=$build/bench/cuda_gemm_bench
for mode in suite throughput repeatability ab; do
  if want $mode; then
    timeout "$(cap $mode)" "$bench" "$mode" --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/$mode.log" |
      grep -vE "^\(written" || status=1
  fi
done

if want sass && command -v cuobjdump >/dev/null; then
  # The instruction mix of one cached kernel (128x128x32, 4 stages, 4 warps, bf16 nn):
  # are the loads 16 bytes wide, are the MMAs HMMA, any local memory?
  python3 - "$out/sass.txt" <<'PY'
import glob, os, subprocess, sys, collections, re
want = ["MMT_BLOCK_M 128\n", "MMT_BLOCK_N 128\n", "MMT_BLOCK_K 32\n", "MMT_NUM_STAGES 4\n", "MMT_NUM_WARPS 4\n",
        "MMT_DTYPE 1\n", "MMT_A_KMAJOR 1\n", "MMT_B_KMAJOR 0\n", "MMT_VEC_A 8\n", "MMT_ADDMM 0\n", "MMT_EVEN_K 1\n"]
for path in glob.glob(os.path.expanduser("~/.cache/matmul_toolkit/kernels/*.cubin")):
    data = open(path, "rb").read()
    n, rest = data.split(b"\n", 1)
    key = rest[:int(n)].decode()
    if all(w in key for w in want):
        open("/tmp/k.cubin", "wb").write(rest[int(n):])
        sass = subprocess.run(["cuobjdump", "-sass", "/tmp/k.cubin"], capture_output=True, text=True).stdout
        ops = collections.Counter(m.group(1).split(".")[0] for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass))
        with open(sys.argv[1], "w") as f:
            f.write(key + "\n" + "\n".join(f"{c:6d} {op}" for op, c in ops.most_common(40)) + "\n\n" + sass)
        print("sass:", ", ".join(f"{op} {c}" for op, c in ops.most_common(14)))
        break
PY
fi

if want triton; then
  mkdir -p "$out/triton"
  ours=()
  [[ -f $out/suite.csv ]] && ours=(--ours "$out/suite.csv")
  # The script's own --budget stops starting problems; the cap stops a compile that hangs.
  timeout "$(cap triton)" python3 bench/triton_suite.py --out "$out/triton" "${ours[@]}" ${TRITON_ARGS:-} \
    2>"$out/triton/stderr.log" | tee "$out/triton.log" || status=1
fi

if want coldcollect && [[ -x $build/src/cli/matmul_toolkit ]]; then
  # The native dataset's collection (data/README.md), from an empty kernel cache (compile-bound: what the kernel plan
  # is for) and then warm.
  cache=$(mktemp -d)
  for pass in cold warm; do
    rm -f "$out/coldcollect_$pass.msgpack"
    XDG_CACHE_HOME=$cache timeout "$(cap coldcollect)" "$build/src/cli/matmul_toolkit" --seed 42 collect --device cuda \
      --log-normal --num-shapes "${COLD_SHAPES:-300}" --search-space DEFAULT --dtypes float16 bfloat16 \
      --ops mm addmm bmm --output "$out/coldcollect_$pass.msgpack" >"$out/coldcollect_$pass.log" 2>&1 || status=1
    echo "coldcollect $pass: $(grep -E 'configs/s' "$out/coldcollect_$pass.log" | tail -1)"
  done
  rm -rf "$cache"
fi

if want cli && [[ -x $build/src/cli/matmul_toolkit ]]; then
  # The engine end to end on the GPU: a few log-normal problems, DEFAULT configs.
  timeout "$(cap cli)" "$build/src/cli/matmul_toolkit" collect --device cuda --num-shapes 4 --log-normal --seed 1 \
    --output "$out/cli_collect.json" >"$out/cli.log" 2>&1 || status=1
  tail -25 "$out/cli.log"
fi
exit $status
