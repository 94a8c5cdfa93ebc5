#!/usr/bin/env bash
# Install what building and testing mnemofs needs on Debian/Ubuntu (idempotent):
#   - fuse3 (fusermount3) from apt, when missing
#   - iproute2 (ip netns) from apt, when missing and root (the cluster tests'
#     network namespaces; without root they run on loopback)
#   - the mount(8) helper /sbin/mount.fuse.mnemofs (scripts/install-mount-helper.sh)
#   - rustfmt and clippy rustup components, when missing
#   - man-db from apt, when man is missing; the release build (cargo build --release);
#     then, as root, its man pages and shell completions, generated from the binary
#     (scripts/install-man-pages.sh: man mnemofs-mount, man mnemofs-bench-compare, ...;
#     skipped with --fuse-only)
#   - pjdfstest 0.2.2 and fsx 0.3.2 into .tools/<name>/bin (skipped with --fuse-only)
#   - with --bench only: fio and bindfs from apt, for `mnemofs bench peers` (benchmarks
#     only; no test needs them)
# Usage: scripts/setup.sh [--fuse-only | --bench]
set -euo pipefail
cd "$(dirname "$0")/.."

FUSE_ONLY=false
BENCH=false
case ${1:-} in
  --fuse-only) FUSE_ONLY=true ;;
  --bench) BENCH=true ;;
  "") ;;
  *) echo "usage: $0 [--fuse-only | --bench]" >&2; exit 2 ;;
esac
SUDO=()
((EUID == 0)) || SUDO=(sudo)

if ! command -v fusermount3 >/dev/null; then
  echo "setup: installing fuse3"
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends fuse3
fi
# `ip netns`, for the cluster tests that put the server in a network namespace.
if ((EUID == 0)) && ! command -v ip >/dev/null; then
  echo "setup: installing iproute2"
  apt-get update -q
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2
fi
[[ -c /dev/fuse ]] || echo "setup: warning: /dev/fuse is missing (containers need --device /dev/fuse)" >&2

# The mount(8) helper, so `mount -t fuse.mnemofs IMAGE DIR` and fstab lines work.
if ((EUID == 0)); then
  bash scripts/install-mount-helper.sh
else
  echo "setup: not root: run 'sudo bash scripts/install-mount-helper.sh' for mount -t fuse.mnemofs" >&2
fi

if $FUSE_ONLY; then exit 0; fi

if $BENCH; then
  # The kernel peers of `mnemofs bench peers`: fio drives them, bindfs is the FUSE
  # baseline; mkfs.ext4 (e2fsprogs) and losetup (mount) are on Debian already.
  missing=()
  command -v fio >/dev/null || missing+=(fio)
  command -v bindfs >/dev/null || missing+=(bindfs)
  command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]} (benchmarks only)"
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
  exit 0
fi

for comp in rustfmt clippy; do
  if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
    echo "setup: installing rustup component $comp"
    rustup component add "$comp"
  fi
done

# man(1) for the pages installed below (a minimal Debian has none).
if ! command -v man >/dev/null; then
  echo "setup: installing man-db"
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends man-db
fi
# The release build, then its man pages and completions (generated from the binary).
cargo build --release
if ((EUID == 0)); then
  bash scripts/install-man-pages.sh
else
  echo "setup: not root: run 'sudo bash scripts/install-man-pages.sh' for the man pages and completions" >&2
fi

# install_tool NAME VERSION: cargo install NAME@VERSION into .tools/NAME.
install_tool() {
  local bin=.tools/$1/bin/$1
  if [[ -x $bin ]] && [[ $("$bin" --version) == "$1 $2" ]]; then
    echo "setup: $1 $2 already installed ($bin)"
    return
  fi
  echo "setup: installing $1 $2 into .tools/$1"
  cargo install --locked --quiet --version "$2" --root ".tools/$1" "$1"
}
install_tool pjdfstest 0.2.2
install_tool fsx 0.3.2
