#!/usr/bin/env bash
# Run xfstests (as root) against mnemofs mounts of this build.
# Usage: scripts/xfstests.sh XFSTESTS_DIR [CHECK_ARGS...]
#   XFSTESTS_DIR  a checkout of xfstests (git://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git);
#                 built here with `make` when it is not built yet (its build needs
#                 the packages its README names: apt-get install acl attr automake bc
#                 e2fsprogs fio gawk gcc indent libacl1-dev libaio-dev libcap-dev
#                 libgdbm-dev libgdbm-compat-dev libtool libtool-bin liburing-dev make
#                 psmisc python3 quota uuid-dev uuid-runtime xfsprogs xfslibs-dev)
#   CHECK_ARGS    passed to xfstests' ./check (default: -g generic/quick)
# The test and scratch file systems are 2 GiB images in $MNEMOFS_SCRATCH (/dev/shm),
# mounted through the mount(8) helper (FSTYP=fuse, FUSE_SUBTYP=.mnemofs). Both are
# fsck'd at the end. Results stay in XFSTESTS_DIR/results.
set -euo pipefail
if ((EUID != 0)); then exec sudo -E bash "$0" "$@"; fi
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

XT=${1:?usage: scripts/xfstests.sh XFSTESTS_DIR [CHECK_ARGS...]}
shift
XT=$(cd "$XT" && pwd)
[[ -x $XT/check ]] || die "$XT is not an xfstests checkout (no ./check)"
need "$MNEMOFS" "cargo build --release"
if [[ ! -x $XT/ltp/fsstress ]]; then
  make -C "$XT" -j"$(nproc)" >/dev/null || die "building xfstests failed (see its README for the packages it needs)"
fi
# The users xfstests' README asks for.
for u in fsgqa fsgqa2 123456-fsgqa; do
  getent passwd "$u" >/dev/null || useradd -m "$u"
done
getent group fsgqa >/dev/null || groupadd fsgqa

bash "$ROOT/scripts/install-mount-helper.sh" >/dev/null
WORK=$(mktemp -d "$SCRATCH/mnemofs-xfstests.XXXXXX")
TEST_IMG=$WORK/test.img SCRATCH_IMG=$WORK/scratch.img
TEST_MNT=/mnt/mnemofs-xt-test SCRATCH_MNT=/mnt/mnemofs-xt-scratch
done_() {
  umount "$TEST_MNT" "$SCRATCH_MNT" 2>/dev/null || true
  for img in "$TEST_IMG" "$SCRATCH_IMG"; do
    wait_released "$img" 2>/dev/null || true
    [[ -e $img ]] && "$MNEMOFS" fsck "$img" | tail -n 2
  done
  rm -rf "$WORK"
}
trap done_ EXIT
mkdir -p "$TEST_MNT" "$SCRATCH_MNT"
"$MNEMOFS" mkfs "$TEST_IMG" --size 2G >/dev/null
"$MNEMOFS" mkfs "$SCRATCH_IMG" --size 2G >/dev/null

# xfstests compares the type df reports ("fuse.mnemofs") with FSTYP ("fuse"): a df
# that reports mnemofs mounts as "fuse".
cat >"$WORK/df" <<'EOF'
#!/bin/bash
set -o pipefail
/usr/bin/df "$@" | sed -E 's/^([^[:space:]]+[[:space:]]+)fuse\.mnemofs([[:space:]])/\1fuse\2/'
EOF
chmod 755 "$WORK/df"
cat >"$WORK/local.config" <<EOF
export FSTYP=fuse
export FUSE_SUBTYP=.mnemofs
export TEST_DEV=$TEST_IMG
export TEST_DIR=$TEST_MNT
export SCRATCH_DEV=$SCRATCH_IMG
export SCRATCH_MNT=$SCRATCH_MNT
export DF_PROG="$WORK/df -T -P"
EOF
((${#@} > 0)) || set -- -g generic/quick
cd "$XT"
HOST_OPTIONS=$WORK/local.config ./check "$@"
