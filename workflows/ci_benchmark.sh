#!/usr/bin/env bash
# CI benchmark: collect a small dataset, train, validate, rank with the model, and print ONE
# JSON object of metrics on stdout:
#   device, hardware, collection_configs_per_second, training_rows_per_second,
#   validation_rmse_log, validation_r2, top1_achieved_fraction, top5_achieved_fraction,
#   recommend_latency_ms (median over the shapeset's problems), recommend_candidates,
#   plus the run's parameters and "missing": the metrics that could not be produced.
# Exits non-zero when any metric is missing. Step logs go to $WORK_DIR/*.log, never stdout.
# Runs on CPU or GPU (DEVICE=cpu|cuda; default: cuda when a GPU is usable). Reading the
# tools' JSON needs jq or python3.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMT=${MMT:-$ROOT/build/src/cli/matmul_toolkit}
SEED=${SEED:-42}
DEVICE=${DEVICE:-}
WORK_DIR=${WORK_DIR:-$ROOT/out/ci_benchmark}
NUM_SHAPES=${NUM_SHAPES:-20}
VALIDATION_SHAPES=${VALIDATION_SHAPES:-10}
MIN_SIZE=${MIN_SIZE:-32}
MAX_SIZE=${MAX_SIZE:-}                    # empty: the backend's default
OPS=${OPS:-mm addmm bmm}
SEARCH_SPACE=${SEARCH_SPACE:-DEFAULT}
WARMUP=${WARMUP:-}
REPEAT=${REPEAT:-}
MODEL_TYPE=${MODEL_TYPE:-}               # empty: the quick recipe's (base 64,32); base | deep
NUM_EPOCHS=${NUM_EPOCHS:-20}
BATCH_SIZE=${BATCH_SIZE:-64}
RECOMMEND_SHAPESET=${RECOMMEND_SHAPESET:-$ROOT/data/shapesets/example_shapes.json}
RECOMMEND_SEARCH_SPACE=${RECOMMEND_SEARCH_SPACE:-EXHAUSTIVE}   # ranked unpruned: 1875 configs (and ATen when the model learned it)

if [[ ! -x $MMT ]]; then
  echo "error: MMT: matmul_toolkit binary not found at '$MMT' (build it or set MMT)" >&2
  exit 2
fi
mkdir -p "$WORK_DIR"

