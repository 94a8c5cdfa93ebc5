#!/usr/bin/env bash
# Two cluster clients on one host (docs/CLUSTER.md): a metadata server and two FUSE
# client mounts of one image, one with synchronous and one with delayed commits.
# Files each client writes and fsyncs are read back, byte for byte, through the
# other; then both unmount, the server stops cleanly and fsck must find the image
# clean.
set -euo pipefail
if ((EUID != 0)); then exec sudo -E bash "$0" "$@"; fi
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
need "$MNEMOFS" "cargo build --release"
WORK=$(mktemp -d "$SCRATCH/mnemofs-2c.XXXXXX")
IMG=$WORK/vol.img A=/tmp/mnemofs-2c-a B=/tmp/mnemofs-2c-b
MDS=
finish2() {
  unmount "$A" || true
  unmount "$B" || true
  [[ -n $MDS ]] && { kill -TERM "$MDS" 2>/dev/null || true; wait "$MDS" 2>/dev/null || true; }
  rmdir "$A" "$B" 2>/dev/null || true
  rm -rf "$WORK"
}
trap finish2 EXIT
mkdir -p "$A" "$B"
"$MNEMOFS" mkfs "$IMG" --size 512M
port=$((20000 + RANDOM % 20000))
"$MNEMOFS" mds "$IMG" --listen "127.0.0.1:$port" --lease-ms 1000 >"$WORK/mds.log" 2>&1 &
MDS=$!
for _ in $(seq 50); do grep -qs "served on" "$WORK/mds.log" && break; sleep 0.1; done
"$MNEMOFS" mount --mds "127.0.0.1:$port" --data "$IMG" --commit sync "$A"
"$MNEMOFS" mount --mds "127.0.0.1:$port" --data "$IMG" --commit delayed "$B"
head -c 3000000 /dev/urandom >"$WORK/x"
head -c 777777 /dev/urandom >"$WORK/y"
# A writes and fsyncs x; B writes and fsyncs y, and appends to x after reading it.
dd if="$WORK/x" of="$A/x" bs=64k conv=fsync status=none
cmp "$WORK/x" "$B/x"
dd if="$WORK/y" of="$B/y" bs=10000 conv=fsync status=none
cmp "$WORK/y" "$A/y"
printf 'tail' | dd of="$B/x" bs=4 oflag=append conv=notrunc,fsync status=none

{ cat "$WORK/x"; printf 'tail'; } | cmp - "$A/x"
mkdir "$A/d" && mv "$B/y" "$A/d/y" && cmp "$WORK/y" "$B/d/y"
echo "two clients: each reads the other's fsynced files (3,000,000 + 777,777 bytes, an append, a rename)"
unmount "$A"
unmount "$B"
kill -TERM "$MDS"
wait "$MDS"
MDS=
"$MNEMOFS" fsck "$IMG"
echo "cluster two clients OK"
