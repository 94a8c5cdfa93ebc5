#!/usr/bin/env bash
# Run the pjdfstest POSIX conformance suite (as root) on a fresh mnemofs mount.
# Usage: scripts/pjdfstest.sh [MIN_PASS [PATTERN...]]
#   MIN_PASS  fail if fewer tests pass (default: $PJDFSTEST_MIN_PASS or 383)
#   PATTERN   only run tests whose name contains PATTERN (e.g. rename:: open::)
set -euo pipefail
if ((EUID != 0)); then exec sudo -E bash "$0" "$@"; fi
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

MIN_PASS=${1:-${PJDFSTEST_MIN_PASS:-383}}
shift || true
PJD=$ROOT/.tools/pjdfstest/bin/pjdfstest
IMG=$SCRATCH/mnemofs-pjd.img
MNT=/tmp/mnemofs-pjd
need "$PJD" scripts/setup.sh
need "$MNEMOFS" "cargo build --release"
# The EROFS tests run `mount -o remount,ro`: the helper runs this build.
export MNEMOFS_BIN=$MNEMOFS
for u in nobody:nogroup daemon:daemon; do
  if ! getent passwd "${u%:*}" >/dev/null || ! getent group "${u#*:}" >/dev/null; then
    die "user/group $u (scripts/pjdfstest.toml [dummy_auth]) does not exist"
  fi
done

# WORK holds the server log, the pjdfstest log and the secondary fs.
WORK=$(mktemp -d "$SCRATCH/mnemofs-pjd.XXXXXX")
trap 'cleanup "$MNT" "$IMG" "$WORK"' EXIT
mkdir -m 755 "$WORK/secondary"
mount_fresh "$IMG" "$MNT" "$WORK/server.log"

echo "--- pjdfstest -c scripts/pjdfstest.toml -p $MNT -s $WORK/secondary $*"
rc=0
RUST_BACKTRACE=0 RUST_LIB_BACKTRACE=0 "$PJD" -c "$ROOT/scripts/pjdfstest.toml" -p "$MNT" -s "$WORK/secondary" "$@" |
  tee "$WORK/pjdfstest.log" || rc=$?
if (($# == 0)); then
  # The EROFS tests (`mount -o remount,ro` and back) on their own: in the whole
  # run an earlier test leaves a file open, and the remount is refused (EBUSY) on
  # any file system (tmpfs too).
  sed 's/^allow_remount = false$/allow_remount = true/' "$ROOT/scripts/pjdfstest.toml" >"$WORK/remount.toml"
  echo "--- pjdfstest -c (allow_remount = true) -p $MNT erofs"
  RUST_BACKTRACE=0 RUST_LIB_BACKTRACE=0 "$PJD" -c "$WORK/remount.toml" -p "$MNT" -s "$WORK/secondary" erofs |
    tee "$WORK/pjdfstest-erofs.log" || rc=$?
  e_summary=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/pjdfstest-erofs.log" | grep '^Summary:' || true)
  [[ $e_summary =~ ([0-9]+)\ failed,\ ([0-9]+)\ skipped,\ ([0-9]+)\ passed ]] ||
    die "pjdfstest (erofs) printed no summary"
  ((BASH_REMATCH[1] == 0 && BASH_REMATCH[3] > 0)) || die "pjdfstest's EROFS tests failed"
  echo "--- pjdfstest erofs: ${BASH_REMATCH[3]} passed, 0 failed"
fi
finish "$MNT" "$IMG" "$WORK/server.log" || rc=1

summary=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/pjdfstest.log" | grep '^Summary:' || true)
re='([0-9]+) failed, ([0-9]+) skipped, ([0-9]+) passed'
[[ $summary =~ $re ]] || die "pjdfstest printed no summary (exit status $rc)"
failed=${BASH_REMATCH[1]} skipped=${BASH_REMATCH[2]} passed=${BASH_REMATCH[3]}

echo "--- pjdfstest: $passed passed, $failed failed, $skipped skipped (minimum passing: $MIN_PASS)"
if ((failed > 0)); then
  echo "failed tests:"
  sed 's/\x1b\[[0-9;]*m//g' "$WORK/pjdfstest.log" | awk '$NF == "FAILED" || $NF == "UNEXPECTEDLY" { print "  " $1 }'
fi
((passed >= MIN_PASS)) || die "only $passed tests passed, expected at least $MIN_PASS"
((failed == 0 && rc == 0)) || die "pjdfstest failed"
echo "pjdfstest OK"
