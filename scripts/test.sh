#!/usr/bin/env bash
# The mnemofs test suite: the host facts it depends on (at the start, and what a
# default mount chose once the build exists), setup, fmt, the text checks
# (scripts/check-text.sh: no development diary, Markdown links resolve), clippy, build,
# unit/integration tests with the host's choices and again with each choice forced
# both ways (scripts/test-forced.sh), the crash explorer's budget,
# the hang test (mixed mmap/direct/buffered I/O under a watchdog, on the default
# preset, nova and a delayed cluster client), the hostile-image fuzzer (20,000 images, and fsck on
# 1,000), pjdfstest, fsx, and both again on a cluster client mount (pjdfstest
# with delayed commits, fsx with each commit mode, two clients reading each
# other's fsynced files). Stops at the first failing step;
# the last line of output is "N passed, M failed" (counting steps).
# Env: FSX_OPS (fsx operations per configuration, default 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
export FSX_OPS=${FSX_OPS:-20000}

STEPS=(
  "bash scripts/setup.sh"
  "cargo fmt --all -- --check"
  "bash scripts/check-text.sh --self-test"
  "bash scripts/check-text.sh"
  "cargo clippy --all-targets -- -D warnings"
  "cargo build --release"
  "bash scripts/host-facts.sh --mount"
  "cargo test --workspace --release"
  "bash scripts/test-forced.sh a"
  "bash scripts/test-forced.sh b"
  "bash scripts/crashtest.sh"
  "bash scripts/fuzz.sh"
  "bash scripts/pjdfstest.sh"
  "bash scripts/fsx.sh"
  "bash scripts/hang-test.sh"
  "env MNEMOFS_CLUSTER=1 MNEMOFS_COMMIT=delayed bash scripts/pjdfstest.sh"
  "env MNEMOFS_CLUSTER=1 MNEMOFS_COMMIT=sync bash scripts/fsx.sh"
  "env MNEMOFS_CLUSTER=1 MNEMOFS_COMMIT=delayed bash scripts/fsx.sh"
  "bash scripts/cluster-two-clients.sh"
)

bash scripts/host-facts.sh
passed=0 failed=0 n=0 t0=$SECONDS
for step in "${STEPS[@]}"; do
  n=$((n + 1)) start=$SECONDS
  printf '\n==== [%d/%d] %s\n' "$n" "${#STEPS[@]}" "$step"
  # Word splitting of $step is intended: each entry is a plain command line.
  # shellcheck disable=SC2086
  if $step; then
    passed=$((passed + 1))
    printf '==== [%d/%d] OK (%ds): %s\n' "$n" "${#STEPS[@]}" $((SECONDS - start)) "$step"
  else
    failed=$((failed + 1))
    printf '==== [%d/%d] FAILED (%ds): %s\n' "$n" "${#STEPS[@]}" $((SECONDS - start)) "$step"
    break
  fi
done
printf '\n==== total %ds\n' $((SECONDS - t0))
echo "$passed passed, $failed failed"
((failed == 0))
