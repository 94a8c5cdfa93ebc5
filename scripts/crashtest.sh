#!/usr/bin/env bash
# The crash explorer's CI budget: all of seq-1, a seeded sample of seq-2, a seeded
# random run, multi-writer runs (segment and interval locks), sub-page write modes,
# 2-CPU images and 2-device volumes; then injected bugs, each of which must be caught
# (exit status 1): the LAWN bugs with cached descriptors, and every bug on a 2-device
# volume (crates/crashtest/tests/injected_bugs.rs catches every bug in the other
# configurations). Each run prints its time.
# Env (a deeper run than the suite's: raise them, e.g. CRASH_SEQ2_SAMPLE=48
# CRASH_LAWN_SAMPLE=52 CRASH_DEVICES_SAMPLE=42 CRASH_RANDOM_STATES=40000
# CRASH_MULTI_STATES=40000 CRASH_SMALL_STATES=50000):
#      CRASH_SEQ2_SAMPLE (seq-2 workloads, default 10), CRASH_LAWN_SAMPLE (seq-1
#      workloads under LAWN, default 24 of 52), CRASH_DEVICES_SAMPLE (seq-1 workloads
#      on 2-device volumes, default 16 of 42), CRASH_RANDOM_STATES
#      (default 10000), CRASH_MULTI_STATES (default 12000), CRASH_SMALL_STATES
#      (fine-log seq-1 and LAWN random, default 12500), CRASH_TEAR_STATES (LAWN seq-1
#      with torn 16-byte stores, per order, default 7500), CRASH_CPUS_STATES (each
#      run on 2-CPU images, default 8000), CRASH_DEVICES_STATES (each sampled run on
#      2-device volumes, default 8000), CRASH_PAGE_STATES (LAWN seq-1 on a version-6
#      image, page-format descriptors, default 10000).
# LAWN descriptors are stored one of two ways, whichever a mount measures cheaper
# (--desc-store nt|cached in the explorer): the LAWN runs cover both.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
need "$MNEMOFS" "cargo build --release"

run() {
  local t=$SECONDS
  echo "--- mnemofs $*"
  "$MNEMOFS" "$@"
  echo "--- ($((SECONDS - t)) s)"
}
run crashtest --workload seq1
run crashtest --workload seq2 --sample "${CRASH_SEQ2_SAMPLE:-10}" --seed 1
run crashtest --workload random --seed 1 --max-states "${CRASH_RANDOM_STATES:-10000}"
run crashtest --workload multi --seed 1 --lock segment --max-states "${CRASH_MULTI_STATES:-12000}"
run crashtest --workload multi --seed 2 --lock interval --max-states "$(( ${CRASH_MULTI_STATES:-12000} / 4 ))"
# Sub-page writes: LAWN alternate writing and the fine-log baseline.
run crashtest --workload seq1 --small-write lawn --sample "${CRASH_LAWN_SAMPLE:-24}" --seed 1
run crashtest --workload seq1 --small-write finelog --max-states "${CRASH_SMALL_STATES:-12500}"
run crashtest --workload random --seed 2 --small-write lawn --max-states "${CRASH_SMALL_STATES:-12500}"
run crashtest --workload seq1 --small-write lawn --desc-store cached --max-states "${CRASH_SMALL_STATES:-12500}"
run crashtest --workload random --seed 3 --small-write lawn --desc-store cached \
  --max-states "$(( ${CRASH_SMALL_STATES:-12500} / 2 ))"
# LAWN descriptors must not rely on 16-byte failure atomicity: tear them, both orders,
# each way of storing them.
for order in low-first high-first; do
  for how in nt cached; do
    run crashtest --workload seq1 --small-write lawn --desc-store "$how" --tear-16 "$order" \
      --max-states "$(( ${CRASH_TEAR_STATES:-7500} * 2 / 3 ))"
  done
done
# Images of earlier builds (format version 6) keep page-format LAWN descriptors, and a
# zone write fences its slots before its descriptor there: explore those too.
run crashtest --workload seq1 --small-write lawn --lawn-descriptors page \
  --max-states "${CRASH_PAGE_STATES:-10000}"
