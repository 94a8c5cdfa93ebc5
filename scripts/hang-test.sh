#!/usr/bin/env bash
# The hang test: mixed mmap, direct and buffered I/O on shared files (the mix of
# xfstests generic/095: scripts/hang/mixed-io.fio), then every engine writing and
# verifying a file of its own (scripts/hang/verify.fio), then the family's other
# stress tests at once (scripts/hang/stress.py: mmap writers against truncate,
# msync under O_DIRECT writers, fsync of a mapped file, splice and copy_file_range,
# fork with a shared writable mapping; each checks its own data), on a fresh mount of each
# configuration: the default preset, --preset nova, and a cluster client with
# delayed commits. Each phase runs under a watchdog: if it has not finished within
# HANG_BOUND seconds, the step fails after printing the daemon's threads (name,
# wait channel, kernel stack) and every blocked task's kernel stack, then aborts the FUSE connection and unmounts lazily, so a hang never
# hangs the suite. After each round the image is unmounted and fsck'd.
#
# Usage: scripts/hang-test.sh [CONFIG...]   (default: default nova cluster-delayed)
# Env:   HANG_ROUNDS (rounds per configuration, default 1), HANG_RUNTIME (seconds
#        of the mix, default 5), HANG_BOUND (watchdog, default 120)
# Needs root (the kernel stacks, the connection's abort file) and fio (installed
# from apt when missing).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

ROUNDS=${HANG_ROUNDS:-1}
RUNTIME=${HANG_RUNTIME:-5}
BOUND=${HANG_BOUND:-120}
CONFIGS=("$@")
((${#CONFIGS[@]})) || CONFIGS=(default nova cluster-delayed)
need "$MNEMOFS" "cargo build --release"
((EUID == 0)) || die "the hang test needs root (kernel stacks, /sys/fs/fuse/connections)"
if ! command -v fio >/dev/null; then
  echo "hang-test: installing fio"
  apt-get update -q
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends fio
fi
mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections

WORK=$(mktemp -d "$SCRATCH/mnemofs-hang.XXXXXX")
MNT=$WORK/mnt
IMG=$WORK/img
trap 'cleanup "$MNT" "$IMG" "$WORK"' EXIT

# The FUSE connection of mount point $1 (its device's minor number), read from
# mountinfo: a stat of a wedged mount would hang.
connection() {
  awk -v m="$1" '$5 == m { split($3, d, ":"); print d[2]; exit }' /proc/self/mountinfo
}

# Print what every party waits for, then free the mount: abort the connection
# (every request fails with ENOTCONN, every waiting process wakes), unmount lazily.
report_and_abort() {
  local pid=$SERVER_PID conn
  conn=$(connection "$MNT")
  echo "==== hang: fio did not finish within $BOUND s; connection ${conn:-?} has $(cat "/sys/fs/fuse/connections/$conn/waiting" 2>/dev/null || echo ?) requests waiting"
  for t in /proc/"$pid"/task/*; do
    echo "---- daemon thread $(cat "$t/comm" 2>/dev/null) ($(basename "$t")): $(cat "$t/wchan" 2>/dev/null)"
    cat "$t/stack" 2>/dev/null || true
  done
  # (No debugger: attaching one to the daemon of a wedged mount can hang too.)
  echo "---- blocked tasks (state D)"
  for p in /proc/[0-9]*; do
    [[ $(awk '{ print $3 }' "$p/stat" 2>/dev/null) == D ]] || continue
    echo "-- $(cat "$p/comm" 2>/dev/null) ($(basename "$p")): $(cat "$p/wchan" 2>/dev/null)"
    cat "$p/stack" 2>/dev/null || true
  done
  [[ -n $conn ]] && echo 1 >"/sys/fs/fuse/connections/$conn/abort" 2>/dev/null || true
  umount -l "$MNT" 2>/dev/null || true
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  [[ -n $MDS_PID ]] && kill -KILL "$MDS_PID" 2>/dev/null || true
  SERVER_PID='' MDS_PID=''
}

# watched NAME CMD...: CMD (in the mount, output to $WORK/NAME.out) under the
# watchdog; 0, or 1 on a hang or a failure of CMD.
watched() {
  local name=$1 out=$WORK/$1.out start=$SECONDS
  shift
  (cd "$MNT" && exec "$@" >"$out" 2>&1) &
  local job=$!
  while kill -0 "$job" 2>/dev/null; do
    if ((SECONDS - start >= BOUND)); then
      report_and_abort
      kill -KILL "$job" 2>/dev/null || true
      pkill -KILL -f "$ROOT/scripts/hang/" 2>/dev/null || true
      return 1
    fi
    sleep 0.5
  done
  if ! wait "$job"; then
    echo "==== $name failed:"
    grep -E 'err=|verify|error|differs|worker' "$out" | head -20
    return 1
  fi
  local what
  what=$(grep -E '^stress:' "$out" || echo "$(grep -cE 'err= 0' "$out") fio jobs without error")
  echo "$name: finished in $((SECONDS - start)) s: ${what#stress: }"
}

# The round's three phases: the mix, the verifying pass, the other stress tests.
phases() {
  MNT=$MNT RUNTIME=$RUNTIME watched mixed-io fio "$ROOT/scripts/hang/mixed-io.fio" &&
    MNT=$MNT watched verify fio "$ROOT/scripts/hang/verify.fio" &&
    watched stress python3 "$ROOT/scripts/hang/stress.py" "$MNT" "$RUNTIME"
}

failed=0
for cfg in "${CONFIGS[@]}"; do
  case $cfg in
    default) export MNEMOFS_CLUSTER=0 MNEMOFS_MOUNT_ARGS="" ;;
    nova) export MNEMOFS_CLUSTER=0 MNEMOFS_MOUNT_ARGS="--preset nova" ;;
    cluster-delayed) export MNEMOFS_CLUSTER=1 MNEMOFS_COMMIT=delayed MNEMOFS_MOUNT_ARGS="" ;;
    *) die "unknown configuration $cfg (default, nova, cluster-delayed)" ;;
  esac
  CLUSTER=$MNEMOFS_CLUSTER
  read -ra MOUNT_ARGS <<<"$MNEMOFS_MOUNT_ARGS"
  for round in $(seq "$ROUNDS"); do
    echo "--- hang test $cfg, round $round of $ROUNDS"
    mount_fresh "$IMG" "$MNT" "$WORK/server.log" >/dev/null
    if phases; then
      finish "$MNT" "$IMG" "$WORK/server.log" >"$WORK/finish.out" 2>&1 || {
        cat "$WORK/finish.out"
        failed=1
        break 2
      }
      grep -q ': clean' "$WORK/finish.out" || { cat "$WORK/finish.out"; failed=1; break 2; }
    else
      [[ -n $SERVER_PID ]] && stop_server "$MNT" || true
      echo "==== hang test $cfg FAILED in round $round; server log:"
      tail -n 20 "$WORK/server.log"
      failed=1
      break 2
    fi
  done
  echo "hang test $cfg: $ROUNDS rounds, every one finished, verified and fsck clean"
done
exit "$failed"
