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

// K4SCALES unpacks the 6-bit scales and minimums of the Q4_K (or Q5_K)
// super-block at SI (scaleMin), four bytes at a time, into R12 (sc0..7,
// a byte each) and R13 (m0..7), using AX, BX, DX, R10 and R11:
// sc0..3 = s0..3 & 63, m0..3 = s4..7 & 63,
// sc4..7 = s8..11 & 15 | s0..3>>6<<4, m4..7 = s8..11>>4 | s4..7>>6<<4.
#define K4SCALES \
	MOVL 4(SI), AX; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), DX; \
	MOVL AX, R10; \
	ANDL $0x3F3F3F3F, R10; \
	MOVL BX, R11; \
	ANDL $0x3F3F3F3F, R11; \
	MOVL DX, R12; \
	ANDL $0x0F0F0F0F, R12; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL AX, R12; \
	MOVL DX, R13; \
	SHRL $4, R13; \
	ANDL $0x0F0F0F0F, R13; \
	SHRL $6, BX; \
	ANDL $0x03030303, BX; \
	SHLL $4, BX; \
	ORL BX, R13; \
	SHLQ $32, R12; \
	ORQ R10, R12; \
	SHLQ $32, R13; \
	ORQ R11, R13

// k4shufL, k4shufH, k4mask and k4c0 unpack a Q4_K super-block's 6-bit
// scales and minimums (scaleMin) from its first 16 bytes (f16 d and dmin,
// then the 12 bytes s0…s11) in one xmm, VK4SCALES.
DATA k4shufL<>+0(SB)/8, $0x0f0e0d0c07060504
DATA k4shufL<>+8(SB)/8, $0x0f0e0d0c0b0a0908
GLOBL k4shufL<>(SB), RODATA|NOPTR, $16
DATA k4shufH<>+0(SB)/8, $0x0706050480808080
DATA k4shufH<>+8(SB)/8, $0x0b0a090880808080
GLOBL k4shufH<>(SB), RODATA|NOPTR, $16
DATA k4mask<>+0(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA k4mask<>+8(SB)/8, $0x0f0f0f0f3f3f3f3f
GLOBL k4mask<>(SB), RODATA|NOPTR, $16
DATA k4c0<>+0(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA k4c0<>+8(SB)/8, $0xc0c0c0c0c0c0c0c0
GLOBL k4c0<>(SB), RODATA|NOPTR, $16

// VK4SCALES leaves in S the bytes sc0…sc7, m0…m7 (scaleMin) of the Q4_K
// super-block whose first 16 bytes are in X, using T and U: sc0..3 =
// s0..3 & 63, sc4..7 = s8..11 & 15 | s0..3>>6<<4, m0..3 = s4..7 & 63,
// m4..7 = s8..11>>4 | s4..7>>6<<4.
#define VK4SCALES(X, S, T, U) \
	VPSHUFB k4shufL<>(SB), X, S; \
	VPSHUFB k4shufH<>(SB), X, T; \
	VPSRLW $4, S, U; \
	VPBLENDD $8, U, S, S; \
	VPAND k4mask<>(SB), S, S; \
	VPAND k4c0<>(SB), T, T; \
	VPSRLW $2, T, T; \
	VPOR T, S, S

// K4SUBSCALES stores the super-block's sub-block scales float32(d·sc_j)
// at 4j(SP) and minimums float32(dmin·m_j) at 32+4j(SP) (subScales), from
// K4SCALES's R12 and R13 and the f16 d and dmin at SI.
#define K4SUBSCALES \
	MOVL (SI), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VMOVSHDUP X1, X2; \
	VBROADCASTSS X1, Y4; \
	VBROADCASTSS X2, Y6; \
	VMOVQ R12, X3; \
	VPMOVZXBD X3, Y3; \
	VCVTDQ2PS Y3, Y3; \
	VMULPS Y3, Y4, Y3; \
	VMOVUPS Y3, 0(SP); \
	VMOVQ R13, X5; \
	VPMOVZXBD X5, Y5; \
	VCVTDQ2PS Y5, Y5; \
	VMULPS Y5, Y6, Y5; \
	VMOVUPS Y5, 32(SP)

// D8 dequantizes 8 values: the bytes at src(SP) as int32, to float32,
// times Y8 (d·sc), less Y9 (dmin·m), each op rounded, stored at dst(DI).
// The product and the subtraction are one FMA: the product of an f16
// scale and an integer of at most 12 bits is exact in float32
// (TestQuantProductsExact), so the one rounding is the subtraction's.
#define D8(src, dst) \
	VPMOVZXBD src(SP), Y10; \
	VCVTDQ2PS Y10, Y10; \
	VFMSUB213PS Y9, Y8, Y10; \
	VMOVUPS Y10, dst(DI)


// K4HALVES writes the 64 values of sub-blocks 2i and 2i+1 (i in R14)
// from the low (Y7) and high (Y11) values, whose bytes go through the
// stack to VPMOVZXBD, with the sub-block scales K4SUBSCALES stored.
#define K4HALVES \
	VMOVDQU Y7, 64(SP); \
	VMOVDQU Y11, 96(SP); \
	VBROADCASTSS 0(SP)(R14*8), Y8; \
	VBROADCASTSS 32(SP)(R14*8), Y9; \
	D8(64, 0); \
	D8(72, 32); \
	D8(80, 64); \
	D8(88, 96); \
	VBROADCASTSS 4(SP)(R14*8), Y8; \
	VBROADCASTSS 36(SP)(R14*8), Y9; \
	D8(96, 128); \
	D8(104, 160); \
	D8(112, 192); \
	D8(120, 224)

// Q6KQ0…Q6KQ3 build in Y9 run c of the 32-value runs of a Q6_K half, from
// a (Y2, 32 bytes of ql), b (Y3, the next 32) and t (Y7, 32 bytes of qh):
// a&15 | (t&3)<<4, b&15 | (t>>2&3)<<4, a>>4 | (t>>4&3)<<4 and
// b>>4 | (t>>6)<<4 (Y14: 0x0F bytes, Y13: 0x30 bytes), using Y10.
#define Q6KQ0 \
	VPAND Y14, Y2, Y9; \
	VPSLLW $4, Y7, Y10; \
	VPAND Y13, Y10, Y10; \
	VPOR Y10, Y9, Y9
#define Q6KQ1 \
	VPAND Y14, Y3, Y9; \
	VPSLLW $2, Y7, Y10; \
	VPAND Y13, Y10, Y10; \
	VPOR Y10, Y9, Y9
#define Q6KQ2 \
	VPSRLW $4, Y2, Y9; \
	VPAND Y14, Y9, Y9; \
	VPAND Y13, Y7, Y10; \
	VPOR Y10, Y9, Y9
#define Q6KQ3 \
	VPSRLW $4, Y3, Y9; \
	VPAND Y14, Y9, Y9; \
	VPSRLW $2, Y7, Y10; \
	VPAND Y13, Y10, Y10; \
	VPOR Y10, Y9, Y9

// Q6KLOAD loads a half's a, b and t (see Q6KQ0).
#define Q6KLOAD(ql, qlb, qh) \
	VMOVDQU ql(SI), Y2; \
	VMOVDQU qlb(SI), Y3; \
	VMOVDQU qh(SI), Y7

// Q6KHALF does one half (128 values) of a Q6_K super-block for the dot
// product: its four runs against x at x0…x3(DI), the groups' scales at
// s0…s7(SP).
#define Q6KHALF(ql, qlb, qh, x0, x1, x2, x3, s0, s1, s2, s3, s4, s5, s6, s7) \
	Q6KLOAD(ql, qlb, qh); \
	Q6KQ0; \
	Q6KPART(x0, s0, s1); \
	Q6KQ1; \
	Q6KPART(x1, s2, s3); \
	Q6KQ2; \
	Q6KPART(x2, s4, s5); \
	Q6KQ3; \
	Q6KPART(x3, s6, s7)

// D6 dequantizes the run in Y9 (values q, 0…63): q-32 (Y12: 0x20 bytes)
// as int32 through the stack, to float32, times the groups' d·sc at
// s0(SP) (the first 16 values) and s1(SP) (the rest), stored at
// dst(DI) on, 32 floats.
#define D6(s0, s1, dst0, dst1, dst2, dst3) \
	VPSUBB Y12, Y9, Y9; \
	VMOVDQU Y9, 64(SP); \
	VBROADCASTSS s0(SP), Y11; \
	VPMOVSXBD 64(SP), Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS Y11, Y10, Y10; \
	VMOVUPS Y10, dst0(DI); \
	VPMOVSXBD 72(SP), Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS Y11, Y10, Y10; \
	VMOVUPS Y10, dst1(DI); \
	VBROADCASTSS s1(SP), Y11; \
	VPMOVSXBD 80(SP), Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS Y11, Y10, Y10; \
	VMOVUPS Y10, dst2(DI); \
	VPMOVSXBD 88(SP), Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS Y11, Y10, Y10; \
	VMOVUPS Y10, dst3(DI)

// The fused GEMVs of exact mode's block types (gemvQ4KAVX2,
// gemvQ6KAVX2; kernelSet.deqGemv), each super-block prefetching
// (PREFETCHT0) the one 2 KiB further on, a few rows ahead in the
// stream, L3 to L2: each weight dequantized as
// dequantQ4KAVX2 or dequantQ6KAVX2 does and its product added to its lane
// as gemvF32AVX2 does (lanes 0–7 in one ymm, 8–15 in another; VMULPS,
// then VADDPS, never an FMA), so the bits are those of dequantizing the
// row and gemvF32AVX2's, without the f32 row in memory between them. x
// holds n·256 values; out[j] is the dot product of x and row j of rows,
// stride bytes apart.

// D8F is D8 whose 8 values, rather than stored, multiply x's 8 at xoff(DI)
// and add to acc.
#define D8F(src, xoff, acc) \
	VPMOVZXBD src(SP), Y10; \
	VCVTDQ2PS Y10, Y10; \
	VFMSUB213PS Y9, Y8, Y10; \
	VMULPS xoff(DI), Y10, Y10; \
	VADDPS Y10, acc, acc

// K4PAIRF is K4HALVES of the 32 bytes of nibbles at R15 (sub-blocks 2i
// and 2i+1, i in R14) into the lanes Y12 (0–7) and Y13 (8–15), against
// x's 64 values at DI.
#define K4PAIRF \
	VMOVDQU (R15), Y7; \
	VPSRLW $4, Y7, Y11; \
	VPAND Y14, Y7, Y7; \
	VPAND Y14, Y11, Y11; \
	VMOVDQU Y7, 64(SP); \
	VMOVDQU Y11, 96(SP); \
	VBROADCASTSS 0(SP)(R14*8), Y8; \
	VBROADCASTSS 32(SP)(R14*8), Y9; \
	D8F(64, 0, Y12); \
	D8F(72, 32, Y13); \
	D8F(80, 64, Y12); \
	D8F(88, 96, Y13); \
	VBROADCASTSS 4(SP)(R14*8), Y8; \
	VBROADCASTSS 36(SP)(R14*8), Y9; \
	D8F(96, 128, Y12); \
	D8F(104, 160, Y13); \
	D8F(112, 192, Y12); \
	D8F(120, 224, Y13)

// LANESUM stores at (R8) the sum of the 16 lanes in A (0–7) and B
// (8–15), added pairwise as gemvF32AVX2 does (lane i += lane i+8, +4,
// +2, +1), XA and XB their low halves; B is clobbered.
#define LANESUM(A, B, XA, XB) \
	VADDPS B, A, A; \
	VEXTRACTF128 $1, A, XB; \
	VADDPS XB, XA, XA; \
	VMOVHLPS XA, XA, XB; \
	VADDPS XB, XA, XA; \
	VMOVSHDUP XA, XB; \
	VADDSS XB, XA, XA; \
	VMOVSS XA, (R8)

// D6F is D6 whose 32 values, rather than stored, multiply x's at x0…x3(DI)
// and add to the lanes Y5 (0–7) and Y6 (8–15).
#define D6F(s0, s1, x0, x1, x2, x3) \
	VPSUBB Y12, Y9, Y9; \
	VMOVDQU Y9, 64(SP); \
	VBROADCASTSS s0(SP), Y11; \
	D6F8(64, x0, Y5); \
	D6F8(72, x1, Y6); \
	VBROADCASTSS s1(SP), Y11; \
	D6F8(80, x2, Y5); \
	D6F8(88, x3, Y6)

// D6F8 is 8 of D6F's values: the bytes at src(SP) as int32, to float32,
// times Y11 (d·sc), times x's 8 at xoff(DI), added to acc.
#define D6F8(src, xoff, acc) \
	VPMOVSXBD src(SP), Y10; \
	VCVTDQ2PS Y10, Y10; \
	VMULPS Y11, Y10, Y10; \
	VMULPS xoff(DI), Y10, Y10; \
	VADDPS Y10, acc, acc

// Q6KSB does the Q6_K super-block at SI with D (D6, or D6F): its groups'
// scales d·sc_g to 4g(SP), then its 8 runs of 32 values, the first 16 of
// each with its first group's scale, the rest with the next's.
#define Q6KSB(D) \
	MOVWLZX 208(SI), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS X1, Y4; \
	VPMOVSXBD 192(SI), Y2; \
	VCVTDQ2PS Y2, Y2; \
	VMULPS Y2, Y4, Y2; \
	VMOVUPS Y2, 0(SP); \
	VPMOVSXBD 200(SI), Y3; \
	VCVTDQ2PS Y3, Y3; \
	VMULPS Y3, Y4, Y3; \
	VMOVUPS Y3, 32(SP); \
	Q6KLOAD(0, 32, 128); \
	Q6KQ0; \
	D(0, 4, 0, 32, 64, 96); \
	Q6KQ1; \
	D(8, 12, 128, 160, 192, 224); \
	Q6KQ2; \
	D(16, 20, 256, 288, 320, 352); \
	Q6KQ3; \
	D(24, 28, 384, 416, 448, 480); \
	Q6KLOAD(64, 96, 160); \
	Q6KQ0; \
	D(32, 36, 512, 544, 576, 608); \
	Q6KQ1; \
	D(40, 44, 640, 672, 704, 736); \
	Q6KQ2; \
	D(48, 52, 768, 800, 832, 864); \
	Q6KQ3; \
	D(56, 60, 896, 928, 960, 992)

// GEMVROW starts a weight row of the fused GEMVs (R9 at it; jumping to
// done when no row is left): SI at the row, DI at x, CX its super-blocks,
// the lanes A and B zero. GEMVNEXT stores the row's sum (LANESUM) at R8
// and goes on to the next row (label row).
#define GEMVROW(A, B, done) \
	CMPQ rows+32(FP), $0; \
	JEQ done; \
	MOVQ R9, SI; \
	MOVQ x+8(FP), DI; \
	MOVQ n+24(FP), CX; \
	VXORPS A, A, A; \
	VXORPS B, B, B

#define GEMVNEXT(A, B, XA, XB, row) \
	LANESUM(A, B, XA, XB); \
	ADDQ $4, R8; \
	ADDQ stride+40(FP), R9; \
	DECQ rows+32(FP); \
	JMP row

// K6CONSTS sets Y14 to 0x0F bytes and Y13 to 0x30 bytes.
#define K6CONSTS \
	MOVL $0x0F0F0F0F, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL $0x30303030, AX; \
	VMOVD AX, X13; \
	VPBROADCASTD X13, Y13

// The multi-row kernels (q4KR4*): one weight row against four rows of x
// packed by packAct4, per super-block the four rows' 256 int8 in turn
// (1024 bytes), their four float32 scales (16 bytes) and their sums per
// 16 as int16 (128 bytes), so that each weight block is decoded once for
// four x rows. The float part runs in an xmm of four lanes, one per x row,
// in intDot's order and rounding (VCVTDQ2PS, VMULPS, VSUBPS and VADDPS
// round each lane as the scalar ops do).

// MADDAVX2 adds to acc the int32 pair sums of the int16 products of a and
// s (VPMADDWD, then VPADDD), clobbering a; MADDVNNI is the same in one
// AVX512-VNNI instruction (VPDPWSSD, EVEX on ymm: AVX512VL).
#define MADDAVX2(s, a, acc) \
	VPMADDWD s, a, a; \
	VPADDD a, acc, acc

#define MADDVNNI(s, a, acc) \
	VPDPWSSD s, a, acc

// R4REDUCE leaves in XA the four int32 sums of the 8 lanes of YA, YB, YC
// and YD (one x row each), in order, using XB.
#define R4REDUCE(YA, YB, YC, YD, XA, XB) \
	VPHADDD YB, YA, YA; \
	VPHADDD YD, YC, YC; \
	VPHADDD YC, YA, YA; \
	VEXTRACTI128 $1, YA, XB; \
	VPADDD XB, XA, XA

// Q4KR4PAIR adds to Y8…Y11 (x rows 0…3) the int32 products sc·w·x of
// sub-blocks 2i and 2i+1 of the Q4_K super-block at SI: the 32 bytes of
// nibbles at off(SI) against each row's 64 int8 at xo(DI) (rows 256 bytes
// apart), the scales the int16 at s0(SP) and s1(SP); M is MADDAVX2 or
// MADDVNNI.
#define Q4KR4PAIR(M, off, xo, s0, s1) \
	VMOVDQU off(SI), Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y14, Y2, Y2; \
	VPAND Y14, Y3, Y3; \
	VPBROADCASTW s0(SP), Y4; \
	VPBROADCASTW s1(SP), Y5; \
	VPMADDUBSW xo(DI), Y2, Y6; \
	VPMADDUBSW xo+32(DI), Y3, Y7; \
	M(Y4, Y6, Y8); \
	M(Y5, Y7, Y8); \
	VPMADDUBSW xo+256(DI), Y2, Y6; \
	VPMADDUBSW xo+288(DI), Y3, Y7; \
	M(Y4, Y6, Y9); \
	M(Y5, Y7, Y9); \
	VPMADDUBSW xo+512(DI), Y2, Y6; \
	VPMADDUBSW xo+544(DI), Y3, Y7; \
	M(Y4, Y6, Y10); \
	M(Y5, Y7, Y10); \
	VPMADDUBSW xo+768(DI), Y2, Y6; \
	VPMADDUBSW xo+800(DI), Y3, Y7; \
	M(Y4, Y6, Y11); \
	M(Y5, Y7, Y11)

// Q4KR4SB adds one Q4_K super-block (SI) against four packed x rows (DI:
// int8, R9: scales, R8: sums per 16) to X0's four lanes:
// sum += float32(float32(d·dx)·float32(is)) - float32(float32(dmin·dx)·float32(im)),
// is = Σ sc_j·s_j and im = Σ m_j·Σx_j in int32 (exact, any order), as
// dotQ4KAVX2 for each row. Y14 holds 0x0F bytes; K4SCALES clobbers AX,
// BX, DX, R10…R13.
#define Q4KR4SB(M) \
	K4SCALES; \
	VMOVQ R12, X1; \
	VPMOVZXBW X1, X1; \
	VMOVDQU X1, 0(SP); \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	Q4KR4PAIR(M, 16, 0, 0, 2); \
	Q4KR4PAIR(M, 48, 64, 4, 6); \
	Q4KR4PAIR(M, 80, 128, 8, 10); \
	Q4KR4PAIR(M, 112, 192, 12, 14); \
	R4REDUCE(Y8, Y9, Y10, Y11, X8, X9); \
	VMOVQ R13, X1; \
	VPUNPCKLBW X1, X1, X1; \
	VPMOVZXBW X1, Y1; \
	VPMADDWD 0(R8), Y1, Y10; \
	VPMADDWD 32(R8), Y1, Y11; \
	VPMADDWD 64(R8), Y1, Y12; \
	VPMADDWD 96(R8), Y1, Y13; \
	R4REDUCE(Y10, Y11, Y12, Y13, X10, X11); \
	MOVL (SI), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS X1, X2; \
	VMOVSHDUP X1, X3; \
	VBROADCASTSS X3, X3; \
	VMOVUPS (R9), X4; \
	VMULPS X4, X2, X2; \
	VCVTDQ2PS X8, X5; \
	VMULPS X5, X2, X2; \
	VMULPS X4, X3, X3; \
	VCVTDQ2PS X10, X6; \
	VMULPS X6, X3, X3; \
	VSUBPS X3, X2, X2; \
	VADDPS X2, X0, X0; \
	ADDQ $144, SI; \
	ADDQ $1024, DI; \
	ADDQ $16, R9; \
	ADDQ $128, R8

// Q6KR4PART adds to Y8, Y11, Y12 and Y15 (x rows 0…3) the int32 products
// sc·q·x of the 32 6-bit values in Y9 (Q6KQ0…3) against each row's 32
// int8 at xoff(DI) (rows 256 bytes apart): two groups of 16, whose scales
// are the int16 at s0(SP) and s1(SP).
#define Q6KR4PART(M, xoff, s0, s1) \
	VPBROADCASTW s0(SP), X4; \
	VPBROADCASTW s1(SP), X5; \
	VINSERTI128 $1, X5, Y4, Y4; \
	VPMADDUBSW xoff(DI), Y9, Y6; \
	M(Y4, Y6, Y8); \
	VPMADDUBSW xoff+256(DI), Y9, Y6; \
	M(Y4, Y6, Y11); \
	VPMADDUBSW xoff+512(DI), Y9, Y6; \
	M(Y4, Y6, Y12); \
	VPMADDUBSW xoff+768(DI), Y9, Y6; \
	M(Y4, Y6, Y15)

// Q6KR4HALF does one half (128 values) of a Q6_K super-block against the
// four x rows (Q6KHALF's arguments).
#define Q6KR4HALF(M, ql, qlb, qh, x0, x1, x2, x3, s0, s1, s2, s3, s4, s5, s6, s7) \
	Q6KLOAD(ql, qlb, qh); \
	Q6KQ0; \
	Q6KR4PART(M, x0, s0, s1); \
	Q6KQ1; \
	Q6KR4PART(M, x1, s2, s3); \
	Q6KQ2; \
	Q6KR4PART(M, x2, s4, s5); \
	Q6KQ3; \
	Q6KR4PART(M, x3, s6, s7)

// Q6KR4SB adds one Q6_K super-block (SI) against four packed x rows (DI,
// R9, R8 as for Q4KR4SB) to X0's four lanes:
// sum += float32(float32(d·dx)·float32(is)), is = Σ sc_g·s_g - 32·Σ sc_g·Σx_g
// in int32 (intDot's integer: int32 arithmetic wraps alike in any order).
// Y13 and Y14 hold K6CONSTS.
#define Q6KR4SB(M) \
	VPMOVSXBW 192(SI), Y9; \
	VMOVDQU Y9, 0(SP); \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y11, Y11, Y11; \
	VPXOR Y12, Y12, Y12; \
	VPXOR Y15, Y15, Y15; \
	Q6KR4HALF(M, 0, 32, 128, 0, 32, 64, 96, 0, 2, 4, 6, 8, 10, 12, 14); \
	Q6KR4HALF(M, 64, 96, 160, 128, 160, 192, 224, 16, 18, 20, 22, 24, 26, 28, 30); \
	R4REDUCE(Y8, Y11, Y12, Y15, X8, X9); \
	VMOVDQU 0(SP), Y1; \
	VPMADDWD 0(R8), Y1, Y10; \
	VPMADDWD 32(R8), Y1, Y11; \
	VPMADDWD 64(R8), Y1, Y12; \
	VPMADDWD 96(R8), Y1, Y15; \
	R4REDUCE(Y10, Y11, Y12, Y15, X10, X11); \
	VPSLLD $5, X10, X10; \
	VPSUBD X10, X8, X8; \
	MOVWLZX 208(SI), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS X1, X1; \
	VMULPS (R9), X1, X1; \
	VCVTDQ2PS X8, X4; \
	VMULPS X4, X1, X1; \
	VADDPS X1, X0, X0; \
	ADDQ $210, SI; \
	ADDQ $1024, DI; \
	ADDQ $16, R9; \
	ADDQ $128, R8

// Q8R4AVX2 and Q8R4VNNI leave in Y8…Y11 (x rows 0…3) int32 lanes that
// add up to the block sum Σ w·x of the Q8_0 block at SI against each row's
// 32 int8 at DI (rows 32 bytes apart). AVX2: |w| (unsigned) times x with
// w's sign (VPSIGNB, VPMADDUBSW: at most 2·128·127, no saturation), pairs
// added by VPMADDWD with Y15's int16 ones. VNNI: VPDPBUSD of w+128
// (unsigned, Y13: 0x80 bytes) and x, from -128·Σx of the row (the int32
// at R8, in lane 0): the same integer.
#define Q8R4AVX2 \
	VMOVDQU 2(SI), Y1; \
	VPSIGNB Y1, Y1, Y2; \
	VMOVDQU 0(DI), Y6; \
	VPSIGNB Y1, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD Y15, Y6, Y8; \
	VMOVDQU 32(DI), Y6; \
	VPSIGNB Y1, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD Y15, Y6, Y9; \
	VMOVDQU 64(DI), Y6; \
	VPSIGNB Y1, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD Y15, Y6, Y10; \
	VMOVDQU 96(DI), Y6; \
	VPSIGNB Y1, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD Y15, Y6, Y11

#define Q8R4VNNI \
	VPXOR 2(SI), Y13, Y2; \
	VMOVD 0(R8), X8; \
	VMOVD 4(R8), X9; \
	VMOVD 8(R8), X10; \
	VMOVD 12(R8), X11; \
	VPDPBUSD 0(DI), Y2, Y8; \
	VPDPBUSD 32(DI), Y2, Y9; \
	VPDPBUSD 64(DI), Y2, Y10; \
	VPDPBUSD 96(DI), Y2, Y11

// Q8R4B adds one Q8_0 block (SI) against four x rows packed by packAct4
// (DI: int8, R9: scales, R8: -128·Σx) to X0's four lanes, in intDot's
// order and rounding: sum += float32(float32(d·dx)·float32(s)). BLOCK is
// Q8R4AVX2 or Q8R4VNNI.
#define Q8R4B(BLOCK) \
	BLOCK; \
	R4REDUCE(Y8, Y9, Y10, Y11, X8, X9); \
	MOVWLZX (SI), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS X1, X1; \
	VMULPS (R9), X1, X1; \
	VCVTDQ2PS X8, X4; \
	VMULPS X4, X1, X1; \
	VADDPS X1, X0, X0; \
	ADDQ $34, SI; \
	ADDQ $128, DI; \
	ADDQ $16, R9; \
	ADDQ $16, R8

// QV quantizes the 8 float32 at off(SI) as quantizeAct does, to int32 in
// dst: y = x·id (Y3), rounded to nearest with halves away from zero
// (trunc(y), plus ±1 where |y - trunc(y)| ≥ 0.5: exact in float32),
// clamped to ±127, NaN to 0; using Y1, Y2 and Y8.
#define QV(off, dst) \
	VMULPS off(SI), Y3, dst; \
	VROUNDPS $3, dst, Y1; \
	VSUBPS Y1, dst, Y2; \
	VANDPS Y15, Y2, Y2; \
	VCMPPS $13, Y13, Y2, Y2; \
	VANDPS Y14, dst, Y8; \
	VORPS Y12, Y8, Y8; \
	VANDPS Y2, Y8, Y8; \
	VADDPS Y8, Y1, Y1; \
	VCMPPS $7, Y1, Y1, Y2; \
	VMINPS Y11, Y1, Y1; \
	VMAXPS Y10, Y1, Y1; \
	VANDPS Y2, Y1, Y1; \
	VCVTTPS2DQ Y1, dst

// The four-weight-row kernels (q4KC4*): four weight rows (W0: SI, W1:
// (SI)(R14*1), W2: (SI)(R14*2), W3: R11) against one row of x, for a
// one-row matmul (a decode step): the integer sums and intDot's float part
// of the four in one pass, the float part in an xmm lane per weight row.

// Q4KC4ROW adds to acc the int32 products sc·w·x of sub-blocks 2i and
// 2i+1 of one weight row: the 32 bytes of nibbles at addr against x's
// 64 int8 in Y12 (low nibbles) and Y13 (high), the scales the int16 at
// s0(SP) and s1(SP).
#define Q4KC4ROW(M, addr, s0, s1, acc) \
	VMOVDQU addr, Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y14, Y2, Y2; \
	VPAND Y14, Y3, Y3; \
	VPMADDUBSW Y12, Y2, Y6; \
	VPMADDUBSW Y13, Y3, Y7; \
	VPBROADCASTW s0(SP), Y4; \
	VPBROADCASTW s1(SP), Y5; \
	M(Y4, Y6, acc); \
	M(Y5, Y7, acc)

// Q4KC4PAIR does sub-blocks 2i and 2i+1 (nibbles at off, x at xo) of the
// four weight rows into Y8…Y11; row c's scale j is the int16 at
// 64+16c+2j(SP).
#define Q4KC4PAIR(M, off, xo, j) \
	VMOVDQU xo(DI), Y12; \
	VMOVDQU xo+32(DI), Y13; \
	Q4KC4ROW(M, off(SI), 64+2*j, 66+2*j, Y8); \
	Q4KC4ROW(M, off(SI)(R14*1), 80+2*j, 82+2*j, Y9); \
	Q4KC4ROW(M, off(SI)(R14*2), 96+2*j, 98+2*j, Y10); \
	Q4KC4ROW(M, off(R11), 112+2*j, 114+2*j, Y11)

// Q4KC4SCALES unpacks (VK4SCALES, using X1–X4) one weight row's scales to
// c(SP) and minimums to 32+c(SP), a byte each, and moves SI to the next
// row.
#define Q4KC4SCALES(c) \
	VMOVDQU (SI), X1; \
	VK4SCALES(X1, X2, X3, X4); \
	VMOVQ X2, c(SP); \
	VMOVHPS X2, 32+c(SP); \
	ADDQ R14, SI

// C4PF4 and C4PF6 prefetch (PREFETCHT0) the super-block at SI of the
// next group's four weight rows (SI + 4·R14 on), 144 and 210 bytes a row,
// using R15 (C4PF4 R11 too, before K4SCALES sets it; C4PF6 reads R11 as
// the group's fourth row): L3 to L2 ahead of the stream.
#define C4PF(o) \
	PREFETCHT0 o(R15); \
	PREFETCHT0 o(R15)(R14*1); \
	PREFETCHT0 o(R15)(R14*2); \
	PREFETCHT0 o(R11)

#define C4PF4 \
	LEAQ (SI)(R14*4), R15; \
	LEAQ (R15)(R14*2), R11; \
	ADDQ R14, R11; \
	C4PF(0); \
	C4PF(64); \
	C4PF(128)

#define C4PF6R(o) \
	PREFETCHT0 o(R15); \
	PREFETCHT0 o(R15)(R14*1); \
	PREFETCHT0 o(R15)(R14*2); \
	PREFETCHT0 o(R11)(R14*4)

#define C4PF6 \
	LEAQ (SI)(R14*4), R15; \
	C4PF6R(0); \
	C4PF6R(64); \
	C4PF6R(128); \
	C4PF6R(192)

// Q4KC4SB adds one super-block of the four Q4_K weight rows against x
// (DI: int8, R9: its scale, R8: its sums per 16, int32) to X0's lanes in
// intDot's order and rounding, as dotQ4KAVX2 does for each row.
#define Q4KC4SB(M) \
	C4PF4; \
	Q4KC4SCALES(0); \
	Q4KC4SCALES(8); \
	Q4KC4SCALES(16); \
	Q4KC4SCALES(24); \
	SUBQ R14, SI; \
	MOVQ SI, R11; \
	SUBQ R14, SI; \
	SUBQ R14, SI; \
	SUBQ R14, SI; \
	VPMOVZXBW 0(SP), X1; \
	VPMOVZXBW 8(SP), X2; \
	VINSERTI128 $1, X2, Y1, Y1; \
	VMOVDQU Y1, 64(SP); \
	VPMOVZXBW 16(SP), X1; \
	VPMOVZXBW 24(SP), X2; \
	VINSERTI128 $1, X2, Y1, Y1; \
	VMOVDQU Y1, 96(SP); \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	Q4KC4PAIR(M, 16, 0, 0); \
	Q4KC4PAIR(M, 48, 64, 2); \
	Q4KC4PAIR(M, 80, 128, 4); \
	Q4KC4PAIR(M, 112, 192, 6); \
	R4REDUCE(Y8, Y9, Y10, Y11, X8, X9); \
	VMOVDQU (R8), Y1; \
	VPHADDD 32(R8), Y1, Y1; \
	VPERMQ $0xD8, Y1, Y1; \
	VEXTRACTI128 $1, Y1, X2; \
	VPACKSSDW X2, X1, X1; \
	VPMOVZXBW 32(SP), X10; \
	VPMOVZXBW 40(SP), X11; \
	VPMOVZXBW 48(SP), X12; \
	VPMOVZXBW 56(SP), X13; \
	VPMADDWD X1, X10, X10; \
	VPMADDWD X1, X11, X11; \
	VPMADDWD X1, X12, X12; \
	VPMADDWD X1, X13, X13; \
	VPHADDD X11, X10, X10; \
	VPHADDD X13, X12, X12; \
	VPHADDD X12, X10, X10; \
	VMOVD 0(SI), X1; \
	VPINSRD $1, 0(SI)(R14*1), X1, X1; \
	VPINSRD $2, 0(SI)(R14*2), X1, X1; \
	VPINSRD $3, 0(R11), X1, X1; \
	VCVTPH2PS X1, Y1; \
	VEXTRACTF128 $1, Y1, X2; \
	VSHUFPS $0x88, X2, X1, X3; \
	VSHUFPS $0xDD, X2, X1, X4; \
	VBROADCASTSS (R9), X5; \
	VMULPS X5, X3, X3; \
	VCVTDQ2PS X8, X6; \
	VMULPS X6, X3, X3; \
	VMULPS X5, X4, X4; \
	VCVTDQ2PS X10, X7; \
	VMULPS X7, X4, X4; \
	VSUBPS X4, X3, X3; \
	VADDPS X3, X0, X0; \
	ADDQ $144, SI; \
	ADDQ $256, DI; \
	ADDQ $4, R9; \
	ADDQ $64, R8

// Q6KC4RUN adds to acc the int32 products sc·q·x of the 32 6-bit values
// in Y9 against x's 32 int8 at xoff(DI), the two groups' scales the int16
// at s0(SP) and s1(SP).
#define Q6KC4RUN(M, xoff, s0, s1, acc) \
	VPBROADCASTW s0(SP), X4; \
	VPBROADCASTW s1(SP), X5; \
	VINSERTI128 $1, X5, Y4, Y4; \
	VPMADDUBSW xoff(DI), Y9, Y6; \
	M(Y4, Y6, acc)

// Q6KC4HALF does half h of one Q6_K weight row's super-block (its ql at a
// and b, qh at t; its scales at sc(SP), 16 int16) into acc.
#define Q6KC4HALF(M, a, b, t, h, sc, acc) \
	VMOVDQU a, Y2; \
	VMOVDQU b, Y3; \
	VMOVDQU t, Y7; \
	Q6KQ0; \
	Q6KC4RUN(M, 128*h, sc+16*h, sc+16*h+2, acc); \
	Q6KQ1; \
	Q6KC4RUN(M, 128*h+32, sc+16*h+4, sc+16*h+6, acc); \
	Q6KQ2; \
	Q6KC4RUN(M, 128*h+64, sc+16*h+8, sc+16*h+10, acc); \
	Q6KQ3; \
	Q6KC4RUN(M, 128*h+96, sc+16*h+12, sc+16*h+14, acc)

// Q6KC4SB adds one super-block of four Q6_K weight rows (SI,
// (SI)(R14*1), (SI)(R14*2), R11) against x (DI, R9, R8 as for Q4KC4SB) to
// X0's lanes, as dotQ6KAVX2 does for each row; Y13 and Y14 hold
// K6CONSTS.
#define Q6KC4SB(M) \
	C4PF6; \
	VPMOVSXBW 192(SI), Y1; \
	VMOVDQU Y1, 0(SP); \
	VPMOVSXBW 192(SI)(R14*1), Y1; \
	VMOVDQU Y1, 32(SP); \
	VPMOVSXBW 192(SI)(R14*2), Y1; \
	VMOVDQU Y1, 64(SP); \
	VPMOVSXBW 192(R11), Y1; \
	VMOVDQU Y1, 96(SP); \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y11, Y11, Y11; \
	VPXOR Y12, Y12, Y12; \
	VPXOR Y15, Y15, Y15; \
	Q6KC4HALF(M, 0(SI), 32(SI), 128(SI), 0, 0, Y8); \
	Q6KC4HALF(M, 64(SI), 96(SI), 160(SI), 1, 0, Y8); \
	Q6KC4HALF(M, 0(SI)(R14*1), 32(SI)(R14*1), 128(SI)(R14*1), 0, 32, Y11); \
	Q6KC4HALF(M, 64(SI)(R14*1), 96(SI)(R14*1), 160(SI)(R14*1), 1, 32, Y11); \
	Q6KC4HALF(M, 0(SI)(R14*2), 32(SI)(R14*2), 128(SI)(R14*2), 0, 64, Y12); \
	Q6KC4HALF(M, 64(SI)(R14*2), 96(SI)(R14*2), 160(SI)(R14*2), 1, 64, Y12); \
	Q6KC4HALF(M, 0(R11), 32(R11), 128(R11), 0, 96, Y15); \
	Q6KC4HALF(M, 64(R11), 96(R11), 160(R11), 1, 96, Y15); \
	R4REDUCE(Y8, Y11, Y12, Y15, X8, X9); \
	VMOVDQU (R8), Y1; \
	VPACKSSDW 32(R8), Y1, Y1; \
	VPERMQ $0xD8, Y1, Y1; \
	VPMADDWD 0(SP), Y1, Y10; \
	VPMADDWD 32(SP), Y1, Y11; \
	VPMADDWD 64(SP), Y1, Y12; \
	VPMADDWD 96(SP), Y1, Y15; \
	R4REDUCE(Y10, Y11, Y12, Y15, X10, X11); \
	VPSLLD $5, X10, X10; \
	VPSUBD X10, X8, X8; \
	VPXOR X1, X1, X1; \
	VPINSRW $0, 208(SI), X1, X1; \
	VPINSRW $1, 208(SI)(R14*1), X1, X1; \
	VPINSRW $2, 208(SI)(R14*2), X1, X1; \
	VPINSRW $3, 208(R11), X1, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS (R9), X5; \
	VMULPS X5, X1, X1; \
	VCVTDQ2PS X8, X4; \
	VMULPS X4, X1, X1; \
	VADDPS X1, X0, X0; \
	ADDQ $210, SI; \
	ADDQ $210, R11; \
	ADDQ $256, DI; \
	ADDQ $4, R9; \
	ADDQ $64, R8

// Q8C4AVX2 and Q8C4VNNI leave in X8 the block sums Σ w·x of four Q8_0
// weight rows' blocks (2(SI), 2(SI)(R14*1), 2(SI)(R14*2), 2(R11))
// against x's 32 int8 at DI: AVX2 as Q8R4AVX2 (Y15: int16 ones); VNNI
// VPDPBUSD of w+128 (Y13: 0x80 bytes) and x, less 128·Σx (x's two sums
// per 16 at R8).
#define Q8C4AVX2ROW(addr, acc) \
	VMOVDQU addr, Y1; \
	VPSIGNB Y1, Y1, Y2; \
	VPSIGNB Y1, Y12, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD Y15, Y6, acc

#define Q8C4AVX2 \
	VMOVDQU (DI), Y12; \
	Q8C4AVX2ROW(2(SI), Y8); \
	Q8C4AVX2ROW(2(SI)(R14*1), Y9); \
	Q8C4AVX2ROW(2(SI)(R14*2), Y10); \
	Q8C4AVX2ROW(2(R11), Y11); \
	R4REDUCE(Y8, Y9, Y10, Y11, X8, X9)

#define Q8C4VNNIROW(addr, acc) \
	VPXOR addr, Y13, Y2; \
	VPXOR acc, acc, acc; \
	VPDPBUSD Y12, Y2, acc

#define Q8C4VNNI \
	VMOVDQU (DI), Y12; \
	Q8C4VNNIROW(2(SI), Y8); \
	Q8C4VNNIROW(2(SI)(R14*1), Y9); \
	Q8C4VNNIROW(2(SI)(R14*2), Y10); \
	Q8C4VNNIROW(2(R11), Y11); \
	R4REDUCE(Y8, Y9, Y10, Y11, X8, X9); \
	MOVL (R8), AX; \
	ADDL 4(R8), AX; \
	SHLL $7, AX; \
	VMOVD AX, X9; \
	VPBROADCASTD X9, X9; \
	VPSUBD X9, X8, X8

// Q8C4B adds one block of the four Q8_0 weight rows against x (DI, R9:
// its scale per block, R8: its sums per 16) to X0's lanes in intDot's
// order and rounding, as dotQ8_0AVX2 does for each row. BLOCK is Q8C4AVX2
// or Q8C4VNNI.
#define Q8C4B(BLOCK) \
	BLOCK; \
	VPXOR X1, X1, X1; \
	VPINSRW $0, 0(SI), X1, X1; \
	VPINSRW $1, 0(SI)(R14*1), X1, X1; \
	VPINSRW $2, 0(SI)(R14*2), X1, X1; \
	VPINSRW $3, 0(R11), X1, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS (R9), X5; \
	VMULPS X5, X1, X1; \
	VCVTDQ2PS X8, X4; \
	VMULPS X4, X1, X1; \
	VADDPS X1, X0, X0; \
	ADDQ $34, SI; \
	ADDQ $34, R11; \
	ADDQ $32, DI; \
	ADDQ $4, R9; \
	ADDQ $8, R8

// C4ROWS starts a group of four weight rows: x from the arguments, n
// super-blocks in CX, X0 zero.
#define C4ROWS \
	MOVQ x+16(FP), DI; \
	MOVQ d+24(FP), R9; \
	MOVQ sums+32(FP), R8; \
	MOVQ n+40(FP), CX; \
	VXORPS X0, X0, X0

// C4ROWS3 is C4ROWS with R11 at the group's fourth row.
#define C4ROWS3 \
	C4ROWS; \
	LEAQ (SI)(R14*2), R11; \
	ADDQ R14, R11

// C4LOOP is the body of a four-weight-row kernel after its constants: for
// each group of four rows (label group, started by START), its
// super-blocks (label sb) by BLOCK, then C4NEXT.
#define C4LOOP(START, BLOCK, group, sb) \
group: \
	START; \
sb: \
	BLOCK; \
	DECQ CX; \
	JNZ sb; \
	C4NEXT; \
	SUBQ $4, rows+48(FP); \
	JNZ group; \
	VZEROUPPER; \
	RET

// C4NEXT stores X0's four results at out, moves out on by four and SI
// from the end of the group's first row to the next group's.
#define C4NEXT \
	MOVQ out+0(FP), AX; \
	VMOVUPS X0, (AX); \
	ADDQ $16, AX; \
	MOVQ AX, out+0(FP); \
	LEAQ (SI)(R14*2), SI; \
	ADDQ R14, SI

// Q40R4 leaves in X8 the four block sums Σ (q-8)·x of the Q4_0 block at
// SI (f16 d, 16 bytes of nibbles: values 0…15 low, 16…31 high) against
// the four x rows' 32 int8 at DI (32 bytes apart): the unsigned nibbles
// times x (AVX2: VPMADDUBSW, then VPMADDWD by Y15's ones; VNNI:
// VPDPBUSD), reduced, plus -8·Σx (the packed -128·Σx at R8, shifted).
// M4 is Q40AVX2 or Q40VNNI; Y14 holds 0x0F bytes.
#define Q40AVX2(xo, acc) \
	VPMADDUBSW xo(DI), Y2, Y6; \
	VPMADDWD Y15, Y6, acc

#define Q40VNNI(xo, acc) \
	VPXOR acc, acc, acc; \
	VPDPBUSD xo(DI), Y2, acc

#define Q40R4(M4) \
	VMOVDQU 2(SI), X2; \
	VPSRLW $4, X2, X3; \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPAND Y14, Y2, Y2; \
	M4(0, Y8); \
	M4(32, Y9); \
	M4(64, Y10); \
	M4(96, Y11); \
	R4REDUCE(Y8, Y9, Y10, Y11, X8, X9); \
	VMOVDQU (R8), X9; \
	VPSRAD $4, X9, X9; \
	VPADDD X9, X8, X8

// Q40R4B adds one Q4_0 block (SI) against four packed x rows to X0's
// lanes, as Q8R4B does for Q8_0.
#define Q40R4B(M4) \
	Q40R4(M4); \
	MOVWLZX (SI), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS X1, X1; \
	VMULPS (R9), X1, X1; \
	VCVTDQ2PS X8, X4; \
	VMULPS X4, X1, X1; \
	VADDPS X1, X0, X0; \
	ADDQ $18, SI; \
	ADDQ $128, DI; \
	ADDQ $16, R9; \
	ADDQ $16, R8

// R4ROW starts a weight row of a multi-row kernel: the packed x from the
// arguments, n super-blocks in CX, X0 zero.
#define R4ROW \
	MOVQ x+16(FP), DI; \
	MOVQ d+24(FP), R9; \
	MOVQ sums+32(FP), R8; \
	MOVQ n+40(FP), CX; \
	VXORPS X0, X0, X0

// R4STORE writes X0's four lanes to out (x row r at out + r·ldo bytes)
// and moves out on by a float32.
#define R4STORE \
	MOVQ out+0(FP), AX; \
	MOVQ ldo+56(FP), BX; \
	VMOVSS X0, (AX); \
	VEXTRACTPS $1, X0, (AX)(BX*1); \
	LEAQ (AX)(BX*2), DX; \
	VEXTRACTPS $2, X0, (DX); \
	VEXTRACTPS $3, X0, (DX)(BX*1); \
	ADDQ $4, AX; \
	MOVQ AX, out+0(FP)

// R4LOOP is the body of a multi-row kernel after its constants: for each
// weight row (label row), its blocks (label blk) by BLOCK, then R4STORE.
#define R4LOOP(BLOCK, row, blk) \
row: \
	R4ROW; \
blk: \
	BLOCK; \
	DECQ CX; \
	JNZ blk; \
	R4STORE; \
	DECQ rows+48(FP); \
	JNZ row; \
	VZEROUPPER; \
	RET

// NIBBLEMASK sets Y14 to 0x0F bytes.
#define NIBBLEMASK \
	MOVL $0x0F0F0F0F, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14

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

// func sumsQ4KAVX2(w *byte, x *int8, n int, out *int32)
// n Q4_K super-blocks (144 bytes: f16 d and dmin, 12 bytes of scales, 128
// of nibbles) against n×256 int8 of x: each 32 bytes c (c < 4) of
// nibbles give sub-block 2c (low nibbles, times x[64c…64c+31]) and 2c+1
// (high nibbles, times x[64c+32…64c+63]): 8 sums per super-block.
TEXT ·sumsQ4KAVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

q4ksb:
	TESTQ CX, CX
	JZ q4kdone
	ADDQ $16, SI // past d, dmin and the scales
	MOVQ $4, R8

q4kloop:
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
	DECQ R8
	JNZ q4kloop
	DECQ CX
	JMP q4ksb

q4kdone:
	VZEROUPPER
	RET

// Q6H computes the 8 group sums of half H (0 or 1) of the Q6_K
// super-block at SI against the x at DI into 32 bytes at DX+32·H: the
// 6-bit codes q of values 32k+l (k < 4, l < 32) are the low (k even) or
// high (k odd) nibble of ql[l + 32·(k&1)] with bits 2k, 2k+1 of qh[l] on
// top; group g is the 16 values 16g…16g+15.
#define Q6H(H) \
	VMOVDQU (64*H)(SI), Y0; \
	VMOVDQU (64*H+32)(SI), Y1; \
	VMOVDQU (128+32*H)(SI), Y2; \
	VPAND Y14, Y0, Y3; \
	VPSRLW $4, Y0, Y4; \
	VPAND Y14, Y4, Y4; \
	VPAND Y14, Y1, Y5; \
	VPSRLW $4, Y1, Y6; \
	VPAND Y14, Y6, Y6; \
	VPSLLW $4, Y2, Y7; \
	VPAND Y13, Y7, Y7; \
	VPOR Y7, Y3, Y3; \
	VPSLLW $2, Y2, Y7; \
	VPAND Y13, Y7, Y7; \
	VPOR Y7, Y5, Y5; \
	VPAND Y13, Y2, Y7; \
	VPOR Y7, Y4, Y4; \
	VPSRLW $2, Y2, Y7; \
	VPAND Y13, Y7, Y7; \
	VPOR Y7, Y6, Y6; \
	VPMADDUBSW (128*H)(DI), Y3, Y3; \
	VPMADDUBSW (128*H+32)(DI), Y5, Y5; \
	VPMADDUBSW (128*H+64)(DI), Y4, Y4; \
	VPMADDUBSW (128*H+96)(DI), Y6, Y6; \
	VPMADDWD Y15, Y3, Y3; \
	VPMADDWD Y15, Y5, Y5; \
	VPMADDWD Y15, Y4, Y4; \
	VPMADDWD Y15, Y6, Y6; \
	VPHADDD Y5, Y3, Y3; \
	VPHADDD Y6, Y4, Y4; \
	VPHADDD Y4, Y3, Y3; \
	VEXTRACTI128 $1, Y3, X4; \
	VPUNPCKLDQ X4, X3, X5; \
	VPUNPCKHDQ X4, X3, X6; \
	VMOVDQU X5, (32*H)(DX); \
	VMOVDQU X6, (32*H+16)(DX)

// func sumsQ6KAVX2(w *byte, x *int8, n int, out *int32)
// n Q6_K super-blocks (210 bytes: ql, qh, scales, f16 d) against n×256
// int8 of x: 16 group sums of the unsigned codes (0…63) per super-block
// (VPHADDD's lane order: the low 128-bit lane holds the even groups of
// each half, the high lane the odd ones, interleaved back on store).
TEXT ·sumsQ6KAVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x30303030, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13 // the two top bits, in place

q6loop:
	TESTQ CX, CX
	JZ q6done
	Q6H(0)
	Q6H(1)
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $64, DX
	DECQ CX
	JMP q6loop

q6done:
	VZEROUPPER
	RET

// COMBINE adds the block's float term to X0 in intDot's order and
// rounding: X0 += float32(float32(f16(w at SI)·d at R9)·float32(AX)).
// VCVTPH2PS is exact, like f16; every op is a scalar float32 op, rounded
// on its own.
#define COMBINE \
	MOVWLZX (SI), BX; \
	VMOVD BX, X8; \
	VCVTPH2PS X8, X8; \
	VMULSS (R9), X8, X8; \
	VCVTSI2SSL AX, X9, X9; \
	VMULSS X9, X8, X8; \
	VADDSS X8, X0, X0

// func dotQ8_0AVX2(w *byte, x *int8, d *float32, n int) float32
// The whole integer-kernel dot product of a row of n Q8_0 blocks: each
// block's sum as sumsQ8_0AVX2, then intDot's float part.
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), R9
	MOVQ n+24(FP), CX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	VXORPS X0, X0, X0

dq8loop:
	TESTQ CX, CX
	JZ dq8done
	VMOVDQU 2(SI), Y1
	VMOVDQU (DI), Y2
	VPSIGNB Y1, Y1, Y3
	VPSIGNB Y1, Y2, Y4
	VPMADDUBSW Y4, Y3, Y4
	VPMADDWD Y15, Y4, Y4
	HSUM(Y4, X4, X5, AX)
	COMBINE
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, R9
	DECQ CX
	JMP dq8loop

dq8done:
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// func dotQ4_0AVX2(w *byte, x *int8, d *float32, sums *int32, n int) float32
// The same for Q4_0: the nibble sum less 8·Σx (sums holds Σx per 16).
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), R9
	MOVQ sums+24(FP), R8
	MOVQ n+32(FP), CX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS X0, X0, X0

