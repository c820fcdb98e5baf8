#!/usr/bin/env bash
# Multi-GPU collection throughput (issue 8): the same EXHAUSTIVE problem list collected with
# `collect --devices 0` and with `collect --devices 0,1`; prints configs/s of each and the
# ratio (goal: >= 1.9x with two GPUs). Builds nothing: BUILD_DIR must hold the binary.
#
#   BUILD_DIR=build bash bench/multi_gpu_scaling.sh      # logs + results.json under $OUT
#
# What is measured: timing throughput with a WARM kernel cache. A first, cold run (an empty
# kernel cache of our own under $OUT, one problem) compiles every kernel the list needs and
# is reported separately as "cold". The problems are bf16 mm with M, N, K multiples of 256
# drawn (with SEED) from [MIN_SIZE, MAX_SIZE]: every problem needs the same kernels (aligned,
# EVEN_K), so the cold run warms them all, and problems cost alike (a short tail when two
# workers share them). Each run's wall time includes starting its workers and their
# per-process kernel verification; longer lists (NUM_SHAPES) amortise that better.
# Env: NUM_SHAPES (16), SEED (7), MIN_SIZE (1792), MAX_SIZE (2304), DEVICES_TWO (0,1),
# RUN_TIMEOUT seconds per warm collect (240), COLD_TIMEOUT for the cold one (300),
# OUT (out/multi_gpu). About 5 minutes on two H100/H200 with the defaults.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cli=${MMT:-$build/src/cli/matmul_toolkit}
out=${OUT:-out/multi_gpu}
num_shapes=${NUM_SHAPES:-16}
seed=${SEED:-7}
min_size=${MIN_SIZE:-1792}
max_size=${MAX_SIZE:-2304}
devices_two=${DEVICES_TWO:-0,1}
run_timeout=${RUN_TIMEOUT:-240}
cold_timeout=${COLD_TIMEOUT:-300}
mkdir -p "$out"
[[ -x $cli ]] || { echo "error: $cli: no such program (set BUILD_DIR or MMT)" >&2; exit 2; }
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
[[ $gpus -ge 2 ]] || { echo "error: this machine has $gpus GPUs; the comparison needs 2" >&2; exit 2; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv; echo "cpus: $(nproc)"; } |
  tee "$out/machine.txt"

