#!/usr/bin/env bash
# The Inductor datasets are kept xz-compressed in data/archive: the whole working tree
# travels to the GPU machine with every device call (64 MiB at most), and xz shrinks a
# 7 MB set and its sidecar to 0.5 MB. Their unpacked copies in data/datasets are git-ignored.
#   bash scripts/datasets.sh unpack [NAME ...]   # data/archive/NAME.tar.xz (default: every archive)
#                                                #   into data/datasets; files already there are kept
#   bash scripts/datasets.sh pack NAME ...       # data/datasets/NAME.msgpack and its .meta.json
#                                                #   into data/archive/NAME.tar.xz (after a collection)
# NAME is an archive's name without .tar.xz, e.g. h200_inductor_default_lognormal_unpadded.
# DATA_DIR=path works on another folder of the same layout (archive/, datasets/).
set -euo pipefail
cd "$(dirname "$0")/.."
archive=${DATA_DIR:-data}/archive
datasets=${DATA_DIR:-data}/datasets

usage() {
  sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

unpack() {
  local names=("$@") name
  if ((${#names[@]} == 0)); then
    for name in "$archive"/*.tar.xz; do names+=("$(basename "$name" .tar.xz)"); done
  fi
  for name in "${names[@]}"; do
    [[ -f $archive/$name.tar.xz ]] || { echo "error: $archive/$name.tar.xz: no such archive" >&2; exit 2; }
    tar -xJf "$archive/$name.tar.xz" -C "$datasets" --skip-old-files
  done
}

pack() {
  (($# > 0)) || usage
  local name file files
  for name in "$@"; do
    files=("$name.msgpack" "$name.msgpack.meta.json")
    for file in "${files[@]}"; do
      [[ -f $datasets/$file ]] || { echo "error: $datasets/$file: no such file" >&2; exit 2; }
    done
    # Written beside the old archive, then renamed over it: an interrupted pack keeps the old one.
    XZ_OPT=-9 tar -cJf "$archive/$name.tar.xz.tmp" -C "$datasets" "${files[@]}"
    mv "$archive/$name.tar.xz.tmp" "$archive/$name.tar.xz"
  done
}

case ${1:-} in
  unpack) shift; unpack "$@" ;;
  pack) shift; pack "$@" ;;
  *) usage ;;
esac
