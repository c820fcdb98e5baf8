#!/usr/bin/env bash
# One command: install dependencies, build, and run the main job end to end on the CPU:
# collect a training set (150 problems x the DEFAULT configs) and a validation set
# (40 problems, seed + 1), train with the default recipe (the shipped model's), validate the model on
# the validation set. Outputs go to ${DEMO_DIR:-out/demo}; running it
# again resumes the collections (problems already measured are skipped) and retrains.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh
BUILD_TARGETS=matmul_toolkit bash scripts/build.sh
build_dir=${BUILD_DIR:-build}
demo_dir=${DEMO_DIR:-out/demo}

"$build_dir/src/cli/matmul_toolkit" --device cpu collect-and-train \
  --num-shapes "${NUM_SHAPES:-150}" --validation-shapes "${VALIDATION_SHAPES:-40}" \
  --dataset "$demo_dir/train_dataset.json" --validation-dataset "$demo_dir/validation_dataset.json" \
  --output "$demo_dir/matmul_model.pt" --log-dir "$demo_dir/logs" \
  --validation-report "$demo_dir/validation_metrics.json" --quiet
echo
echo "demo outputs in $demo_dir: datasets, matmul_model.pt, logs/ (training_history.csv," \
     "training_loss.svg, test_metrics.json), validation_metrics.json"
