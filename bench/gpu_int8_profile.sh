#!/usr/bin/env bash
# The GPU checks of int8 and `profile` in one call (issue: every mode, int8, profiling traces):
#   bash bench/gpu_int8_profile.sh
# builds the CLI and the CUDA backend test, then runs
#   - the native int8 kernels: every DEFAULT config checked exactly, and cuBLASLt's int8 equal
#     element for element (cuda_backend_test *Int8*);
#   - the real Inductor worker's int8 (torch._int_mm) and profile requests (test_worker_gpu.py);
#   - `collect --backend native --dtypes int8` on a few problems;
#   - `profile` with the inductor and the native backend (--precision-search), keeping one
#     Kineto trace, one execution trace and one native Chrome trace as samples;
#   - the deep model's 20-epoch training on the GPU (the models issue's speed row).
# $OUT (default out/gpu) gets gpu_check.txt (every step's result) and the samples; full logs
# stay in $LOGS (default /tmp/mmt_gpu_logs). msgpack-cxx comes from .deps/msgpack when the
# machine has none (apt-get download libmsgpack-cxx-dev; dpkg -x ... .deps/msgpack).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu}
logs=${LOGS:-/tmp/mmt_gpu_logs}
build=${BUILD_DIR:-build-gpu}
cli=$build/src/cli/matmul_toolkit
mkdir -p "$out" "$logs"
report=$out/gpu_check.txt
status=0
export PYTHONUNBUFFERED=1
say() { echo "$*" | tee -a "$report"; }

{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc;
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } | tee -a "$report"

prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
[[ -d .deps/msgpack ]] && prefix="$prefix;$PWD/.deps/msgpack/usr"
start=$SECONDS
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DMMT_BUILD_EXAMPLES=OFF \
  >"$logs/configure.log" 2>&1 || { tail -30 "$logs/configure.log" | tee -a "$report"; exit 1; }
ninja -C "$build" -j"$(nproc)" matmul_toolkit cuda_backend_test >"$logs/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$logs/build.log" | head -30 | tee -a "$report"; exit 1; }
say "== build: $((SECONDS - start)) s"

start=$SECONDS
timeout 240 "$build/tests/collect/cuda_backend_test" --gtest_filter='*Int8*' >"$logs/int8_native.log" 2>&1 || status=1
say "== native int8 ($((SECONDS - start)) s):"
grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|wrong|did not run" "$logs/int8_native.log" | head -20 | tee -a "$report"

start=$SECONDS
timeout 240 python3 -m pytest -q -s tests/python/test_worker_gpu.py -k "int8 or profile" >"$logs/worker_gpu.log" 2>&1 ||
  status=1
say "== worker int8 + profile ($((SECONDS - start)) s):"
grep -E "^(int8|profile|hello)|passed|failed|Error" "$logs/worker_gpu.log" | cut -c1-400 | tee -a "$report"

start=$SECONDS
timeout 150 "$cli" --seed 7 collect --backend native --dtypes int8 --ops mm --layouts nn nt tn tt --num-shapes 4 \
  --max-size 2048 --output "$logs/int8_native.json" >"$logs/int8_collect.out" 2>"$logs/int8_collect.log" || status=1
say "== collect --backend native --dtypes int8 ($((SECONDS - start)) s):"
tail -22 "$logs/int8_collect.out" | tee -a "$report"
grep -E "error|failed|wrong" "$logs/int8_collect.log" | head -5 | tee -a "$report"

for backend in inductor native; do
  start=$SECONDS
  timeout 150 "$cli" profile --backend "$backend" --precision-search --sizes 1024 --batch-sizes 1 4 \
    --output-dir "$logs/profile_$backend" >"$logs/profile_$backend.out" 2>"$logs/profile_$backend.log" || status=1
  say "== profile --backend $backend ($((SECONDS - start)) s):"
  cat "$logs/profile_$backend.out" "$logs/profile_$backend/profile_summary.csv" | tee -a "$report"
  grep -E "error|warn" "$logs/profile_$backend.log" | head -5 | tee -a "$report"
  cp "$logs/profile_$backend/profile_summary.csv" "$out/profile_${backend}_summary.csv" 2>/dev/null
done
# Samples: the bf16 mm experiment (config_0003: batch 1, after float32 and float16).
sample=$logs/profile_inductor/config_0003
cp "$(ls "$sample"/*.pt.trace.json 2>/dev/null | head -1)" "$out/kineto_sample.pt.trace.json" 2>/dev/null
cp "$sample/CPU_trace.json" "$out/CPU_trace_sample.json" 2>/dev/null
cp "$logs/profile_native/config_0003/"trace_*.json "$out/native_trace_sample.json" 2>/dev/null
python3 - "$out" <<'EOF' | tee -a "$report"
import json, sys, collections
out = sys.argv[1]
try:
    trace = json.load(open(f"{out}/kineto_sample.pt.trace.json"))
    events = trace["traceEvents"]
    cats = collections.Counter(e.get("cat", "?") for e in events)
    kernels = sorted({e["name"][:80] for e in events if e.get("cat") == "kernel"})
    print("kineto sample:", len(events), "events; categories", dict(cats.most_common(8)))
    print("  kernels:", kernels[:5])
    ops = [e for e in events if e.get("name") == "aten::mm"]
    print("  aten::mm events:", len(ops), "durations us:", [round(e.get("dur", 0), 1) for e in ops][:6])
    et = json.load(open(f"{out}/CPU_trace_sample.json"))
    print("execution trace:", et.get("schema"), len(et.get("nodes", [])), "nodes;",
          sorted({n.get("name", "")[:40] for n in et.get("nodes", [])})[:8])
except Exception as e:
    print("trace summary failed:", type(e).__name__, e)
EOF

for device in cuda; do
  start=$(date +%s%N)
  "$cli" --seed 42 --device "$device" train --dataset data/datasets/h200_default_lognormal.msgpack \
    --model-type deep --num-epochs 20 --patience 100 --batch-size 64 --model "$logs/deep_$device.pt" \
    --log-dir "$logs/train_$device" >"$logs/train_$device.log" 2>&1 || status=1
  say "train deep 20 epochs on $device: $((($(date +%s%N) - start) / 1000000)) ms wall; $(grep -E "^trained" "$logs/train_$device.log")"
  grep -E "^overall" "$logs/train_$device.log" | tail -1 | tee -a "$report"
done
say "== status $status"
exit $status
