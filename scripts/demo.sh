#!/usr/bin/env bash
# One command: install dependencies, build, and run the main job end to end.
# Until collection and training are wired into this script it summarises the shipped
# sample dataset (real CPU timings of data/shapesets/example_shapes.json).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh
BUILD_TARGETS=matmul_toolkit bash scripts/build.sh
build_dir=${BUILD_DIR:-build}
"$build_dir/src/cli/matmul_toolkit" stats data/datasets/sample_cpu.json
