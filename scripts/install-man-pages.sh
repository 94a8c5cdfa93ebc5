#!/usr/bin/env bash
# Installs the man pages and shell completions of this checkout's target/release/mnemofs
# (build it first), both generated from the binary's command line (`mnemofs generate`),
# so they say what `--help` says:
#   - one page per subcommand (mnemofs.1, mnemofs-mount.1, mnemofs-bench-compare.1, ...)
#     into $MAN_DIR (default /usr/local/share/man/man1), then mandb when there is one;
#   - bash completion as mnemofs into $BASH_COMPLETION_DIR (default
#     /usr/share/bash-completion/completions, else /etc/bash_completion.d);
#   - zsh's _mnemofs into /usr/local/share/zsh/site-functions and fish's mnemofs.fish
#     into /usr/local/share/fish/vendor_completions.d ($ZSH_COMPLETION_DIR,
#     $FISH_COMPLETION_DIR).
# Idempotent: pages of subcommands that no longer exist are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/target/release/mnemofs
if [[ ! -x $bin ]]; then
  echo "install-man-pages: $bin is missing: run 'cargo build --release' first" >&2
  exit 1
fi
man_dir=${MAN_DIR:-/usr/local/share/man/man1}
bash_dir=${BASH_COMPLETION_DIR:-}
if [[ -z $bash_dir ]]; then
  bash_dir=/etc/bash_completion.d
  [[ -d /usr/share/bash-completion/completions ]] && bash_dir=/usr/share/bash-completion/completions
fi
zsh_dir=${ZSH_COMPLETION_DIR:-/usr/local/share/zsh/site-functions}
fish_dir=${FISH_COMPLETION_DIR:-/usr/local/share/fish/vendor_completions.d}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" generate man "$tmp/man1" >/dev/null
for shell in bash zsh fish; do
  "$bin" generate completions "$shell" "$tmp/$shell" >/dev/null
done

install -d "$man_dir" "$bash_dir" "$zsh_dir" "$fish_dir"
rm -f "$man_dir"/mnemofs.1 "$man_dir"/mnemofs-*.1
install -m 0644 "$tmp"/man1/*.1 "$man_dir"/
install -m 0644 "$tmp/bash/mnemofs.bash" "$bash_dir/mnemofs"
install -m 0644 "$tmp/zsh/_mnemofs" "$zsh_dir/_mnemofs"
install -m 0644 "$tmp/fish/mnemofs.fish" "$fish_dir/mnemofs.fish"
if command -v mandb >/dev/null; then
  mandb -q 2>/dev/null || echo "install-man-pages: mandb failed (the pages are installed)" >&2
fi
pages=("$tmp"/man1/*.1)
echo "install-man-pages: ${#pages[@]} pages in $man_dir; completions: $bash_dir/mnemofs, $zsh_dir/_mnemofs, $fish_dir/mnemofs.fish"
