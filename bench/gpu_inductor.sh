#!/usr/bin/env bash
# The Inductor backend on a GPU machine, in steps that each fit a 10-minute call:
#   bash bench/gpu_inductor.sh build test                 # build the CLI, run the real-worker, use_model, suite
#                                                         #   and GPU training tests
#   bash bench/gpu_inductor.sh collect                    # DEFAULT log-normal dataset, shape padding off
#                                                         #   (resumes *_default_lognormal_unpadded; the
#                                                         #   older files were timed another way: DEFAULT_DATA=)
#   bash bench/gpu_inductor.sh collect_set                # the DEFAULT sets, shape padding off, in turn
#   bash bench/gpu_inductor.sh exhaustive                 # EXHAUSTIVE problems (resumes; the shipped files
#                                                         #   predate the worker's launch-hidden timing and are
#                                                         #   refused: EXHAUSTIVE_DATA= a new file)
#   bash bench/gpu_inductor.sh speed speed_exhaustive     # seconds per GEMM: ours vs max-autotune (DEFAULT);
#                                                         #   EXHAUSTIVE on one worker and on two
#   bash bench/gpu_inductor.sh train_speed                # deep model, 20 epochs: GPU and all CPU cores
#                                                         #   (TRAIN_FLAGS adds train options, e.g. --ranking-weight 1)
#   bash bench/gpu_inductor.sh repeats                    # do 10 timed runs rank as Inductor's 100?
#   bash bench/gpu_inductor.sh build_cli cross_validate   # the shipped model's recipe, 5 folds, on the CPU cores
#   bash bench/gpu_inductor.sh build_cli e2e_lognormal    # shipped model's tables vs max-autotune
#   bash bench/gpu_inductor.sh build_cli e2e_transformer  #   (held-out log-normal; transformer shapes)
#   E2E_TABLES="a=lut_a.json b=lut_b.json" bash bench/gpu_inductor.sh e2e_lognormal   # tables exported elsewhere
#   bash bench/gpu_inductor.sh build_cli models            # the whole-model suite (bench/models), resumed
#   CALL_SECONDS=590 bash bench/gpu_inductor.sh build test models   # steps in one device call: each timed
#                                                         #   step gets what the earlier ones left
# Collections stop cleanly (SIGINT, finished problems saved) after STEP_SECONDS (default 540)
# and resume on the next call when their output file is in the work tree (exhaustive: or
# in the build folder of a warm machine). Results, logs
# and the datasets go to $OUT (default out/gpu). msgpack-cxx is taken from .deps/msgpack
# when the machine has none (apt-get download libmsgpack-cxx-dev; dpkg -x ... .deps/msgpack).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu}
build=${BUILD_DIR:-build-gpu}
cli=$build/src/cli/matmul_toolkit
step_seconds=${STEP_SECONDS:-540}
# CALL_SECONDS: the whole command's time (a device call's limit). Each timed step then takes
# STEP_SECONDS or what the earlier steps left, the less, so that `build test models` fits one call.
call_seconds=${CALL_SECONDS:-0}
# use_model (the models step's ours, e2e's E2E_USE_MODEL) loads the C library built here.
export MMT_RANK_LIBRARY=${MMT_RANK_LIBRARY:-$build/src/cli/libmmt_rank.so}
# Datasets are named after the GPU (h100 / h200): a call may land on either, and each
# resumes its own file.
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oE 'H[0-9]+' | tr 'H' 'h')
gpu=${gpu:-gpu}
default_data=${DEFAULT_DATA:-data/datasets/${gpu}_inductor_default_lognormal_unpadded.msgpack}
exhaustive_data=${EXHAUSTIVE_DATA:-data/datasets/${gpu}_inductor_exhaustive_lognormal.msgpack}
mkdir -p "$out"
status=0
export PYTHONUNBUFFERED=1

# Seconds the next step may take: STEP_SECONDS, or what is left of CALL_SECONDS (30 s kept
# for the results to come back), the less; at least 60.
step_limit() {
  local limit=$step_seconds
  if ((call_seconds > 0)); then
    local left=$((call_seconds - SECONDS - 30))
    ((left < limit)) && limit=$left
  fi
  echo $((limit < 60 ? 60 : limit))
}

