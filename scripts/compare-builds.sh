#!/usr/bin/env bash
# Compare two builds of the mnemofs binary on the in-process benchmark, e.g. to
# check that a refactoring changed no performance. See --help.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/compare-builds.sh BEFORE_BIN AFTER_BIN [OPTIONS] [-- BENCH_OPTIONS...]

Runs `BIN bench WORKLOAD --preset P --duration D --json` with both builds for every
preset x workload, --rounds times, alternating which build goes first (ABBA:
before,after / after,before / ...) so that drift of the machine hits both alike.
Then prints one table per preset: median ops/s of each build, the ratio
after/before, each build's min-max spread over the rounds as a % of its median
(the noise), a verdict: "same" when |ratio - 1| <= the sum of the two spreads
(each median is uncertain by up to its spread, the ratio by up to about their
sum), else "slower" or "faster", and the ratio of median CPU time per op
(cpu_ns_per_op, after/before; not charged while a thread waits for a core).

The exact counters (PM bytes written, flushes, fences per operation) are taken
from one extra run per build with a fixed operation count (--count-ops; a timed
run does a varying number of ops, so its per-op counters shift with the fixed
setup cost). With the same seed they are deterministic (single thread), so a
pure refactoring must show "=" in the counters column; otherwise it shows
before->after for what differs.

Options:
  --presets LIST     comma-separated presets [default: nova,pnova,lawn]
  --workloads LIST   comma-separated workloads, or "all" for every workload of
                     `BEFORE_BIN bench --list` [default: dwom,drbm,dwal,randwrite,
                     randread,mixed,seqread,fileserver,varmail,webproxy,webserver,
                     oltp,smallfiles]
  --rounds N         rounds per preset x workload, >= 3 [default: 5]
  --duration D       measured time per run (`1`, `1.5`, `300ms`) [default: 1]
  --count-ops N      operations of the fixed-size counter run per build; 0 skips
                     it (the counters column then shows "-") [default: 20000]
  --out FILE         every raw run as JSON Lines: the bench's object plus
                     cmp_build (before|after), cmp_bin, cmp_preset,
                     cmp_workload (as requested), cmp_round (0 = counter run),
                     cmp_kind (timed|counters) [default: /tmp/compare-builds.jsonl]
  --strict           exit 3 if any counters differ or any verdict is not "same"
  -h, --help         this help
  -- BENCH_OPTIONS   passed to every `bench` run, e.g. -- --pm-profile optane
                     (with --threads > 1 the counters need not be deterministic)

Exit status: 0 done, 1 a run failed, 2 bad usage, 3 --strict found a difference.
Example:
  scripts/compare-builds.sh /tmp/mnemofs-main target/release/mnemofs \
      --workloads dwom,varmail --rounds 5 -- --pm-profile optane
EOF
}

die_usage() { echo "compare-builds: $*" >&2; exit 2; }
die() { echo "compare-builds: $*" >&2; exit 1; }

PRESETS=nova,pnova,lawn
WORKLOADS=dwom,drbm,dwal,randwrite,randread,mixed,seqread,fileserver,varmail,webproxy,webserver,oltp,smallfiles
ROUNDS=5
DURATION=1
COUNT_OPS=20000
OUT=/tmp/compare-builds.jsonl
STRICT=0
POS=()
EXTRA=()

while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --presets | --workloads | --rounds | --duration | --count-ops | --out)
      (($# >= 2)) || die_usage "$1 needs a value"
      case $1 in
        --presets) PRESETS=$2 ;;
        --workloads) WORKLOADS=$2 ;;
        --rounds) ROUNDS=$2 ;;
        --duration) DURATION=$2 ;;
        --count-ops) COUNT_OPS=$2 ;;
        --out) OUT=$2 ;;
      esac
      shift 2 ;;
    --strict) STRICT=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -*) die_usage "unknown option $1 (see --help)" ;;
    *) POS+=("$1"); shift ;;
  esac
done