# The fixed problem list, as a shapeset (every problem measured in each run).
python3 - "$out/problems.json" "$num_shapes" "$seed" "$min_size" "$max_size" <<'EOF'
import json, random, sys
path, n, seed, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sizes = list(range((lo + 255) // 256 * 256, hi + 1, 256))
rng = random.Random(seed)
combos = [(m, nn, k) for m in sizes for nn in sizes for k in sizes]
if n > len(combos):
    sys.exit(f"error: NUM_SHAPES={n}: only {len(combos)} distinct problems in [{lo}, {hi}]")
shapes = []
for m, nn, k in rng.sample(combos, n):
    shapes.append({"version": 1, "B": 1, "M": m, "M_dtype": "bfloat16", "N": nn, "K": k, "K_dtype": "bfloat16",
                   "out_dtype": "bfloat16", "out_size": [1, m, nn], "out_stride": [m * nn, nn, 1]})
json.dump({"operations": {"mm": {"shapes": shapes}}}, open(path, "w"), indent=1)
print(f"{n} bf16 mm problems, M/N/K in {sizes}")
EOF
[[ $? -eq 0 ]] || exit 2

export XDG_CACHE_HOME=$out/kernel_cache  # our own cache: the cold run is really cold
rm -rf "$XDG_CACHE_HOME" "$out"/run_*

# collect NAME DEVICES [extra args...]: one run; its summary goes to $out/NAME.log.
collect() {
  local name=$1 devices=$2
  shift 2
  echo "== $name: --devices $devices"
  local start=$SECONDS
  timeout "$run_timeout" "$cli" --device cuda --seed "$seed" collect-shapeset --shapeset "$out/problems.json" \
    --operations mm --search-space EXHAUSTIVE --devices "$devices" --quiet \
    --output "$out/run_$name.json" "$@" >"$out/$name.log" 2>&1
  local code=$?
  echo "$name: exit $code, $((SECONDS - start)) s including process start"
  grep -E "^  (problems|configs|time|worker failure)" "$out/$name.log"
  [[ $code -eq 0 ]] || { tail -20 "$out/$name.log"; return 1; }
}
# configs/s and timed configs from a run's summary line "time: W s wall, R configs/s, ...".
rate() { sed -nE 's/^  time: .* ([0-9.]+) configs\/s.*/\1/p' "$out/$1.log" | tail -1; }
timed() { sed -nE 's/^  configs: [0-9]+ considered, ([0-9]+) timed.*/\1/p' "$out/$1.log" | tail -1; }
wall() { sed -nE 's/^  time: ([0-9.]+) s wall.*/\1/p' "$out/$1.log" | tail -1; }

status=0
# Cold: the first problem alone, from an empty kernel cache (compiles the kernels of all).
python3 -c "
import json,sys; d=json.load(open('$out/problems.json')); d['operations']['mm']['shapes']=d['operations']['mm']['shapes'][:1]
json.dump(d, open('$out/first_problem.json','w'))"
cold_args=(--device cuda --seed "$seed" collect-shapeset --shapeset "$out/first_problem.json" --operations mm
  --search-space EXHAUSTIVE --devices 0 --quiet --output "$out/run_cold.json")
echo "== cold: one problem, empty kernel cache"
cold_start=$SECONDS
timeout "$cold_timeout" "$cli" "${cold_args[@]}" >"$out/cold.log" 2>&1 || {
  tail -20 "$out/cold.log"
  # Without a warm cache the runs below would time compilation, not collection.
  echo "error: the cold run failed or took over ${cold_timeout} s; no comparison" >&2
  exit 1
}
echo "cold: $((SECONDS - cold_start)) s including process start"
grep -E "^  (problems|configs|time)" "$out/cold.log"

collect one_gpu 0 || status=1
collect two_gpus "$devices_two" || status=1

one=$(rate one_gpu)
two=$(rate two_gpus)
ratio=$(python3 -c "print(round(float('${two:-0}') / float('${one:-0}'), 3) if float('${one:-0}') > 0 else 'null')")
python3 - "$out/results.json" <<EOF
import json, sys
def num(x):
    try: return float(x)
    except ValueError: return None
json.dump({
  "what": "collect EXHAUSTIVE configs/s, warm kernel cache (cold: first problem with an empty cache)",
  "problems": $num_shapes, "seed": $seed, "sizes": [$min_size, $max_size], "dtype": "bfloat16", "op": "mm",
  "cold_configs_per_second": num("$(rate cold)"), "cold_wall_seconds": num("$(wall cold)"),
  "one_gpu": {"devices": "0", "configs_per_second": num("$one"), "configs_timed": num("$(timed one_gpu)"),
              "wall_seconds": num("$(wall one_gpu)")},
  "two_gpus": {"devices": "$devices_two", "configs_per_second": num("$two"), "configs_timed": num("$(timed two_gpus)"),
               "wall_seconds": num("$(wall two_gpus)")},
  "speedup": num("$ratio"), "goal": 1.9, "exit_status": $status,
}, open(sys.argv[1], "w"), indent=1)
EOF
echo "cold: $(rate cold) configs/s; one GPU: $one configs/s; two GPUs: $two configs/s; speedup ${ratio}x (goal 1.9x)"
echo "results: $out/results.json"
# Both runs measured the same problems and configs.
[[ "$(timed one_gpu)" == "$(timed two_gpus)" ]] || { echo "warning: the runs timed different config counts"; }
exit $status
