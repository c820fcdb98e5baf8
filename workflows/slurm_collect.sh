#!/usr/bin/env bash
# Collect one dataset across a SLURM cluster: a job array with one task per shard
# (`collect --shard-index $SLURM_ARRAY_TASK_ID --num-shards $NUM_SHARDS`), then a merge job
# that starts when every task has succeeded (afterok dependency).
#
#   NUM_SHARDS=16 DATA_DIR=/scratch/h100 SBATCH_ARGS="--partition=gpu --gres=gpu:1 --time=04:00:00" \
#     bash workflows/slurm_collect.sh -- --num-shapes 2000 --search-space EXHAUSTIVE --chunk-size 50
#
# Arguments after `--` go to every `collect` unchanged; give every task the same ones (and
# the same --seed), so that the shards partition one problem list. Modes (first argument):
#   submit    (default) submit the array and the merge job with sbatch
#   --dry-run print the sbatch commands and, for every array task, the command it runs;
#             nothing is submitted or run (for checking the shard arithmetic without SLURM)
#   task      run one shard: $SLURM_ARRAY_TASK_ID is the shard index (what array tasks run)
#   merge     merge the shard files (what the merge job runs)
# Shards write $DATA_DIR/shards/${NAME}_shardIofN.$FORMAT (chunked and resumable as any
# collect: resubmitting a failed task resumes it); the merge writes $DATA_DIR/$NAME.$FORMAT.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMT=${MMT:-$ROOT/build/src/cli/matmul_toolkit}
NUM_SHARDS=${NUM_SHARDS:-4}
SEED=${SEED:-42}
DEVICE=${DEVICE:-}                  # cpu | cuda; empty: cuda when a GPU is usable
FORMAT=${FORMAT:-json}              # json | msgpack
NAME=${NAME:-matmul_dataset}
DATA_DIR=${DATA_DIR:-$ROOT/out/slurm_collect}
JOB_NAME=${JOB_NAME:-mmt-collect}
SBATCH=${SBATCH:-sbatch}
SBATCH_ARGS=${SBATCH_ARGS:-}        # e.g. "--partition=gpu --gres=gpu:1 --time=04:00:00"
MERGE_SBATCH_ARGS=${MERGE_SBATCH_ARGS:-}

mode=submit
if [[ $# -gt 0 && $1 != -- ]]; then
  mode=$1
  shift
fi
case $mode in
  submit|--dry-run|task|merge) ;;
  *) echo "error: $mode: unknown mode (expected submit, --dry-run, task or merge)" >&2; exit 2 ;;
esac
if [[ $# -gt 0 ]]; then
  if [[ $1 != -- ]]; then
    echo "error: $1: collect options go after '--'" >&2
    exit 2
  fi
  shift
fi
collect_args=("$@")

if ! [[ $NUM_SHARDS =~ ^[0-9]+$ ]] || ((NUM_SHARDS < 1)); then
  echo "error: NUM_SHARDS: '$NUM_SHARDS' is not a positive integer" >&2
  exit 2
fi
SHARD_DIR=$DATA_DIR/shards
LOG_DIR=$DATA_DIR/logs
MERGED=$DATA_DIR/$NAME.$FORMAT

global=(--seed "$SEED")
[[ -n $DEVICE ]] && global+=(--device "$DEVICE")

# The command array task `index` runs.
task_command() {
  local index=$1
  printf '%q ' "$MMT" "${global[@]}" collect --shard-index "$index" --num-shards "$NUM_SHARDS" \
    --output "$SHARD_DIR/$NAME.$FORMAT" --quiet "${collect_args[@]}"
}
merge_command() {
  printf '%q ' "$MMT" merge --dataset "$SHARD_DIR" --output "$MERGED"
}
# sbatch command lines; the array job id is only known after the first submission.
array_submission() {
  # shellcheck disable=SC2086  # SBATCH_ARGS is a list of options
  printf '%q ' "$SBATCH" --parsable --array="0-$((NUM_SHARDS - 1))" --job-name "$JOB_NAME" \
    --output "$LOG_DIR/${JOB_NAME}_%A_%a.log" $SBATCH_ARGS "$ROOT/workflows/slurm_collect.sh" task -- "${collect_args[@]}"
}
merge_submission() {
  local array_job=$1
  # shellcheck disable=SC2086
  printf '%q ' "$SBATCH" --parsable --dependency="afterok:$array_job" --job-name "$JOB_NAME-merge" \
    --output "$LOG_DIR/${JOB_NAME}-merge_%j.log" $MERGE_SBATCH_ARGS "$ROOT/workflows/slurm_collect.sh" merge
}

require_binary() {
  if [[ ! -x $MMT ]]; then
    echo "error: MMT: matmul_toolkit binary not found at '$MMT' (build it or set MMT)" >&2
    exit 2
  fi
}

case $mode in
  --dry-run)
    echo "# submit: $NUM_SHARDS array tasks, then the merge job"
    echo "$(array_submission)"
    echo "$(merge_submission ARRAY_JOB_ID)"
    for ((i = 0; i < NUM_SHARDS; ++i)); do
      echo "# task $i"
      echo "$(task_command "$i")"
    done
    echo "# merge"
    echo "$(merge_command)"
    ;;
  submit)
    require_binary
    mkdir -p "$SHARD_DIR" "$LOG_DIR"
    # SLURM runs a copy of this script from its spool directory: pass absolute paths on.
    export MMT NUM_SHARDS SEED DEVICE FORMAT NAME DATA_DIR JOB_NAME
    array_job=$(eval "$(array_submission)")
    array_job=${array_job%%;*}
    merge_job=$(eval "$(merge_submission "$array_job")")
    echo "submitted array job $array_job ($NUM_SHARDS tasks) and merge job ${merge_job%%;*} -> $MERGED"
    ;;
  task)
    require_binary
    index=${SLURM_ARRAY_TASK_ID:-}
    if ! [[ $index =~ ^[0-9]+$ ]]; then
      echo "error: SLURM_ARRAY_TASK_ID: '$index' is not a task index (run through sbatch --array, or set it)" >&2
      exit 2
    fi
    if [[ -n ${SLURM_ARRAY_TASK_COUNT:-} && $SLURM_ARRAY_TASK_COUNT != "$NUM_SHARDS" ]]; then
      echo "error: NUM_SHARDS: $NUM_SHARDS, but the array has $SLURM_ARRAY_TASK_COUNT tasks" >&2
      exit 2
    fi
    mkdir -p "$SHARD_DIR"
    echo "shard $index of $NUM_SHARDS -> $SHARD_DIR"
    eval "$(task_command "$index")"
    ;;
  merge)
    require_binary
    eval "$(merge_command)"
    ;;
esac
