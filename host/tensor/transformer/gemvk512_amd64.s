//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 fused GEMVs of exact mode's K-quant rows (kernelSet.deqGemv
// of the avx512 set): the bits of gemvQ4KAVX2 and gemvQ6KAVX2 (dequantize
// each weight as the dequantizer does, multiply it by x's value, VMULPS,
// and add the product to its lane, VADDPS, lanes 0–15 in one zmm; lane
// i += lane i+8, +4, +2, +1 at the end), four weight rows at a time: a
// lane's additions are a chain of dependent VADDPS, and four rows' chains
// keep the adders busy where one row's would leave them waiting.
//
// Q4_K: a sub-block's 16 possible values (d·sc)·q − dmin·m, q = 0…15, are
// one zmm (one FMA of iota16, the product exact: TestQuantProductsExact),
// and VPERMPS looks each nibble up in it (it reads an index's low 4 bits
// only, so a byte's low nibble needs no mask), in place of a conversion
// and an FMA per value.
//
// Stack: 64 bytes of scales per row (d·sc_j at 4j, dmin·m_j at 32+4j for
// Q4_K; d·sc_g at 4g for Q6_K), the next group's first row at 256(SP).

// iota16 is the float32 values 0…15.
DATA iota16<>+0(SB)/4, $0x00000000
DATA iota16<>+4(SB)/4, $0x3f800000
DATA iota16<>+8(SB)/4, $0x40000000
DATA iota16<>+12(SB)/4, $0x40400000
DATA iota16<>+16(SB)/4, $0x40800000
DATA iota16<>+20(SB)/4, $0x40a00000
DATA iota16<>+24(SB)/4, $0x40c00000
DATA iota16<>+28(SB)/4, $0x40e00000
DATA iota16<>+32(SB)/4, $0x41000000
DATA iota16<>+36(SB)/4, $0x41100000
DATA iota16<>+40(SB)/4, $0x41200000
DATA iota16<>+44(SB)/4, $0x41300000
DATA iota16<>+48(SB)/4, $0x41400000
DATA iota16<>+52(SB)/4, $0x41500000
DATA iota16<>+56(SB)/4, $0x41600000
DATA iota16<>+60(SB)/4, $0x41700000
GLOBL iota16<>(SB), RODATA|NOPTR, $64

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

// k4dd is the VPERMPS indices 0 (eight times) and 1 (eight times): d for
// the scales, dmin for the minimums.
DATA k4dd<>+0(SB)/8, $0
DATA k4dd<>+8(SB)/8, $0
DATA k4dd<>+16(SB)/8, $0
DATA k4dd<>+24(SB)/8, $0
DATA k4dd<>+32(SB)/8, $0x0000000100000001
DATA k4dd<>+40(SB)/8, $0x0000000100000001
DATA k4dd<>+48(SB)/8, $0x0000000100000001
DATA k4dd<>+56(SB)/8, $0x0000000100000001
GLOBL k4dd<>(SB), RODATA|NOPTR, $64

// VK4SCALES leaves in S the bytes sc0…sc7, m0…m7 (scaleMin) of the Q4_K
// super-block whose first 16 bytes are in X, using T and U: sc0..3 =
// s0..3 & 63, sc4..7 = s8..11 & 15 | s0..3>>6<<4, m0..3 = s4..7 & 63,
// m4..7 = s8..11>>4 | s4..7>>6<<4.
#define VK4SCALES(X, S, T, U) 	VPSHUFB k4shufL<>(SB), X, S; 	VPSHUFB k4shufH<>(SB), X, T; 	VPSRLW $4, S, U; 	VPBLENDD $8, U, S, S; 	VPAND k4mask<>(SB), S, S; 	VPAND k4c0<>(SB), T, T; 	VPSRLW $2, T, T; 	VPOR T, S, S

// K4SCV stores the Q4_K super-block at P's sub-block scales float32(d·sc_j)
// at off+4j(SP) and minimums float32(dmin·m_j) at off+32+4j(SP)
// (subScales), using X1–X4 (Z2, Z3) and Z15 (k4dd).
#define K4SCV(P, off) 	VMOVDQU (P), X1; 	VK4SCALES(X1, X2, X3, X4); 	VPMOVZXBD X2, Z2; 	VCVTDQ2PS Z2, Z2; 	VCVTPH2PS X1, X3; 	VPERMPS Z3, Z15, Z3; 	VMULPS Z3, Z2, Z2; 	VMOVUPS Z2, off(SP)

