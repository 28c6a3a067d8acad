//go:build amd64 && !purego

#include "textflag.h"

// Integer block sums of the integer kernels (intdot.go, intdot_amd64.go),
// hand-written AVX2. Each block sum is Σ w·x over 32 byte pairs, computed
// with VPMADDUBSW (unsigned w × signed x → 16 int16 pair sums, which cannot
// saturate here: |w| ≤ 128 and |x| ≤ 127 give at most 32512) and VPMADDWD
// by ones (→ 8 int32), then a horizontal add: exact, so the same integers
// as blockSumsGo.

// HSUM adds the 8 int32 of Y (X its low half) into R, using T.
#define HSUM(Y, X, T, R) \
	VEXTRACTI128 $1, Y, T; \
	VPADDD T, X, X; \
	VPSHUFD $0x4E, X, T; \
	VPADDD T, X, X; \
	VPSHUFD $0xB1, X, T; \
	VPADDD T, X, X; \
	VMOVD X, R

// func sumsQ8_0AVX2(w *byte, x *int8, n int, out *int32)
// n Q8_0 blocks (34 bytes: f16 scale, 32 int8) against n×32 int8 of x.
TEXT ·sumsQ8_0AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15 // int16 ones

q8loop:
	TESTQ CX, CX
	JZ q8done
	VMOVDQU 2(SI), Y0
	VMOVDQU (DI), Y1
	VPSIGNB Y0, Y0, Y2 // |w|, unsigned (-128 reads 128)
	VPSIGNB Y0, Y1, Y3 // x with w's sign: |w|·x' = w·x
	VPMADDUBSW Y3, Y2, Y4
	VPMADDWD Y15, Y4, Y4
	HSUM(Y4, X4, X5, AX)
	MOVL AX, (DX)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JMP q8loop

q8done:
	VZEROUPPER
	RET

// func sumsQ4_0AVX2(w *byte, x *int8, n int, out *int32)
// n Q4_0 blocks (18 bytes: f16 scale, 16 bytes of nibbles: low nibbles are
// values 0…15, high 16…31) against n×32 int8 of x; the nibbles unsigned.
TEXT ·sumsQ4_0AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14 // nibble mask

q4loop:
	TESTQ CX, CX
	JZ q4done
	VMOVDQU 2(SI), X0
	VPSRLW $4, X0, X1
	VINSERTI128 $1, X1, Y0, Y0 // low nibbles in bytes 0…15, high in 16…31
	VPAND Y14, Y0, Y0
	VMOVDQU (DI), Y1
	VPMADDUBSW Y1, Y0, Y4
	VPMADDWD Y15, Y4, Y4
	HSUM(Y4, X4, X5, AX)
	MOVL AX, (DX)
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JMP q4loop

q4done:
	VZEROUPPER
	RET

// func sumsNibAVX2(w *byte, x *int8, n int, out *int32)
// n chunks of 32 bytes of nibbles (Q4_K's layout): chunk c's low nibbles
// times x[64c…64c+31] into out[2c], its high nibbles times
// x[64c+32…64c+63] into out[2c+1].
TEXT ·sumsNibAVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

nibloop:
	TESTQ CX, CX
	JZ nibdone
	VMOVDQU (SI), Y0
	VPSRLW $4, Y0, Y1
	VPAND Y14, Y0, Y0
	VPAND Y14, Y1, Y1
	VMOVDQU (DI), Y2
	VMOVDQU 32(DI), Y3
	VPMADDUBSW Y2, Y0, Y4
	VPMADDUBSW Y3, Y1, Y6
	VPMADDWD Y15, Y4, Y4
	VPMADDWD Y15, Y6, Y6
	HSUM(Y4, X4, X5, AX)
	MOVL AX, (DX)
	HSUM(Y6, X6, X5, AX)
	MOVL AX, 4(DX)
	ADDQ $32, SI
	ADDQ $64, DI
	ADDQ $8, DX
	DECQ CX
	JMP nibloop

nibdone:
	VZEROUPPER
	RET
