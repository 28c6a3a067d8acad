#!/usr/bin/env bash
# make test-mixed: a network of this build and an older one
# (TestMixedVersions, cmd/infernet/itest/mixed_test.go). The older binary
# is built once from INFERNET_OLD_REV (default: the commit before adverts
# said the host's tensor ABI), in a git worktree of this repository, and
# kept in ${INFERNET_CACHE:-~/.cache/infernet}/infernet-REV/. Needs the
# repository's history (not a shallow clone).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
rev=$(git rev-parse --verify "${INFERNET_OLD_REV:-84062ec^}^{commit}")
cache=${INFERNET_CACHE:-$HOME/.cache/infernet}/infernet-${rev:0:12}
if [ ! -x "$cache/infernet" ]; then
  echo "test-mixed: building infernet at ${rev:0:12} into $cache" >&2
  tmp=$(mktemp -d)
  trap 'git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  git worktree add --detach "$tmp/src" "$rev" >/dev/null
  mkdir -p "$cache"
  (cd "$tmp/src" && "$GO" build -o "$cache/infernet.tmp" ./cmd/infernet)
  mv "$cache/infernet.tmp" "$cache/infernet"
fi
INFERNET_OLD_BINARY=$cache/infernet "$GO" test -count=1 -run '^TestMixedVersions$' -v ./cmd/infernet/itest/ | grep -v '^=== '