# Configures with the machine's torch LibTorch (and .deps/msgpack where present), then
# builds the given targets; the first failure's lines go to stdout.
build_targets() {
  local prefix
  prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  [[ -d .deps/msgpack ]] && prefix="$prefix;$PWD/.deps/msgpack/usr"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DMMT_BUILD_EXAMPLES=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; return 1; }
  ninja -C "$build" -k 0 -j"$(nproc)" "$@" >"$out/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$out/build.log" | head -30; status=1; }
}

step_build() {
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; nproc;
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } |
    tee "$out/machine.txt"
  build_targets matmul_toolkit mmt_rank collect_bench collect_inductor_backend_test model_trainer_test \
    model_training_step_graph_test
}

# The CLI (export-lut for the end-to-end runs; it brings libmmt_train.so) and libmmt_rank.so
# (the use_model variants).
step_build_cli() {
  build_targets matmul_toolkit mmt_rank
}

step_test() {
  timeout 400 python3 -m pytest -q -s -rs tests/python/test_worker_gpu.py tests/python/test_inductor_torch.py \
    tests/python/test_model_hook_torch.py "tests/python/test_model_suite.py::test_the_suite_on_a_gpu" \
    >"$out/test_worker_gpu.log" 2>&1 || status=1
  grep -E "passed|failed|DEFAULT|configs:|SKIPPED" "$out/test_worker_gpu.log"
  local t
  for t in tests/collect/collect_inductor_backend_test tests/model/model_trainer_test \
    tests/model/model_training_step_graph_test; do
    timeout 400 "$build/$t" >"$out/$(basename "$t").log" 2>&1 || status=1
    echo "$(basename "$t"): $(grep -E "^\[  (PASSED|FAILED|SKIPPED)" "$out/$(basename "$t").log" | tr '\n' ' ')"
  done
}

# One collection, stopped with SIGINT after step_limit (it saves what is finished).
collect_until_time() {
  local name=$1 data=$2 mix=()
  shift 2
  # A set's own --ops / --dtypes replace the default mix (CLI11 appends repeated options).
  [[ " $* " == *" --ops "* ]] || mix+=(--ops mm addmm bmm)
  [[ " $* " == *" --dtypes "* ]] || mix+=(--dtypes bfloat16 float16 float32)
  timeout -s INT "$(step_limit)" "$cli" --seed "${COLLECT_SEED:-42}" --format msgpack collect --backend inductor --quiet \
    --log-normal "${mix[@]}" --output "$data" "$@" \
    >"$out/$name.stdout" 2>"$out/$name.log"
  local rc=$?
  tail -25 "$out/$name.stdout"
  cp "$data" "$data.meta.json" "$out/" 2>/dev/null
  [[ $rc -eq 0 || $rc -eq 130 || $rc -eq 124 ]] || status=1
}

# DEFAULT_WORKERS=2 overlaps one worker's compile with the other's benchmarking.
# COLLECT_SEED draws another problem list (default 42).
# COLLECT_FLAGS adds collect options, e.g. the small-M (decode) set:
#   DEFAULT_DATA=data/datasets/h200_inductor_default_small_m_unpadded.msgpack NUM_SHAPES=120 \
#   COLLECT_FLAGS="--min-size 1 --log-normal-m-mean 2.0 --log-normal-m-std 1.2"
step_collect() {
  # shellcheck disable=SC2086 # COLLECT_FLAGS is a list of options
  collect_until_time collect_default "$default_data" --num-shapes "${NUM_SHAPES:-400}" --search-space DEFAULT \
    --workers-per-device "${DEFAULT_WORKERS:-1}" ${COLLECT_FLAGS:-}
}

# The DEFAULT sets the shipped model is trained on, measured as the worker does now
# (shape padding off) into *_unpadded files, each resumed in turn until STEP_SECONDS are
# spent (a finished file moves on to the next); two workers a GPU. COLLECT_DEVICES=all
# measures on every GPU of the machine (two workers each). COLLECT_SETS="name ..." takes only
# the sets named (a finished set still costs ~17 s of worker start-up). The files this call changed and
# their logs come back gzipped in 15 MiB pieces (the device tool returns at most 8 files of
# 16 MiB): cat $out/collect_set.tgz.* | tar -xz -C data/datasets
default_set=(
  "lognormal_unpadded|42|800|"
  "lognormal_s44_unpadded|44|400|"
  "small_m_unpadded|42|120|--min-size 1 --log-normal-m-mean 2.0 --log-normal-m-std 1.2"
  "gemv_unpadded|42|400|--min-size 1 --log-normal-m-mean 0.5 --log-normal-m-std 1.0 --log-normal-n-mean 7.0 --log-normal-k-mean 7.0"
  "aligned_unpadded|45|400|--multiple-of 64"
  # More problems of other seeds, the shapes the model misses most (small M, GEMV) first.
  "small_m_s47_unpadded|47|200|--min-size 1 --log-normal-m-mean 2.0 --log-normal-m-std 1.2"
  "gemv_s48_unpadded|48|200|--min-size 1 --log-normal-m-mean 0.5 --log-normal-m-std 1.0 --log-normal-n-mean 7.0 --log-normal-k-mean 7.0"
  "lognormal_s46_unpadded|46|800|"
  "lognormal_s49_unpadded|49|800|"
  # The op and dtypes the model ranks worst (bmm; bfloat16, then float16).
  "bmm_half_s50_unpadded|50|600|--ops bmm --dtypes bfloat16 float16"
  "half_s51_unpadded|51|800|--dtypes bfloat16 float16"
  "bmm_half_s52_unpadded|52|600|--ops bmm --dtypes bfloat16 float16"
  "bf16_s53_unpadded|53|800|--dtypes bfloat16"
)
step_collect_set() {
  local deadline entry name seed shapes flags left data before file packed=()
  deadline=$(($(date +%s) + step_seconds))
  for entry in "${default_set[@]}"; do
    IFS='|' read -r name seed shapes flags <<<"$entry"
    [[ -z ${COLLECT_SETS:-} || " $COLLECT_SETS " == *" $name "* ]] || continue
    left=$((deadline - $(date +%s)))
    ((left > 30)) || break
    data=data/datasets/${gpu}_inductor_default_$name.msgpack
    # Sets are kept xz-compressed in data/archive; a new draw has none yet.
    [[ -f data/archive/${gpu}_inductor_default_$name.tar.xz ]] && bash scripts/datasets.sh unpack "${gpu}_inductor_default_$name"
    before=$([[ -f $data ]] && cksum <"$data")
    # shellcheck disable=SC2086 # flags is a list of options
    COLLECT_SEED=$seed step_seconds=$left collect_until_time "collect_$name" "$data" \
      --num-shapes "$shapes" --search-space DEFAULT \
      --workers-per-device "${DEFAULT_WORKERS:-2}" ${COLLECT_DEVICES:+--devices "$COLLECT_DEVICES"} $flags
    # A finished file that this call left as it was need not come back, nor its copies (the
    # device tool returns 8 files at most).
    if [[ ! -f $data || $(cksum <"$data") == "$before" ]]; then
      (cd "$out" && rm -f "${data##*/}" "${data##*/}.meta.json" "collect_$name.stdout" "collect_$name.log")
      continue
    fi
    for file in "${data##*/}" "${data##*/}.meta.json" "collect_$name.stdout" "collect_$name.log"; do
      [[ -f $out/$file ]] && packed+=("$file")
    done
  done
  ((${#packed[@]})) || return 0
  tar -czf - -C "$out" "${packed[@]}" | split -b 15M -d - "$out/collect_set.tgz." && (cd "$out" && rm -f "${packed[@]}")
}

# Each worker compiles a problem's hundreds of choices on its process pool, and two workers
# share the GPU (their benchmarks take turns), so one compiles while the other benchmarks.
# A problem interrupted is lost, so the step starts problems only in its first
# EXHAUSTIVE_START_S seconds and lets them finish.
# Consecutive calls on one warm machine finish the problems a call cut off from Triton's
# cache in seconds, so the step collects into a copy in the (ignored) build folder: the
# next call's work tree, which still holds the older file, does not replace it.
step_exhaustive() {
  local data name
  data=$build/$(basename "$exhaustive_data")
  # The finished H200 set is kept xz-compressed in data/archive.
  name=$(basename "$exhaustive_data" .msgpack)
  [[ -f data/archive/$name.tar.xz ]] && bash scripts/datasets.sh unpack "$name"
  if [[ ! -f $data && -f $exhaustive_data ]]; then
    cp "$exhaustive_data" "$data" && cp "$exhaustive_data.meta.json" "$data.meta.json"
  fi
  collect_until_time collect_exhaustive "$data" --num-shapes "${EXHAUSTIVE_SHAPES:-30}" \
    --search-space EXHAUSTIVE --max-size 2048 --workers-per-device "${EXHAUSTIVE_WORKERS:-2}" --worker-timeout 3600 \
    --stop-after "${EXHAUSTIVE_START_S:-90}"
}

# Seconds per GEMM: the inductor backend with cold, then warm caches, and plain
# torch.compile max-autotune with fresh caches, on the same held-out log-normal problems.
step_speed() {
  "$build/bench/collect_bench" --backend inductor --log-normal "${SPEED_SHAPES:-10}" --seed 1234 --passes 2 \
    --max-autotune bench/max_autotune_time.py 2>"$out/speed.log" | tee "$out/speed.txt" || status=1
}

# EXHAUSTIVE: one worker's latency per problem (collect_bench; SPEED_SHAPES=0 skips it;
# EXHAUSTIVE_MAX_AUTOTUNE=1 also times plain max-autotune with Inductor's EXHAUSTIVE space on
# the same problems, minutes each), then collect's throughput with EXHAUSTIVE_WORKERS
# (default 2) workers on the GPU, whose compiles overlap each other's benchmarking; both with
# empty Triton and Inductor caches. SPEED_STOP_AFTER=S starts no problem after S seconds, so
# none is cut off by STEP_SECONDS.
step_speed_exhaustive() {
  if [[ ${SPEED_SHAPES:-2} -gt 0 ]]; then
    local reference=()
    [[ ${EXHAUSTIVE_MAX_AUTOTUNE:-0} == 1 ]] && reference=(--max-autotune bench/max_autotune_time.py)
    "$build/bench/collect_bench" --backend inductor --search-space EXHAUSTIVE --log-normal "${SPEED_SHAPES:-2}" \
      --seed 1234 "${reference[@]}" 2>"$out/speed_exhaustive.log" | tee "$out/speed_exhaustive.txt" || status=1
  fi
  local caches
  caches=$(mktemp -d)
  TRITON_CACHE_DIR=$caches/triton TORCHINDUCTOR_CACHE_DIR=$caches/inductor timeout -s INT "$step_seconds" \
    "$cli" --seed 1234 --format msgpack collect --backend inductor --quiet --log-normal --ops mm addmm bmm \
    --dtypes bfloat16 --num-shapes "${EXHAUSTIVE_SHAPES:-6}" --search-space EXHAUSTIVE --max-size 2048 \
    --workers-per-device "${EXHAUSTIVE_WORKERS:-2}" --output "$out/speed_exhaustive.msgpack" \
    ${SPEED_STOP_AFTER:+--stop-after "$SPEED_STOP_AFTER"} \
    >"$out/speed_exhaustive_collect.txt" 2>>"$out/speed_exhaustive.log" || status=1
  tee -a "$out/speed_exhaustive.txt" <"$out/speed_exhaustive_collect.txt"
  rm -rf "$caches"
}

# Fewer timed runs per config: the same problems collected with Inductor's benchmark count
# (100, twice: the noise between two runs) and with --repeat 10; per-problem Spearman of
# the config times and whether the fastest config stays the same.
step_repeats() {
  local n=${REPEAT_SHAPES:-12} r
  for r in 100a 100b 10; do
    "$cli" --seed 1234 --format json collect --backend inductor --quiet --log-normal --ops mm addmm bmm \
      --dtypes bfloat16 float16 float32 --num-shapes "$n" --search-space DEFAULT --repeat "${r%[ab]}" \
      --output "$out/repeats_$r.json" >"$out/repeats_$r.stdout" 2>"$out/repeats_$r.log" || status=1
  done
  { echo "== 100 vs 100 (run-to-run noise)"; python3 bench/compare_datasets.py "$out/repeats_100a.json" "$out/repeats_100b.json" | tail -4
    echo "== 100 vs 10"; python3 bench/compare_datasets.py "$out/repeats_100a.json" "$out/repeats_10.json" | tail -4; } |
    tee "$out/repeats.txt"
  rm -f "$out"/repeats_*.json*
}

# The shipped model's recipe (its card, data/models/inductor_h200.md) in 5-fold
# cross-validation by problem on the machine's CPU cores: seeds CV_SEEDS (default "42 7")
# side by side, nproc / runs networks at once each (train --jobs; the models do not depend
# on it). Each run stops once its pooled table is printed (the final fit after the folds
# is not needed); logs and cv_metrics.json under $out/cv_<seed>, whose worst_picks list the
# CV_WORST (default 400) held-out problems the model's first pick loses most on: the tail
# that sets regret p95. CV_VARIANTS compares recipes in one call, every seed of each side
# by side: "NAME:OPTIONS;NAME:OPTIONS", each OPTIONS replacing the recipe's value of an
# option it names or adding it (e.g. "base:;wide:--hidden-dims 128,64"; out: cv_<name>_<seed>).
cv_recipe=(--ensemble 3 --hidden-dims 96,48 --weight-average 0.999 --ranking-weight 15 --ranking-loss top
  --dropout 0 --patience 30 --num-epochs 300)

# The recipe with the options of $1 ("--opt value ...") in place of its own.
cv_options() {
  local -a recipe=("${cv_recipe[@]}") changes
  read -r -a changes <<<"$1"
  local i j
  for ((i = 0; i < ${#changes[@]}; i += 2)); do
    for ((j = 0; j < ${#recipe[@]}; j += 2)); do
      [[ ${recipe[$j]} == "${changes[$i]}" ]] && { recipe[$((j + 1))]=${changes[$((i + 1))]}; continue 2; }
    done
    recipe+=("${changes[$i]}" "${changes[$((i + 1))]}")
  done
  printf '%s\n' "${recipe[@]}"
}

step_cross_validate() {
  local seeds=(${CV_SEEDS:-42 7}) datasets=() names=() options=() pids=() variant seed file name i
  bash scripts/datasets.sh unpack
  for file in $(cd data/datasets && LC_ALL=C ls h200_inductor_default_*_unpadded.msgpack); do
    datasets+=(--dataset "data/datasets/$file")
  done
  IFS=';' read -r -a variants <<<"${CV_VARIANTS:-:}"
  for variant in "${variants[@]}"; do
    for seed in "${seeds[@]}"; do
      name=${variant%%:*}
      names+=("cv_${name:+${name}_}$seed")
      options+=("${variant#*:}")
    done
  done
  for i in "${!names[@]}"; do
    name=${names[$i]}
    seed=${name##*_}
    mapfile -t recipe < <(cv_options "${options[$i]}")
    OMP_NUM_THREADS=1 "$cli" --device cpu --seed "$seed" train "${datasets[@]}" --folds 5 \
      --jobs $(($(nproc) / ${#names[@]} > 0 ? $(nproc) / ${#names[@]} : 1)) "${recipe[@]}" \
      --top-n-worst "${CV_WORST:-400}" --model "$out/$name.pt" --log-dir "$out/$name" >"$out/$name.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!names[@]}"; do
    name=${names[$i]}
    while kill -0 "${pids[$i]}" 2>/dev/null && ! grep -qs "^top-k:" "$out/$name.log"; do sleep 2; done
    kill "${pids[$i]}" 2>/dev/null; wait "${pids[$i]}" 2>/dev/null
    grep -q "^top-k:" "$out/$name.log" || status=1
    echo "== $name: ${options[$i]:-the recipe}" | tee "$out/$name.txt"
    grep -A14 "fold cross-validation" "$out/$name.log" | head -16 | tee -a "$out/$name.txt"
  done
  rm -f "$out"/cv_*.pt
}

# The models issue's speed row: deep model, 20 epochs, batch 64, on the shipped H200 native
# dataset, wall time of the whole command on the GPU (by default full batches replay one
# captured CUDA-graph step; --no-cuda-graph launches every kernel from the host, the
# previous version) and on the CPU cores, test metrics.
step_train_speed() {
  local run device flags start
  for run in cuda cuda_no_graph cpu; do
    device=${run%_no_graph}
    flags=()
    [[ $run == cuda_no_graph ]] && flags=(--no-cuda-graph)
    start=$(date +%s%N)
    "$cli" --seed 42 --device "$device" train --dataset data/datasets/h200_default_lognormal.msgpack \
      --model-type deep --num-epochs 20 --patience 100 --batch-size 64 "${flags[@]}" ${TRAIN_FLAGS:-} --model "$out/deep_$run.pt" \
      --log-dir "$out/train_$run" >"$out/train_$run.log" 2>&1 || status=1
    echo "train deep 20 epochs on $device ${flags[*]} ${TRAIN_FLAGS:-}: $((($(date +%s%N) - start) / 1000000)) ms wall; test:" \
      "$(grep -E "^overall" "$out/train_$run.log" | tail -1)" | tee -a "$out/train_speed.txt"
  done
  rm -rf "$out"/deep_*.pt "$out"/train_cuda "$out"/train_cuda_no_graph "$out"/train_cpu
}

# The shipped default model's export-lut tables against max-autotune, on problems no
# training set holds: log-normal draws of another seed, then the transformer shapeset
# (every E2E_EVERY-th problem); each stops starting problems after E2E_BUDGET s.
# E2E_TOP_K: the tables compared (default: the recommended one, top-1 with ATen from 10 us,
# a 5 % compile margin, ATen alone from 100 us and for GEMVs, a runner-up within 5 %, a heavy
# pick more than 5 % ahead of ATen alone; lut_e2e.py --help has the syntax);
# E2E_RESUME: an earlier call's lut_e2e.json to go on from (below).
# E2E_MODEL: the model, or several separated by spaces to compare them on the same problems.
# E2E_TABLES: tables exported beforehand on any machine, "NAME=FILE ...", measured without a
# build (no build_cli step); models are exported too only where E2E_MODEL is given.
# E2E_TABLES=none with E2E_USE_MODEL: the use_model variants alone, no table and no build
# (libmmt_rank.so built elsewhere and named by MMT_RANK_LIBRARY).
e2e_sources() {
  local item
  # E2E_USE_MODEL="graph isolated": also the model deciding every GEMM while compiling (use_model;
  # "graph+pad": it decides Inductor's shape padding too)
  [[ -n ${E2E_USE_MODEL:-} ]] && printf -- '--use-model %s ' "$E2E_USE_MODEL"
  [[ ${E2E_TABLES:-} == none && -n ${E2E_USE_MODEL:-} ]] && return 0
  for item in ${E2E_TABLES:-}; do printf -- '--table %s ' "$item"; done
  if [[ -z ${E2E_TABLES:-} || -n ${E2E_MODEL:-} ]]; then
    for item in ${E2E_MODEL:-data/models/inductor_h200.pt}; do printf -- '--model %s ' "$item"; done
    printf -- '--mmt %s --top-k %s' "$cli" "${E2E_TOP_K:-1+aten@10us+fast5+alone100us+gemv+runner5+heavy5}"
  fi
}

# No problem is started after E2E_BUDGET s (default 420), nor past what CALL_SECONDS leaves.
e2e_budget() {
  local budget=${E2E_BUDGET:-420} left
  left=$(($(step_limit) - 60))
  echo $((budget < left ? budget : left))
}

# E2E_RESUME=path/to/lut_e2e.json (an earlier call's, copied into the work tree): go on from
# it, measuring only the problems it lacks ($OUT starts empty on every call).
e2e_resume() {
  [[ -n ${E2E_RESUME:-} ]] || return 0
  [[ -f $E2E_RESUME ]] || { echo "error: E2E_RESUME: $E2E_RESUME is not a file" >&2; return 1; }
  mkdir -p "$1" && cp "$E2E_RESUME" "$1/lut_e2e.json" && printf -- '--resume'
}

step_e2e_lognormal() {
  local resume
  resume=$(e2e_resume "$out/e2e_ln") || { status=1; return; }
  # shellcheck disable=SC2046,SC2086 # e2e_sources is a list of options, resume none or one
  python3 bench/lut_e2e.py $(e2e_sources) --log-normal "${E2E_PROBLEMS:-40}" --seed 2026 --dtypes bfloat16 \
    --out "$out/e2e_ln" $resume --budget "$(e2e_budget)" \
    >"$out/e2e_ln.txt" 2>"$out/e2e_ln.log" || status=1
  tail -12 "$out/e2e_ln.txt"
}

step_e2e_transformer() {
  local resume
  resume=$(e2e_resume "$out/e2e_tr") || { status=1; return; }
  # shellcheck disable=SC2046,SC2086 # e2e_sources is a list of options, resume none or one
  python3 bench/lut_e2e.py $(e2e_sources) --shapeset data/shapesets/transformer_shapes.json \
    --every "${E2E_EVERY:-3}" --out "$out/e2e_tr" $resume --budget "$(e2e_budget)" \
    >"$out/e2e_tr.txt" 2>"$out/e2e_tr.log" || status=1
  tail -12 "$out/e2e_tr.txt"
}

# The whole-model suite (bench/models/suite.py) on bench/models/results_<gpu>.json (h200, h100): the
# workloads it lacks (MODELS_WORKLOADS, default all) in the variants MODELS_VARIANTS (default
# the suite's), none started that the suite expects to outlast the step (its compile times so
# far), so each call ends inside its 10 minutes; the results, the suite's GEMMs
# (data/shapesets/model_suite.json, when the run added to them) and the logs come back under
# $out. Copy them into the work tree before the next call to go on.
# MODELS_FRESH=1 measures the asked workloads again, results or not (after a change).
# MODELS_COMPILES=N compiles each variant N times (suite.py --compiles): the medians, so that
# what Inductor tunes at a kernel's first run is not one draw.
# MODELS_TABLE: the table variants' table, exported elsewhere (export-lut --lut-format inductor on
# data/shapesets/model_suite.json) and carried, so that the call needs no build_cli.
# MODELS_AUTOTUNE_STATE: the models/autotune_state folder of an earlier call's models_logs.tgz,
# copied into the work tree (carried): a max-autotune compile that call's limit cut off goes on
# from the GEMMs it had timed (bench/models/autotune_state.py).
step_models() {
  local limit budget
  limit=$(step_limit)
  budget=$((limit > 80 ? limit - 20 : limit))
  mkdir -p "$out/models/autotune_state"
  if [[ -n ${MODELS_AUTOTUNE_STATE:-} ]]; then
    [[ -d $MODELS_AUTOTUNE_STATE ]] ||
      { echo "error: MODELS_AUTOTUNE_STATE: $MODELS_AUTOTUNE_STATE is not a folder" >&2; status=1; return; }
    cp "$MODELS_AUTOTUNE_STATE"/*.json "$out/models/autotune_state/" 2>/dev/null
  fi
  # Each GPU keeps its own results; on another GPU than the shipped model's (an H200), ours
  # installs it all the same and says so (model_forced).
  local results=bench/models/results_$gpu.json force=() shapeset_sum
  shapeset_sum=$(cksum <data/shapesets/model_suite.json)
  [[ $gpu == h200 ]] || force=(--force-model)
  # shellcheck disable=SC2086 # the lists are lists of words
  timeout -s TERM "$limit" python3 bench/models/suite.py --mmt "$cli" --results "$results" "${force[@]}" \
    ${MODELS_WORKLOADS:+--workloads $MODELS_WORKLOADS} ${MODELS_VARIANTS:+--variants $MODELS_VARIANTS} \
    ${MODELS_FRESH:+--fresh} ${MODELS_COMPILES:+--compiles $MODELS_COMPILES} ${MODELS_TABLE:+--table $MODELS_TABLE} \
    --budget "$budget" --workload-timeout "$limit" --out "$out/models" >"$out/models.txt" 2>"$out/models.log" ||
    status=1
  tail -40 "$out/models.txt"
  cp "$results" "$out/" 2>/dev/null
  # The shapeset comes back only when the run added GEMMs to it: a call's files are few.
  [[ $(cksum <data/shapesets/model_suite.json) == "$shapeset_sum" ]] || cp data/shapesets/model_suite.json "$out/"
  (cd "$out" && tar -czf models_logs.tgz models && rm -rf models)
}

for step in "$@"; do
  case $step in
    build | build_cli | test | collect | collect_set | exhaustive | speed | speed_exhaustive | repeats | cross_validate | train_speed | e2e_lognormal | e2e_transformer | models) "step_$step" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
exit $status
