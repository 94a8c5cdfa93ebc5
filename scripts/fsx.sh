#!/usr/bin/env bash
# Run fsx (random file I/O checked against an in-memory model) on a fresh
# mnemofs mount, in the four configurations scripts/fsx/*.toml.
# Usage: scripts/fsx.sh [CONFIG...]   (default: default closeopen mmap falloc)
# Env:   FSX_OPS (operations per run, default 20000), FSX_SEED (default 1),
#        FSX_ARGS (extra fsx flags, e.g. "-vv" to log every operation)
# On failure the expected (.fsxgood) and actual (.fsxbad) file contents are
# left in target/fsx-artifacts/.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

OPS=${FSX_OPS:-20000}
SEED=${FSX_SEED:-1}
read -ra EXTRA <<<"${FSX_ARGS:-}"
CONFIGS=("$@")
((${#CONFIGS[@]})) || CONFIGS=(default closeopen mmap falloc)
FSX=$ROOT/.tools/fsx/bin/fsx
IMG=$SCRATCH/mnemofs-fsx.img
MNT=/tmp/mnemofs-fsx
ART=$ROOT/target/fsx-artifacts
need "$FSX" scripts/setup.sh
need "$MNEMOFS" "cargo build --release"

WORK=$(mktemp -d "$SCRATCH/mnemofs-fsx.XXXXXX")
trap 'cleanup "$MNT" "$IMG" "$WORK"' EXIT
rm -rf "$ART" && mkdir -p "$ART"
mount_fresh "$IMG" "$MNT" "$WORK/server.log"

failed=()
for cfg in "${CONFIGS[@]}"; do
  echo "--- fsx $cfg: fsx -f scripts/fsx/$cfg.toml -N $OPS -S $SEED $MNT/fsx-$cfg"
  start=$SECONDS
  # Exit status 1 on a data/size mismatch ("miscompare", "Size error"), 101
  # if a syscall fails (Rust panic); success prints "All operations completed A-OK!".
  if "$FSX" -f "$ROOT/scripts/fsx/$cfg.toml" -N "$OPS" -S "$SEED" -P "$ART" "${EXTRA[@]}" "$MNT/fsx-$cfg"; then
    echo "fsx $cfg: OK ($((SECONDS - start)) s)"
  else
    echo "fsx $cfg: FAILED (exit status $?); replay with the same -S $SEED, FSX_ARGS=-vv logs every op"
    cp "$MNT/fsx-$cfg" "$ART/fsx-$cfg.fsxbad" 2>/dev/null || true
    failed+=("$cfg")
  fi
done
finish "$MNT" "$IMG" "$WORK/server.log" || failed+=(server/fsck)

((${#failed[@]} == 0)) || die "fsx failed: ${failed[*]} (artifacts: $ART)"
rmdir "$ART"
echo "fsx OK: ${CONFIGS[*]} ($OPS ops each, seed $SEED)"