# json_get FILE KEY... : the value at that path ("#N" indexes an array); fails when absent or null.
json_get() {
  local file=$1
  shift
  if command -v jq >/dev/null 2>&1; then
    local path="[" sep="" k
    for k in "$@"; do
      if [[ $k == \#* ]]; then path+="$sep${k#\#}"; else path+="$sep\"$k\""; fi
      sep=","
    done
    jq -er --argjson p "$path]" 'getpath($p) | select(. != null)' "$file"
  elif command -v python3 >/dev/null 2>&1; then
    python3 - "$file" "$@" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2:]:
    value = value[int(key[1:])] if key.startswith("#") else value[key]
if value is None:
    sys.exit(1)
print(value)
PY
  else
    echo "error: ci_benchmark: reading JSON needs jq or python3" >&2
    return 1
  fi
}

is_number() { [[ $1 =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]]; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

global=(--seed "$SEED")
[[ -n $DEVICE ]] && global+=(--device "$DEVICE")
read -r -a ops <<<"$OPS"
collection=(--min-size "$MIN_SIZE" --ops "${ops[@]}" --search-space "$SEARCH_SPACE" --quiet)
[[ -n $MAX_SIZE ]] && collection+=(--max-size "$MAX_SIZE")
[[ -n $WARMUP ]] && collection+=(--warmup "$WARMUP")
[[ -n $REPEAT ]] && collection+=(--repeat "$REPEAT")

train_dataset=$WORK_DIR/train.json
validation_dataset=$WORK_DIR/validation.json
model=$WORK_DIR/model.pt
log_dir=$WORK_DIR/logs
validation_report=$WORK_DIR/validation_report.json
recommend_json=$WORK_DIR/recommend.out
rm -f "$train_dataset" "$train_dataset.meta.json" "$validation_dataset" "$validation_dataset.meta.json" \
  "$model" "$validation_report" "$recommend_json"

declare -A metric=()
device=""
hardware=""

step() {  # step NAME COMMAND... : stdout to $WORK_DIR/NAME.out, stderr to $WORK_DIR/NAME.log
  local name=$1
  shift
  if "$@" >"$WORK_DIR/$name.out" 2>"$WORK_DIR/$name.log"; then return 0; fi
  echo "ci_benchmark: step '$name' failed (see $WORK_DIR/$name.log):" >&2
  tail -n 5 "$WORK_DIR/$name.log" "$WORK_DIR/$name.out" >&2
  return 1
}

if step collect "$MMT" "${global[@]}" collect --num-shapes "$NUM_SHAPES" --output "$train_dataset" \
  "${collection[@]}"; then
  metric[collection_configs_per_second]=$(sed -n 's/.*wall, \([0-9.eE+-]*\) configs\/s.*/\1/p' "$WORK_DIR/collect.out" | tail -1)
  summary=$(sed -n 's/^Collection summary (\(.*\))$/\1/p' "$WORK_DIR/collect.out" | tail -1)
  device=${summary%%: *}
  hardware=${summary#*: }
fi

architecture=()
[[ -n $MODEL_TYPE ]] && architecture=(--model-type "$MODEL_TYPE")
if [[ -f $train_dataset ]] && step train "$MMT" "${global[@]}" train --recipe quick --dataset "$train_dataset" \
  --output "$model" "${architecture[@]}" --num-epochs "$NUM_EPOCHS" --batch-size "$BATCH_SIZE" \
  --log-dir "$log_dir"; then
  metric[training_rows_per_second]=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "rows_per_second") c = i; next }
    c && $c != "" { s += $c; n++ } END { if (n) printf "%.1f\n", s / n }' "$log_dir/training_history.csv" 2>/dev/null || true)
fi

if step create-validation "$MMT" "${global[@]}" create-validation --num-shapes "$VALIDATION_SHAPES" \
  --output "$validation_dataset" "${collection[@]}" &&
  [[ -f $model ]] && step validate-model "$MMT" "${global[@]}" validate-model --model "$model" \
  --dataset "$validation_dataset" --output "$validation_report"; then
  metric[validation_rmse_log]=$(json_get "$validation_report" overall rmse_log || true)
  metric[validation_r2]=$(json_get "$validation_report" overall r2 || true)
  metric[top1_achieved_fraction]=$(json_get "$validation_report" overall top_k_achieved_fraction 1 || true)
  metric[top5_achieved_fraction]=$(json_get "$validation_report" overall top_k_achieved_fraction 5 || true)
fi

if [[ -f $model ]] && step recommend "$MMT" "${global[@]}" recommend --model "$model" \
  --shapeset "$RECOMMEND_SHAPESET" --search-space "$RECOMMEND_SEARCH_SPACE" --no-prune --top-k 5 --json; then
  latencies=()
  for ((i = 0; ; i++)); do
    value=$(json_get "$recommend_json" problems "#$i" ranking_ms 2>/dev/null) || break
    latencies+=("$value")
  done
  if ((${#latencies[@]} > 0)); then
    metric[recommend_latency_ms]=$(printf '%s\n' "${latencies[@]}" | median)
    metric[recommend_candidates]=$(json_get "$recommend_json" problems "#0" candidates || true)
  fi
fi

names=(collection_configs_per_second training_rows_per_second validation_rmse_log validation_r2
       top1_achieved_fraction top5_achieved_fraction recommend_latency_ms recommend_candidates)
missing=()
[[ -z $device ]] && missing+=(device)
fields=""
for name in "${names[@]}"; do
  value=${metric[$name]:-}
  if is_number "$value"; then
    fields+="  \"$name\": $value,"$'\n'
  else
    fields+="  \"$name\": null,"$'\n'
    missing+=("$name")
  fi
done
json_string() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
missing_list=""
for name in "${missing[@]}"; do missing_list+="${missing_list:+, }\"$name\""; done

printf '{\n'
printf '  "device": %s,\n' "$(if [[ -n $device ]]; then json_string "$device"; else echo null; fi)"
printf '  "hardware": %s,\n' "$(if [[ -n $hardware ]]; then json_string "$hardware"; else echo null; fi)"
printf '%s' "$fields"
printf '  "seed": %s,\n  "num_shapes": %s,\n  "validation_shapes": %s,\n  "num_epochs": %s,\n' \
  "$SEED" "$NUM_SHAPES" "$VALIDATION_SHAPES" "$NUM_EPOCHS"
printf '  "model_type": %s,\n  "recommend_search_space": %s,\n' "$(json_string "${MODEL_TYPE:-default}")" \
  "$(json_string "$RECOMMEND_SEARCH_SPACE")"
printf '  "missing": [%s]\n}\n' "$missing_list"

if ((${#missing[@]} > 0)); then
  echo "ci_benchmark: could not produce: ${missing[*]}" >&2
  exit 1
fi