dq4loop:
	TESTQ CX, CX
	JZ dq4done
	VMOVDQU 2(SI), X1
	VPSRLW $4, X1, X2
	VINSERTI128 $1, X2, Y1, Y1
	VPAND Y14, Y1, Y1
	VMOVDQU (DI), Y2
	VPMADDUBSW Y2, Y1, Y4
	VPMADDWD Y15, Y4, Y4
	HSUM(Y4, X4, X5, AX)
	MOVL (R8), BX
	ADDL 4(R8), BX
	SHLL $3, BX
	SUBL BX, AX
	COMBINE
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, R9
	ADDQ $8, R8
	DECQ CX
	JMP dq4loop

dq4done:
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// Q4KPAIR adds the int32 products sc·(pair sums) of two sub-blocks of a
// Q4_K super-block to Y8: the 32 bytes of nibbles at off(SI) (sub-block
// 2i in the low nibbles, 2i+1 in the high) against the 64 int8 of x at
// xoff(DI), the sub-blocks' scales the int16 at s0(SP) and s1(SP).
#define Q4KPAIR(off, xlo, xhi, s0, s1) \
	VMOVDQU off(SI), Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y14, Y2, Y2; \
	VPAND Y14, Y3, Y3; \
	VPMADDUBSW xlo(DI), Y2, Y2; \
	VPMADDUBSW xhi(DI), Y3, Y3; \
	VPBROADCASTW s0(SP), Y4; \
	VPBROADCASTW s1(SP), Y5; \
	VPMADDWD Y4, Y2, Y2; \
	VPMADDWD Y5, Y3, Y3; \
	VPADDD Y2, Y8, Y8; \
	VPADDD Y3, Y8, Y8

