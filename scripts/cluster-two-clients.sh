#!/usr/bin/env bash
# Two cluster clients on one host (docs/CLUSTER.md): a metadata server and two FUSE
# client mounts of one image, one with synchronous and one with delayed commits.
# Files each client writes and fsyncs are read back, byte for byte, through the
# other; then both unmount, the server stops cleanly and fsck must find the image
# clean. The server runs in a network namespace of its own, reached over a veth
# pair (docs/CLUSTER.md, "Across network namespaces"); on loopback, saying so,
# where `ip netns` is not available.
set -euo pipefail
if ((EUID != 0)); then exec sudo -E bash "$0" "$@"; fi
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
need "$MNEMOFS" "cargo build --release"
WORK=$(mktemp -d "$SCRATCH/mnemofs-2c.XXXXXX")
IMG=$WORK/vol.img A=/tmp/mnemofs-2c-a B=/tmp/mnemofs-2c-b
MDS= NS=
finish2() {
  unmount "$A" || true
  unmount "$B" || true
  [[ -n $MDS ]] && { kill -TERM "$MDS" 2>/dev/null || true; wait "$MDS" 2>/dev/null || true; }
  [[ -n $NS ]] && { ip netns del "$NS" 2>/dev/null || true; }
  rmdir "$A" "$B" 2>/dev/null || true
  rm -rf "$WORK"
}
trap finish2 EXIT
mkdir -p "$A" "$B"
"$MNEMOFS" mkfs "$IMG" --size 512M
port=$((20000 + RANDOM % 20000))
SRV=127.0.0.1 RUN=()
if command -v ip >/dev/null && ip netns add "mnemofs-2c-$$" 2>/dev/null; then
  NS=mnemofs-2c-$$
  # A /30 of 10.64.0.0/10 from the pid; the host end .1, the namespace's .2.
  n=$(($$ % 1048576 * 4)) h=mf2h$$ v=mf2n$$
  net=10.$((64 + n / 65536)).$((n / 256 % 256))
  last=$((n % 256))
  ip link add "$h" type veth peer name "$v"
  ip link set "$v" netns "$NS"
  ip addr add "$net.$((last + 1))/30" dev "$h"
  ip link set "$h" up
  ip netns exec "$NS" ip addr add "$net.$((last + 2))/30" dev "$v"
  ip netns exec "$NS" ip link set "$v" up
  ip netns exec "$NS" ip link set lo up
  SRV=$net.$((last + 2)) RUN=(ip netns exec "$NS")
  echo "server in network namespace $NS at $SRV:$port, over veth $h"
else
  echo "no network namespaces here (needs root and iproute2): server on loopback"
fi
# (`ip netns exec` runs the server in its own place: $! is the server's pid.)
"${RUN[@]}" "$MNEMOFS" mds "$IMG" --listen "$SRV:$port" --lease-ms 1000 >"$WORK/mds.log" 2>&1 &
MDS=$!
for _ in $(seq 50); do grep -qs "served on" "$WORK/mds.log" && break; sleep 0.1; done
"$MNEMOFS" mount --mds "$SRV:$port" --data "$IMG" --commit sync "$A"
"$MNEMOFS" mount --mds "$SRV:$port" --data "$IMG" --commit delayed "$B"
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
