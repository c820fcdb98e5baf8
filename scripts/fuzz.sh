#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ in the sanitizer build (scripts/sanitizer_build.sh:
# clang, ASan + UBSan, the project's own libraries with libFuzzer's coverage) and runs each
# for a bounded time on a copy of its seed corpus (tests/fuzz/corpus/<target>).
# fuzz_checkpoint fuzzes the torch-free checkpoint loader (src/model/inference: the archive
# walk, the checks, the fold); no target links LibTorch. A crash fails the script and leaves
# the input in ${SANITIZE_BUILD_DIR}/fuzz/crashes/<target>/: add it to
# tests/fuzz/regressions/<target>/ with the fix, where reliability_fuzz_regression_test
# (model_torch_archive_check_test for checkpoints) replays it.
#   FUZZ_SECONDS        seconds per target (default 45)
#   FUZZ_TARGETS        targets to run (default: all five)
#   SANITIZE_BUILD_DIR  build directory (default build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-45}
build_dir=${SANITIZE_BUILD_DIR:-build-sanitize}
targets=(${FUZZ_TARGETS:-dataset_json dataset_msgpack shapeset solution checkpoint})

SANITIZE_BUILD_DIR=$build_dir bash scripts/sanitizer_build.sh "${targets[@]/#/fuzz_}"
build_dir=$build_dir/fuzz

# The targets write each input to a scratch file under TMPDIR; keep those in the build dir.
export TMPDIR="$PWD/$build_dir/tmp"
mkdir -p "$TMPDIR"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0}
status=0
for t in "${targets[@]}"; do
  work="$build_dir/work/$t"
  crashes="$build_dir/crashes/$t"
  rm -rf "$work" && mkdir -p "$work" "$crashes"
  cp tests/fuzz/corpus/"$t"/* "$work"/
  # Replays the regression inputs first: each must pass before new inputs are searched.
  if compgen -G "tests/fuzz/regressions/$t/*" >/dev/null; then
    "$build_dir/fuzz_$t" -runs=0 tests/fuzz/regressions/"$t"/* || status=1
  fi
  log="$build_dir/fuzz_$t.log"
  if "$build_dir/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$crashes/" -print_final_stats=1 "$work" >"$log" 2>&1; then
    execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    echo "fuzz: $t: ${seconds}s, ${execs:-?} executions, no crash"
  else
    status=1
    echo "fuzz: $t: FAILED (input in $crashes); last lines of $log:"
    tail -40 "$log"
  fi
done
exit $status
