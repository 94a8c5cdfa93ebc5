#!/usr/bin/env bash
# The host facts the test suite depends on, so that a failure report says where it
# ran. With no argument: the CPU (model, count, the instructions the pm layer picks
# from), huge pages, /dev/shm, NUMA nodes, the kernel, and the MNEMOFS_* variables
# that force a host choice (crates/pm/src/host.rs). With --mount (needs the release
# build and FUSE): also mounts a fresh default mnemofs and prints what that mount
# chose: the host choices, the page size of its mapping, how LAWN descriptors are
# stored.
set -euo pipefail
cd "$(dirname "$0")/.."

flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2 || true)
has() { [[ " $flags " == *" $1 "* ]] && echo "$1" || echo "no-$1"; }
model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//' || true)
echo "host: ${model:-unknown CPU} ($(uname -m)), $(nproc) CPUs usable of $(nproc --all)"
echo "host: $(has clwb) $(has clflushopt) $(has avx) $(has cx16) $(has constant_tsc) $(has nonstop_tsc)"
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "not available")
shm=$(awk '$2 == "/dev/shm" { print $4 }' /proc/mounts | head -1)
shm_free=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 " MiB free" }' || true)
echo "host: THP $thp; /dev/shm ${shm:-not mounted} (${shm_free:-?})"
nodes=$( (find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' 2>/dev/null || true) | wc -l)
echo "host: $nodes NUMA node(s); kernel $(uname -r)"
forced=$(env | grep -E '^MNEMOFS_(FLUSH|AVX|DESC_STORE|HUGE_PAGES|CLOCK|CPUS)=' | sort | paste -sd" " || true)
echo "host: forced by the environment: ${forced:-nothing}"

[[ ${1:-} == --mount ]] || exit 0

# shellcheck source=scripts/lib.sh
source scripts/lib.sh
need "$MNEMOFS" "cargo build --release"
IMAGE_MB=64
dir=$(mktemp -d "$SCRATCH/mnemofs-host.XXXXXX")
trap 'unmount "$dir/mnt" || true; rm -rf "$dir"' EXIT
mount_fresh "$dir/img" "$dir/mnt" "$dir/log" >/dev/null
"$MNEMOFS" stat "$dir/mnt" | grep -E '^  (host|mapping|modes|LAWN zone) ' | sed 's/^  /mount: /'
stop_server "$dir/mnt"
