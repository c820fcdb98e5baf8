#!/usr/bin/env bash
# H9's prepared device run (never run: the session's device time was spent). With
# h9_dynamic_tiles.patch applied (git apply bench/results_cuda/h100_2026-11-22_persistence/h9_dynamic_tiles.patch),
# in the repository root on the GPU machine, carry .deps (msgpack):
#   BUDGET=290 bash bench/results_cuda/h100_2026-11-22_persistence/h9_dynamic_tiles_ab.sh
# builds, runs A/B round 1 (one tile per CTA, static, dynamic), cuda_gemm_kernel_sm90_test,
# round 2 in reverse order; passes that would end past BUDGET seconds are skipped. Only the
# two leader configs are timed (--config), so a pass compiles 6 kernels, not ~420.
set -uo pipefail
root=$PWD; B=$root/build-gpu; T0=$SECONDS
mkdir -p "$OUT"; res=/tmp/h9res; mkdir -p $res
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; } > $OUT/machine.txt 2>&1
cat $OUT/machine.txt
p=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null); p="$p;$root/.deps/msgpack/usr"
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$p" -DMMT_BUILD_EXAMPLES=OFF >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
ninja -C $B -j16 cuda_gemm_bench cuda_gemm_kernel_sm90_test >>$OUT/build.log 2>&1 || { grep -E "error|FAILED" $OUT/build.log | head -30; exit 1; }
echo "build done at $((SECONDS-T0)) s"
bench=$B/bench/cuda_gemm_bench
pass() { # name, cap, flags...
  local name=$1 cap=$2; shift 2; mkdir -p $res/$name; local t0=$SECONDS
  (( SECONDS - T0 + cap > ${BUDGET:-290} )) && { echo "skip $name at $((SECONDS-T0)) s"; return; }
  echo "=== $name ($*) at $((SECONDS-T0)) s" >> $OUT/ab.log
  timeout $cap $bench suite --large --hopper-subset --only "mm 2552x10616x7616" --only "mm 4096x4096x4096 bf16" --only bmm \
    --config "256x128x64 g8 s4 w8" --config "128x256x64 g8 s4 w8" "$@" --out $res/$name >> $OUT/ab.log 2>&1
  echo "=== $name rc $? $((SECONDS-t0)) s" >> $OUT/ab.log
  echo "$name: $((SECONDS-t0)) s"; grep -E "^\| (mm|addmm|bmm) " $res/$name/*.md | cut -d'|' -f2-5
  tar -czf $OUT/results.tgz -C $res .
}
pass r1_one_tile 45 --no-persistent
pass r1_static 40 --static-tiles
pass r1_dynamic 40
t0=$SECONDS; timeout 110 $B/tests/collect/cuda_gemm_kernel_sm90_test > $OUT/sm90.log 2>&1; echo "sm90 test rc $? $((SECONDS-t0)) s"
grep -E "^\[ +(OK|PASSED|FAILED|SKIPPED) |Failure|wrong" $OUT/sm90.log | head -20
pass r2_dynamic 30
pass r2_static 30 --static-tiles
pass r2_one_tile 30 --no-persistent
echo "total $((SECONDS-T0)) s"
