//go:build amd64 && !purego

#include "textflag.h"

// func canonAVX2(s *float32, n int)
// replaces every NaN of the n floats at s (n a multiple of 32) by
// abi.CanonicalNaN32 (0x7fc00000): 32 at a time compared with themselves
// (VCMPPS unordered: true for a NaN alone), written back only where one
// is a NaN.
TEXT ·canonAVX2(SB), NOSPLIT, $0-16
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	JZ canondone
	MOVL $0x7fc00000, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

canonloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VCMPPS $3, Y0, Y0, Y4
	VCMPPS $3, Y1, Y1, Y5
	VCMPPS $3, Y2, Y2, Y6
	VCMPPS $3, Y3, Y3, Y7
	VORPS Y5, Y4, Y8
	VORPS Y7, Y6, Y9
	VORPS Y9, Y8, Y8
	VPTEST Y8, Y8
	JZ canonnext
	VBLENDVPS Y4, Y15, Y0, Y0
	VBLENDVPS Y5, Y15, Y1, Y1
	VBLENDVPS Y6, Y15, Y2, Y2
	VBLENDVPS Y7, Y15, Y3, Y3
	VMOVUPS Y0, (SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)

canonnext:
	ADDQ $128, SI
	DECQ CX
	JNZ canonloop
	VZEROUPPER

canondone:
	RET
