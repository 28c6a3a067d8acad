#!/bin/sh
# Regenerates kernels.ptx from kernels.cu (run by `go generate` in this
# directory). Needs only clang with the NVPTX target (Debian's clang-14 has
# it); no CUDA toolkit: -nocudainc -nocudalib.
#
# sm_52 PTX is JIT-compiled by the driver for any newer GPU. CLANG overrides
# the compiler.
set -eu
cd "$(dirname "$0")"
CLANG=${CLANG:-}
if [ -z "$CLANG" ]; then
	for c in clang-14 clang; do
		if command -v "$c" >/dev/null 2>&1; then CLANG=$c; break; fi
	done
fi
if [ -z "$CLANG" ]; then
	echo "gen_ptx.sh: clang not found (apt-get install clang-14)" >&2
	exit 1
fi
"$CLANG" -x cuda --cuda-device-only -nocudainc -nocudalib \
	--cuda-gpu-arch=sm_52 -O3 -S -o kernels.ptx.tmp kernels.cu
mv kernels.ptx.tmp kernels.ptx