// K4PAIR does sub-blocks 2i and 2i+1 of the row at P (their 32 bytes of
// nibbles at off(P), their scales and minimums at s0, s1, m0, m1 (SP))
// against x's 64 values in Z21–Z24, into the lanes acc: the tables
// d·sc·iota − dmin·m in Z25 (low nibbles) and Z27 (high), the bytes as
// int32 in Z29 and Z30, each value looked up, times x, added in order.
#define K4PAIR(P, off, s0, s1, m0, m1, acc) \
	VBROADCASTSS s0(SP), Z25; \
	VBROADCASTSS m0(SP), Z26; \
	VFMSUB213PS Z26, Z20, Z25; \
	VBROADCASTSS s1(SP), Z27; \
	VBROADCASTSS m1(SP), Z28; \
	VFMSUB213PS Z28, Z20, Z27; \
	VPMOVZXBD off(P), Z29; \
	VPMOVZXBD off+16(P), Z30; \
	VPERMPS Z25, Z29, Z31; \
	VMULPS Z21, Z31, Z31; \
	VADDPS Z31, acc, acc; \
	VPERMPS Z25, Z30, Z31; \
	VMULPS Z22, Z31, Z31; \
	VADDPS Z31, acc, acc; \
	VPSRLD $4, Z29, Z29; \
	VPERMPS Z27, Z29, Z31; \
	VMULPS Z23, Z31, Z31; \
	VADDPS Z31, acc, acc; \
	VPSRLD $4, Z30, Z30; \
	VPERMPS Z27, Z30, Z31; \
	VMULPS Z24, Z31, Z31; \
	VADDPS Z31, acc, acc

// XLOAD loads x's 64 values at DI into Z21–Z24.
#define XLOAD \
	VMOVUPS 0(DI), Z21; \
	VMOVUPS 64(DI), Z22; \
	VMOVUPS 128(DI), Z23; \
	VMOVUPS 192(DI), Z24

// LSUM stores at off(R8) the sum of the 16 lanes in Z (lane i += lane
// i+8, +4, +2, +1), using Z0 and Z1.
#define LSUM(Z, off) \
	VMOVAPS Z, Z0; \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0; \
	VMOVSS X0, off(R8)


// K6SC stores the Q6_K super-block at P's group scales float32(d·sc_g)
// at off+4g(SP), g = 0…15, using Z1, Z2 and DX.
#define K6SC(P, off) \
	MOVWLZX 208(P), DX; \
	VMOVD DX, X1; \
	VCVTPH2PS X1, X1; \
	VBROADCASTSS X1, Z1; \
	VPMOVSXBD 192(P), Z2; \
	VCVTDQ2PS Z2, Z2; \
	VMULPS Z2, Z1, Z2; \
	VMOVUPS Z2, off(SP)

// K6HALF builds half h of the Q6_K super-block at P (ql at ql(P), qh at
// qh(P)), its 128 values q − 32 as bytes in order, at buf(SP): runs 0 and
// 1 from the 64 bytes of ql (low nibbles) and qh doubled (t, t>>2:
// VPSRLW under K1, the upper half's words), runs 2 and 3 from their high
// nibbles (Z26: 0x0F bytes, Z27: 0x30 bytes, Z28: 0x20 bytes), using
// Z0–Z3 (intdot_amd64.s's Q6KQ0…Q6KQ3, 64 bytes at once).
#define K6HALF(P, ql, qh, buf) \
	VMOVDQU64 ql(P), Z0; \
	VBROADCASTI64X4 qh(P), Z1; \
	VPSRLW $2, Z1, K1, Z1; \
	VPSLLW $4, Z1, Z2; \
	VPANDD Z27, Z2, Z2; \
	VPTERNLOGD $0xF8, Z26, Z0, Z2; \
	VPSUBB Z28, Z2, Z2; \
	VMOVDQU64 Z2, buf(SP); \
	VPSRLW $4, Z0, Z0; \
	VPANDD Z27, Z1, Z1; \
	VPTERNLOGD $0xF8, Z26, Z0, Z1; \
	VPSUBB Z28, Z1, Z1; \
	VMOVDQU64 Z1, buf+64(SP)

