#!/usr/bin/env bash
# Text checks over the repository's files (cheap; an early step of scripts/test.sh).
# Fails, naming FILE:LINE for each finding, when
#   (a) the word session followed by a number appears in any file, as in a
#       development diary (a numbered sitting that "measured" something, with its
#       date and build). The cluster protocol's client sessions are the exception:
#       in crates/cluster/ and docs/CLUSTER.md a line may number a client's session,
#       but not in the diary's sense (a possessive, a date in parentheses, "measured
#       in" it);
#   (b) a relative Markdown link in a *.md file ([text](path), [text](path#anchor),
#       ![alt](path), [ref]: path) does not resolve to a file or directory of the
#       repository, relative to that file (a leading / is the repository's root);
#       links with a scheme (https:, mailto:, ...) and pure #anchors are not checked;
#   (c) such a link points outside the repository (e.g. ../shared/...).
# The files are those git lists in ROOT (tracked, and new ones not ignored); where
# ROOT is not a git checkout, every file under it but target/, .tools/ and .git/. A
# link must name one of them (or a directory holding one): a file that exists only
# here, ignored, is not in a clone.
# Usage: scripts/check-text.sh [ROOT]    (default: this checkout)
#        scripts/check-text.sh --self-test
# Exit: 0 clean, 1 findings, 2 usage.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
self="$here/$(basename "$0")"

# The diary's sense (a), also where the protocol's is allowed.
DIARY='sessions? [0-9]+('"'"'s| ?\(|,| (measured|re-?measured|found|tried|showed|ran)\b)|(measured|re-?measured|ran|tried|since|until|before|after|in) (in )?sessions? [0-9]+\b'

