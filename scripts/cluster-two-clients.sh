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
MDS= NS= H=
# Deletes the namespace (its end of the pair goes with it) and the host end.
netns_down() {
  if [[ -n $NS ]]; then ip netns del "$NS" 2>/dev/null || true; fi
  if [[ -n $H ]]; then ip link del "$H" 2>/dev/null || true; fi
  NS= H=
}
finish2() {
  unmount "$A" || true
  unmount "$B" || true
  [[ -n $MDS ]] && { kill -TERM "$MDS" 2>/dev/null || true; wait "$MDS" 2>/dev/null || true; }
  netns_down
  rmdir "$A" "$B" 2>/dev/null || true
  rm -rf "$WORK"
}
trap finish2 EXIT
mkdir -p "$A" "$B"
"$MNEMOFS" mkfs "$IMG" --size 512M
port=$((20000 + RANDOM % 20000))
SRV=127.0.0.1 RUN=()
# The server's namespace and a veth pair to it, on a /30 of 198.19.0.0/16 (the
# RFC 2544 benchmark range; the Rust tests use 198.18.0.0/16) with no route yet,
# from the pid on; sets SRV and RUN. Fails, leaving nothing behind, if any step does.
netns_up() {
  command -v ip >/dev/null || return 1
  local name=mnemofs-2c-$$ v=mf2n$$ i n net
  ip netns del "$name" 2>/dev/null || true # left by a killed run of this pid
  ip netns add "$name" 2>/dev/null || return 1
  NS=$name H=mf2h$$
  for ((i = 0; i < 16384; i++)); do
    n=$(((($$ + i) % 16384) * 4))
    net=198.19.$((n / 256)).$((n % 256))
    [[ -z $(ip -4 route show "$net/30") ]] && break
  done
  local base=198.19.$((n / 256)) last=$((n % 256))
  ip link add "$H" type veth peer name "$v" &&
    ip link set "$v" netns "$NS" &&
    ip addr add "$base.$((last + 1))/30" dev "$H" &&
    ip link set "$H" up &&
    ip netns exec "$NS" ip addr add "$base.$((last + 2))/30" dev "$v" &&
    ip netns exec "$NS" ip link set "$v" up &&
    ip netns exec "$NS" ip link set lo up || { netns_down; return 1; }
  SRV=$base.$((last + 2)) RUN=(ip netns exec "$NS")
}
if netns_up; then
  echo "server in network namespace $NS at $SRV:$port, over veth $H"
else
  echo "no network namespace could be made (needs root, iproute2 and CAP_SYS_ADMIN): server on loopback"
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