((${#POS[@]} == 2)) || die_usage "need exactly BEFORE_BIN and AFTER_BIN (see --help)"
BEFORE=${POS[0]} AFTER=${POS[1]}
for b in "$BEFORE" "$AFTER"; do
  [[ -f $b && -x $b ]] || die_usage "$b is not an executable file"
done
[[ $ROUNDS =~ ^[0-9]+$ ]] && ((ROUNDS >= 3)) || die_usage "--rounds must be an integer >= 3"
[[ $COUNT_OPS =~ ^[0-9]+$ ]] || die_usage "--count-ops must be a non-negative integer"
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?(ms|s)?$ ]] || die_usage "--duration must look like 1, 1.5 or 300ms"
[[ -n $PRESETS ]] || die_usage "--presets is empty"
[[ -n $WORKLOADS ]] || die_usage "--workloads is empty"
command -v python3 >/dev/null || die "python3 is needed for the statistics"

if [[ $WORKLOADS == all ]]; then
  # The workload table of `bench --list`: the lines after the dashes, up to the blank line.
  WORKLOADS=$("$BEFORE" bench --list | awk '/^---/ { t = 1; next } t && NF == 0 { exit } t { print $1 }' | paste -sd, -)
  [[ -n $WORKLOADS ]] || die "could not read the workloads from $BEFORE bench --list"
fi
IFS=, read -r -a PRESET_LIST <<<"$PRESETS"
IFS=, read -r -a WORKLOAD_LIST <<<"$WORKLOADS"

: >"$OUT" || die_usage "cannot write $OUT"
ERR=$(mktemp)
trap 'rm -f "$ERR"' EXIT

# run BUILD BIN ROUND KIND WORKLOAD PRESET ARGS...: one bench run, its JSON line
# tagged with cmp_* fields and appended to $OUT.
run() {
  local build=$1 bin=$2 round=$3 kind=$4 workload=$5 preset=$6 line
  shift 6
  if ! line=$("$bin" bench "$workload" --preset "$preset" "$@" --json ${EXTRA[@]+"${EXTRA[@]}"} 2>"$ERR" | grep -m1 '^{'); then
    cat "$ERR" >&2
    die "run failed: $bin bench $workload --preset $preset $* --json ${EXTRA[*]-}"
  fi
  local binj=${bin//\\/\\\\}
  binj=${binj//\"/\\\"}
  printf '{"cmp_build":"%s","cmp_bin":"%s","cmp_preset":"%s","cmp_workload":"%s","cmp_round":%d,"cmp_kind":"%s",%s\n' \
    "$build" "$binj" "$preset" "$workload" "$round" "$kind" "${line#\{}" >>"$OUT"
}

total=$((${#PRESET_LIST[@]} * ${#WORKLOAD_LIST[@]}))
n=0
echo "before: $BEFORE ($(sha256sum "$BEFORE" | cut -c1-12))" >&2
echo "after:  $AFTER ($(sha256sum "$AFTER" | cut -c1-12))" >&2
for preset in "${PRESET_LIST[@]}"; do
  for workload in "${WORKLOAD_LIST[@]}"; do
    n=$((n + 1))
    printf '[%d/%d] %s %s:' "$n" "$total" "$preset" "$workload" >&2
    if ((COUNT_OPS > 0)); then
      printf ' counters' >&2
      run before "$BEFORE" 0 counters "$workload" "$preset" --ops "$COUNT_OPS"
      run after "$AFTER" 0 counters "$workload" "$preset" --ops "$COUNT_OPS"
    fi
    for ((r = 1; r <= ROUNDS; r++)); do
      printf ' %d' "$r" >&2
      # ABBA: odd rounds before first, even rounds after first.
      if ((r % 2)); then
        run before "$BEFORE" "$r" timed "$workload" "$preset" --duration "$DURATION"
        run after "$AFTER" "$r" timed "$workload" "$preset" --duration "$DURATION"
      else
        run after "$AFTER" "$r" timed "$workload" "$preset" --duration "$DURATION"
        run before "$BEFORE" "$r" timed "$workload" "$preset" --duration "$DURATION"
      fi
    done
    echo >&2
  done
done

set +e
python3 - "$OUT" "$STRICT" <<'PY'
import json, statistics, sys

path, strict = sys.argv[1], sys.argv[2] == "1"
runs = [json.loads(l) for l in open(path) if l.strip()]
keys = []  # (preset, workload) in run order
timed, counters, cpu = {}, {}, {}
for r in runs:
    k = (r["cmp_preset"], r["cmp_workload"])
    if k not in keys:
        keys.append(k)
    if r["cmp_kind"] == "timed":
        timed.setdefault(k, {}).setdefault(r["cmp_build"], []).append(r["ops_per_sec"])
        cpu.setdefault(k, {}).setdefault(r["cmp_build"], []).append(r.get("cpu_ns_per_op", 0.0))
    else:
        counters.setdefault(k, {})[r["cmp_build"]] = r

# Exact totals compared between the fixed-ops runs (those present in the JSON).
EXACT = ["ops", "pm_bytes_written", "pm_nt_bytes_written", "flushes", "fences",
         "user_bytes_written", "user_bytes_read", "pm_modeled_delay_ns"]
SHOWN = [("pm_bytes_written", "B/op"), ("flushes", "flush/op"), ("fences", "fence/op")]

def fmt_ops(x):
    return f"{x / 1e6:.3f}M" if x >= 1e6 else f"{x / 1e3:.1f}K"

def counters_cell(c):
    if not c or "before" not in c or "after" not in c:
        return "-", True
    b, a = c["before"], c["after"]
    diff = [f for f in EXACT if f in b and f in a and b[f] != a[f]]
    if not diff:
        return "=", True
    parts = []
    for f, name in SHOWN:
        pb, pa = b[f] / max(b["ops"], 1), a[f] / max(a["ops"], 1)
        if b[f] != a[f]:
            parts.append(f"{name} {pb:.2f}->{pa:.2f}")
    rest = [f for f in diff if f not in dict(SHOWN)]
    if rest:
        parts.append("also " + ",".join(rest))
    return "; ".join(parts), False

bad = False
presets = []
for p, _ in keys:
    if p not in presets:
        presets.append(p)
hdr = ("workload", "before ops/s", "after ops/s", "after/before", "spread B", "spread A", "verdict", "cpu/op A/B", "counters/op")
for p in presets:
    print(f"\npreset {p}")
    rows = [hdr]
    for (pp, w) in keys:
        if pp != p:
            continue
        t = timed.get((pp, w), {})
        b, a = t.get("before", []), t.get("after", [])
        mb, ma = statistics.median(b), statistics.median(a)
        sb = (max(b) - min(b)) / mb if mb else 0.0
        sa = (max(a) - min(a)) / ma if ma else 0.0
        ratio = ma / mb if mb else float("nan")
        noise = sb + sa
        verdict = "same" if abs(ratio - 1) <= noise else ("slower" if ratio < 1 else "faster")
        c = cpu.get((pp, w), {})
        cb, ca = statistics.median(c.get("before", [0])), statistics.median(c.get("after", [0]))
        cpu_ratio = f"{ca / cb:.3f}" if cb else "-"
        cell, same_counters = counters_cell(counters.get((pp, w)))
        bad |= verdict != "same" or not same_counters
        rows.append((w, fmt_ops(mb), fmt_ops(ma), f"{ratio:.3f}", f"{sb * 100:.1f}%", f"{sa * 100:.1f}%", verdict, cpu_ratio, cell))
    widths = [max(len(r[i]) for r in rows) for i in range(len(hdr))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(widths[j]) if j in (0, 6, 8) else c.rjust(widths[j]) for j, c in enumerate(r)).rstrip())
        if i == 0:
            print("-" * (sum(widths[:-1]) + 2 * (len(widths) - 1) + len(hdr[-1])))
n_timed = sum(1 for r in runs if r["cmp_kind"] == "timed")
print(f"\n{len(runs)} runs ({n_timed} timed, medians over {len(next(iter(timed.values()))['before'])} rounds, ABBA order) in {path}")
print("spread = (max - min) / median over the rounds; verdict 'same' when |after/before - 1| <= spread B + spread A")
print("cpu/op A/B = ratio of median CPU time per op (after/before), less sensitive to waiting for a core than ops/s")
print("counters/op: '=' = identical exact counters (bytes, flushes, fences, ...) in the fixed-ops runs; '-' = not measured")
sys.exit(3 if strict and bad else 0)
PY
