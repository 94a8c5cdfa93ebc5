# shellcheck shell=bash
# Helpers shared by pjdfstest.sh and fsx.sh: serve a fresh mnemofs image in
# the background, then unmount it, check the server's exit status and fsck it.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MNEMOFS=${MNEMOFS:-$ROOT/target/release/mnemofs}
IMAGE_MB=${IMAGE_MB:-256}
# Scratch space for test images and logs: $MNEMOFS_SCRATCH when set
# (scripts/test-forced.sh), else /dev/shm (RAM, like PM) when it has room (Docker's
# default /dev/shm is only 64 MiB), else $TMPDIR or /tmp.
SCRATCH=${MNEMOFS_SCRATCH:-/dev/shm}
if [[ -z ${MNEMOFS_SCRATCH:-} ]] &&
  (($(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }' || echo 0) < 2 * IMAGE_MB)); then
  # shellcheck disable=SC2034 # used by the scripts that source this file
  SCRATCH=${TMPDIR:-/tmp}
fi
SERVER_PID=
# MNEMOFS_CLUSTER=1: the mount is a cluster client (`mount --mds`) of a metadata
# server (`mnemofs mds`) of the image, both on this host (docs/CLUSTER.md), with
# MNEMOFS_COMMIT=sync (default) or delayed commits.
CLUSTER=${MNEMOFS_CLUSTER:-0}
# MNEMOFS_MOUNT_ARGS: more `mnemofs mount` flags, e.g. "--preset nova".
read -ra MOUNT_ARGS <<<"${MNEMOFS_MOUNT_ARGS:-}"
MDS_PID=

die() { echo "error: $*" >&2; exit 1; }

# need FILE HINT: fail unless FILE is executable.
need() { [[ -x $1 ]] || die "$1 not found; run: $2"; }

is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/self/mounts; }

# unmount MNT if mounted (also clears a stale "transport not connected" mount).
unmount() {
  is_mounted "$1" || return 0
  fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || umount -l "$1"
}

# wait_released FILE: wait (up to 10 s) until no process maps or opens FILE,
# e.g. a daemonized server that is still shutting down after an unmount.
wait_released() {
  for _ in $(seq 100); do
    grep -qsF "$1" /proc/[0-9]*/maps ||
      [[ -n $(find /proc/[0-9]*/fd -lname "$1" -print -quit 2>/dev/null) ]] || return 0
    sleep 0.1
  done
  echo "warning: $1 is still in use" >&2
}

# mount_fresh IMG MNT LOG: mkfs IMG and serve it at MNT (server output -> LOG).
mount_fresh() {
  local img=$1 mnt=$2 log=$3
  unmount "$mnt"
  mkdir -p "$mnt"
  rm -f "$img"
  "$MNEMOFS" mkfs "$img" --size "${IMAGE_MB}M"
  if ((CLUSTER)); then
    local port=$((20000 + RANDOM % 20000))
    "$MNEMOFS" mds "$img" --listen "127.0.0.1:$port" >"$log.mds" 2>&1 &
    MDS_PID=$!
    for _ in $(seq 50); do
      grep -q "served on" "$log.mds" 2>/dev/null && break
      kill -0 "$MDS_PID" 2>/dev/null || { cat "$log.mds" >&2; return 1; }
      sleep 0.1
    done
    "$MNEMOFS" mount --mds "127.0.0.1:$port" --data "$img" --commit "${MNEMOFS_COMMIT:-sync}" "${MOUNT_ARGS[@]}" "$mnt" --foreground >"$log" 2>&1 &
  else
    "$MNEMOFS" mount "$img" "$mnt" --foreground "${MOUNT_ARGS[@]}" >"$log" 2>&1 &
  fi
  SERVER_PID=$!
  for _ in $(seq 100); do
    is_mounted "$mnt" && { echo "mounted $img at $mnt (server pid $SERVER_PID)"; return 0; }
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "error: mount of $img at $mnt failed; server log:" >&2
  cat "$log" >&2
  return 1
}

# gone PID TENTHS: wait up to TENTHS/10 s for PID to exit.
gone() {
  for _ in $(seq "$2"); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  ! kill -0 "$1" 2>/dev/null
}

# stop_server MNT: unmount MNT, wait (up to 30 s) for our server to exit and
# return its exit status.
stop_server() {
  local rc=0
  unmount "$1" || true
  [[ -n $SERVER_PID ]] || return 0
  if ! gone "$SERVER_PID" 300; then
    echo "error: server $SERVER_PID still running after unmount; killing it" >&2
    kill "$SERVER_PID" # it unmounts on SIGTERM
    gone "$SERVER_PID" 100 || kill -KILL "$SERVER_PID"
  fi
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=
  if [[ -n $MDS_PID ]]; then
    # The metadata server stops on SIGTERM (a script's background job ignores
    # SIGINT): its sessions end and the volume is unmounted cleanly.
    kill -TERM "$MDS_PID" 2>/dev/null || true
    gone "$MDS_PID" 300 || kill -KILL "$MDS_PID"
    wait "$MDS_PID" || rc=$?
    MDS_PID=
  fi
  return "$rc"
}

# finish MNT IMG LOG: stop the server and fsck the image; fails if either does.
finish() {
  local rc=0
  stop_server "$1" || rc=$?
  if ((rc != 0)); then
    echo "error: mnemofs server exited with status $rc; last lines of its log:" >&2
    tail -n 30 "$3" >&2
    return 1
  fi
  echo "--- mnemofs fsck $2"
  "$MNEMOFS" fsck "$2"
}

# cleanup MNT IMG DIR: for `trap ... EXIT`; never fails.
cleanup() {
  stop_server "$1" >/dev/null 2>&1 || true
  rmdir "$1" 2>/dev/null || true
  # (Not into a mount point still mounted: an unmount that failed leaves it.)
  rm -rf --one-file-system "$2" "$3"
}
