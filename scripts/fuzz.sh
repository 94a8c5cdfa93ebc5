#!/usr/bin/env bash
# The mutation fuzzer for hostile images (crates/crashtest/src/fuzz, `mnemofs fuzz`):
#  1. 20,000 mutated images (seeds 1..20001) through fsck, mount, a walk, a short
#     workload, unmount, fsck and a second mount; every failure line names its seed
#     and the command that replays it (`mnemofs fuzz --only SEED`).
#  2. `mnemofs fsck` (the binary, as users run it) on 1,000 mutated images: never a
#     panic or a signal (exit 0 clean, 1 problems, 2 unusable); every image it calls
#     clean mounts and passes the short workload (`mnemofs fuzz --only`).
# FUZZ_IMAGES / FUZZ_FSCK_IMAGES / FUZZ_SEED override the counts and the first seed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/mnemofs
[[ -x $bin ]] || cargo build --release -p mnemofs-cli
images=${FUZZ_IMAGES:-20000}
fsck_images=${FUZZ_FSCK_IMAGES:-1000}
seed=${FUZZ_SEED:-1}
status=0

"$bin" fuzz --images "$images" --seed "$seed" || status=1

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fseed=$((seed + 1000000))
"$bin" fuzz --write-images "$dir" --images "$fsck_images" --seed "$fseed" >/dev/null
clean=0 problems=0 unusable=0 bad=0
for ((s = fseed; s < fseed + fsck_images; s++)); do
  rc=0
  out=$(timeout 10 "$bin" fsck "$dir/seed-$s.img" 2>&1) || rc=$?
  case $rc in
    0)
      clean=$((clean + 1))
      if ! "$bin" fuzz --only "$s" >"$dir/only.txt"; then
        echo "FAIL fsck: seed $s: fsck clean, but mount/workload fails: $(grep result: "$dir/only.txt")"
        bad=$((bad + 1))
      fi
      ;;
    1) problems=$((problems + 1)) ;;
    2) unusable=$((unusable + 1)) ;;
    *)
      echo "FAIL fsck: seed $s: exit $rc: $(tail -1 <<<"$out") | reproduce: mnemofs fuzz --only $s"
      bad=$((bad + 1))
      ;;
  esac
done
echo "fuzz fsck: $fsck_images images (seeds $fseed..$((fseed + fsck_images))): clean $clean, problems $problems, unusable $unusable; failures $bad"
((bad == 0)) || status=1
exit $status
