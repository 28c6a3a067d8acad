//go:build !purego

#include "textflag.h"

// func packT4(dst, src *float32, ld, kc, stride int)
//
// Transposes 4 rows of kc floats (row r at src + r·ld) into dst, writing
// row r, column k to dst[k·stride + r]: 4×4 blocks via unpack and move
// high/low, VEX-encoded so no SSE/AVX transition stalls occur.
TEXT ·packT4(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), DX
	MOVQ kc+24(FP), CX
	MOVQ stride+32(FP), BX
	SHLQ $2, DX
	SHLQ $2, BX
	LEAQ (SI)(DX*1), R8
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (BX)(BX*2), R11 // 3·stride bytes
	MOVQ CX, R12
	SHRQ $2, R12
	JZ   t4tail

t4loop:
	VMOVUPS (SI), X0
	VMOVUPS (R8), X1
	VMOVUPS (R9), X2
	VMOVUPS (R10), X3
	VUNPCKLPS X1, X0, X4 // r0k0 r1k0 r0k1 r1k1
	VUNPCKHPS X1, X0, X0 // r0k2 r1k2 r0k3 r1k3
	VUNPCKLPS X3, X2, X5 // r2k0 r3k0 r2k1 r3k1
	VUNPCKHPS X3, X2, X2 // r2k2 r3k2 r2k3 r3k3
	VMOVLHPS  X5, X4, X1 // column k0
	VMOVHLPS  X4, X5, X5 // column k1
	VMOVLHPS  X2, X0, X3 // column k2
	VMOVHLPS  X0, X2, X2 // column k3
	VMOVUPS   X1, (DI)
	VMOVUPS   X5, (DI)(BX*1)
	VMOVUPS   X3, (DI)(BX*2)
	VMOVUPS   X2, (DI)(R11*1)
	ADDQ      $16, SI
	ADDQ      $16, R8
	ADDQ      $16, R9
	ADDQ      $16, R10
	LEAQ      (DI)(BX*4), DI
	DECQ      R12
	JNZ       t4loop

t4tail:
	ANDQ $3, CX
	JZ   t4done

t4tail1:
	VMOVSS (SI), X0
	VMOVSS X0, (DI)
	VMOVSS (R8), X1
	VMOVSS X1, 4(DI)
	VMOVSS (R9), X2
	VMOVSS X2, 8(DI)
	VMOVSS (R10), X3
	VMOVSS X3, 12(DI)
	ADDQ   $4, SI
	ADDQ   $4, R8
	ADDQ   $4, R9
	ADDQ   $4, R10
	ADDQ   BX, DI
	DECQ   CX
	JNZ    t4tail1

t4done:
	RET

// func packCopy(dst, src *float32, ld, kc, n int)
//
// Copies kc rows of n floats (n a multiple of 4) from src (row stride ld)
// to dst (row stride n).
TEXT ·packCopy(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), DX
	MOVQ kc+24(FP), CX
	MOVQ n+32(FP), BX
	SHLQ $2, DX
	SHRQ $2, BX // 16-byte chunks per row
	TESTQ CX, CX
	JZ   cpdone
	TESTQ BX, BX
	JZ   cpdone

cprow:
	MOVQ SI, R8
	MOVQ BX, R9

cpchunk:
	VMOVUPS (R8), X0
	VMOVUPS X0, (DI)
	ADDQ    $16, R8
	ADDQ    $16, DI
	DECQ    R9
	JNZ     cpchunk
	ADDQ    DX, SI
	DECQ    CX
	JNZ     cprow

cpdone:
	RET
