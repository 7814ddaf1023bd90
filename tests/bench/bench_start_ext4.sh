#!/bin/bash
# bench_start_scan over a fresh ext4 file system of its own: an image file
# (sparse, under BENCH_START_IMAGE_DIR, /var/tmp unless set) made with
# mkfs.ext4 and loop-mounted with `nodiscard`, so the million files are
# written, scanned and deleted on this machine's disk without the cost of
# a root file system mounted with `discard` (each unlink of a file with
# data about 3 ms there: most of an hour for a million). Unmounted and
# removed at the end, also after a failure or an interrupt.
# Root only (mount). Usage: bench_start_ext4.sh BENCH_BINARY [FILES [ARGS]]
# (`make bench-start-ext4`; ARGS go to bench_start_scan, e.g. --batch 512).
set -euo pipefail
bin=${1:?usage: $0 BENCH_BINARY [FILES [ARGS]]}
files=${2:-1000000}
shift $(( $# >= 2 ? 2 : 1 ))
if [ "$(id -u)" != 0 ]; then
  echo "$0: needs root (it loop-mounts an image); or run" \
       "$bin --files $files --dir DIR on a mount of your own" >&2
  exit 2
fi
parent=${BENCH_START_IMAGE_DIR:-/var/tmp}
# 12 KiB of image a file (one 4 KiB block each, inodes, journal), at
# least 1 GiB; sparse, so only what the files use is taken.
size=$(( files * 12 * 1024 ))
(( size >= 1 << 30 )) || size=$(( 1 << 30 ))
avail=$(( $(df --output=avail -k "$parent" | tail -1) * 1024 ))
need=$(( files * 6 * 1024 ))
if (( avail < need )); then
  echo "$0: $parent has $avail bytes free; $files files want about $need" >&2
  exit 1
fi
work=$(mktemp -d "$parent/kvtier-bench-start-XXXXXX")
mnt=$work/mnt
cleanup() {
  if mountpoint -q "$mnt"; then umount "$mnt"; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # through the EXIT trap
truncate -s "$size" "$work/ext4.img"
mkfs.ext4 -q -F -N $(( files + files / 4 + 1024 )) -E nodiscard \
  "$work/ext4.img"
mkdir "$mnt"
mount -o loop,nodiscard "$work/ext4.img" "$mnt"
echo "bench_start_ext4: $files files on ext4 in $work/ext4.img ($size bytes, sparse)"
"$bin" --files "$files" --dir "$mnt" "$@"
