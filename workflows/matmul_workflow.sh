#!/usr/bin/env bash
# The whole pipeline: collect training data -> train a model -> create a validation set
# (seed + 1, so its problems are new) -> validate the model on it.
#
# Every path, the seed and the sizes are variables with defaults; set them in the
# environment, e.g.
#   NUM_SHAPES=20 NUM_EPOCHS=10 DATA_DIR=/tmp/run bash workflows/matmul_workflow.sh
# DEVICE=cpu|cuda picks the backend and the training device (default: cuda when a GPU is
# usable). Outputs: $TRAIN_DATASET, $MODEL_PATH, $VALIDATION_DATASET, $VALIDATION_REPORT and
# the training logs under $LOG_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMT=${MMT:-$ROOT/build/src/cli/matmul_toolkit}
SEED=${SEED:-42}
DEVICE=${DEVICE:-}
FORMAT=${FORMAT:-json}                  # json | msgpack
DATA_DIR=${DATA_DIR:-$ROOT/out/matmul_workflow}
NUM_SHAPES=${NUM_SHAPES:-100}
VALIDATION_SHAPES=${VALIDATION_SHAPES:-30}
MIN_SIZE=${MIN_SIZE:-32}
MAX_SIZE=${MAX_SIZE:-}                  # empty: the backend's default
OPS=${OPS:-mm addmm bmm}
SEARCH_SPACE=${SEARCH_SPACE:-DEFAULT}   # DEFAULT | EXHAUSTIVE
WARMUP=${WARMUP:-}                      # empty: the backend's default
REPEAT=${REPEAT:-}
RECIPE=${RECIPE:-}                      # empty: train's default (the shipped model's) | quick
MODEL_TYPE=${MODEL_TYPE:-}              # empty: the recipe's (base) | deep
NUM_EPOCHS=${NUM_EPOCHS:-}              # empty: the recipe's
BATCH_SIZE=${BATCH_SIZE:-}
PATIENCE=${PATIENCE:-}
TRAIN_DATASET=${TRAIN_DATASET:-$DATA_DIR/seed_${SEED}_train_dataset.$FORMAT}
VALIDATION_DATASET=${VALIDATION_DATASET:-$DATA_DIR/seed_${SEED}_validation_dataset.$FORMAT}
MODEL_PATH=${MODEL_PATH:-$DATA_DIR/matmul_model.pt}
LOG_DIR=${LOG_DIR:-$DATA_DIR/logs}
VALIDATION_REPORT=${VALIDATION_REPORT:-$DATA_DIR/validation_report.json}

if [[ ! -x $MMT ]]; then
  echo "error: MMT: matmul_toolkit binary not found at '$MMT' (build it or set MMT)" >&2
  exit 2
fi
mkdir -p "$DATA_DIR"

global=(--seed "$SEED")
[[ -n $DEVICE ]] && global+=(--device "$DEVICE")
read -r -a ops <<<"$OPS"
collection=(--min-size "$MIN_SIZE" --ops "${ops[@]}" --search-space "$SEARCH_SPACE" --quiet)
[[ -n $MAX_SIZE ]] && collection+=(--max-size "$MAX_SIZE")
[[ -n $WARMUP ]] && collection+=(--warmup "$WARMUP")
[[ -n $REPEAT ]] && collection+=(--repeat "$REPEAT")

echo "== 1/4 collect: $NUM_SHAPES problems -> $TRAIN_DATASET"
"$MMT" "${global[@]}" collect --num-shapes "$NUM_SHAPES" --output "$TRAIN_DATASET" "${collection[@]}"

training=(--log-dir "$LOG_DIR")
[[ -n $RECIPE ]] && training+=(--recipe "$RECIPE")
[[ -n $MODEL_TYPE ]] && training+=(--model-type "$MODEL_TYPE")
[[ -n $NUM_EPOCHS ]] && training+=(--num-epochs "$NUM_EPOCHS")
[[ -n $BATCH_SIZE ]] && training+=(--batch-size "$BATCH_SIZE")
[[ -n $PATIENCE ]] && training+=(--patience "$PATIENCE")
echo "== 2/4 train: ${RECIPE:-the default} recipe -> $MODEL_PATH"
"$MMT" "${global[@]}" train --dataset "$TRAIN_DATASET" --output "$MODEL_PATH" "${training[@]}"

echo "== 3/4 create-validation: $VALIDATION_SHAPES problems (seed $((SEED + 1))) -> $VALIDATION_DATASET"
"$MMT" "${global[@]}" create-validation --num-shapes "$VALIDATION_SHAPES" \
  --output "$VALIDATION_DATASET" "${collection[@]}"

echo "== 4/4 validate-model -> $VALIDATION_REPORT"
"$MMT" "${global[@]}" validate-model --model "$MODEL_PATH" --dataset "$VALIDATION_DATASET" \
  --output "$VALIDATION_REPORT"

echo "done: model $MODEL_PATH, report $VALIDATION_REPORT"