// func dotQ4KAVX2(w *byte, x *int8, d *float32, sums *int32, n int) float32
// The whole integer-kernel dot product of a row of n Q4_K super-blocks
// (144 bytes: f16 d and dmin, 12 bytes of 6-bit scales and minimums, 128
// bytes of nibbles) against n×256 int8 of x (d: x's scale per super-block;
// sums: Σx per 16). intDot's integer parts, is = Σ sc_j·s_j and
// im = Σ m_j·Σx_j, are summed in int32 vectors, one horizontal add each per
// super-block (integer sums are exact: any order gives intDot's); then
// its float part, scalar, in its order and rounding.
TEXT ·dotQ4KAVX2(SB), NOSPLIT, $16-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), R9
	MOVQ sums+24(FP), R8
	MOVQ n+32(FP), CX
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS X0, X0, X0

dq4kloop:
	TESTQ CX, CX
	JZ dq4kdone
	K4SCALES
	VMOVQ R12, X1
	VPMOVZXBW X1, X1
	VMOVDQU X1, 0(SP) // sc_j as int16 at 2j(SP)

	// is = Σ sc_j·s_j
	VPXOR Y8, Y8, Y8
	Q4KPAIR(16, 0, 32, 0, 2)
	Q4KPAIR(48, 64, 96, 4, 6)
	Q4KPAIR(80, 128, 160, 8, 10)
	Q4KPAIR(112, 192, 224, 12, 14)
	HSUM(Y8, X8, X9, AX)

	// im = Σ m_j·(Σx of sub-block j): the 16 sums per 16 added in pairs
	// (VPHADDD orders them 0 1 4 5 | 2 3 6 7; VPERMQ puts them in order).
	VMOVDQU (R8), Y10
	VMOVDQU 32(R8), Y11
	VPHADDD Y11, Y10, Y12
	VPERMQ $0xD8, Y12, Y12
	VMOVQ R13, X13
	VPMOVZXBD X13, Y13
	VPMULLD Y13, Y12, Y12
	HSUM(Y12, X12, X9, BX)

	// sum += float32(float32(d·dx)·float32(is)) - float32(float32(dmin·dx)·float32(im))
	MOVL (SI), DX
	VMOVD DX, X1
	VCVTPH2PS X1, X1 // d, dmin
	VMOVSS (R9), X2
	VMULSS X2, X1, X3
	VCVTSI2SSL AX, X4, X4
	VMULSS X4, X3, X3
	VMOVSHDUP X1, X5
	VMULSS X2, X5, X5
	VCVTSI2SSL BX, X6, X6
	VMULSS X6, X5, X5
	VSUBSS X5, X3, X3
	VADDSS X3, X0, X0

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, R9
	ADDQ $64, R8
	DECQ CX
	JMP dq4kloop

dq4kdone:
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// Q6KPART adds to Y8 the int32 products sc·(pair sums) of the 32 6-bit
// values in Y9 against the 32 int8 of x at xoff(DI): two groups of 16,
// whose scales are the int16 at s0(SP) (low lane) and s1(SP) (high lane).
#define Q6KPART(xoff, s0, s1) \
	VPMADDUBSW xoff(DI), Y9, Y6; \
	VPBROADCASTW s0(SP), X4; \
	VPBROADCASTW s1(SP), X5; \
	VINSERTI128 $1, X5, Y4, Y4; \
	VPMADDWD Y4, Y6, Y6; \
	VPADDD Y6, Y8, Y8

// func dotQ6KAVX2(w *byte, x *int8, d *float32, sums *int32, n int) float32
// The whole integer-kernel dot product of a row of n Q6_K super-blocks
// (210 bytes: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
// scales, f16 d) against n×256 int8 of x (d: x's scale per super-block;
// sums: Σx per 16): intDot's is = Σ sc_g·(s_g - 32·Σx_g) as
// Σ sc_g·s_g - 32·Σ sc_g·Σx_g in int32 vectors (the same integer: int32
// arithmetic wraps alike in any order), then its float part, scalar.
TEXT ·dotQ6KAVX2(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), R9
	MOVQ sums+24(FP), R8
	MOVQ n+32(FP), CX
	K6CONSTS
	VXORPS X0, X0, X0

