#!/usr/bin/env bash
# The crash explorer's CI budget: all of seq-1, a seeded sample of seq-2, a seeded
# random run, multi-writer runs (segment and interval locks), and every injected bug
# (each must be caught: exit status 1; bugs of the concurrent append protocol only
# show with several writers, so a bug seq-1 misses is tried on multi).
# Env: CRASH_SEQ2_SAMPLE (seq-2 workloads, default 24), CRASH_RANDOM_STATES
#      (default 20000), CRASH_MULTI_STATES (default 20000), CRASH_SMALL_STATES
#      (fine-log seq-1 and LAWN random, default 25000), CRASH_TEAR_STATES (LAWN seq-1
#      with torn 16-byte stores, per order, default 15000), CRASH_CPUS_STATES (each
#      run on 2-CPU images, default 8000), CRASH_DEVICES_STATES (each sampled run on
#      2-device volumes, default 8000), CRASH_PAGE_STATES (LAWN seq-1 on a version-6
#      image, page-format descriptors, default 10000).
# LAWN descriptors are stored one of two ways, whichever a mount measures cheaper
# (--desc-store nt|cached in the explorer): the LAWN runs cover both. LAWN bugs
# (lawn-*) run with --small-write lawn, once per way.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
need "$MNEMOFS" "cargo build --release"

run() { echo "--- mnemofs $*"; "$MNEMOFS" "$@"; }
run crashtest --workload seq1
run crashtest --workload seq2 --sample "${CRASH_SEQ2_SAMPLE:-24}" --seed 1
run crashtest --workload random --seed 1 --max-states "${CRASH_RANDOM_STATES:-20000}"
run crashtest --workload multi --seed 1 --lock segment --max-states "${CRASH_MULTI_STATES:-20000}"
run crashtest --workload multi --seed 2 --lock interval --max-states "$(( ${CRASH_MULTI_STATES:-20000} / 4 ))"
# Sub-page writes: LAWN alternate writing and the fine-log baseline.
run crashtest --workload seq1 --small-write lawn
run crashtest --workload seq1 --small-write finelog --max-states "${CRASH_SMALL_STATES:-25000}"
run crashtest --workload random --seed 2 --small-write lawn --max-states "${CRASH_SMALL_STATES:-25000}"
run crashtest --workload seq1 --small-write lawn --desc-store cached --max-states "${CRASH_SMALL_STATES:-25000}"
run crashtest --workload random --seed 3 --small-write lawn --desc-store cached \
  --max-states "$(( ${CRASH_SMALL_STATES:-25000} / 2 ))"
# LAWN descriptors must not rely on 16-byte failure atomicity: tear them, both orders,
# each way of storing them.
for order in low-first high-first; do
  for how in nt cached; do
    run crashtest --workload seq1 --small-write lawn --desc-store "$how" --tear-16 "$order" \
      --max-states "$(( ${CRASH_TEAR_STATES:-15000} * 2 / 3 ))"
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
run crashtest --devices 2 --workload seq1
run crashtest --devices 2 --workload random --seed 5 --max-states "$dev_states"
run crashtest --devices 2 --workload multi --seed 5 --lock segment --max-states "$dev_states"
run crashtest --devices 2 --workload seq1 --small-write lawn --sample 12 --seed 5 \
  --max-states "$dev_states"

missed=()
# bug_run ARGS...: the explorer with ARGS, stopping at the first violation; sets rc
# (1: a violation, i.e. the injected bug was caught) and out.
bug_run() {
  rc=0
  out=$("$MNEMOFS" crashtest "$@" --max-violations 1) || rc=$?
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
for bug in $("$MNEMOFS" crashtest --list-bugs | awk '{ print $1 }'); do
  ways=(nt)
  mode=cow
  [[ $bug == lawn-* ]] && mode=lawn && ways=(nt cached)
  for how in "${ways[@]}"; do
    bug_run --workload seq1 --small-write "$mode" --desc-store "$how" --inject-bug "$bug"
    if ((rc == 0)); then
      bug_run --workload multi --inject-bug "$bug" --max-states 30000 --no-recovery-crashes
    fi
    report "$bug ($how)"
  done
  # The LAWN bugs that apply to page-format descriptors, on a version-6 image.
  if [[ $bug == lawn-* && $bug != lawn-sum-unchecked ]]; then
    bug_run --workload seq1 --small-write lawn --lawn-descriptors page --inject-bug "$bug"
    report "$bug (page-format descriptors)"
  fi
done
# The journal and allocator bugs on 2-CPU images too (the workload where each shows
# first; tail-not-max on multi).
for case in "journal-records-unfenced seq1 0" "journal-retired-early seq1 0" \
  "replay-uncommitted seq1 1" "free-list-before-rollback seq1 0" \
  "free-before-commit seq1 15" "data-not-persisted seq1 0" "tail-not-max multi 1"; do
  read -r bug wl only <<<"$case"
  bug_run --cpus 2 --workload "$wl" --only "$only" --inject-bug "$bug" --no-recovery-crashes
  report "$bug (2 CPUs)"
done
# Every bug on a 2-device volume too (seq-1, else multi, or LAWN's random run:
# interleave placement reuses a freed block later than one device does, so a stale
# LAWN descriptor meets its block again there, not in seq-1).
for bug in $("$MNEMOFS" crashtest --list-bugs | awk '{ print $1 }'); do
  mode=cow
  [[ $bug == lawn-* ]] && mode=lawn
  bug_run --devices 2 --workload seq1 --small-write "$mode" --inject-bug "$bug" \
    --no-recovery-crashes
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
echo "crashtest OK"
