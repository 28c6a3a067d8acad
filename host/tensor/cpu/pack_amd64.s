//go:build !purego

#include "textflag.h"

// func packT4(dst, src *float32, ld, kc, stride int)
//
// Transposes 4 rows of kc floats (row r at src + r·ld) into dst, writing
// row r, column k to dst[k·stride + r]. 8 columns at a time: unpack and
// shuffle transpose two 4×4 blocks in the two 128-bit lanes of ymm
// registers; then 4 columns, then single columns. VEX-encoded throughout.
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
	SHRQ $3, R12
	JZ   t4four

t4eight:
	VMOVUPS (SI), Y0
	VMOVUPS (R8), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R10), Y3
	VUNPCKLPS Y1, Y0, Y4 // per lane: r0k0 r1k0 r0k1 r1k1
	VUNPCKHPS Y1, Y0, Y0 // r0k2 r1k2 r0k3 r1k3
	VUNPCKLPS Y3, Y2, Y5 // r2k0 r3k0 r2k1 r3k1
	VUNPCKHPS Y3, Y2, Y2 // r2k2 r3k2 r2k3 r3k3
	VSHUFPS   $0x44, Y5, Y4, Y1 // columns k0 | k4
	VSHUFPS   $0xEE, Y5, Y4, Y5 // columns k1 | k5
	VSHUFPS   $0x44, Y2, Y0, Y3 // columns k2 | k6
	VSHUFPS   $0xEE, Y2, Y0, Y2 // columns k3 | k7
	LEAQ      (DI)(BX*4), R14
	VMOVUPS   X1, (DI)
	VMOVUPS   X5, (DI)(BX*1)
	VMOVUPS   X3, (DI)(BX*2)
	VMOVUPS   X2, (DI)(R11*1)
	VEXTRACTF128 $1, Y1, (R14)
	VEXTRACTF128 $1, Y5, (R14)(BX*1)
	VEXTRACTF128 $1, Y3, (R14)(BX*2)
	VEXTRACTF128 $1, Y2, (R14)(R11*1)
	ADDQ      $32, SI
	ADDQ      $32, R8
	ADDQ      $32, R9
	ADDQ      $32, R10
	LEAQ      (R14)(BX*4), DI
	DECQ      R12
	JNZ       t4eight

t4four:
	TESTQ $4, CX
	JZ    t4tail
	VMOVUPS (SI), X0
	VMOVUPS (R8), X1
	VMOVUPS (R9), X2
	VMOVUPS (R10), X3
	VUNPCKLPS X1, X0, X4
	VUNPCKHPS X1, X0, X0
	VUNPCKLPS X3, X2, X5
	VUNPCKHPS X3, X2, X2
	VSHUFPS   $0x44, X5, X4, X1
	VSHUFPS   $0xEE, X5, X4, X5
	VSHUFPS   $0x44, X2, X0, X3
	VSHUFPS   $0xEE, X2, X0, X2
	VMOVUPS   X1, (DI)
	VMOVUPS   X5, (DI)(BX*1)
	VMOVUPS   X3, (DI)(BX*2)
	VMOVUPS   X2, (DI)(R11*1)
	ADDQ      $16, SI
	ADDQ      $16, R8
	ADDQ      $16, R9
	ADDQ      $16, R10
	LEAQ      (DI)(BX*4), DI

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
	VZEROUPPER
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

// func packPanels(dst, src *float32, ld, kc, n, panels int)
//
// Packs panels micro-panels of n columns (n a multiple of 8): row k of
// panel p, src[k·ld + p·n : +n], goes to dst[p·kc·n + k·n : +n]. Rows are
// read whole (all panels) for sequential access to src.
TEXT ·packPanels(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), DX
	MOVQ kc+24(FP), CX
	MOVQ n+32(FP), BX
	MOVQ panels+40(FP), R10
	SHLQ $2, DX  // src row stride, bytes
	SHLQ $2, BX  // panel row, bytes
	MOVQ CX, R13
	IMULQ BX, R13 // panel size, bytes
	TESTQ CX, CX
	JZ    ppdone
	TESTQ R10, R10
	JZ    ppdone

pprow:
	MOVQ SI, R8
	MOVQ DI, R9
	MOVQ R10, R11

pppanel:
	MOVQ BX, R12
	XORQ AX, AX

ppchunk:
	VMOVUPS (R8)(AX*1), Y0
	VMOVUPS Y0, (R9)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, R12
	JLT     ppchunk
	ADDQ    BX, R8
	ADDQ    R13, R9
	DECQ    R11
	JNZ     pppanel
	ADDQ    DX, SI
	ADDQ    BX, DI
	DECQ    CX
	JNZ     pprow

ppdone:
	VZEROUPPER
	RET
