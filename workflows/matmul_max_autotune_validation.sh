#!/usr/bin/env bash
# How close does the model come to max-autotune? Runs validate-max-autotune for a model, a
# validation dataset (file or directory) and a max-autotune solution file, and writes the
# per-op report (torch-diode's model_performance_analysis_by_op.json layout).
#
#   MODEL_PATH=m.pt VALIDATION_DATASET=val.json bash workflows/matmul_max_autotune_validation.sh
#
# SOLUTION defaults to data/solutions/default_max_autotune.json (Inductor's DEFAULT configs).
# OP_NAME / HARDWARE_NAME filter the dataset; FORCE=1 compares even when the dataset is
# from other hardware than the model's.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMT=${MMT:-$ROOT/build/src/cli/matmul_toolkit}
SEED=${SEED:-42}
DEVICE=${DEVICE:-}
DATA_DIR=${DATA_DIR:-$ROOT/out/matmul_workflow}
MODEL_PATH=${MODEL_PATH:-$DATA_DIR/matmul_model.pt}
VALIDATION_DATASET=${VALIDATION_DATASET:-$DATA_DIR/seed_${SEED}_validation_dataset.json}
SOLUTION=${SOLUTION:-$ROOT/data/solutions/default_max_autotune.json}
OUTPUT=${OUTPUT:-$DATA_DIR/model_performance_analysis_by_op.json}
OP_NAME=${OP_NAME:-}
HARDWARE_NAME=${HARDWARE_NAME:-}
TOP_N=${TOP_N:-1 5 10 20 50 100 500}
FORCE=${FORCE:-0}

if [[ ! -x $MMT ]]; then
  echo "error: MMT: matmul_toolkit binary not found at '$MMT' (build it or set MMT)" >&2
  exit 2
fi
for input in "$MODEL_PATH" "$VALIDATION_DATASET" "$SOLUTION"; do
  if [[ ! -e $input ]]; then
    echo "error: $input: no such file or directory" >&2
    exit 2
  fi
done
mkdir -p "$(dirname "$OUTPUT")"

global=(--seed "$SEED")
[[ -n $DEVICE ]] && global+=(--device "$DEVICE")
read -r -a top_n <<<"$TOP_N"
args=(--model "$MODEL_PATH" --dataset "$VALIDATION_DATASET" --max-autotune-solution "$SOLUTION"
      --output "$OUTPUT" --top-k "${top_n[@]}")
[[ -n $OP_NAME ]] && args+=(--op-name "$OP_NAME")
[[ -n $HARDWARE_NAME ]] && args+=(--hardware-name "$HARDWARE_NAME")
[[ $FORCE == 1 ]] && args+=(--force)

"$MMT" "${global[@]}" validate-max-autotune "${args[@]}"