// K6CHUNK does 16 values of a row: the bytes at b(SP) as int32, to
// float32, times their group's scale at s(SP), times x's 16 in X, added
// to acc, using T and U.
#define K6CHUNK(b, s, X, acc, T, U) \
	VPMOVSXBD b(SP), T; \
	VCVTDQ2PS T, T; \
	VBROADCASTSS s(SP), U; \
	VMULPS U, T, T; \
	VMULPS X, T, T; \
	VADDPS T, acc, acc


// func gemvQ4KAVX512(out, x *float32, w *byte, n, rows, stride int)
TEXT ·gemvQ4KAVX512(SB), NOSPLIT, $528-48
	MOVQ out+0(FP), R8
	MOVQ w+16(FP), AX
	MOVQ AX, 256(SP)
	VMOVUPS iota16<>(SB), Z20
	VMOVUPS k4dd<>(SB), Z15
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z26
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Z27
	MOVL $0x20202020, AX
	VPBROADCASTD AX, Z28
	MOVL $0xFFFF0000, AX
	KMOVD AX, K1

gemvQ4KAVX512_g4:
	CMPQ rows+32(FP), $4
	JLT gemvQ4KAVX512_r1
	MOVQ 256(SP), SI
	MOVQ stride+40(FP), AX
	LEAQ (SI)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	LEAQ (R11)(AX*1), DX
	MOVQ DX, 256(SP)
	SHLQ $2, AX
	MOVQ AX, 520(SP)
	MOVQ x+8(FP), DI
	MOVQ n+24(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19

gemvQ4KAVX512_g4sb:
	MOVQ 520(SP), AX
	PREFETCHT0 0(SI)(AX*1)
	PREFETCHT0 64(SI)(AX*1)
	PREFETCHT0 128(SI)(AX*1)
	PREFETCHT0 0(R9)(AX*1)
	PREFETCHT0 64(R9)(AX*1)
	PREFETCHT0 128(R9)(AX*1)
	PREFETCHT0 0(R10)(AX*1)
	PREFETCHT0 64(R10)(AX*1)
	PREFETCHT0 128(R10)(AX*1)
	PREFETCHT0 0(R11)(AX*1)
	PREFETCHT0 64(R11)(AX*1)
	PREFETCHT0 128(R11)(AX*1)
	K4SCV(SI, 0)
	K4SCV(R9, 64)
	K4SCV(R10, 128)
	K4SCV(R11, 192)
	XLOAD
	K4PAIR(SI, 16, 0, 4, 32, 36, Z16)
	K4PAIR(R9, 16, 64, 68, 96, 100, Z17)
	K4PAIR(R10, 16, 128, 132, 160, 164, Z18)
	K4PAIR(R11, 16, 192, 196, 224, 228, Z19)
	ADDQ $256, DI
	XLOAD
	K4PAIR(SI, 48, 8, 12, 40, 44, Z16)
	K4PAIR(R9, 48, 72, 76, 104, 108, Z17)
	K4PAIR(R10, 48, 136, 140, 168, 172, Z18)
	K4PAIR(R11, 48, 200, 204, 232, 236, Z19)
	ADDQ $256, DI
	XLOAD
	K4PAIR(SI, 80, 16, 20, 48, 52, Z16)
	K4PAIR(R9, 80, 80, 84, 112, 116, Z17)
	K4PAIR(R10, 80, 144, 148, 176, 180, Z18)
	K4PAIR(R11, 80, 208, 212, 240, 244, Z19)
	ADDQ $256, DI
	XLOAD
	K4PAIR(SI, 112, 24, 28, 56, 60, Z16)
	K4PAIR(R9, 112, 88, 92, 120, 124, Z17)
	K4PAIR(R10, 112, 152, 156, 184, 188, Z18)
	K4PAIR(R11, 112, 216, 220, 248, 252, Z19)
	ADDQ $256, DI
	ADDQ $144, SI
	ADDQ $144, R9
	ADDQ $144, R10
	ADDQ $144, R11
	DECQ CX
	JNZ gemvQ4KAVX512_g4sb
	LSUM(Z16, 0)
	LSUM(Z17, 4)
	LSUM(Z18, 8)
	LSUM(Z19, 12)
	ADDQ $16, R8
	SUBQ $4, rows+32(FP)
	JMP gemvQ4KAVX512_g4

gemvQ4KAVX512_r1:
	CMPQ rows+32(FP), $0
	JEQ gemvQ4KAVX512_done
	MOVQ 256(SP), SI
	MOVQ stride+40(FP), AX
	LEAQ (SI)(AX*1), DX
	MOVQ DX, 256(SP)
	MOVQ x+8(FP), DI
	MOVQ n+24(FP), CX
	VPXORD Z16, Z16, Z16

gemvQ4KAVX512_r1sb:
	K4SCV(SI, 0)
	XLOAD
	K4PAIR(SI, 16, 0, 4, 32, 36, Z16)
	ADDQ $256, DI
	XLOAD
	K4PAIR(SI, 48, 8, 12, 40, 44, Z16)
	ADDQ $256, DI
	XLOAD
	K4PAIR(SI, 80, 16, 20, 48, 52, Z16)
	ADDQ $256, DI
	XLOAD
	K4PAIR(SI, 112, 24, 28, 56, 60, Z16)
	ADDQ $256, DI
	ADDQ $144, SI
	DECQ CX
	JNZ gemvQ4KAVX512_r1sb
	LSUM(Z16, 0)
	ADDQ $4, R8
	DECQ rows+32(FP)
	JMP gemvQ4KAVX512_r1

gemvQ4KAVX512_done:
	VZEROUPPER
	RET

// func gemvQ6KAVX512(out, x *float32, w *byte, n, rows, stride int)
TEXT ·gemvQ6KAVX512(SB), NOSPLIT, $528-48
	MOVQ out+0(FP), R8
	MOVQ w+16(FP), AX
	MOVQ AX, 256(SP)
	VMOVUPS iota16<>(SB), Z20
	VMOVUPS k4dd<>(SB), Z15
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z26
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Z27
	MOVL $0x20202020, AX
	VPBROADCASTD AX, Z28
	MOVL $0xFFFF0000, AX
	KMOVD AX, K1

gemvQ6KAVX512_g4:
	CMPQ rows+32(FP), $4
	JLT gemvQ6KAVX512_r1
	MOVQ 256(SP), SI
	MOVQ stride+40(FP), AX
	LEAQ (SI)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	LEAQ (R11)(AX*1), DX
	MOVQ DX, 256(SP)
	SHLQ $2, AX
	MOVQ AX, 520(SP)
	MOVQ x+8(FP), DI
	MOVQ n+24(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19

gemvQ6KAVX512_g4sb:
	MOVQ 520(SP), AX
	PREFETCHT0 0(SI)(AX*1)
	PREFETCHT0 64(SI)(AX*1)
	PREFETCHT0 128(SI)(AX*1)
	PREFETCHT0 192(SI)(AX*1)
	PREFETCHT0 0(R9)(AX*1)
	PREFETCHT0 64(R9)(AX*1)
	PREFETCHT0 128(R9)(AX*1)
	PREFETCHT0 192(R9)(AX*1)
	PREFETCHT0 0(R10)(AX*1)
	PREFETCHT0 64(R10)(AX*1)
	PREFETCHT0 128(R10)(AX*1)
	PREFETCHT0 192(R10)(AX*1)
	PREFETCHT0 0(R11)(AX*1)
	PREFETCHT0 64(R11)(AX*1)
	PREFETCHT0 128(R11)(AX*1)
	PREFETCHT0 192(R11)(AX*1)
	K6SC(SI, 0)
	K6SC(R9, 64)
	K6SC(R10, 128)
	K6SC(R11, 192)
	VMOVUPS 0(DI), Z8
	VMOVUPS 64(DI), Z9
	VMOVUPS 128(DI), Z10
	VMOVUPS 192(DI), Z11
	VMOVUPS 256(DI), Z12
	VMOVUPS 320(DI), Z13
	VMOVUPS 384(DI), Z14
	VMOVUPS 448(DI), Z15
	K6HALF(SI, 0, 128, 264)
	K6CHUNK(264, 0, Z8, Z16, Z4, Z5)
	K6CHUNK(280, 4, Z9, Z16, Z6, Z7)
	K6CHUNK(296, 8, Z10, Z16, Z4, Z5)
	K6CHUNK(312, 12, Z11, Z16, Z6, Z7)
	K6CHUNK(328, 16, Z12, Z16, Z4, Z5)
	K6CHUNK(344, 20, Z13, Z16, Z6, Z7)
	K6CHUNK(360, 24, Z14, Z16, Z4, Z5)
	K6CHUNK(376, 28, Z15, Z16, Z6, Z7)
	K6HALF(R9, 0, 128, 392)
	K6CHUNK(392, 64, Z8, Z17, Z4, Z5)
	K6CHUNK(408, 68, Z9, Z17, Z6, Z7)
	K6CHUNK(424, 72, Z10, Z17, Z4, Z5)
	K6CHUNK(440, 76, Z11, Z17, Z6, Z7)
	K6CHUNK(456, 80, Z12, Z17, Z4, Z5)
	K6CHUNK(472, 84, Z13, Z17, Z6, Z7)
	K6CHUNK(488, 88, Z14, Z17, Z4, Z5)
	K6CHUNK(504, 92, Z15, Z17, Z6, Z7)
	K6HALF(R10, 0, 128, 264)
	K6CHUNK(264, 128, Z8, Z18, Z4, Z5)
	K6CHUNK(280, 132, Z9, Z18, Z6, Z7)
	K6CHUNK(296, 136, Z10, Z18, Z4, Z5)
	K6CHUNK(312, 140, Z11, Z18, Z6, Z7)
	K6CHUNK(328, 144, Z12, Z18, Z4, Z5)
	K6CHUNK(344, 148, Z13, Z18, Z6, Z7)
	K6CHUNK(360, 152, Z14, Z18, Z4, Z5)
	K6CHUNK(376, 156, Z15, Z18, Z6, Z7)
	K6HALF(R11, 0, 128, 392)
	K6CHUNK(392, 192, Z8, Z19, Z4, Z5)
	K6CHUNK(408, 196, Z9, Z19, Z6, Z7)
	K6CHUNK(424, 200, Z10, Z19, Z4, Z5)
	K6CHUNK(440, 204, Z11, Z19, Z6, Z7)
	K6CHUNK(456, 208, Z12, Z19, Z4, Z5)
	K6CHUNK(472, 212, Z13, Z19, Z6, Z7)
	K6CHUNK(488, 216, Z14, Z19, Z4, Z5)
	K6CHUNK(504, 220, Z15, Z19, Z6, Z7)
	VMOVUPS 512(DI), Z8
	VMOVUPS 576(DI), Z9
	VMOVUPS 640(DI), Z10
	VMOVUPS 704(DI), Z11
	VMOVUPS 768(DI), Z12
	VMOVUPS 832(DI), Z13
	VMOVUPS 896(DI), Z14
	VMOVUPS 960(DI), Z15
	K6HALF(SI, 64, 160, 264)
	K6CHUNK(264, 32, Z8, Z16, Z4, Z5)
	K6CHUNK(280, 36, Z9, Z16, Z6, Z7)
	K6CHUNK(296, 40, Z10, Z16, Z4, Z5)
	K6CHUNK(312, 44, Z11, Z16, Z6, Z7)
	K6CHUNK(328, 48, Z12, Z16, Z4, Z5)
	K6CHUNK(344, 52, Z13, Z16, Z6, Z7)
	K6CHUNK(360, 56, Z14, Z16, Z4, Z5)
	K6CHUNK(376, 60, Z15, Z16, Z6, Z7)
	K6HALF(R9, 64, 160, 392)
	K6CHUNK(392, 96, Z8, Z17, Z4, Z5)
	K6CHUNK(408, 100, Z9, Z17, Z6, Z7)
	K6CHUNK(424, 104, Z10, Z17, Z4, Z5)
	K6CHUNK(440, 108, Z11, Z17, Z6, Z7)
	K6CHUNK(456, 112, Z12, Z17, Z4, Z5)
	K6CHUNK(472, 116, Z13, Z17, Z6, Z7)
	K6CHUNK(488, 120, Z14, Z17, Z4, Z5)
	K6CHUNK(504, 124, Z15, Z17, Z6, Z7)
	K6HALF(R10, 64, 160, 264)
	K6CHUNK(264, 160, Z8, Z18, Z4, Z5)
	K6CHUNK(280, 164, Z9, Z18, Z6, Z7)
	K6CHUNK(296, 168, Z10, Z18, Z4, Z5)
	K6CHUNK(312, 172, Z11, Z18, Z6, Z7)
	K6CHUNK(328, 176, Z12, Z18, Z4, Z5)
	K6CHUNK(344, 180, Z13, Z18, Z6, Z7)
	K6CHUNK(360, 184, Z14, Z18, Z4, Z5)
	K6CHUNK(376, 188, Z15, Z18, Z6, Z7)
	K6HALF(R11, 64, 160, 392)
	K6CHUNK(392, 224, Z8, Z19, Z4, Z5)
	K6CHUNK(408, 228, Z9, Z19, Z6, Z7)
	K6CHUNK(424, 232, Z10, Z19, Z4, Z5)
	K6CHUNK(440, 236, Z11, Z19, Z6, Z7)
	K6CHUNK(456, 240, Z12, Z19, Z4, Z5)
	K6CHUNK(472, 244, Z13, Z19, Z6, Z7)
	K6CHUNK(488, 248, Z14, Z19, Z4, Z5)
	K6CHUNK(504, 252, Z15, Z19, Z6, Z7)
	ADDQ $1024, DI
	ADDQ $210, SI
	ADDQ $210, R9
	ADDQ $210, R10
	ADDQ $210, R11
	DECQ CX
	JNZ gemvQ6KAVX512_g4sb
	LSUM(Z16, 0)
	LSUM(Z17, 4)
	LSUM(Z18, 8)
	LSUM(Z19, 12)
	ADDQ $16, R8
	SUBQ $4, rows+32(FP)
	JMP gemvQ6KAVX512_g4

gemvQ6KAVX512_r1:
	CMPQ rows+32(FP), $0
	JEQ gemvQ6KAVX512_done
	MOVQ 256(SP), SI
	MOVQ stride+40(FP), AX
	LEAQ (SI)(AX*1), DX
	MOVQ DX, 256(SP)
	MOVQ x+8(FP), DI
	MOVQ n+24(FP), CX
	VPXORD Z16, Z16, Z16

gemvQ6KAVX512_r1sb:
	K6SC(SI, 0)
	VMOVUPS 0(DI), Z8
	VMOVUPS 64(DI), Z9
	VMOVUPS 128(DI), Z10
	VMOVUPS 192(DI), Z11
	VMOVUPS 256(DI), Z12
	VMOVUPS 320(DI), Z13
	VMOVUPS 384(DI), Z14
	VMOVUPS 448(DI), Z15
	K6HALF(SI, 0, 128, 264)
	K6CHUNK(264, 0, Z8, Z16, Z4, Z5)
	K6CHUNK(280, 4, Z9, Z16, Z6, Z7)
	K6CHUNK(296, 8, Z10, Z16, Z4, Z5)
	K6CHUNK(312, 12, Z11, Z16, Z6, Z7)
	K6CHUNK(328, 16, Z12, Z16, Z4, Z5)
	K6CHUNK(344, 20, Z13, Z16, Z6, Z7)
	K6CHUNK(360, 24, Z14, Z16, Z4, Z5)
	K6CHUNK(376, 28, Z15, Z16, Z6, Z7)
	VMOVUPS 512(DI), Z8
	VMOVUPS 576(DI), Z9
	VMOVUPS 640(DI), Z10
	VMOVUPS 704(DI), Z11
	VMOVUPS 768(DI), Z12
	VMOVUPS 832(DI), Z13
	VMOVUPS 896(DI), Z14
	VMOVUPS 960(DI), Z15
	K6HALF(SI, 64, 160, 264)
	K6CHUNK(264, 32, Z8, Z16, Z4, Z5)
	K6CHUNK(280, 36, Z9, Z16, Z6, Z7)
	K6CHUNK(296, 40, Z10, Z16, Z4, Z5)
	K6CHUNK(312, 44, Z11, Z16, Z6, Z7)
	K6CHUNK(328, 48, Z12, Z16, Z4, Z5)
	K6CHUNK(344, 52, Z13, Z16, Z6, Z7)
	K6CHUNK(360, 56, Z14, Z16, Z4, Z5)
	K6CHUNK(376, 60, Z15, Z16, Z6, Z7)
	ADDQ $1024, DI
	ADDQ $210, SI
	DECQ CX
	JNZ gemvQ6KAVX512_r1sb
	LSUM(Z16, 0)
	ADDQ $4, R8
	DECQ rows+32(FP)
	JMP gemvQ6KAVX512_r1

gemvQ6KAVX512_done:
	VZEROUPPER
	RET

// K4DEQ writes sub-blocks 2i and 2i+1 of the Q4_K row at P (their 32 bytes
// of nibbles at off(P), their scales and minimums at s0, s1, m0, m1 (SP))
// as 64 float32 at d(DI): K4PAIR's tables and lookups, each value stored
// where gemvQ4KAVX512 multiplies it by x.
#define K4DEQ(P, off, s0, s1, m0, m1, d) \
	VBROADCASTSS s0(SP), Z25; \
	VBROADCASTSS m0(SP), Z26; \
	VFMSUB213PS Z26, Z20, Z25; \
	VBROADCASTSS s1(SP), Z27; \
	VBROADCASTSS m1(SP), Z28; \
	VFMSUB213PS Z28, Z20, Z27; \
	VPMOVZXBD off(P), Z29; \
	VPMOVZXBD off+16(P), Z30; \
	VPERMPS Z25, Z29, Z31; \
	VMOVUPS Z31, d(DI); \
	VPERMPS Z25, Z30, Z31; \
	VMOVUPS Z31, d+64(DI); \
	VPSRLD $4, Z29, Z29; \
	VPERMPS Z27, Z29, Z31; \
	VMOVUPS Z31, d+128(DI); \
	VPSRLD $4, Z30, Z30; \
	VPERMPS Z27, Z30, Z31; \
	VMOVUPS Z31, d+192(DI)

// func dequantQ4KAVX512(w *byte, dst *float32, n int)
TEXT ·dequantQ4KAVX512(SB), NOSPLIT, $64-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	VMOVUPS iota16<>(SB), Z20
	VMOVUPS k4dd<>(SB), Z15
	TESTQ CX, CX
	JEQ dequantQ4KAVX512_done

dequantQ4KAVX512_sb:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	K4SCV(SI, 0)
	K4DEQ(SI, 16, 0, 4, 32, 36, 0)
	K4DEQ(SI, 48, 8, 12, 40, 44, 256)
	K4DEQ(SI, 80, 16, 20, 48, 52, 512)
	K4DEQ(SI, 112, 24, 28, 56, 60, 768)
	ADDQ $144, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ dequantQ4KAVX512_sb

dequantQ4KAVX512_done:
	VZEROUPPER
	RET

// D6CHUNK writes 16 values of a Q6_K row: the bytes at b(SP) as int32, to
// float32, times their group's scale at s(SP) (K6CHUNK's operations, its
// product by x left out), at d(DI), using T and U.
#define D6CHUNK(b, s, d, T, U) \
	VPMOVSXBD b(SP), T; \
	VCVTDQ2PS T, T; \
	VBROADCASTSS s(SP), U; \
	VMULPS U, T, T; \
	VMOVUPS T, d(DI)

// func dequantQ6KAVX512(w *byte, dst *float32, n int)
TEXT ·dequantQ6KAVX512(SB), NOSPLIT, $400-24
	MOVQ w+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z26
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Z27
	MOVL $0x20202020, AX
	VPBROADCASTD AX, Z28
	MOVL $0xFFFF0000, AX
	KMOVD AX, K1
	TESTQ CX, CX
	JEQ dequantQ6KAVX512_done

dequantQ6KAVX512_sb:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4288(SI)
	K6SC(SI, 0)
	K6HALF(SI, 0, 128, 264)
	D6CHUNK(264, 0, 0, Z4, Z5)
	D6CHUNK(280, 4, 64, Z6, Z7)
	D6CHUNK(296, 8, 128, Z8, Z9)
	D6CHUNK(312, 12, 192, Z10, Z11)
	D6CHUNK(328, 16, 256, Z4, Z5)
	D6CHUNK(344, 20, 320, Z6, Z7)
	D6CHUNK(360, 24, 384, Z8, Z9)
	D6CHUNK(376, 28, 448, Z10, Z11)
	K6HALF(SI, 64, 160, 264)
	D6CHUNK(264, 32, 512, Z4, Z5)
	D6CHUNK(280, 36, 576, Z6, Z7)
	D6CHUNK(296, 40, 640, Z8, Z9)
	D6CHUNK(312, 44, 704, Z10, Z11)
	D6CHUNK(328, 48, 768, Z4, Z5)
	D6CHUNK(344, 52, 832, Z6, Z7)
	D6CHUNK(360, 56, 896, Z8, Z9)
	D6CHUNK(376, 60, 960, Z10, Z11)
	ADDQ $210, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ dequantQ6KAVX512_sb

dequantQ6KAVX512_done:
	VZEROUPPER
	RET
