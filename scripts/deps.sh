#!/usr/bin/env bash
# Installs what infernet's build, tests and benchmarks need, idempotently:
# Debian packages (only the missing ones) and pinned Go tools cached outside
# the checkout under ~/.cache/infernet/<tool>-<version>.
set -euo pipefail

# wabt: wat2wasm for hand-written test modules; clang/lld/wasi-libc: C guests;
# rustc + libstd-rust-dev-wasm32: Rust guests; libopenblas: the BLAS we
# compare against (and can load at run time); hyperfine: whole-command timing;
# libonnx-testdata: golden vectors of the tensor ops; chromium-headless-shell
# and a font: the browser the dashboard tests drive (chromedp); nodejs and
# npm: OpenAI's npm client in scripts/openai-e2e.sh; iproute2 and nftables:
# the network namespaces and NAT routers of node/internal/reach/nattest; jq:
# every script reads JSON (lncli's, the node's --json) with it, never as text.
packages=(jq iproute2 nftables wabt binaryen clang lld wasi-libc libclang-rt-dev-wasm32 rustc libstd-rust-dev-wasm32 libopenblas-dev hyperfine gcc libonnx-testdata
  chromium-headless-shell fonts-dejavu-core nodejs)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null || missing+=(npm) # some machines have nodejs's own npm
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The wazero CLI, pinned: the peer `make bench` compares `infernet run` against.
cache="${INFERNET_CACHE:-$HOME/.cache/infernet}"
wazero_version=v1.11.0
wazero_dir="$cache/wazero-$wazero_version"
if [ ! -x "$wazero_dir/wazero" ]; then
  echo "deps: building wazero CLI $wazero_version into $wazero_dir" >&2
  mkdir -p "$wazero_dir"
  GOBIN="$wazero_dir" GOFLAGS=-mod=mod go install "github.com/tetratelabs/wazero/cmd/wazero@$wazero_version"
fi