self_test() {
  local t out rc
  t=$(mktemp -d)
  trap 'rm -rf "$t"' RETURN
  # The word the check looks for, spelled so that this file does not contain it.
  local word=sess
  word+=ion
  mkdir -p "$t/repo/docs" "$t/repo/crates/cluster/src" "$t/shared"
  touch "$t/shared/x.md"
  cat >"$t/repo/README.md" <<'EOF'
# r
[ok](docs/A.md), [ok with anchor](docs/A.md#part), [dir](docs/), [root](/docs/A.md)
[web](https://example.org/x) [mail](mailto:a@b.c) [anchor](#r) ![img](docs/A.md)
`[code span](missing-in-code.md)`
```
[fenced](missing-in-fence.md)
```
This line says SESS 3 measured it.
[bad](docs/missing.md)
[out](../shared/x.md)
[ref]: docs/gone.md
EOF
  sed -i "s/SESS/$word/" "$t/repo/README.md"
  printf '# A\n[up](../README.md) [titled](../README.md "title")\n' >"$t/repo/docs/A.md"
  printf '// the client opens %s 1; its pins go with %s 1.\n// %s 22%ss figures\n' \
    "$word" "$word" "$word" "'" >"$t/repo/crates/cluster/src/c.rs"
  rc=0
  out=$(bash "$self" "$t/repo" 2>&1) || rc=$?
  local want=(
    "README.md:8: "
    "README.md:9: broken link: docs/missing.md"
    "README.md:10: link outside the repository: ../shared/x.md"
    "README.md:11: broken link: docs/gone.md"
    "crates/cluster/src/c.rs:2: "
  )
  local ok=true w
  ((rc == 1)) || { echo "self-test: exit $rc, want 1" >&2; ok=false; }
  for w in "${want[@]}"; do
    grep -qF -- "$w" <<<"$out" || { echo "self-test: no finding '$w'" >&2; ok=false; }
  done
  if [[ $(grep -cE '^[^ ]+:[0-9]+: ' <<<"$out") -ne ${#want[@]} ]]; then
    echo "self-test: want ${#want[@]} findings" >&2
    ok=false
  fi
  # Once fixed, the tree is clean.
  sed -i -e '8,11d' "$t/repo/README.md"
  sed -i -e '2d' "$t/repo/crates/cluster/src/c.rs"
  rc=0
  out2=$(bash "$self" "$t/repo" 2>&1) || rc=$?
  ((rc == 0)) || { echo "self-test: the fixed tree: exit $rc: $out2" >&2; ok=false; }
  if $ok; then
    echo "check-text self-test: ok"
    return 0
  fi
  printf 'self-test output:\n%s\n' "$out" >&2
  return 1
}

case ${1:-} in
  --self-test) self_test; exit ;;
  -*) echo "usage: $0 [ROOT | --self-test]" >&2; exit 2 ;;
esac
root=${1:-$here/..}
[[ -d $root ]] || { echo "check-text: $root: not a directory" >&2; exit 2; }
root=$(cd "$root" && pwd -P)
cd "$root"

# The files, relative to the root.
if git -C "$root" rev-parse --show-toplevel 2>/dev/null | grep -qxF "$root"; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard | sort -u)
else
  # Not a checkout (an unpacked archive, the self-test's tree): every file but the
  # build's and the tools' (.gitignore's).
  mapfile -t files < <(find . \( -path ./.git -o -path ./target -o -path ./.tools \) -prune \
    -o -type f -print | sed 's|^\./||' | sort)
fi
declare -A known=()
for f in "${files[@]}"; do
  [[ -e $f ]] || continue
  known[$f]=1
  d=$f
  while [[ $d == */* ]]; do
    d=${d%/*}
    known[$d]=1
  done
done
this=$(realpath -m --relative-to="$root" "$self")

findings=0 links=0
report() {
  echo "$1"
  findings=$((findings + 1))
}

# (a) "session N".
for f in "${files[@]}"; do
  [[ -f $f && $f != "$this" ]] || continue
  protocol=false
  [[ $f == crates/cluster/* || $f == docs/CLUSTER.md ]] && protocol=true
  while IFS= read -r hit; do
    [[ -n $hit ]] || continue
    line=${hit%%:*} text=${hit#*:}
    if $protocol && ! grep -qiE "$DIARY" <<<"$text"; then
      continue
    fi
    report "$f:$line: 'session N' of a development diary: state the fact without its history: $(cut -c1-120 <<<"$text")"
  done < <(grep -nIiE 'sessions? [0-9]+' -- "$f" || true)
done

# (b), (c): relative Markdown links. The awk prints LINE<TAB>TARGET for each link
# outside fenced code blocks and code spans.
extract_links() {
  awk '
    {
      line = $0
      if (match(line, /^ ? ? ?(```+|~~~+)/)) {
        mark = substr(line, RSTART, RLENGTH)
        gsub(/ /, "", mark)
        if (fence == "") { fence = mark; next }
        if (substr(mark, 1, 1) == substr(fence, 1, 1) && length(mark) >= length(fence)) {
          fence = ""
          next
        }
      }
      if (fence != "") next
      gsub(/``[^`]*``/, "", line)
      gsub(/`[^`]*`/, "", line)
      if (match(line, /^ ? ? ?\[[^]]+\]:[ \t]*[^ \t]+/)) {
        t = line
        sub(/^ ? ? ?\[[^]]+\]:[ \t]*/, "", t)
        sub(/[ \t].*/, "", t)
        print NR "\t" t
        next
      }
      while (match(line, /\]\([^)]*\)/)) {
        t = substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
        sub(/^[ \t]+/, "", t)
        if (substr(t, 1, 1) == "<") {
          sub(/^</, "", t)
          sub(/>.*/, "", t)
        } else {
          sub(/[ \t].*/, "", t)
        }
        print NR "\t" t
      }
    }' "$1"
}

for f in "${files[@]}"; do
  [[ $f == *.md && -f $f ]] || continue
  dir=.
  [[ $f == */* ]] && dir=${f%/*}
  while IFS=$'\t' read -r line target; do
    case $target in
      '') report "$f:$line: empty link target"; continue ;;
      '#'*) continue ;;
    esac
    [[ $target =~ ^[A-Za-z][A-Za-z0-9+.-]*: ]] && continue
    links=$((links + 1))
    path=${target%%#*}
    path=${path%%\?*}
    path=${path//%20/ }
    [[ -n $path ]] || continue
    if [[ $path == /* ]]; then
      abs=$root$path
    else
      abs=$root/$dir/$path
    fi
    abs=$(realpath -ms -- "$abs")
    if [[ $abs != "$root" && $abs != "$root"/* ]]; then
      report "$f:$line: link outside the repository: $target"
      continue
    fi
    rel=${abs#"$root"}
    rel=${rel#/}
    if [[ -z $rel ]]; then
      continue
    fi
    if [[ -z ${known[$rel]:-} ]]; then
      if [[ -e $abs ]]; then
        report "$f:$line: link to a file the repository does not hold (ignored or untracked?): $target"
      else
        report "$f:$line: broken link: $target"
      fi
    fi
  done < <(extract_links "$f")
done

if ((findings)); then
  echo "check-text: $findings finding(s)" >&2
  exit 1
fi
echo "check-text: ${#files[@]} files, $links relative links, clean"
