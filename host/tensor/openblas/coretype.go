package openblas

import "golang.org/x/sys/cpu"

// coreTypeEnv is the variable OpenBLAS's DYNAMIC_ARCH builds read, in their
// load-time constructor, to override CPU detection.
const coreTypeEnv = "OPENBLAS_CORETYPE"

// chooseCoreType returns the OpenBLAS core type matching the CPU's vector
// features, or "" to leave detection to OpenBLAS. SkylakeX is the AVX-512
// kernel family OpenBLAS uses on every AVX-512 Intel and AMD core (its
// Cooperlake and SapphireRapids types only add bf16 kernels); Haswell is
// the AVX2+FMA family.
func chooseCoreType() string {
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512VL && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512CD:
		return "SkylakeX"
	case x.HasAVX2 && x.HasFMA:
		return "Haswell"
	}
	return ""
}
