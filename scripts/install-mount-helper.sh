#!/usr/bin/env bash
# Installs the mount(8) helper /sbin/mount.fuse.mnemofs (scripts/mount.fuse.mnemofs)
# pointing at this checkout's target/release/mnemofs (build it first), so that
# `mount -t fuse.mnemofs IMAGE DIR -o OPTS` and /etc/fstab entries work. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/target/release/mnemofs
dest=${MOUNT_HELPER_DIR:-/sbin}/mount.fuse.mnemofs
tmp=$(mktemp)
sed "s|@MNEMOFS_BIN@|$bin|" scripts/mount.fuse.mnemofs >"$tmp"
install -m 0755 "$tmp" "$dest"
rm -f "$tmp"
echo "install-mount-helper: $dest -> $bin"
