#!/usr/bin/env bash
# Runs the commands README.md shows, so that they keep working (ctest: readme_commands_test).
#   bash tests/workflows/readme_commands_test.sh SOURCE_DIR BIN
#
# The marker convention, on a fenced block's opening line:
#   ```bash          runs here: a CPU machine, no GPU, no network, no torch
#   ```bash gpu      not run: needs a GPU, torch or Triton (GitHub renders it as bash)
#   ```bash long     not run: takes minutes or more
# Only ```bash blocks run (```python, ```text and the rest are not commands for this test).
# The quick start's `bash scripts/demo.sh` and `bash scripts/test.sh` are marked long: test.sh
# runs the whole ctest suite, this test included, and both build and install packages. A
# runnable block that still names either script fails this test instead of recursing.
#
# The blocks run in README order in one bash process (`set -eo pipefail`), so a later block
# may use what an earlier one wrote, with the working directory a scratch tree: symlinks to the
# source tree's scripts/, workflows/, python/ and bench/, a copy of the small files of data/
# (shapesets, solutions, models, sample_cpu.json), and build/src/cli/matmul_toolkit linking to
# BIN. Every `/tmp/mmt` in the README becomes a folder of that scratch tree, so nothing is
# written outside it. MMT is build/src/cli/matmul_toolkit, as the README sets it.
set -euo pipefail
src=$(cd "$1" && pwd)
bin=$2
readme=$src/README.md

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for dir in scripts workflows python bench; do ln -s "$src/$dir" "$work/$dir"; done
mkdir -p "$work/data/datasets" "$work/build/src/cli" "$work/out"
cp -r "$src/data/shapesets" "$src/data/solutions" "$src/data/models" "$work/data/"
cp "$src/data/datasets/sample_cpu.json" "$src/data/datasets/sample_cpu.json.meta.json" "$work/data/datasets/"
ln -s "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" "$work/build/src/cli/matmul_toolkit"

# The blocks, as one script: a header line per block (its README line), then its lines.
awk -v scratch="$work/out" '
  /^```/ {
    if (!inside) {
      inside = 1
      info = substr($0, 4)
      runs = (info == "bash")
      skipped_kind = (info ~ /^bash /)
      if (runs) { blocks++; printf "echo \"== README.md:%d\" >&2\n", NR }
      if (skipped_kind) skipped++
      next
    }
    inside = 0
    next
  }
  inside && runs { gsub("/tmp/mmt", scratch); print }
  END { printf "# %d blocks run, %d marked gpu or long\n", blocks, skipped > "/dev/stderr" }
' "$readme" >"$work/readme_commands.sh"

first_commands=$(awk '/^```bash/ { inside = 1; next } /^```/ { inside = 0 } inside && NF { print; if (++n == 2) exit }' "$readme")
if [[ $first_commands != $'bash scripts/demo.sh\nbash scripts/test.sh' ]]; then
  echo "README.md's first two commands are not the quick start's 'bash scripts/demo.sh' and 'bash scripts/test.sh':"
  echo "$first_commands"
  exit 1
fi
if grep -nE 'scripts/(demo|test)\.sh' "$work/readme_commands.sh"; then
  echo "a README block that this test runs calls scripts/demo.sh or scripts/test.sh (above):"
  echo "mark its fence \`\`\`bash long (test.sh runs this test again)"
  exit 1
fi

cd "$work"
if ! MMT=build/src/cli/matmul_toolkit bash -eo pipefail readme_commands.sh >"$work/log" 2>&1; then
  tail -n 60 "$work/log"
  echo
  echo "a README command failed: the last '== README.md:LINE' above is its block."
  echo "Fix the command, or mark the block \`\`\`bash gpu or \`\`\`bash long if it cannot run on a CPU machine."
  exit 1
fi
grep '^== README.md:' "$work/log" | tr '\n' ' '
echo
echo "every runnable README command passed"
