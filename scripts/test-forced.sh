#!/usr/bin/env bash
# The tests of the crates that run by the choices the host makes for mnemofs, with every
# choice forced one way or the other (crates/pm/src/host.rs), so that one host runs
# the paths another host would pick. The suite's plain `cargo test` step runs the host's own choices.
#
#   a: descriptors non-temporal, clflushopt (clflush where the CPU lacks it), no AVX
#      (16-byte stores by cmpxchg16b), the monotonic clock, 1 CPU (and one test
#      thread), no huge-page advice, scratch images on a tmpfs mounted huge=never
#      (4 KiB pages)
#   b: descriptors cached and written back, clflush, AVX where the CPU has it, the
#      time-stamp counter where invariant, 64 CPUs, huge pages advised, scratch
#      images on a tmpfs mounted huge=always (2 MiB pages)
#
# Usage: scripts/test-forced.sh a|b [cargo test arguments...]
# The tmpfs needs root; without it the images stay in /dev/shm (said so).
set -euo pipefail
cd "$(dirname "$0")/.."

way=${1:-}
shift || true
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2 || true)
has() { [[ " $flags " == *" $1 "* ]]; }

case $way in
  a)
    flush=clflush
    has clflushopt && flush=clflushopt
    # One CPU for the engine, and one test thread per test binary, as the harness
    # runs on a one-CPU host (it then prints each test's name before the test runs).
    vars=(MNEMOFS_DESC_STORE=nt "MNEMOFS_FLUSH=$flush" MNEMOFS_CLOCK=monotonic
      MNEMOFS_CPUS=1 MNEMOFS_HUGE_PAGES=off RUST_TEST_THREADS=1)
    # Off only where cmpxchg16b can take the 16-byte stores (every x86-64 CPU since
    # 2008 has it).
    has cx16 && vars+=(MNEMOFS_AVX=off)
    huge=never
    ;;
  b)
    vars=(MNEMOFS_DESC_STORE=cached MNEMOFS_FLUSH=clflush MNEMOFS_CPUS=64)
    huge=always
    ;;
  *)
    echo "usage: $0 a|b [cargo test arguments...]" >&2
    exit 2
    ;;
esac

scratch=$(mktemp -d /tmp/mnemofs-forced.XXXXXX)
cleanup() {
  umount "$scratch" 2>/dev/null || umount -l "$scratch" 2>/dev/null || true
  rmdir "$scratch" 2>/dev/null || true
}
trap cleanup EXIT
if ((EUID == 0)) && mount -t tmpfs -o "size=8g,huge=$huge" mnemofs-forced "$scratch" 2>/dev/null; then
  vars+=("MNEMOFS_SCRATCH=$scratch")
  echo "forced $way: scratch images on a tmpfs mounted huge=$huge"
else
  echo "forced $way: cannot mount a tmpfs here (not root?): scratch images stay in /dev/shm"
fi
echo "forced $way: ${vars[*]}"
env "${vars[@]}" bash scripts/host-facts.sh --mount
# The crates whose code runs by the host choices: the PM layer, the engine, the crash
# explorer (its traces come from the engine's stores) and the FUSE frontend. The
# cluster and benchmark crates add no host detection of their own and reach PM
# through the same layer; their tests run once, with the host's choices, in the
# suite's `cargo test --workspace` step.
env "${vars[@]}" cargo test --release -p pm -p mnemofs -p crashtest -p mnemofs-fuse \
  -p mnemofs-cli "$@"
