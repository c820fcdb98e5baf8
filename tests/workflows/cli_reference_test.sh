#!/usr/bin/env bash
# docs/cli.md is scripts/cli_reference.sh's output for the built binary: regenerate it into a
# temporary file and fail with the difference when the committed page is out of date.
#   bash tests/workflows/cli_reference_test.sh SOURCE_DIR BIN     (ctest: cli_reference_test)
set -euo pipefail
src=$1
bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bash "$src/scripts/cli_reference.sh" "$bin" "$tmp/cli.md"
if ! diff -u "$src/docs/cli.md" "$tmp/cli.md" >"$tmp/diff"; then
  cat "$tmp/diff"
  echo
  echo "docs/cli.md differs from the binary's --help (diff above: - committed, + generated)."
  echo "Regenerate it from the source directory and commit it:"
  echo "  bash scripts/cli_reference.sh build/src/cli/matmul_toolkit docs/cli.md"
  exit 1
fi
echo "docs/cli.md matches $bin --help"