# 2-CPU images: per-CPU journals, allocators and inode tables, and LAWN across two
# sub-zones (each traced operation runs pinned to the CPU it is assigned to).
cpus_states=${CRASH_CPUS_STATES:-8000}
run crashtest --cpus 2 --workload seq1 --sample 12 --seed 1 --max-states "$cpus_states"
run crashtest --cpus 2 --workload random --seed 4 --max-states "$cpus_states"
run crashtest --cpus 2 --workload multi --seed 3 --lock segment --max-states "$cpus_states"
run crashtest --cpus 2 --workload seq1 --small-write lawn --sample 12 --seed 2 --max-states "$cpus_states"
run crashtest --cpus 2 --workload seq1 --small-write finelog --sample 12 --seed 3 \
  --max-states "$cpus_states"

# Volumes of 2 devices (512 KiB + 256 KiB, placement interleave: a file's data block
# and its next log page on different devices; the tracer sees global offsets).
dev_states=${CRASH_DEVICES_STATES:-8000}
run crashtest --devices 2 --workload seq1 --sample "${CRASH_DEVICES_SAMPLE:-16}" --seed 5
run crashtest --devices 2 --workload random --seed 5 --max-states "$dev_states"
run crashtest --devices 2 --workload multi --seed 5 --lock segment --max-states "$dev_states"
run crashtest --devices 2 --workload seq1 --small-write lawn --sample 12 --seed 5 \
  --max-states "$dev_states"

missed=()
bug_secs=0
# bug_run ARGS...: the explorer with ARGS, stopping at the first violation; sets rc
# (1: a violation, i.e. the injected bug was caught) and out.
bug_run() {
  rc=0
  local t=$SECONDS
  out=$("$MNEMOFS" crashtest "$@" --max-violations 1) || rc=$?
  bug_secs=$((bug_secs + SECONDS - t))
}
# report LABEL: says whether the last bug_run caught its bug, and records a miss.
report() {
  if ((rc == 1)); then
    echo "caught $1: $(grep -m1 'what:' <<<"$out" | sed 's/^ *what: *//' | cut -c1-120)"
  else
    echo "NOT caught: $1 (exit status $rc)"
    missed+=("$1")
  fi
}
# Every injected bug is caught on the workload where it shows, on page-format
# (version-6) images and on 2-CPU images by crates/crashtest/tests/injected_bugs.rs,
# which the suite runs with the host's choices and with each forced set
# (scripts/test-forced.sh). Here: the LAWN bugs with descriptors stored the other way
# (cached, a 16-byte atomic store and a write-back; the test stores them
# non-temporally), found by a sweep of all of seq-1 rather than told where.
for bug in $("$MNEMOFS" crashtest --list-bugs | awk '$1 ~ /^lawn-/ { print $1 }'); do
  bug_run --workload seq1 --small-write lawn --desc-store cached --inject-bug "$bug"
  report "$bug (cached)"
done
# Every bug on a 2-device volume too (seq-1, else multi, or LAWN's random run:
# interleave placement reuses a freed block later than one device does, so a stale
# LAWN descriptor meets its block again there, not in seq-1).
for bug in $("$MNEMOFS" crashtest --list-bugs | awk '{ print $1 }'); do
  mode=cow
  [[ $bug == lawn-* ]] && mode=lawn
  # The inode-flags bug shows only in the flag workloads (seq-1 39 and 40): those.
  only=()
  [[ $bug == inode-flags-* ]] && only=(--only 39)
  # The xattr bug shows in the large-xattr sequence (seq-1 41), the unnamed-file
  # bug in the unnamed-file sequence (seq-1 42).
  [[ $bug == xattr-parts-* ]] && only=(--only 41)
  [[ $bug == tmpfile-* ]] && only=(--only 42)
  bug_run --devices 2 --workload seq1 --small-write "$mode" --inject-bug "$bug" \
    --no-recovery-crashes "${only[@]}"
  if ((rc == 0)) && [[ $mode == lawn ]]; then
    bug_run --devices 2 --workload random --seed 2 --small-write lawn --inject-bug "$bug" \
      --max-states 30000 --no-recovery-crashes
  elif ((rc == 0)); then
    bug_run --devices 2 --workload multi --inject-bug "$bug" --max-states 30000 \
      --no-recovery-crashes
  fi
  report "$bug (2 devices)"
done
((${#missed[@]} == 0)) || die "injected bugs not caught: ${missed[*]}"
echo "injected bugs: ${bug_secs} s"
echo "crashtest OK"
