#!/usr/bin/env bash
# Build mnemofs, mount a 1 GiB image at /tmp/mnemofs-demo, use it a little and
# leave it mounted.
# Env: DEMO_IMAGE (default /dev/shm/mnemofs-demo.img), DEMO_MNT (default /tmp/mnemofs-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

IMG=${DEMO_IMAGE:-/dev/shm/mnemofs-demo.img}
MNT=${DEMO_MNT:-/tmp/mnemofs-demo}
step() { printf '\n== %s\n' "$*"; }
run() { echo "\$ $*"; "$@"; }

step "setup (fuse3)"
bash scripts/setup.sh --fuse-only
step "build"
cargo build --release
mnemofs() { "$MNEMOFS" "$@"; }

step "mount $IMG at $MNT"
if is_mounted "$MNT"; then # left over from an earlier run
  run fusermount3 -u "$MNT" || run umount -l "$MNT"
  wait_released "$IMG"
fi
# An image from an earlier run is remounted (its files survive); one this build cannot
# mount (e.g. an older on-PM format version) is replaced by a fresh one.
if [[ -e $IMG ]] && ! why=$(mnemofs stat "$IMG" 2>&1 >/dev/null); then
  echo "$IMG: not an image this build can mount (${why:-unknown}); making a fresh one"
  run mnemofs mkfs "$IMG" --size 1G --force
fi
if [[ ! -e $IMG ]]; then
  run mnemofs mkfs "$IMG" --size 1G
fi
mkdir -p "$MNT"
run mnemofs mount "$IMG" "$MNT"
is_mounted "$MNT" || die "$MNT is not mounted"
D=$MNT/demo
if [[ -e $D/hello.txt ]]; then
  step "files from the previous run survived the remount"
  run cat "$D/hello.txt"
  run sha256sum "$D/big.bin"
  rm -rf "$D"
fi
mkdir "$D"

step "a text file"
echo "hello from mnemofs, $(date)" >"$D/hello.txt"
run cat "$D/hello.txt"

step "a 10 MiB file"
run dd if=/dev/urandom of=/dev/shm/mnemofs-demo.10M bs=1M count=10 status=none
run dd if=/dev/shm/mnemofs-demo.10M of="$D/big.bin" bs=1M conv=fsync status=none
run cmp /dev/shm/mnemofs-demo.10M "$D/big.bin"
sha256sum /dev/shm/mnemofs-demo.10M "$D/big.bin"
rm /dev/shm/mnemofs-demo.10M

step "a directory tree and a rename"
mkdir -p "$D/tree/a/b/c" "$D/tree/d"
for i in 1 2 3; do seq "$i" 1000 >"$D/tree/a/b/c/file$i"; done
cp "$D/tree/a/b/c/file2" "$D/file2.orig"
run mv "$D/tree/a" "$D/tree/d/moved"
run ls -lR "$D/tree"
run diff "$D/file2.orig" "$D/tree/d/moved/b/c/file2"
echo "contents match"

step "mnemofs stat $MNT"
mnemofs stat "$MNT"

step "done"
echo "mnemofs is still mounted at $MNT (image $IMG); the files are in $D."
echo "unmount with:  fusermount3 -u $MNT"