dq6kloop:
	TESTQ CX, CX
	JZ dq6kdone
	VPMOVSXBW 192(SI), Y9
	VMOVDQU Y9, 0(SP) // sc_g as int16 at 2g(SP)
	VPXOR Y8, Y8, Y8
	Q6KHALF(0, 32, 128, 0, 32, 64, 96, 0, 2, 4, 6, 8, 10, 12, 14)
	Q6KHALF(64, 96, 160, 128, 160, 192, 224, 16, 18, 20, 22, 24, 26, 28, 30)
	HSUM(Y8, X8, X9, AX)
	VPMOVSXBD 192(SI), Y9
	VPMOVSXBD 200(SI), Y10
	VPMULLD (R8), Y9, Y9
	VPMULLD 32(R8), Y10, Y10
	VPADDD Y10, Y9, Y9
	HSUM(Y9, X9, X10, BX)
	SHLL $5, BX
	SUBL BX, AX

	// sum += float32(float32(d·dx)·float32(is))
	MOVWLZX 208(SI), DX
	VMOVD DX, X1
	VCVTPH2PS X1, X1
	VMULSS (R9), X1, X1
	VCVTSI2SSL AX, X4, X4
	VMULSS X4, X1, X1
	VADDSS X1, X0, X0

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, R9
	ADDQ $64, R8
	DECQ CX
	JMP dq6kloop

dq6kdone:
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func dequantQ6KAVX2(w *byte, dst *float32, n int)
// dequantQ6K of n super-blocks: each value float32(float32(d·sc)·(q-32)),
// every product rounded on its own as in the Go code (the same bits, a
// NaN's payload aside, which matMul makes canonical).
TEXT ·dequantQ6KAVX2(SB), NOSPLIT, $96-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	K6CONSTS
	MOVL $0x20202020, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12

deq6kloop:
	TESTQ CX, CX
	JZ deq6kdone
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4288(SI)
	Q6KSB(D6)
	ADDQ $210, SI
	ADDQ $1024, DI
	DECQ CX
	JMP deq6kloop

deq6kdone:
	VZEROUPPER
	RET

