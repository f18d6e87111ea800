#!/usr/bin/env bash
# Trims a Bazel --disk_cache folder to a size bound by removing its least recently read files first (Bazel 4 never
# trims it; a removed entry is only a cache miss). Above LIMIT_MIB it removes files until the folder holds at most
# three quarters of LIMIT_MIB. tools/setup.sh runs it on ~/.cache/convoy-bazel-disk.
# Usage: tools/prune_disk_cache.sh DIR LIMIT_MIB
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 DIR LIMIT_MIB" >&2
  exit 2
fi
dir="$1"
limit_kib=$(($2 * 1024))
[ -d "$dir" ] || exit 0
used_kib=$(du -sk "$dir" | cut -f1)
[ "$used_kib" -le "$limit_kib" ] && exit 0
target_kib=$((limit_kib * 3 / 4))
echo "[setup] Bazel disk cache $dir: $((used_kib / 1024)) MiB, over its bound of $2 MiB; removing the least" \
  "recently read entries down to $((target_kib / 1024)) MiB"
# Access time, then path: the oldest reads go first. awk stops reading once enough is freed (sort's SIGPIPE is
# expected, hence the `|| true`).
find "$dir" -type f -printf '%A@ %k %p\n' | sort -n |
  awk -v excess=$((used_kib - target_kib)) '{ if (freed >= excess) exit; freed += $2; sub(/^[^ ]+ [^ ]+ /, ""); print }' |
  xargs -r -d '\n' rm -f || true