// func dequantQ4_0AVX2(w *byte, dst *float32, n int)
// dequantQ4_0 of n blocks: each value float32(float32(q-8)·d) (the same
// bits, a NaN's payload aside, which matMul makes canonical).
TEXT ·dequantQ4_0AVX2(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x08080808, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12

deq40loop:
	TESTQ CX, CX
	JZ deq40done
	MOVWLZX (SI), DX
	VMOVD DX, X1
	VCVTPH2PS X1, X1
	VBROADCASTSS X1, Y4
	VMOVDQU 2(SI), X2
	VPSRLW $4, X2, X3
	VINSERTI128 $1, X3, Y2, Y2 // values 0..15 low nibbles, 16..31 high
	VPAND Y14, Y2, Y2
	VPSUBB Y12, Y2, Y2
	VPMOVSXBD X2, Y5
	VPSRLDQ $8, X2, X3
	VPMOVSXBD X3, Y6
	VEXTRACTI128 $1, Y2, X2
	VPMOVSXBD X2, Y7
	VPSRLDQ $8, X2, X3
	VPMOVSXBD X3, Y8
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VCVTDQ2PS Y8, Y8
	VMULPS Y4, Y5, Y5
	VMULPS Y4, Y6, Y6
	VMULPS Y4, Y7, Y7
	VMULPS Y4, Y8, Y8
	VMOVUPS Y5, (DI)
	VMOVUPS Y6, 32(DI)
	VMOVUPS Y7, 64(DI)
	VMOVUPS Y8, 96(DI)
	ADDQ $18, SI
	ADDQ $128, DI
	DECQ CX
	JMP deq40loop

deq40done:
	VZEROUPPER
	RET

// func dequantQ4KAVX2(w *byte, dst *float32, n int)
// dequantQ4K of n super-blocks: each value float32(d·sc)·q - float32(dmin·m),
// every product and difference rounded on its own as in the Go code (the
// same bits; a NaN's payload aside, which matMul makes canonical).
TEXT ·dequantQ4KAVX2(SB), NOSPLIT, $128-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

deq4kloop:
	TESTQ CX, CX
	JZ deq4kdone
	K4SCALES
	K4SUBSCALES
	XORQ R14, R14
	LEAQ 16(SI), R15 // the nibbles, 32 bytes a pair of sub-blocks

deq4kpair:
	VMOVDQU (R15), Y7
	VPSRLW $4, Y7, Y11
	VPAND Y14, Y7, Y7
	VPAND Y14, Y11, Y11
	K4HALVES
	ADDQ $256, DI
	ADDQ $32, R15
	INCQ R14
	CMPQ R14, $4
	JLT deq4kpair
	ADDQ $144, SI
	DECQ CX
	JMP deq4kloop

deq4kdone:
	VZEROUPPER
	RET

// func dequantQ5KAVX2(w *byte, dst *float32, n int)
// dequantQ5K of n super-blocks: Q4_K's values with a fifth bit from qh
// (bit 2i of qh[l] tops value l of sub-block 2i, bit 2i+1 that of 2i+1),
// each op rounded on its own as in the Go code (the same bits, a NaN's
// payload aside).
TEXT ·dequantQ5KAVX2(SB), NOSPLIT, $128-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x01010101, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13

deq5kloop:
	TESTQ CX, CX
	JZ deq5kdone
	K4SCALES
	K4SUBSCALES
	VMOVDQU 16(SI), Y15 // qh
	XORQ R14, R14
	LEAQ 48(SI), R15

deq5kpair:
	VMOVDQU (R15), Y7
	VPSRLW $4, Y7, Y11
	VPAND Y14, Y7, Y7
	VPAND Y14, Y11, Y11
	MOVQ R14, AX
	SHLQ $1, AX
	VMOVQ AX, X10
	VPSRLW X10, Y15, Y12 // qh >> 2i
	VPAND Y13, Y12, Y10
	VPSLLW $4, Y10, Y10
	VPOR Y10, Y7, Y7
	VPSRLW $1, Y12, Y12
	VPAND Y13, Y12, Y12
	VPSLLW $4, Y12, Y12
	VPOR Y12, Y11, Y11
	K4HALVES
	ADDQ $256, DI
	ADDQ $32, R15
	INCQ R14
	CMPQ R14, $4
	JLT deq5kpair
	ADDQ $176, SI
	DECQ CX
	JMP deq5kloop

deq5kdone:
	VZEROUPPER
	RET

// func q4KR4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)
// rows Q4_K weight rows of n super-blocks each (stored one after the
// other) against four x rows packed by packAct4 (x, d, sums): out[r·ldo/4 + j]
// is dotQ4KAVX2's result for x row r and weight row j. rows, n ≥ 1.
TEXT ·q4KR4AVX2(SB), NOSPLIT, $16-64
	MOVQ w+8(FP), SI
	NIBBLEMASK

	R4LOOP(Q4KR4SB(MADDAVX2), q4kr4row, q4kr4sb)

// func q4KR4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)
// q4KR4AVX2 with VPDPWSSD (AVX512-VNNI and AVX512VL).
TEXT ·q4KR4VNNI(SB), NOSPLIT, $16-64
	MOVQ w+8(FP), SI
	NIBBLEMASK

	R4LOOP(Q4KR4SB(MADDVNNI), q4kr4vrow, q4kr4vsb)

// func q6KR4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)
// q4KR4AVX2 for Q6_K weight rows: dotQ6KAVX2's results.
TEXT ·q6KR4AVX2(SB), NOSPLIT, $32-64
	MOVQ w+8(FP), SI
	K6CONSTS

	R4LOOP(Q6KR4SB(MADDAVX2), q6kr4row, q6kr4sb)

// func q6KR4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)
// q6KR4AVX2 with VPDPWSSD (AVX512-VNNI and AVX512VL).
TEXT ·q6KR4VNNI(SB), NOSPLIT, $32-64
	MOVQ w+8(FP), SI
	K6CONSTS

	R4LOOP(Q6KR4SB(MADDVNNI), q6kr4vrow, q6kr4vsb)

// func q8R4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)
// q4KR4AVX2 for Q8_0 weight rows of n blocks, x packed in blocks of 32:
// dotQ8_0AVX2's results.
TEXT ·q8R4AVX2(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15

	R4LOOP(Q8R4B(Q8R4AVX2), q8r4row, q8r4b)

// func q8R4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)
// q8R4AVX2 with VPDPBUSD (AVX512-VNNI and AVX512VL).
TEXT ·q8R4VNNI(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	MOVL $0x80808080, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13

	R4LOOP(Q8R4B(Q8R4VNNI), q8r4vrow, q8r4vb)

// func quantActAVX2(x *float32, n, bs int, qs *int8, d *float32, sums *int32)
// quantizeAct of n blocks of bs values (bs a multiple of 32), the same
// bits: amax as the largest |x| bit pattern (NaN above +Inf, as Go's max
// makes it NaN), d = amax/127, id = 1/d unless d is 0, infinite or NaN.
TEXT ·quantActAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ qs+24(FP), DI
	MOVQ d+32(FP), R10
	MOVQ sums+40(FP), R11
	VPCMPEQD Y15, Y15, Y15
	VPSLLD $31, Y15, Y14 // sign bits
	VPSRLD $1, Y15, Y15  // |x| mask
	MOVL $0x3F000000, AX // 0.5
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x3F800000, AX // 1
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	MOVL $0x42FE0000, AX // 127
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVL $0xC2FE0000, AX // -127
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVQ $0x0703060205010400, AX // VPERMD's order of the packed dwords
	VMOVQ AX, X9
	VPMOVZXBD X9, Y9

qablock:
	MOVQ bs+16(FP), DX
	MOVQ SI, R8
	VPXOR Y0, Y0, Y0

qaamax:
	VPAND (R8), Y15, Y1
	VPMAXUD Y1, Y0, Y0
	ADDQ $32, R8
	SUBQ $8, DX
	JNZ qaamax
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0x4E, X0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0xB1, X0, X1
	VPMAXUD X1, X0, X0
	VMOVD X0, AX
	VDIVSS X11, X0, X2 // d = amax/127
	VMOVSS X2, (R10)
	VXORPS X3, X3, X3
	CMPL AX, $0x7F800000
	JAE qaid // amax infinite or NaN: id = 0
	VMOVD X2, BX
	TESTL BX, BX
	JZ qaid
	VDIVSS X2, X12, X3 // id = 1/d

qaid:
	VBROADCASTSS X3, Y3
	MOVQ bs+16(FP), DX

qa32:
	QV(0, Y4)
	QV(32, Y5)
	QV(64, Y6)
	QV(96, Y7)
	VPADDD Y5, Y4, Y1
	VPADDD Y7, Y6, Y2
	VPHADDD Y2, Y1, Y1
	VPHADDD Y1, Y1, Y1
	VEXTRACTI128 $1, Y1, X2
	VPADDD X2, X1, X1
	VMOVQ X1, (R11) // Σq of the two groups of 16
	VPACKSSDW Y5, Y4, Y4
	VPACKSSDW Y7, Y6, Y6
	VPACKSSWB Y6, Y4, Y4
	VPERMD Y4, Y9, Y4
	VMOVDQU Y4, (DI)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $8, R11
	SUBQ $32, DX
	JNZ qa32
	ADDQ $4, R10
	DECQ CX
	JNZ qablock
	VZEROUPPER
	RET

// func q4KC4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// rows (a multiple of 4) Q4_K weight rows of n super-blocks, stride bytes
// apart, against one row of x (a q8Act: int8, scales, sums per 16):
// out[j] is dotQ4KAVX2's result for weight row j. rows, n ≥ 1.
TEXT ·q4KC4AVX2(SB), NOSPLIT, $128-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	NIBBLEMASK

	C4LOOP(C4ROWS, Q4KC4SB(MADDAVX2), q4kc4group, q4kc4sb)

// func q4KC4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// q4KC4AVX2 with VPDPWSSD (AVX512-VNNI and AVX512VL).
TEXT ·q4KC4VNNI(SB), NOSPLIT, $128-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	NIBBLEMASK

	C4LOOP(C4ROWS, Q4KC4SB(MADDVNNI), q4kc4vgroup, q4kc4vsb)

// func q6KC4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// q4KC4AVX2 for Q6_K weight rows: dotQ6KAVX2's results.
TEXT ·q6KC4AVX2(SB), NOSPLIT, $128-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	K6CONSTS

	C4LOOP(C4ROWS3, Q6KC4SB(MADDAVX2), q6kc4group, q6kc4sb)

// func q6KC4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// q6KC4AVX2 with VPDPWSSD (AVX512-VNNI and AVX512VL).
TEXT ·q6KC4VNNI(SB), NOSPLIT, $128-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	K6CONSTS

	C4LOOP(C4ROWS3, Q6KC4SB(MADDVNNI), q6kc4vgroup, q6kc4vsb)

// func q40R4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)
// q8R4AVX2 for Q4_0 weight rows: dotQ4_0AVX2's results.
TEXT ·q40R4AVX2(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	NIBBLEMASK
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15

	R4LOOP(Q40R4B(Q40AVX2), q40r4row, q40r4b)

// func q40R4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)
// q40R4AVX2 with VPDPBUSD (AVX512-VNNI and AVX512VL).
TEXT ·q40R4VNNI(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	NIBBLEMASK

	R4LOOP(Q40R4B(Q40VNNI), q40r4vrow, q40r4vb)

// func q8C4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// q4KC4AVX2 for Q8_0 weight rows of n blocks: dotQ8_0AVX2's results.
TEXT ·q8C4AVX2(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15

	C4LOOP(C4ROWS3, Q8C4B(Q8C4AVX2), q8c4group, q8c4b)

// func q8C4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// q8C4AVX2 with VPDPBUSD (AVX512-VNNI and AVX512VL).
TEXT ·q8C4VNNI(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	MOVL $0x80808080, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13

	C4LOOP(C4ROWS3, Q8C4B(Q8C4VNNI), q8c4vgroup, q8c4vb)

// func gemvQ4KAVX2(out, x *float32, w *byte, n, rows, stride int)
TEXT ·gemvQ4KAVX2(SB), NOSPLIT, $128-48
	MOVQ out+0(FP), R8
	MOVQ w+16(FP), R9
	MOVL $0x0F0F0F0F, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

g4krow:
	GEMVROW(Y12, Y13, g4kdone)

g4ksb:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	K4SCALES
	K4SUBSCALES
	XORQ R14, R14
	LEAQ 16(SI), R15 // the nibbles, 32 bytes a pair of sub-blocks

g4kpair:
	K4PAIRF
	ADDQ $256, DI
	ADDQ $32, R15
	INCQ R14
	CMPQ R14, $4
	JLT g4kpair
	ADDQ $144, SI
	DECQ CX
	JNZ g4ksb
	GEMVNEXT(Y12, Y13, X12, X13, g4krow)

g4kdone:
	VZEROUPPER
	RET

// func gemvQ6KAVX2(out, x *float32, w *byte, n, rows, stride int)
TEXT ·gemvQ6KAVX2(SB), NOSPLIT, $96-48
	MOVQ out+0(FP), R8
	MOVQ w+16(FP), R9
	K6CONSTS
	MOVL $0x20202020, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12

g6krow:
	GEMVROW(Y5, Y6, g6kdone)

g6ksb:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	PREFETCHT0 2240(SI)
	Q6KSB(D6F)
	ADDQ $210, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ g6ksb
	GEMVNEXT(Y5, Y6, X5, X6, g6krow)

g6kdone:
	VZEROUPPER
	RET

// The eight-row Q4_K kernel (q4KR8VNNI): one weight row against eight
// rows of x, two packs of packAct4 (rows 0…3 at DI, R9, R8; rows 4…7 at
// R14, R15, R13), so that the decoding of each weight block (nibbles,
// scales, minimums) serves eight x rows rather than four. The integer
// sums are exact and the float part runs in a ymm of eight lanes, one per
// x row, with Q4KR4SB's operations in its order, so each row's bits are
// q4KR4VNNI's (dotQ4KAVX2's).

// Q4KR8PAIR adds to Y8…Y15 (x rows 0…7) the int32 products sc·w·x of
// sub-blocks 2i and 2i+1 of the super-block at SI (Q4KR4PAIR's
// arguments); Y31 holds 0x0F bytes.
#define Q4KR8PAIR(off, xo, s0, s1) \
	VMOVDQU off(SI), Y2; \
	VPSRLW $4, Y2, Y3; \
	VPANDD Y31, Y2, Y2; \
	VPANDD Y31, Y3, Y3; \
	VPBROADCASTW s0(SP), Y4; \
	VPBROADCASTW s1(SP), Y5; \
	VPMADDUBSW xo(DI), Y2, Y6; \
	VPMADDUBSW xo+32(DI), Y3, Y7; \
	VPDPWSSD Y4, Y6, Y8; \
	VPDPWSSD Y5, Y7, Y8; \
	VPMADDUBSW xo+256(DI), Y2, Y16; \
	VPMADDUBSW xo+288(DI), Y3, Y17; \
	VPDPWSSD Y4, Y16, Y9; \
	VPDPWSSD Y5, Y17, Y9; \
	VPMADDUBSW xo+512(DI), Y2, Y18; \
	VPMADDUBSW xo+544(DI), Y3, Y19; \
	VPDPWSSD Y4, Y18, Y10; \
	VPDPWSSD Y5, Y19, Y10; \
	VPMADDUBSW xo+768(DI), Y2, Y20; \
	VPMADDUBSW xo+800(DI), Y3, Y21; \
	VPDPWSSD Y4, Y20, Y11; \
	VPDPWSSD Y5, Y21, Y11; \
	VPMADDUBSW xo(R14), Y2, Y22; \
	VPMADDUBSW xo+32(R14), Y3, Y23; \
	VPDPWSSD Y4, Y22, Y12; \
	VPDPWSSD Y5, Y23, Y12; \
	VPMADDUBSW xo+256(R14), Y2, Y24; \
	VPMADDUBSW xo+288(R14), Y3, Y25; \
	VPDPWSSD Y4, Y24, Y13; \
	VPDPWSSD Y5, Y25, Y13; \
	VPMADDUBSW xo+512(R14), Y2, Y26; \
	VPMADDUBSW xo+544(R14), Y3, Y27; \
	VPDPWSSD Y4, Y26, Y14; \
	VPDPWSSD Y5, Y27, Y14; \
	VPMADDUBSW xo+768(R14), Y2, Y28; \
	VPMADDUBSW xo+800(R14), Y3, Y29; \
	VPDPWSSD Y4, Y28, Y15; \
	VPDPWSSD Y5, Y29, Y15

// Q4KR8SB adds one Q4_K super-block (SI) against the eight x rows to Y0's
// eight lanes, as Q4KR4SB does for four: the scales and minimums unpacked
// in vector registers (VK4SCALES), the sub-block scales as int16 at 0(SP),
// the minimums, each twice (one per 16 values), in Y1.
#define Q4KR8SB \
	VMOVDQU (SI), X1; \
	VK4SCALES(X1, X2, X3, X4); \
	VPMOVZXBW X2, Y3; \
	VMOVDQU Y3, 0(SP); \
	VPSRLDQ $8, X2, X1; \
	VPUNPCKLBW X1, X1, X1; \
	VPMOVZXBW X1, Y1; \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	VPXOR Y12, Y12, Y12; \
	VPXOR Y13, Y13, Y13; \
	VPXOR Y14, Y14, Y14; \
	VPXOR Y15, Y15, Y15; \
	Q4KR8PAIR(16, 0, 0, 2); \
	Q4KR8PAIR(48, 64, 4, 6); \
	Q4KR8PAIR(80, 128, 8, 10); \
	Q4KR8PAIR(112, 192, 12, 14); \
	R4REDUCE(Y8, Y9, Y10, Y11, X8, X9); \
	R4REDUCE(Y12, Y13, Y14, Y15, X12, X13); \
	VINSERTI128 $1, X12, Y8, Y8; \
	VPMADDWD 0(R8), Y1, Y10; \
	VPMADDWD 32(R8), Y1, Y11; \
	VPMADDWD 64(R8), Y1, Y12; \
	VPMADDWD 96(R8), Y1, Y13; \
	R4REDUCE(Y10, Y11, Y12, Y13, X10, X11); \
	VPMADDWD 0(R13), Y1, Y11; \
	VPMADDWD 32(R13), Y1, Y12; \
	VPMADDWD 64(R13), Y1, Y13; \
	VPMADDWD 96(R13), Y1, Y14; \
	R4REDUCE(Y11, Y12, Y13, Y14, X11, X12); \
	VINSERTI128 $1, X11, Y10, Y10; \
	MOVL (SI), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS X1, Y2; \
	VMOVSHDUP X1, X3; \
	VBROADCASTSS X3, Y3; \
	VMOVUPS (R9), X4; \
	VINSERTF128 $1, (R15), Y4, Y4; \
	VMULPS Y4, Y2, Y2; \
	VCVTDQ2PS Y8, Y5; \
	VMULPS Y5, Y2, Y2; \
	VMULPS Y4, Y3, Y3; \
	VCVTDQ2PS Y10, Y6; \
	VMULPS Y6, Y3, Y3; \
	VSUBPS Y3, Y2, Y2; \
	VADDPS Y2, Y0, Y0; \
	ADDQ $144, SI; \
	ADDQ $1024, DI; \
	ADDQ $1024, R14; \
	ADDQ $16, R9; \
	ADDQ $16, R15; \
	ADDQ $128, R8; \
	ADDQ $128, R13

// func q4KR8VNNI(out *float32, w *byte, x *int8, d *float32, sums *int16, x2 *int8, d2 *float32, sums2 *int16, n, rows, ldo int)
// rows Q4_K weight rows of n super-blocks each (stored one after the
// other) against eight x rows, two packs of packAct4 (x, d, sums: rows
// 0…3; x2, d2, sums2: rows 4…7): out[r·ldo/4 + j] is dotQ4KAVX2's result
// for x row r and weight row j. rows, n ≥ 1. Needs AVX512-VNNI, BW and VL.
TEXT ·q4KR8VNNI(SB), NOSPLIT, $32-88
	MOVQ w+8(FP), SI
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y31

q4kr8row:
	MOVQ x+16(FP), DI
	MOVQ d+24(FP), R9
	MOVQ sums+32(FP), R8
	MOVQ x2+40(FP), R14
	MOVQ d2+48(FP), R15
	MOVQ sums2+56(FP), R13
	MOVQ n+64(FP), CX
	VXORPS Y0, Y0, Y0

q4kr8sb:
	Q4KR8SB
	DECQ CX
	JNZ q4kr8sb
	MOVQ out+0(FP), AX
	MOVQ ldo+80(FP), BX
	VMOVSS X0, (AX)
	VEXTRACTPS $1, X0, (AX)(BX*1)
	LEAQ (AX)(BX*2), DX
	VEXTRACTPS $2, X0, (DX)
	VEXTRACTPS $3, X0, (DX)(BX*1)
	LEAQ (DX)(BX*2), DX
	VEXTRACTF128 $1, Y0, X1
	VMOVSS X1, (DX)
	VEXTRACTPS $1, X1, (DX)(BX*1)
	LEAQ (DX)(BX*2), DX
	VEXTRACTPS $2, X1, (DX)
	VEXTRACTPS $3, X1, (DX)(BX*1)
	ADDQ $4, AX
	MOVQ AX, out+0(FP)
	DECQ rows+72(FP)
	JNZ q4kr8row
	VZEROUPPER
	RET

// The eight-weight-row Q4_K tile kernel (q4KT8VNNI, kernelSet.tile8):
// eight weight rows repacked by repackQ4KT8 against the four x rows of a
// pack of packAct4. Each 32-bit lane holds one weight row's four nibbles
// of a sub-block, so one VPDPBUSD of a weight ymm and a broadcast of four
// of an x row's int8 adds 32 products into the eight rows' lanes, with no
// horizontal sums; a sub-block's sums are kept in two halves of 16
// values, each within int16 (|Σ| ≤ 16·15·127), whose int32 lanes are then
// int16 pairs (Σ, its sign) that one VPDPWSSD by the pairs (sc_j, 0)
// multiplies by the sub-block's 6-bit scale. One integer multiply per 32
// products and two per 256, rather than two per 32. The integer sums are
// exact and the float part runs lane by lane with Q4KR4SB's operations in
// its order, so each result's bits are q4KR4VNNI's.

// T8SUB adds to Y4…Y7 (x rows 0…3) sc_j times the sums of sub-block j
// (its 32 nibbles of each weight row at 256j(SI), the x rows' 32 int8 at
// 32j(DI), 256 bytes apart): values 0-3, 8-11, … in Y8…Y11, the others in
// Y16…Y19; Y12 clobbered.
#define T8STEP(woff, xoff, A0, A1, A2, A3) \
	VMOVDQU woff(SI), Y12; \
	VPDPBUSD.BCST xoff(DI), Y12, A0; \
	VPDPBUSD.BCST xoff+256(DI), Y12, A1; \
	VPDPBUSD.BCST xoff+512(DI), Y12, A2; \
	VPDPBUSD.BCST xoff+768(DI), Y12, A3

#define T8SUB(j) \
	VPXOR Y8, Y8, Y8; \
	VPXOR Y9, Y9, Y9; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	VPXORD Y16, Y16, Y16; \
	VPXORD Y17, Y17, Y17; \
	VPXORD Y18, Y18, Y18; \
	VPXORD Y19, Y19, Y19; \
	T8STEP(256*j, 32*j, Y8, Y9, Y10, Y11); \
	T8STEP(256*j+32, 32*j+4, Y16, Y17, Y18, Y19); \
	T8STEP(256*j+64, 32*j+8, Y8, Y9, Y10, Y11); \
	T8STEP(256*j+96, 32*j+12, Y16, Y17, Y18, Y19); \
	T8STEP(256*j+128, 32*j+16, Y8, Y9, Y10, Y11); \
	T8STEP(256*j+160, 32*j+20, Y16, Y17, Y18, Y19); \
	T8STEP(256*j+192, 32*j+24, Y8, Y9, Y10, Y11); \
	T8STEP(256*j+224, 32*j+28, Y16, Y17, Y18, Y19); \
	VMOVDQU (2048+32*j)(SI), Y12; \
	VPDPWSSD Y12, Y8, Y4; \
	VPDPWSSD Y12, Y16, Y4; \
	VPDPWSSD Y12, Y9, Y5; \
	VPDPWSSD Y12, Y17, Y5; \
	VPDPWSSD Y12, Y10, Y6; \
	VPDPWSSD Y12, Y18, Y6; \
	VPDPWSSD Y12, Y11, Y7; \
	VPDPWSSD Y12, Y19, Y7

// T8MIN adds to Y8…Y11 m_j·(Σx of sub-block j) for each x row (the pair
// of int16 sums per 16 at 4j(R8), rows 32 bytes apart).
#define T8MIN(j) \
	VMOVDQU (2304+32*j)(SI), Y12; \
	VPDPWSSD.BCST (4*j)(R8), Y12, Y8; \
	VPDPWSSD.BCST (4*j+32)(R8), Y12, Y9; \
	VPDPWSSD.BCST (4*j+64)(R8), Y12, Y10; \
	VPDPWSSD.BCST (4*j+96)(R8), Y12, Y11

// T8FLOAT adds to acc (x row r's eight lanes) the super-block's
// float32(float32(d·dx)·float32(is)) - float32(float32(dmin·dx)·float32(im)).
#define T8FLOAT(r, is, im, acc) \
	VBROADCASTSS (4*r)(R9), Y13; \
	VMULPS 2560(SI), Y13, Y14; \
	VCVTDQ2PS is, Y15; \
	VMULPS Y15, Y14, Y14; \
	VMULPS 2592(SI), Y13, Y13; \
	VCVTDQ2PS im, Y15; \
	VMULPS Y15, Y13, Y13; \
	VSUBPS Y13, Y14, Y14; \
	VADDPS Y14, acc, acc

// func q4KT8VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)
// eight Q4_K weight rows of n super-blocks repacked by repackQ4KT8 (t)
// against the four x rows of a pack of packAct4: out[r·ldo/4 + j] for x
// row r and weight row j. n ≥ 1. Needs AVX512-VNNI and VL.
TEXT ·q4KT8VNNI(SB), NOSPLIT, $0-56
	MOVQ t+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ d+24(FP), R9
	MOVQ sums+32(FP), R8
	MOVQ n+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q4kt8sb:
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	T8SUB(0)
	T8SUB(1)
	T8SUB(2)
	T8SUB(3)
	T8SUB(4)
	T8SUB(5)
	T8SUB(6)
	T8SUB(7)
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	T8MIN(0)
	T8MIN(1)
	T8MIN(2)
	T8MIN(3)
	T8MIN(4)
	T8MIN(5)
	T8MIN(6)
	T8MIN(7)
	T8FLOAT(0, Y4, Y8, Y0)
	T8FLOAT(1, Y5, Y9, Y1)
	T8FLOAT(2, Y6, Y10, Y2)
	T8FLOAT(3, Y7, Y11, Y3)
	ADDQ $2624, SI
	ADDQ $1024, DI
	ADDQ $16, R9
	ADDQ $128, R8
	DECQ CX
	JNZ q4kt8sb
	MOVQ out+0(FP), AX
	MOVQ ldo+48(FP), BX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, (AX)(BX*1)
	LEAQ (AX)(BX*2), DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, (DX)(BX*1)
	VZEROUPPER
	RET

// repackQ4KT8AVX512 is repackQ4KT8: each 32 bytes of nibbles of the
// eight rows an 8×8 transpose of dwords, then split into low and high
// nibbles; the scales and minimums unpacked by VK4SCALES, their bytes
// transposed and widened.

// T8LOAD8 loads the eight rows' 32 bytes at off into Y0…Y7 (rows rb
// bytes apart: R8 = rb, R10 = 3rb, R11 = 5rb, R12 = 7rb).
#define T8LOAD8(off) \
	VMOVDQU off(SI), Y0; \
	VMOVDQU off(SI)(R8*1), Y1; \
	VMOVDQU off(SI)(R8*2), Y2; \
	VMOVDQU off(SI)(R10*1), Y3; \
	VMOVDQU off(SI)(R8*4), Y4; \
	VMOVDQU off(SI)(R11*1), Y5; \
	VMOVDQU off(SI)(R10*2), Y6; \
	VMOVDQU off(SI)(R12*1), Y7

// T8NIBOUT stores the low nibbles of D (dword i of the eight rows) at
// dst(DI) and its high ones at dst+256(DI), clobbering D and Y15; Y16
// holds 0x0F bytes.
#define T8NIBOUT(D, dst) \
	VPANDD Y16, D, Y15; \
	VMOVDQU Y15, dst(DI); \
	VPSRLW $4, D, D; \
	VPANDD Y16, D, D; \
	VMOVDQU D, dst+256(DI)

// T8TRANS loads the eight rows' 32 bytes at off and transposes them as
// dwords: dword i of the eight rows in Y8, Y10, Y12, Y14, Y9, Y11, Y13,
// Y0 for i = 0…7; Y1…Y7 and Y15 clobbered.
#define T8TRANS(off) \
	T8LOAD8(off); \
	VPUNPCKLDQ Y1, Y0, Y8; \
	VPUNPCKHDQ Y1, Y0, Y9; \
	VPUNPCKLDQ Y3, Y2, Y10; \
	VPUNPCKHDQ Y3, Y2, Y11; \
	VPUNPCKLDQ Y5, Y4, Y12; \
	VPUNPCKHDQ Y5, Y4, Y13; \
	VPUNPCKLDQ Y7, Y6, Y14; \
	VPUNPCKHDQ Y7, Y6, Y15; \
	VPUNPCKLQDQ Y10, Y8, Y0; \
	VPUNPCKHQDQ Y10, Y8, Y1; \
	VPUNPCKLQDQ Y11, Y9, Y2; \
	VPUNPCKHQDQ Y11, Y9, Y3; \
	VPUNPCKLQDQ Y14, Y12, Y4; \
	VPUNPCKHQDQ Y14, Y12, Y5; \
	VPUNPCKLQDQ Y15, Y13, Y6; \
	VPUNPCKHQDQ Y15, Y13, Y7; \
	VPERM2I128 $0x20, Y4, Y0, Y8; \
	VPERM2I128 $0x31, Y4, Y0, Y9; \
	VPERM2I128 $0x20, Y5, Y1, Y10; \
	VPERM2I128 $0x31, Y5, Y1, Y11; \
	VPERM2I128 $0x20, Y6, Y2, Y12; \
	VPERM2I128 $0x31, Y6, Y2, Y13; \
	VPERM2I128 $0x20, Y7, Y3, Y14; \
	VPERM2I128 $0x31, Y7, Y3, Y0

// T8NIB repacks the nibbles of sub-blocks 2p and 2p+1 (the 32 bytes at
// off of each row) to 512p(DI).
#define T8NIB(off, dst) \
	T8TRANS(off); \
	T8NIBOUT(Y8, dst); \
	T8NIBOUT(Y10, dst+32); \
	T8NIBOUT(Y12, dst+64); \
	T8NIBOUT(Y14, dst+96); \
	T8NIBOUT(Y9, dst+128); \
	T8NIBOUT(Y11, dst+160); \
	T8NIBOUT(Y13, dst+192); \
	T8NIBOUT(Y0, dst+224)

// T8DM stores the float32 d and dmin of the row at src to 2560+4r(DI)
// and 2592+4r(DI).
#define T8DM(src, r) \
	MOVL src, AX; \
	VMOVD AX, X0; \
	VCVTPH2PS X0, X0; \
	VMOVSS X0, (2560+4*r)(DI); \
	VEXTRACTPS $1, X0, (2592+4*r)(DI)

// T8SCJ stores sub-block j's scales (int32) and minimums (two int16) of
// the eight rows from the transposed bytes at 8j(SP) and 64+8j(SP).
#define T8SCJ(j) \
	VPMOVZXBD (8*j)(SP), Y0; \
	VMOVDQU Y0, (2048+32*j)(DI); \
	VPMOVZXBD (64+8*j)(SP), Y1; \
	VPSLLD $16, Y1, Y2; \
	VPOR Y2, Y1, Y1; \
	VMOVDQU Y1, (2304+32*j)(DI)

// func repackQ4KT8AVX512(t *byte, w *byte, rb, nsb int)
TEXT ·repackQ4KT8AVX512(SB), NOSPLIT, $128-32
	MOVQ t+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), R8
	MOVQ nsb+24(FP), CX
	LEAQ (R8)(R8*2), R10
	LEAQ (R8)(R8*4), R11
	LEAQ (R10)(R8*4), R12
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y16

t8rsb:
	T8NIB(16, 0)
	T8NIB(48, 512)
	T8NIB(80, 1024)
	T8NIB(112, 1536)
	VMOVDQU (SI), X10
	VK4SCALES(X10, X0, X8, X9)
	VMOVDQU (SI)(R8*1), X10
	VK4SCALES(X10, X1, X8, X9)
	VMOVDQU (SI)(R8*2), X10
	VK4SCALES(X10, X2, X8, X9)
	VMOVDQU (SI)(R10*1), X10
	VK4SCALES(X10, X3, X8, X9)
	VMOVDQU (SI)(R8*4), X10
	VK4SCALES(X10, X4, X8, X9)
	VMOVDQU (SI)(R11*1), X10
	VK4SCALES(X10, X5, X8, X9)
	VMOVDQU (SI)(R10*2), X10
	VK4SCALES(X10, X6, X8, X9)
	VMOVDQU (SI)(R12*1), X10
	VK4SCALES(X10, X7, X8, X9)
	VPUNPCKLBW X1, X0, X8
	VPUNPCKHBW X1, X0, X9
	VPUNPCKLBW X3, X2, X10
	VPUNPCKHBW X3, X2, X11
	VPUNPCKLBW X5, X4, X12
	VPUNPCKHBW X5, X4, X13
	VPUNPCKLBW X7, X6, X14
	VPUNPCKHBW X7, X6, X15
	VPUNPCKLWD X10, X8, X0
	VPUNPCKHWD X10, X8, X1
	VPUNPCKLWD X14, X12, X2
	VPUNPCKHWD X14, X12, X3
	VPUNPCKLWD X11, X9, X4
	VPUNPCKHWD X11, X9, X5
	VPUNPCKLWD X15, X13, X6
	VPUNPCKHWD X15, X13, X7
	VPUNPCKLDQ X2, X0, X8
	VPUNPCKHDQ X2, X0, X9
	VPUNPCKLDQ X3, X1, X10
	VPUNPCKHDQ X3, X1, X11
	VPUNPCKLDQ X6, X4, X12
	VPUNPCKHDQ X6, X4, X13
	VPUNPCKLDQ X7, X5, X14
	VPUNPCKHDQ X7, X5, X15
	VMOVDQU X8, 0(SP)
	VMOVDQU X9, 16(SP)
	VMOVDQU X10, 32(SP)
	VMOVDQU X11, 48(SP)
	VMOVDQU X12, 64(SP)
	VMOVDQU X13, 80(SP)
	VMOVDQU X14, 96(SP)
	VMOVDQU X15, 112(SP)
	T8SCJ(0)
	T8SCJ(1)
	T8SCJ(2)
	T8SCJ(3)
	T8SCJ(4)
	T8SCJ(5)
	T8SCJ(6)
	T8SCJ(7)
	T8DM((SI), 0)
	T8DM((SI)(R8*1), 1)
	T8DM((SI)(R8*2), 2)
	T8DM((SI)(R10*1), 3)
	T8DM((SI)(R8*4), 4)
	T8DM((SI)(R11*1), 5)
	T8DM((SI)(R10*2), 6)
	T8DM((SI)(R12*1), 7)
	ADDQ $144, SI
	ADDQ $2624, DI
	DECQ CX
	JNZ t8rsb
	VZEROUPPER
	RET


// The eight-weight-row Q6_K tile kernel (q6KT8VNNI, kernelSet.tile8Q6):
// eight weight rows repacked by repackQ6KT8 against the four x rows of a
// pack of packAct4, as q4KT8VNNI for Q4_K: each 32-bit lane one weight
// row's four 6-bit values, one VPDPBUSD of a weight ymm and a broadcast of
// four of an x row's int8 adding 32 products into the eight rows' lanes.
// A group's sum of 16 products (|Σ| ≤ 16·63·127) needs int32, so VPMULLD
// multiplies it by the group's scale; the minimum part 32·Σ sc_g·Σx_g is
// one VPDPWSSD per pair of groups and x row. The integer sums are exact
// (int32 arithmetic wraps alike in any order) and the float part runs
// lane by lane with Q6KR4SB's operations in its order, so each result's
// bits are q6KR4VNNI's.

// Q6T8Q adds to A0…A3 (x rows 0…3) the products of the eight rows' four
// values at woff(SI) and each x row's four int8 at xoff(DI) (rows 256
// bytes apart); Y12 clobbered.
#define Q6T8Q(woff, xoff, A0, A1, A2, A3) \
	VMOVDQU woff(SI), Y12; \
	VPDPBUSD.BCST xoff(DI), Y12, A0; \
	VPDPBUSD.BCST xoff+256(DI), Y12, A1; \
	VPDPBUSD.BCST xoff+512(DI), Y12, A2; \
	VPDPBUSD.BCST xoff+768(DI), Y12, A3

// Q6T8G adds to Y4…Y7 (x rows 0…3) sc_g times the sums of group g (16
// values), using A0…A3 and Y12, Y13.
#define Q6T8G(g, A0, A1, A2, A3) \
	VPXORD A0, A0, A0; \
	VPXORD A1, A1, A1; \
	VPXORD A2, A2, A2; \
	VPXORD A3, A3, A3; \
	Q6T8Q(128*g, 16*g, A0, A1, A2, A3); \
	Q6T8Q(128*g+32, 16*g+4, A0, A1, A2, A3); \
	Q6T8Q(128*g+64, 16*g+8, A0, A1, A2, A3); \
	Q6T8Q(128*g+96, 16*g+12, A0, A1, A2, A3); \
	VMOVDQU (2048+32*g)(SI), Y13; \
	VPMULLD Y13, A0, A0; \
	VPMULLD Y13, A1, A1; \
	VPMULLD Y13, A2, A2; \
	VPMULLD Y13, A3, A3; \
	VPADDD A0, Y4, Y4; \
	VPADDD A1, Y5, Y5; \
	VPADDD A2, Y6, Y6; \
	VPADDD A3, Y7, Y7

// Q6T8MIN adds to Y8…Y11 sc_2p·Σx_2p + sc_2p+1·Σx_2p+1 for each x row
// (the pair of int16 sums per 16 at 4p(R8), rows 32 bytes apart).
#define Q6T8MIN(p) \
	VMOVDQU (2560+32*p)(SI), Y12; \
	VPDPWSSD.BCST (4*p)(R8), Y12, Y8; \
	VPDPWSSD.BCST (4*p+32)(R8), Y12, Y9; \
	VPDPWSSD.BCST (4*p+64)(R8), Y12, Y10; \
	VPDPWSSD.BCST (4*p+96)(R8), Y12, Y11

// Q6T8FLOAT adds to acc (x row r's eight lanes) the super-block's
// float32(float32(d·dx)·float32(is - 32·im)).
#define Q6T8FLOAT(r, is, im, acc) \
	VPSLLD $5, im, im; \
	VPSUBD im, is, is; \
	VBROADCASTSS (4*r)(R9), Y13; \
	VMULPS 2816(SI), Y13, Y14; \
	VCVTDQ2PS is, Y15; \
	VMULPS Y15, Y14, Y14; \
	VADDPS Y14, acc, acc

// func q6KT8VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)
// eight Q6_K weight rows of n super-blocks repacked by repackQ6KT8 (t)
// against the four x rows of a pack of packAct4: out[r·ldo/4 + j] for x
// row r and weight row j. n ≥ 1. Needs AVX512-VNNI and VL.
TEXT ·q6KT8VNNI(SB), NOSPLIT, $0-56
	MOVQ t+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ d+24(FP), R9
	MOVQ sums+32(FP), R8
	MOVQ n+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

q6kt8sb:
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	Q6T8G(0, Y8, Y9, Y10, Y11)
	Q6T8G(1, Y16, Y17, Y18, Y19)
	Q6T8G(2, Y8, Y9, Y10, Y11)
	Q6T8G(3, Y16, Y17, Y18, Y19)
	Q6T8G(4, Y8, Y9, Y10, Y11)
	Q6T8G(5, Y16, Y17, Y18, Y19)
	Q6T8G(6, Y8, Y9, Y10, Y11)
	Q6T8G(7, Y16, Y17, Y18, Y19)
	Q6T8G(8, Y8, Y9, Y10, Y11)
	Q6T8G(9, Y16, Y17, Y18, Y19)
	Q6T8G(10, Y8, Y9, Y10, Y11)
	Q6T8G(11, Y16, Y17, Y18, Y19)
	Q6T8G(12, Y8, Y9, Y10, Y11)
	Q6T8G(13, Y16, Y17, Y18, Y19)
	Q6T8G(14, Y8, Y9, Y10, Y11)
	Q6T8G(15, Y16, Y17, Y18, Y19)
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	Q6T8MIN(0)
	Q6T8MIN(1)
	Q6T8MIN(2)
	Q6T8MIN(3)
	Q6T8MIN(4)
	Q6T8MIN(5)
	Q6T8MIN(6)
	Q6T8MIN(7)
	Q6T8FLOAT(0, Y4, Y8, Y0)
	Q6T8FLOAT(1, Y5, Y9, Y1)
	Q6T8FLOAT(2, Y6, Y10, Y2)
	Q6T8FLOAT(3, Y7, Y11, Y3)
	ADDQ $2848, SI
	ADDQ $1024, DI
	ADDQ $16, R9
	ADDQ $128, R8
	DECQ CX
	JNZ q6kt8sb
	MOVQ out+0(FP), AX
	MOVQ ldo+48(FP), BX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, (AX)(BX*1)
	LEAQ (AX)(BX*2), DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, (DX)(BX*1)
	VZEROUPPER
	RET

// repackQ6KT8AVX512 is repackQ6KT8: the bytes of ql and qh of the eight
// rows transposed as dwords (T8TRANS; a value's bits sit at the same byte
// of ql and qh, so the transposes commute with the decoding), then each
// dword's four 6-bit values decoded as Q6KQ0…Q6KQ3 do; the scales' bytes
// transposed and widened.

// Q6RSTORE stores the transposed registers to off(SP)…off+224(SP).
#define Q6RSTORE(off) \
	VMOVDQU Y8, off(SP); \
	VMOVDQU Y10, off+32(SP); \
	VMOVDQU Y12, off+64(SP); \
	VMOVDQU Y14, off+96(SP); \
	VMOVDQU Y9, off+128(SP); \
	VMOVDQU Y11, off+160(SP); \
	VMOVDQU Y13, off+192(SP); \
	VMOVDQU Y0, off+224(SP)

// Q6RLO and Q6RHI store to dst(DI) the values of dword m of ql (Q, its
// low or high nibbles) and qh (at 32m(SP), shifted by TS): Q's nibble |
// (TS(t))&0x30, with Y16: 0x0F bytes, Y17: 0x30 bytes; Y1, Y2 clobbered.
// Q6RHI0 is Q6RHI with t unshifted.
#define Q6RLO(Q, m, TS, dst) \
	VPANDD Y16, Q, Y1; \
	VMOVDQU (32*m)(SP), Y2; \
	TS; \
	VPANDD Y17, Y2, Y2; \
	VPORD Y2, Y1, Y1; \
	VMOVDQU Y1, dst(DI)
#define Q6RHI(Q, m, TS, dst) \
	VPSRLW $4, Q, Y1; \
	VPANDD Y16, Y1, Y1; \
	VMOVDQU (32*m)(SP), Y2; \
	TS; \
	VPANDD Y17, Y2, Y2; \
	VPORD Y2, Y1, Y1; \
	VMOVDQU Y1, dst(DI)
#define Q6RHI0(Q, m, dst) \
	VPSRLW $4, Q, Y1; \
	VPANDD Y16, Y1, Y1; \
	VPANDD (32*m)(SP), Y17, Y2; \
	VPORD Y2, Y1, Y1; \
	VMOVDQU Y1, dst(DI)
#define Q6SHL4 VPSLLW $4, Y2, Y2
#define Q6SHL2 VPSLLW $2, Y2, Y2
#define Q6SHR2 VPSRLW $2, Y2, Y2

// Q6RA decodes the transposed ql bytes 0…31 of half h: values 128h + 4m…
// (t's bits 0-1) and 128h + 64 + 4m… (bits 4-5), value quad i at 32i.
#define Q6RA(Q, m, h) \
	Q6RLO(Q, m, Q6SHL4, (32*(32*h+m))); \
	Q6RHI0(Q, m, (32*(32*h+16+m)))

// Q6RB decodes the transposed ql bytes 32…63 of half h: values 128h + 32
// + 4m… (t's bits 2-3) and 128h + 96 + 4m… (bits 6-7).
#define Q6RB(Q, m, h) \
	Q6RLO(Q, m, Q6SHL2, (32*(32*h+8+m))); \
	Q6RHI(Q, m, Q6SHR2, (32*(32*h+24+m)))

// Q6RHALF repacks the values of half h.
#define Q6RHALF(h) \
	T8TRANS(128+32*h); \
	Q6RSTORE(0); \
	T8TRANS(64*h); \
	Q6RA(Y8, 0, h); \
	Q6RA(Y10, 1, h); \
	Q6RA(Y12, 2, h); \
	Q6RA(Y14, 3, h); \
	Q6RA(Y9, 4, h); \
	Q6RA(Y11, 5, h); \
	Q6RA(Y13, 6, h); \
	Q6RA(Y0, 7, h); \
	T8TRANS(64*h+32); \
	Q6RB(Y8, 0, h); \
	Q6RB(Y10, 1, h); \
	Q6RB(Y12, 2, h); \
	Q6RB(Y14, 3, h); \
	Q6RB(Y9, 4, h); \
	Q6RB(Y11, 5, h); \
	Q6RB(Y13, 6, h); \
	Q6RB(Y0, 7, h)

// Q6RSC stores group g's scales (int32) of the eight rows from the
// transposed bytes at 256+8g(SP).
#define Q6RSC(g) \
	VPMOVSXBD (256+8*g)(SP), Y1; \
	VMOVDQU Y1, (2048+32*g)(DI)

// Q6RPAIR stores the pairs (sc_2p, sc_2p+1) of the eight rows as int16.
#define Q6RPAIR(p) \
	VPMOVSXBW (256+16*p)(SP), X1; \
	VPMOVSXBW (256+16*p+8)(SP), X2; \
	VPUNPCKLWD X2, X1, X3; \
	VPUNPCKHWD X2, X1, X4; \
	VMOVDQU X3, (2560+32*p)(DI); \
	VMOVDQU X4, (2560+32*p+16)(DI)

// Q6RD stores the float32 d of the row at src to 2816+4r(DI).
#define Q6RD(src, r) \
	MOVWLZX src, AX; \
	VMOVD AX, X1; \
	VCVTPH2PS X1, X1; \
	VMOVSS X1, (2816+4*r)(DI)

// func repackQ6KT8AVX512(t *byte, w *byte, rb, nsb int)
TEXT ·repackQ6KT8AVX512(SB), NOSPLIT, $384-32
	MOVQ t+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), R8
	MOVQ nsb+24(FP), CX
	LEAQ (R8)(R8*2), R10
	LEAQ (R8)(R8*4), R11
	LEAQ (R10)(R8*4), R12
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y16
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Y17

q6rsb:
	Q6RHALF(0)
	Q6RHALF(1)
	VMOVDQU 192(SI), X0
	VMOVDQU 192(SI)(R8*1), X1
	VMOVDQU 192(SI)(R8*2), X2
	VMOVDQU 192(SI)(R10*1), X3
	VMOVDQU 192(SI)(R8*4), X4
	VMOVDQU 192(SI)(R11*1), X5
	VMOVDQU 192(SI)(R10*2), X6
	VMOVDQU 192(SI)(R12*1), X7
	VPUNPCKLBW X1, X0, X8
	VPUNPCKHBW X1, X0, X9
	VPUNPCKLBW X3, X2, X10
	VPUNPCKHBW X3, X2, X11
	VPUNPCKLBW X5, X4, X12
	VPUNPCKHBW X5, X4, X13
	VPUNPCKLBW X7, X6, X14
	VPUNPCKHBW X7, X6, X15
	VPUNPCKLWD X10, X8, X0
	VPUNPCKHWD X10, X8, X1
	VPUNPCKLWD X14, X12, X2
	VPUNPCKHWD X14, X12, X3
	VPUNPCKLWD X11, X9, X4
	VPUNPCKHWD X11, X9, X5
	VPUNPCKLWD X15, X13, X6
	VPUNPCKHWD X15, X13, X7
	VPUNPCKLDQ X2, X0, X8
	VPUNPCKHDQ X2, X0, X9
	VPUNPCKLDQ X3, X1, X10
	VPUNPCKHDQ X3, X1, X11
	VPUNPCKLDQ X6, X4, X12
	VPUNPCKHDQ X6, X4, X13
	VPUNPCKLDQ X7, X5, X14
	VPUNPCKHDQ X7, X5, X15
	VMOVDQU X8, 256(SP)
	VMOVDQU X9, 272(SP)
	VMOVDQU X10, 288(SP)
	VMOVDQU X11, 304(SP)
	VMOVDQU X12, 320(SP)
	VMOVDQU X13, 336(SP)
	VMOVDQU X14, 352(SP)
	VMOVDQU X15, 368(SP)
	Q6RSC(0)
	Q6RSC(1)
	Q6RSC(2)
	Q6RSC(3)
	Q6RSC(4)
	Q6RSC(5)
	Q6RSC(6)
	Q6RSC(7)
	Q6RSC(8)
	Q6RSC(9)
	Q6RSC(10)
	Q6RSC(11)
	Q6RSC(12)
	Q6RSC(13)
	Q6RSC(14)
	Q6RSC(15)
	Q6RPAIR(0)
	Q6RPAIR(1)
	Q6RPAIR(2)
	Q6RPAIR(3)
	Q6RPAIR(4)
	Q6RPAIR(5)
	Q6RPAIR(6)
	Q6RPAIR(7)
	Q6RD(208(SI), 0)
	Q6RD(208(SI)(R8*1), 1)
	Q6RD(208(SI)(R8*2), 2)
	Q6RD(208(SI)(R10*1), 3)
	Q6RD(208(SI)(R8*4), 4)
	Q6RD(208(SI)(R11*1), 5)
	Q6RD(208(SI)(R10*2), 6)
	Q6RD(208(SI)(R12*1), 7)
	ADDQ $210, SI
	ADDQ $2848, DI
	DECQ CX
	JNZ q6rsb
	VZEROUPPER
	RET

// The sixteen-weight-row Q4_K tile kernel (q4KT16VNNI, kernelSet.tile16):
// q4KT8VNNI in zmm, sixteen weight rows repacked by repackQ4KT16 (two
// eight-row tiles, 32-byte chunk by chunk) in the sixteen lanes; the same
// operations lane by lane, so the same bits. VPDPBUSD on zmm does twice
// the products of one on ymm at less than twice the cost where the CPU
// has two 512-bit ports.
#define T16STEP(woff, xoff, A0, A1, A2, A3) \
	VMOVDQU64 (2*(woff))(SI), Z12; \
	VPDPBUSD.BCST xoff(DI), Z12, A0; \
	VPDPBUSD.BCST xoff+256(DI), Z12, A1; \
	VPDPBUSD.BCST xoff+512(DI), Z12, A2; \
	VPDPBUSD.BCST xoff+768(DI), Z12, A3

#define T16SUB(j) \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	T16STEP(256*j, 32*j, Z8, Z9, Z10, Z11); \
	T16STEP(256*j+32, 32*j+4, Z16, Z17, Z18, Z19); \
	T16STEP(256*j+64, 32*j+8, Z8, Z9, Z10, Z11); \
	T16STEP(256*j+96, 32*j+12, Z16, Z17, Z18, Z19); \
	T16STEP(256*j+128, 32*j+16, Z8, Z9, Z10, Z11); \
	T16STEP(256*j+160, 32*j+20, Z16, Z17, Z18, Z19); \
	T16STEP(256*j+192, 32*j+24, Z8, Z9, Z10, Z11); \
	T16STEP(256*j+224, 32*j+28, Z16, Z17, Z18, Z19); \
	VMOVDQU64 (4096+64*j)(SI), Z12; \
	VPDPWSSD Z12, Z8, Z4; \
	VPDPWSSD Z12, Z16, Z4; \
	VPDPWSSD Z12, Z9, Z5; \
	VPDPWSSD Z12, Z17, Z5; \
	VPDPWSSD Z12, Z10, Z6; \
	VPDPWSSD Z12, Z18, Z6; \
	VPDPWSSD Z12, Z11, Z7; \
	VPDPWSSD Z12, Z19, Z7

// T16MIN adds to Z8…Z11 m_j·(Σx of sub-block j) for each x row (the pair
// of int16 sums per 16 at 4j(R8), rows 32 bytes apart).
#define T16MIN(j) \
	VMOVDQU64 (4608+64*j)(SI), Z12; \
	VPDPWSSD.BCST (4*j)(R8), Z12, Z8; \
	VPDPWSSD.BCST (4*j+32)(R8), Z12, Z9; \
	VPDPWSSD.BCST (4*j+64)(R8), Z12, Z10; \
	VPDPWSSD.BCST (4*j+96)(R8), Z12, Z11

// T16FLOAT adds to acc (x row r's eight lanes) the super-block's
// float32(float32(d·dx)·float32(is)) - float32(float32(dmin·dx)·float32(im)).
#define T16FLOAT(r, is, im, acc) \
	VBROADCASTSS (4*r)(R9), Z13; \
	VMULPS 5120(SI), Z13, Z14; \
	VCVTDQ2PS is, Z15; \
	VMULPS Z15, Z14, Z14; \
	VMULPS 5184(SI), Z13, Z13; \
	VCVTDQ2PS im, Z15; \
	VMULPS Z15, Z13, Z13; \
	VSUBPS Z13, Z14, Z14; \
	VADDPS Z14, acc, acc

// func q4KT16VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)
// sixteen Q4_K weight rows of n super-blocks repacked by repackQ4KT16 (t)
// against the four x rows of a pack of packAct4: out[r·ldo/4 + j] for x
// row r and weight row j < 16. n ≥ 1. Needs AVX512-VNNI.
TEXT ·q4KT16VNNI(SB), NOSPLIT, $0-56
	MOVQ t+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ d+24(FP), R9
	MOVQ sums+32(FP), R8
	MOVQ n+40(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

q4kt16sb:
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	T16SUB(0)
	T16SUB(1)
	T16SUB(2)
	T16SUB(3)
	T16SUB(4)
	T16SUB(5)
	T16SUB(6)
	T16SUB(7)
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	T16MIN(0)
	T16MIN(1)
	T16MIN(2)
	T16MIN(3)
	T16MIN(4)
	T16MIN(5)
	T16MIN(6)
	T16MIN(7)
	T16FLOAT(0, Z4, Z8, Z0)
	T16FLOAT(1, Z5, Z9, Z1)
	T16FLOAT(2, Z6, Z10, Z2)
	T16FLOAT(3, Z7, Z11, Z3)
	ADDQ $5248, SI
	ADDQ $1024, DI
	ADDQ $16, R9
	ADDQ $128, R8
	DECQ CX
	JNZ q4kt16sb
	MOVQ out+0(FP), AX
	MOVQ ldo+48(FP), BX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, (AX)(BX*1)
	LEAQ (AX)(BX*2), DX
	VMOVUPS Z2, (DX)
	VMOVUPS Z3, (DX)(BX*1)
	VZEROUPPER
	RET


// repackQ4KT8S2AVX512 is repackQ4KT8AVX512 writing each 32-byte chunk of
// the eight-row layout at twice its offset (chunk c at 64c, a super-block
// 2·q4KT8Bytes): called for rows 0…7 at t and rows 8…15 at t+32, it
// writes repackQ4KT16's layout. Its macros are repackQ4KT8AVX512's with
// the offsets doubled.

// T8NIBOUTS2 is T8NIBOUT at the doubled offsets.
#define T8NIBOUTS2(D, dst) \
	VPANDD Y16, D, Y15; \
	VMOVDQU Y15, (2*(dst))(DI); \
	VPSRLW $4, D, D; \
	VPANDD Y16, D, D; \
	VMOVDQU D, (2*(dst)+512)(DI)

// T8NIBS2 is T8NIB at the doubled offsets.
#define T8NIBS2(off, dst) \
	T8TRANS(off); \
	T8NIBOUTS2(Y8, dst); \
	T8NIBOUTS2(Y10, dst+32); \
	T8NIBOUTS2(Y12, dst+64); \
	T8NIBOUTS2(Y14, dst+96); \
	T8NIBOUTS2(Y9, dst+128); \
	T8NIBOUTS2(Y11, dst+160); \
	T8NIBOUTS2(Y13, dst+192); \
	T8NIBOUTS2(Y0, dst+224)

// T8DMS2 is T8DM at the doubled offsets.
#define T8DMS2(src, r) \
	MOVL src, AX; \
	VMOVD AX, X0; \
	VCVTPH2PS X0, X0; \
	VMOVSS X0, (5120+4*r)(DI); \
	VEXTRACTPS $1, X0, (5184+4*r)(DI)

// T8SCJS2 is T8SCJ at the doubled offsets.
#define T8SCJS2(j) \
	VPMOVZXBD (8*j)(SP), Y0; \
	VMOVDQU Y0, (4096+64*j)(DI); \
	VPMOVZXBD (64+8*j)(SP), Y1; \
	VPSLLD $16, Y1, Y2; \
	VPOR Y2, Y1, Y1; \
	VMOVDQU Y1, (4608+64*j)(DI)

// func repackQ4KT8S2AVX512(t *byte, w *byte, rb, nsb int)
TEXT ·repackQ4KT8S2AVX512(SB), NOSPLIT, $128-32
	MOVQ t+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), R8
	MOVQ nsb+24(FP), CX
	LEAQ (R8)(R8*2), R10
	LEAQ (R8)(R8*4), R11
	LEAQ (R10)(R8*4), R12
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y16

t8rs2sb:
	T8NIBS2(16, 0)
	T8NIBS2(48, 512)
	T8NIBS2(80, 1024)
	T8NIBS2(112, 1536)
	VMOVDQU (SI), X10
	VK4SCALES(X10, X0, X8, X9)
	VMOVDQU (SI)(R8*1), X10
	VK4SCALES(X10, X1, X8, X9)
	VMOVDQU (SI)(R8*2), X10
	VK4SCALES(X10, X2, X8, X9)
	VMOVDQU (SI)(R10*1), X10
	VK4SCALES(X10, X3, X8, X9)
	VMOVDQU (SI)(R8*4), X10
	VK4SCALES(X10, X4, X8, X9)
	VMOVDQU (SI)(R11*1), X10
	VK4SCALES(X10, X5, X8, X9)
	VMOVDQU (SI)(R10*2), X10
	VK4SCALES(X10, X6, X8, X9)
	VMOVDQU (SI)(R12*1), X10
	VK4SCALES(X10, X7, X8, X9)
	VPUNPCKLBW X1, X0, X8
	VPUNPCKHBW X1, X0, X9
	VPUNPCKLBW X3, X2, X10
	VPUNPCKHBW X3, X2, X11
	VPUNPCKLBW X5, X4, X12
	VPUNPCKHBW X5, X4, X13
	VPUNPCKLBW X7, X6, X14
	VPUNPCKHBW X7, X6, X15
	VPUNPCKLWD X10, X8, X0
	VPUNPCKHWD X10, X8, X1
	VPUNPCKLWD X14, X12, X2
	VPUNPCKHWD X14, X12, X3
	VPUNPCKLWD X11, X9, X4
	VPUNPCKHWD X11, X9, X5
	VPUNPCKLWD X15, X13, X6
	VPUNPCKHWD X15, X13, X7
	VPUNPCKLDQ X2, X0, X8
	VPUNPCKHDQ X2, X0, X9
	VPUNPCKLDQ X3, X1, X10
	VPUNPCKHDQ X3, X1, X11
	VPUNPCKLDQ X6, X4, X12
	VPUNPCKHDQ X6, X4, X13
	VPUNPCKLDQ X7, X5, X14
	VPUNPCKHDQ X7, X5, X15
	VMOVDQU X8, 0(SP)
	VMOVDQU X9, 16(SP)
	VMOVDQU X10, 32(SP)
	VMOVDQU X11, 48(SP)
	VMOVDQU X12, 64(SP)
	VMOVDQU X13, 80(SP)
	VMOVDQU X14, 96(SP)
	VMOVDQU X15, 112(SP)
	T8SCJS2(0)
	T8SCJS2(1)
	T8SCJS2(2)
	T8SCJS2(3)
	T8SCJS2(4)
	T8SCJS2(5)
	T8SCJS2(6)
	T8SCJS2(7)
	T8DMS2((SI), 0)
	T8DMS2((SI)(R8*1), 1)
	T8DMS2((SI)(R8*2), 2)
	T8DMS2((SI)(R10*1), 3)
	T8DMS2((SI)(R8*4), 4)
	T8DMS2((SI)(R11*1), 5)
	T8DMS2((SI)(R10*2), 6)
	T8DMS2((SI)(R12*1), 7)
	ADDQ $144, SI
	ADDQ $5248, DI
	DECQ CX
	JNZ t8rs2sb
	VZEROUPPER
	RET

// The sixteen-weight-row Q6_K tile kernel (q6KT16VNNI,
// kernelSet.tile16Q6): q6KT8VNNI in zmm over repackQ6KT16's layout (two
// eight-row tiles, 32-byte chunk by chunk), as q4KT16VNNI is q4KT8VNNI;
// the same operations lane by lane, so the same bits.

// Q6T16Q adds to A0…A3 (x rows 0…3) the products of the eight rows' four
// values at woff(SI) and each x row's four int8 at xoff(DI) (rows 256
// bytes apart); Z12 clobbered.
#define Q6T16Q(woff, xoff, A0, A1, A2, A3) \
	VMOVDQU64 (2*(woff))(SI), Z12; \
	VPDPBUSD.BCST xoff(DI), Z12, A0; \
	VPDPBUSD.BCST xoff+256(DI), Z12, A1; \
	VPDPBUSD.BCST xoff+512(DI), Z12, A2; \
	VPDPBUSD.BCST xoff+768(DI), Z12, A3

// Q6T16G adds to Z4…Z7 (x rows 0…3) sc_g times the sums of group g (16
// values), using A0…A3 and Z12, Z13.
#define Q6T16G(g, A0, A1, A2, A3) \
	VPXORD A0, A0, A0; \
	VPXORD A1, A1, A1; \
	VPXORD A2, A2, A2; \
	VPXORD A3, A3, A3; \
	Q6T16Q(128*g, 16*g, A0, A1, A2, A3); \
	Q6T16Q(128*g+32, 16*g+4, A0, A1, A2, A3); \
	Q6T16Q(128*g+64, 16*g+8, A0, A1, A2, A3); \
	Q6T16Q(128*g+96, 16*g+12, A0, A1, A2, A3); \
	VMOVDQU64 (4096+64*g)(SI), Z13; \
	VPMULLD Z13, A0, A0; \
	VPMULLD Z13, A1, A1; \
	VPMULLD Z13, A2, A2; \
	VPMULLD Z13, A3, A3; \
	VPADDD A0, Z4, Z4; \
	VPADDD A1, Z5, Z5; \
	VPADDD A2, Z6, Z6; \
	VPADDD A3, Z7, Z7

// Q6T16MIN adds to Z8…Z11 sc_2p·Σx_2p + sc_2p+1·Σx_2p+1 for each x row
// (the pair of int16 sums per 16 at 4p(R8), rows 32 bytes apart).
#define Q6T16MIN(p) \
	VMOVDQU64 (5120+64*p)(SI), Z12; \
	VPDPWSSD.BCST (4*p)(R8), Z12, Z8; \
	VPDPWSSD.BCST (4*p+32)(R8), Z12, Z9; \
	VPDPWSSD.BCST (4*p+64)(R8), Z12, Z10; \
	VPDPWSSD.BCST (4*p+96)(R8), Z12, Z11

// Q6T16FLOAT adds to acc (x row r's eight lanes) the super-block's
// float32(float32(d·dx)·float32(is - 32·im)).
#define Q6T16FLOAT(r, is, im, acc) \
	VPSLLD $5, im, im; \
	VPSUBD im, is, is; \
	VBROADCASTSS (4*r)(R9), Z13; \
	VMULPS 5632(SI), Z13, Z14; \
	VCVTDQ2PS is, Z15; \
	VMULPS Z15, Z14, Z14; \
	VADDPS Z14, acc, acc

// func q6KT16VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)
// sixteen Q6_K weight rows of n super-blocks repacked by repackQ6KT16 (t)
// against the four x rows of a pack of packAct4: out[r·ldo/4 + j] for x
// row r and weight row j < 16. n ≥ 1. Needs AVX512-VNNI.
TEXT ·q6KT16VNNI(SB), NOSPLIT, $0-56
	MOVQ t+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ d+24(FP), R9
	MOVQ sums+32(FP), R8
	MOVQ n+40(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

q6kt16sb:
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	Q6T16G(0, Z8, Z9, Z10, Z11)
	Q6T16G(1, Z16, Z17, Z18, Z19)
	Q6T16G(2, Z8, Z9, Z10, Z11)
	Q6T16G(3, Z16, Z17, Z18, Z19)
	Q6T16G(4, Z8, Z9, Z10, Z11)
	Q6T16G(5, Z16, Z17, Z18, Z19)
	Q6T16G(6, Z8, Z9, Z10, Z11)
	Q6T16G(7, Z16, Z17, Z18, Z19)
	Q6T16G(8, Z8, Z9, Z10, Z11)
	Q6T16G(9, Z16, Z17, Z18, Z19)
	Q6T16G(10, Z8, Z9, Z10, Z11)
	Q6T16G(11, Z16, Z17, Z18, Z19)
	Q6T16G(12, Z8, Z9, Z10, Z11)
	Q6T16G(13, Z16, Z17, Z18, Z19)
	Q6T16G(14, Z8, Z9, Z10, Z11)
	Q6T16G(15, Z16, Z17, Z18, Z19)
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	Q6T16MIN(0)
	Q6T16MIN(1)
	Q6T16MIN(2)
	Q6T16MIN(3)
	Q6T16MIN(4)
	Q6T16MIN(5)
	Q6T16MIN(6)
	Q6T16MIN(7)
	Q6T16FLOAT(0, Z4, Z8, Z0)
	Q6T16FLOAT(1, Z5, Z9, Z1)
	Q6T16FLOAT(2, Z6, Z10, Z2)
	Q6T16FLOAT(3, Z7, Z11, Z3)
	ADDQ $5696, SI
	ADDQ $1024, DI
	ADDQ $16, R9
	ADDQ $128, R8
	DECQ CX
	JNZ q6kt16sb
	MOVQ out+0(FP), AX
	MOVQ ldo+48(FP), BX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, (AX)(BX*1)
	LEAQ (AX)(BX*2), DX
	VMOVUPS Z2, (DX)
	VMOVUPS Z3, (DX)(BX*1)
	VZEROUPPER
	RET

// repackQ6KT8S2AVX512 is repackQ6KT8AVX512 writing each 32-byte chunk of
// the eight-row layout at twice its offset (chunk c at 64c, a super-block
// 2·q6KT8Bytes): called for rows 0…7 at t and rows 8…15 at t+32, it
// writes repackQ6KT16's layout. Its macros (…S2) are repackQ6KT8AVX512's
// with the offsets doubled.
#define Q6RSTORES2(off) \
	VMOVDQU Y8, off(SP); \
	VMOVDQU Y10, off+32(SP); \
	VMOVDQU Y12, off+64(SP); \
	VMOVDQU Y14, off+96(SP); \
	VMOVDQU Y9, off+128(SP); \
	VMOVDQU Y11, off+160(SP); \
	VMOVDQU Y13, off+192(SP); \
	VMOVDQU Y0, off+224(SP)

#define Q6RLOS2(Q, m, TS, dst) \
	VPANDD Y16, Q, Y1; \
	VMOVDQU (32*m)(SP), Y2; \
	TS; \
	VPANDD Y17, Y2, Y2; \
	VPORD Y2, Y1, Y1; \
	VMOVDQU Y1, (2*(dst))(DI)
#define Q6RHIS2(Q, m, TS, dst) \
	VPSRLW $4, Q, Y1; \
	VPANDD Y16, Y1, Y1; \
	VMOVDQU (32*m)(SP), Y2; \
	TS; \
	VPANDD Y17, Y2, Y2; \
	VPORD Y2, Y1, Y1; \
	VMOVDQU Y1, (2*(dst))(DI)
#define Q6RHI0S2(Q, m, dst) \
	VPSRLW $4, Q, Y1; \
	VPANDD Y16, Y1, Y1; \
	VPANDD (32*m)(SP), Y17, Y2; \
	VPORD Y2, Y1, Y1; \
	VMOVDQU Y1, (2*(dst))(DI)
#define Q6SHL4S2 VPSLLW $4, Y2, Y2
#define Q6SHL2S2 VPSLLW $2, Y2, Y2
#define Q6RAS2(Q, m, h) \
	Q6RLOS2(Q, m, Q6SHL4S2, (32*(32*h+m))); \
	Q6RHI0S2(Q, m, (32*(32*h+16+m)))

#define Q6RBS2(Q, m, h) \
	Q6RLOS2(Q, m, Q6SHL2S2, (32*(32*h+8+m))); \
	Q6RHIS2(Q, m, Q6SHR2, (32*(32*h+24+m)))

#define Q6RHALFS2(h) \
	T8TRANS(128+32*h); \
	Q6RSTORES2(0); \
	T8TRANS(64*h); \
	Q6RAS2(Y8, 0, h); \
	Q6RAS2(Y10, 1, h); \
	Q6RAS2(Y12, 2, h); \
	Q6RAS2(Y14, 3, h); \
	Q6RAS2(Y9, 4, h); \
	Q6RAS2(Y11, 5, h); \
	Q6RAS2(Y13, 6, h); \
	Q6RAS2(Y0, 7, h); \
	T8TRANS(64*h+32); \
	Q6RBS2(Y8, 0, h); \
	Q6RBS2(Y10, 1, h); \
	Q6RBS2(Y12, 2, h); \
	Q6RBS2(Y14, 3, h); \
	Q6RBS2(Y9, 4, h); \
	Q6RBS2(Y11, 5, h); \
	Q6RBS2(Y13, 6, h); \
	Q6RBS2(Y0, 7, h)

#define Q6RSCS2(g) \
	VPMOVSXBD (256+8*g)(SP), Y1; \
	VMOVDQU Y1, (4096+64*g)(DI)

#define Q6RPAIRS2(p) \
	VPMOVSXBW (256+16*p)(SP), X1; \
	VPMOVSXBW (256+16*p+8)(SP), X2; \
	VPUNPCKLWD X2, X1, X3; \
	VPUNPCKHWD X2, X1, X4; \
	VMOVDQU X3, (5120+64*p)(DI); \
	VMOVDQU X4, (5120+64*p+16)(DI)

#define Q6RDS2(src, r) \
	MOVWLZX src, AX; \
	VMOVD AX, X1; \
	VCVTPH2PS X1, X1; \
	VMOVSS X1, (5632+4*r)(DI)

// func repackQ6KT8S2AVX512(t *byte, w *byte, rb, nsb int)
TEXT ·repackQ6KT8S2AVX512(SB), NOSPLIT, $384-32
	MOVQ t+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), R8
	MOVQ nsb+24(FP), CX
	LEAQ (R8)(R8*2), R10
	LEAQ (R8)(R8*4), R11
	LEAQ (R10)(R8*4), R12
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Y16
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Y17

q6rs2sb:
	Q6RHALFS2(0)
	Q6RHALFS2(1)
	VMOVDQU 192(SI), X0
	VMOVDQU 192(SI)(R8*1), X1
	VMOVDQU 192(SI)(R8*2), X2
	VMOVDQU 192(SI)(R10*1), X3
	VMOVDQU 192(SI)(R8*4), X4
	VMOVDQU 192(SI)(R11*1), X5
	VMOVDQU 192(SI)(R10*2), X6
	VMOVDQU 192(SI)(R12*1), X7
	VPUNPCKLBW X1, X0, X8
	VPUNPCKHBW X1, X0, X9
	VPUNPCKLBW X3, X2, X10
	VPUNPCKHBW X3, X2, X11
	VPUNPCKLBW X5, X4, X12
	VPUNPCKHBW X5, X4, X13
	VPUNPCKLBW X7, X6, X14
	VPUNPCKHBW X7, X6, X15
	VPUNPCKLWD X10, X8, X0
	VPUNPCKHWD X10, X8, X1
	VPUNPCKLWD X14, X12, X2
	VPUNPCKHWD X14, X12, X3
	VPUNPCKLWD X11, X9, X4
	VPUNPCKHWD X11, X9, X5
	VPUNPCKLWD X15, X13, X6
	VPUNPCKHWD X15, X13, X7
	VPUNPCKLDQ X2, X0, X8
	VPUNPCKHDQ X2, X0, X9
	VPUNPCKLDQ X3, X1, X10
	VPUNPCKHDQ X3, X1, X11
	VPUNPCKLDQ X6, X4, X12
	VPUNPCKHDQ X6, X4, X13
	VPUNPCKLDQ X7, X5, X14
	VPUNPCKHDQ X7, X5, X15
	VMOVDQU X8, 256(SP)
	VMOVDQU X9, 272(SP)
	VMOVDQU X10, 288(SP)
	VMOVDQU X11, 304(SP)
	VMOVDQU X12, 320(SP)
	VMOVDQU X13, 336(SP)
	VMOVDQU X14, 352(SP)
	VMOVDQU X15, 368(SP)
	Q6RSCS2(0)
	Q6RSCS2(1)
	Q6RSCS2(2)
	Q6RSCS2(3)
	Q6RSCS2(4)
	Q6RSCS2(5)
	Q6RSCS2(6)
	Q6RSCS2(7)
	Q6RSCS2(8)
	Q6RSCS2(9)
	Q6RSCS2(10)
	Q6RSCS2(11)
	Q6RSCS2(12)
	Q6RSCS2(13)
	Q6RSCS2(14)
	Q6RSCS2(15)
	Q6RPAIRS2(0)
	Q6RPAIRS2(1)
	Q6RPAIRS2(2)
	Q6RPAIRS2(3)
	Q6RPAIRS2(4)
	Q6RPAIRS2(5)
	Q6RPAIRS2(6)
	Q6RPAIRS2(7)
	Q6RDS2(208(SI), 0)
	Q6RDS2(208(SI)(R8*1), 1)
	Q6RDS2(208(SI)(R8*2), 2)
	Q6RDS2(208(SI)(R10*1), 3)
	Q6RDS2(208(SI)(R8*4), 4)
	Q6RDS2(208(SI)(R11*1), 5)
	Q6RDS2(208(SI)(R10*2), 6)
	Q6RDS2(208(SI)(R12*1), 7)
	ADDQ $210, SI
	ADDQ $5696, DI
	DECQ CX
	JNZ q6rs2sb
	VZEROUPPER
	RET

// The four-weight-row Q4_K kernel on zmm (q4KC4Z, AVX-512 BW and VNNI):
// q4KC4VNNI's results by fewer operations. Each weight row's 128 bytes of
// nibbles are two zmm; the low and high nibbles of each (sub-blocks 2p and
// 2p+1 of pairs p = 0, 1 and 2, 3 in its 256-bit halves) go by VPDPBUSD
// against x's matching 64 int8 (Z20…Z23: x's 32-byte runs paired as the
// halves are), four products a dword lane (|Σ| ≤ 4·15·128, within int16),
// packed to int16 (VPACKSSDW) and multiplied by their sub-block's 6-bit
// scale and added in pairs (VPDPWSSD by the scales spread by VPSHUFB,
// k4zA and k4zB). The four rows' scales and minimums are unpacked
// together, a 128-bit lane each (Q4KZSCALES), and their m·Σx too; the
// four rows' sums reduced together in zmm. Integer sums are exact, so each
// row's int32 sums are q4KC4VNNI's, and the float part is its operations
// in its order: the same bits.
DATA k4zA<>+0(SB)/8, $0x8000800080008000
DATA k4zA<>+8(SB)/8, $0x8001800180018001
DATA k4zA<>+16(SB)/8, $0x8000800080008000
DATA k4zA<>+24(SB)/8, $0x8001800180018001
DATA k4zA<>+32(SB)/8, $0x8002800280028002
DATA k4zA<>+40(SB)/8, $0x8003800380038003
DATA k4zA<>+48(SB)/8, $0x8002800280028002
DATA k4zA<>+56(SB)/8, $0x8003800380038003
GLOBL k4zA<>(SB), RODATA|NOPTR, $64
DATA k4zB<>+0(SB)/8, $0x8004800480048004
DATA k4zB<>+8(SB)/8, $0x8005800580058005
DATA k4zB<>+16(SB)/8, $0x8004800480048004
DATA k4zB<>+24(SB)/8, $0x8005800580058005
DATA k4zB<>+32(SB)/8, $0x8006800680068006
DATA k4zB<>+40(SB)/8, $0x8007800780078007
DATA k4zB<>+48(SB)/8, $0x8006800680068006
DATA k4zB<>+56(SB)/8, $0x8007800780078007
GLOBL k4zB<>(SB), RODATA|NOPTR, $64
// k4zIdx gathers dword 0 of each 128-bit lane, then dword 2 (VPERMD).
DATA k4zIdx<>+0(SB)/8, $0x0000000400000000
DATA k4zIdx<>+8(SB)/8, $0x0000000c00000008
DATA k4zIdx<>+16(SB)/8, $0x0000000600000002
DATA k4zIdx<>+24(SB)/8, $0x0000000e0000000a
GLOBL k4zIdx<>(SB), RODATA|NOPTR, $32

// C4PFZ prefetches (PREFETCHT0) line o of the super-block at SI of the
// four weight rows C4PFROWS rows on (R13: C4PFROWS·stride, set by the
// kernel), using R15 and R12: two groups ahead, where C4PF4 and C4PF6 go
// one. Streaming matrices from memory (600 MB of them, one thread), eight
// rows ahead made q4KC4Z 1.15x (best of 9 rounds; 1.34x the median) and
// q6KC4Z 1.03x (1.06x) faster than four; twelve and sixteen no faster.
#define C4PFROWS 8
#define C4PFZ(o) \
	LEAQ (SI)(R13*1), R15; \
	LEAQ (R11)(R13*1), R12; \
	PREFETCHT0 o(R15); \
	PREFETCHT0 o(R15)(R14*1); \
	PREFETCHT0 o(R15)(R14*2); \
	PREFETCHT0 o(R12)

// Q4KZROW adds one Q4_K weight row's super-block (its nibbles at base)
// against x (Z20…Z23) to acc (zeroed first); the row's sc0…sc7 are bytes
// 0…7 of 128-bit lane imm/0x55 of Z2 (Q4KZSCALES).
#define Q4KZROW(base, acc, imm) \
	VSHUFI32X4 $imm, Z2, Z2, Z3; \
	VPSHUFB Z30, Z3, Z24; \
	VPSHUFB Z29, Z3, Z25; \
	VMOVDQU64 16+base, Z16; \
	VMOVDQU64 80+base, Z17; \
	VPSRLW $4, Z16, Z18; \
	VPSRLW $4, Z17, Z19; \
	VPANDD Z31, Z16, Z16; \
	VPANDD Z31, Z17, Z17; \
	VPANDD Z31, Z18, Z18; \
	VPANDD Z31, Z19, Z19; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPDPBUSD Z20, Z16, Z4; \
	VPDPBUSD Z21, Z18, Z5; \
	VPDPBUSD Z22, Z17, Z6; \
	VPDPBUSD Z23, Z19, Z7; \
	VPACKSSDW Z5, Z4, Z4; \
	VPACKSSDW Z7, Z6, Z6; \
	VPXORD acc, acc, acc; \
	VPDPWSSD Z24, Z4, acc; \
	VPDPWSSD Z25, Z6, acc

// Q4KZSCALES is VK4SCALES for the four rows at once: row r's first 16
// bytes in 128-bit lane r of Z1, its sc0…sc7, m0…m7 left in lane r of Z2
// (Z12…Z15: k4shufL, k4shufH, k4mask, k4c0 in each lane; K1: dwords 3, 7,
// 11 and 15); then each row's four dwords of m·Σx in its lane of Z26
// (X26 in: x's Σ per sub-block as int16; Z27 zero).
#define Q4KZSCALES \
	VMOVDQU 0(SI), X1; \
	VINSERTI32X4 $1, 0(SI)(R14*1), Z1, Z1; \
	VINSERTI32X4 $2, 0(SI)(R14*2), Z1, Z1; \
	VINSERTI32X4 $3, 0(R11), Z1, Z1; \
	VPSHUFB Z12, Z1, Z2; \
	VPSHUFB Z13, Z1, Z3; \
	VPSRLW $4, Z2, Z4; \
	VMOVDQA32 Z4, K1, Z2; \
	VPANDD Z14, Z2, Z2; \
	VPANDD Z15, Z3, Z3; \
	VPSRLW $2, Z3, Z3; \
	VPORD Z3, Z2, Z2; \
	VPUNPCKHBW Z27, Z2, Z3; \
	VSHUFI32X4 $0, Z26, Z26, Z4; \
	VPMADDWD Z4, Z3, Z26

// Q4KZSB adds one super-block of the four Q4_K weight rows (SI,
// (SI)(R14*1), (SI)(R14*2), R11) against x (DI, R9, R8 as for Q4KC4SB)
// to X0's lanes.
#define Q4KZSB \
	C4PFZ(0); \
	C4PFZ(64); \
	C4PFZ(128); \
	VMOVDQU64 0(DI), Y20; \
	VINSERTI64X4 $1, 64(DI), Z20, Z20; \
	VMOVDQU64 32(DI), Y21; \
	VINSERTI64X4 $1, 96(DI), Z21, Z21; \
	VMOVDQU64 128(DI), Y22; \
	VINSERTI64X4 $1, 192(DI), Z22, Z22; \
	VMOVDQU64 160(DI), Y23; \
	VINSERTI64X4 $1, 224(DI), Z23, Z23; \
	VMOVDQU (R8), Y1; \
	VPHADDD 32(R8), Y1, Y1; \
	VPERMQ $0xD8, Y1, Y1; \
	VEXTRACTI128 $1, Y1, X2; \
	VPACKSSDW X2, X1, X26; \
	Q4KZSCALES; \
	Q4KZROW(0(SI), Z8, 0x00); \
	Q4KZROW(0(SI)(R14*1), Z9, 0x55); \
	Q4KZROW(0(SI)(R14*2), Z10, 0xAA); \
	Q4KZROW(0(R11), Z11, 0xFF); \
	VSHUFI32X4 $0x44, Z9, Z8, Z1; \
	VSHUFI32X4 $0xEE, Z9, Z8, Z2; \
	VPADDD Z2, Z1, Z1; \
	VSHUFI32X4 $0x44, Z11, Z10, Z3; \
	VSHUFI32X4 $0xEE, Z11, Z10, Z2; \
	VPADDD Z2, Z3, Z3; \
	VSHUFI32X4 $0x88, Z3, Z1, Z2; \
	VSHUFI32X4 $0xDD, Z3, Z1, Z4; \
	VPADDD Z4, Z2, Z1; \
	VPUNPCKLQDQ Z26, Z1, Z2; \
	VPUNPCKHQDQ Z26, Z1, Z3; \
	VPADDD Z3, Z2, Z2; \
	VPSHUFD $0xB1, Z2, Z3; \
	VPADDD Z3, Z2, Z2; \
	VPERMD Z2, Z28, Z8; \
	VEXTRACTI32X4 $1, Z8, X10; \
	VMOVD 0(SI), X1; \
	VPINSRD $1, 0(SI)(R14*1), X1, X1; \
	VPINSRD $2, 0(SI)(R14*2), X1, X1; \
	VPINSRD $3, 0(R11), X1, X1; \
	VCVTPH2PS X1, Y1; \
	VEXTRACTF128 $1, Y1, X2; \
	VSHUFPS $0x88, X2, X1, X3; \
	VSHUFPS $0xDD, X2, X1, X4; \
	VBROADCASTSS (R9), X5; \
	VMULPS X5, X3, X3; \
	VCVTDQ2PS X8, X6; \
	VMULPS X6, X3, X3; \
	VMULPS X5, X4, X4; \
	VCVTDQ2PS X10, X7; \
	VMULPS X7, X4, X4; \
	VSUBPS X4, X3, X3; \
	VADDPS X3, X0, X0; \
	ADDQ $144, SI; \
	ADDQ $144, R11; \
	ADDQ $256, DI; \
	ADDQ $4, R9; \
	ADDQ $64, R8

// func q4KC4Z(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// q4KC4VNNI on zmm (AVX512BW and AVX512-VNNI): the same results.
TEXT ·q4KC4Z(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	IMUL3Q $C4PFROWS, R14, R13
	NIBBLEMASK
	VPBROADCASTD X14, Z31
	VMOVDQU64 k4zA<>(SB), Z30
	VMOVDQU64 k4zB<>(SB), Z29
	VMOVDQU64 k4zIdx<>(SB), Y28
	VPXORD Z27, Z27, Z27
	VBROADCASTI32X4 k4shufL<>(SB), Z12
	VBROADCASTI32X4 k4shufH<>(SB), Z13
	VBROADCASTI32X4 k4mask<>(SB), Z14
	VBROADCASTI32X4 k4c0<>(SB), Z15
	MOVL $0x8888, AX
	KMOVW AX, K1

	C4LOOP(C4ROWS3, Q4KZSB, q4kzgroup, q4kzsb)

// The four-weight-row Q6_K kernel on zmm (q6KC4Z, AVX-512 BW, VNNI and
// GFNI): q6KC4VNNI's results by fewer operations. Per half h of a weight
// row's super-block, its 64 bytes of ql (values l and l+32: low nibbles;
// l+64 and l+96: high) and its 32 bytes of qh, loaded in both 256-bit
// halves, make the 6-bit values of 64 x values in order twice: the high
// nibbles and qh's bit pairs moved into place by VGF2P8AFFINEQB (k6zShr4,
// k6zLo, k6zHi: a bit matrix per qword, so each 256-bit half takes its own
// pair), then OR. VPDPBUSD by x in order gives four products a dword lane
// (|Σ| ≤ 4·63·127, within int16), a group of 16 a 128-bit lane; packed to
// int16 and multiplied by the groups' int8 scales (VPERMW, k6zIdxA and
// k6zIdxB) and added (VPDPWSSD); the -32·Σ sc·Σx of the unsigned values'
// offset one VPDPWSSD of 32·sc by -Σx. Integer sums are exact, so each
// row's are q6KC4VNNI's, and the float part is its operations in its
// order: the same bits.
DATA k6zShr4<>+0(SB)/8, $0x1020408000000000
GLOBL k6zShr4<>(SB), RODATA|NOPTR, $8
DATA k6zLo<>+0(SB)/8, $0x0000000001020000
DATA k6zLo<>+8(SB)/8, $0x0000000001020000
DATA k6zLo<>+16(SB)/8, $0x0000000001020000
DATA k6zLo<>+24(SB)/8, $0x0000000001020000
DATA k6zLo<>+32(SB)/8, $0x0000000004080000
DATA k6zLo<>+40(SB)/8, $0x0000000004080000
DATA k6zLo<>+48(SB)/8, $0x0000000004080000
DATA k6zLo<>+56(SB)/8, $0x0000000004080000
GLOBL k6zLo<>(SB), RODATA|NOPTR, $64
DATA k6zHi<>+0(SB)/8, $0x0000000010200000
DATA k6zHi<>+8(SB)/8, $0x0000000010200000
DATA k6zHi<>+16(SB)/8, $0x0000000010200000
DATA k6zHi<>+24(SB)/8, $0x0000000010200000
DATA k6zHi<>+32(SB)/8, $0x0000000040800000
DATA k6zHi<>+40(SB)/8, $0x0000000040800000
DATA k6zHi<>+48(SB)/8, $0x0000000040800000
DATA k6zHi<>+56(SB)/8, $0x0000000040800000
GLOBL k6zHi<>(SB), RODATA|NOPTR, $64
DATA k6zIdxA<>+0(SB)/8, $0x0000000000000000
DATA k6zIdxA<>+8(SB)/8, $0x0004000400040004
DATA k6zIdxA<>+16(SB)/8, $0x0001000100010001
DATA k6zIdxA<>+24(SB)/8, $0x0005000500050005
DATA k6zIdxA<>+32(SB)/8, $0x0002000200020002
DATA k6zIdxA<>+40(SB)/8, $0x0006000600060006
DATA k6zIdxA<>+48(SB)/8, $0x0003000300030003
DATA k6zIdxA<>+56(SB)/8, $0x0007000700070007
GLOBL k6zIdxA<>(SB), RODATA|NOPTR, $64
DATA k6zIdxB<>+0(SB)/8, $0x0008000800080008
DATA k6zIdxB<>+8(SB)/8, $0x000c000c000c000c
DATA k6zIdxB<>+16(SB)/8, $0x0009000900090009
DATA k6zIdxB<>+24(SB)/8, $0x000d000d000d000d
DATA k6zIdxB<>+32(SB)/8, $0x000a000a000a000a
DATA k6zIdxB<>+40(SB)/8, $0x000e000e000e000e
DATA k6zIdxB<>+48(SB)/8, $0x000b000b000b000b
DATA k6zIdxB<>+56(SB)/8, $0x000f000f000f000f
GLOBL k6zIdxB<>(SB), RODATA|NOPTR, $64

// Q6KZHALF adds half of one Q6_K row's super-block (ql at qlo+base, qh at
// qho+base) against x's 128 int8 in xa and xb to acc, by the groups'
// scales spread in sc.
#define Q6KZHALF(qlo, qho, base, xa, xb, sc, acc) \
	VMOVDQU64 qlo+base, Z16; \
	VBROADCASTI64X4 qho+base, Z17; \
	VGF2P8AFFINEQB $0, Z29, Z17, Z18; \
	VGF2P8AFFINEQB $0, Z28, Z17, Z17; \
	VPTERNLOGD $0xF8, Z31, Z16, Z18; \
	VGF2P8AFFINEQB $0, Z30, Z16, Z16; \
	VPORD Z16, Z17, Z17; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPDPBUSD xa, Z18, Z4; \
	VPDPBUSD xb, Z17, Z5; \
	VPACKSSDW Z5, Z4, Z4; \
	VPDPWSSD sc, Z4, acc

// Q6KZROW sets acc to one Q6_K weight row's super-block (at base) against
// x (Z20…Z23; Z13: -Σx per group of 16 as int16).
#define Q6KZROW(base, acc) \
	VPMOVSXBW 192+base, Y6; \
	VPERMW Z6, Z27, Z7; \
	VPERMW Z6, Z26, Z8; \
	VPSLLW $5, Y6, Y6; \
	VPXORD acc, acc, acc; \
	VPDPWSSD Z13, Z6, acc; \
	Q6KZHALF(0, 128, base, Z20, Z21, Z7, acc); \
	Q6KZHALF(64, 160, base, Z22, Z23, Z8, acc)

// Q6KZSB adds one super-block of the four Q6_K weight rows (SI,
// (SI)(R14*1), (SI)(R14*2), R11) against x (DI, R9, R8 as for Q6KC4SB)
// to X0's lanes.
#define Q6KZSB \
	C4PFZ(0); \
	C4PFZ(64); \
	C4PFZ(128); \
	C4PFZ(192); \
	VMOVDQU64 0(DI), Z20; \
	VMOVDQU64 64(DI), Z21; \
	VMOVDQU64 128(DI), Z22; \
	VMOVDQU64 192(DI), Z23; \
	VMOVDQU (R8), Y1; \
	VPACKSSDW 32(R8), Y1, Y1; \
	VPERMQ $0xD8, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPSUBW Y1, Y2, Y13; \
	Q6KZROW(0(SI), Z9); \
	Q6KZROW(0(SI)(R14*1), Z10); \
	Q6KZROW(0(SI)(R14*2), Z11); \
	Q6KZROW(0(R11), Z12); \
	VSHUFI32X4 $0x44, Z10, Z9, Z1; \
	VSHUFI32X4 $0xEE, Z10, Z9, Z2; \
	VPADDD Z2, Z1, Z1; \
	VSHUFI32X4 $0x44, Z12, Z11, Z3; \
	VSHUFI32X4 $0xEE, Z12, Z11, Z2; \
	VPADDD Z2, Z3, Z3; \
	VSHUFI32X4 $0x88, Z3, Z1, Z2; \
	VSHUFI32X4 $0xDD, Z3, Z1, Z4; \
	VPADDD Z4, Z2, Z1; \
	VPSHUFD $0x4E, Z1, Z2; \
	VPADDD Z2, Z1, Z1; \
	VPSHUFD $0xB1, Z1, Z2; \
	VPADDD Z2, Z1, Z1; \
	VPERMD Z1, Z25, Z8; \
	VPXOR X1, X1, X1; \
	VPINSRW $0, 208(SI), X1, X1; \
	VPINSRW $1, 208(SI)(R14*1), X1, X1; \
	VPINSRW $2, 208(SI)(R14*2), X1, X1; \
	VPINSRW $3, 208(R11), X1, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS (R9), X5; \
	VMULPS X5, X1, X1; \
	VCVTDQ2PS X8, X4; \
	VMULPS X4, X1, X1; \
	VADDPS X1, X0, X0; \
	ADDQ $210, SI; \
	ADDQ $210, R11; \
	ADDQ $256, DI; \
	ADDQ $4, R9; \
	ADDQ $64, R8

// func q6KC4Z(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)
// q6KC4VNNI on zmm (AVX512BW, AVX512-VNNI, GFNI): the same results.
TEXT ·q6KC4Z(SB), NOSPLIT, $0-64
	MOVQ w+8(FP), SI
	MOVQ stride+56(FP), R14
	IMUL3Q $C4PFROWS, R14, R13
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z31
	VPBROADCASTQ k6zShr4<>(SB), Z30
	VMOVDQU64 k6zLo<>(SB), Z29
	VMOVDQU64 k6zHi<>(SB), Z28
	VMOVDQU64 k6zIdxA<>(SB), Z27
	VMOVDQU64 k6zIdxB<>(SB), Z26
	VMOVDQU64 k4zIdx<>(SB), Y25

	C4LOOP(C4ROWS3, Q6KZSB, q6kzgroup, q6kzsb)


// func prefetchLines(p *byte, n int)
// PREFETCHT0 of the n cache lines from p, 64 bytes apart.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JLE pfdone
pfloop:
	PREFETCHT0 (SI)
	ADDQ $64, SI
	DECQ CX
	JNZ pfloop
pfdone:
	RET
