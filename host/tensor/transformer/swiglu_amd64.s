//go:build amd64 && !purego

#include "textflag.h"

// SwiGLU's activation in AVX2 (swigluAVX2): pmath.Exp in four float64
// lanes, each operation pmath's, in its order, rounded on its own (no FMA),
// for the arguments whose e**x takes Exp's main path and is a normal
// float64 (2**-28 ≤ |x| ≤ 700; ldexp is then an exponent add); the Go
// code does the others.

// swc holds the constants, each in four float64 lanes: |x| and sign masks,
// 0.5, log2(e), ln2 high and low, Exp's p1…p5, 1, 2, 2**-28 and 700.
DATA swc<>+0(SB)/8, $0x7fffffffffffffff
DATA swc<>+8(SB)/8, $0x7fffffffffffffff
DATA swc<>+16(SB)/8, $0x7fffffffffffffff
DATA swc<>+24(SB)/8, $0x7fffffffffffffff
DATA swc<>+32(SB)/8, $0x8000000000000000
DATA swc<>+40(SB)/8, $0x8000000000000000
DATA swc<>+48(SB)/8, $0x8000000000000000
DATA swc<>+56(SB)/8, $0x8000000000000000
DATA swc<>+64(SB)/8, $0x3fe0000000000000
DATA swc<>+72(SB)/8, $0x3fe0000000000000
DATA swc<>+80(SB)/8, $0x3fe0000000000000
DATA swc<>+88(SB)/8, $0x3fe0000000000000
DATA swc<>+96(SB)/8, $0x3ff71547652b82fe
DATA swc<>+104(SB)/8, $0x3ff71547652b82fe
DATA swc<>+112(SB)/8, $0x3ff71547652b82fe
DATA swc<>+120(SB)/8, $0x3ff71547652b82fe
DATA swc<>+128(SB)/8, $0x3fe62e42fee00000
DATA swc<>+136(SB)/8, $0x3fe62e42fee00000
DATA swc<>+144(SB)/8, $0x3fe62e42fee00000
DATA swc<>+152(SB)/8, $0x3fe62e42fee00000
DATA swc<>+160(SB)/8, $0x3dea39ef35793c76
DATA swc<>+168(SB)/8, $0x3dea39ef35793c76
DATA swc<>+176(SB)/8, $0x3dea39ef35793c76
DATA swc<>+184(SB)/8, $0x3dea39ef35793c76
DATA swc<>+192(SB)/8, $0x3fc5555555555555
DATA swc<>+200(SB)/8, $0x3fc5555555555555
DATA swc<>+208(SB)/8, $0x3fc5555555555555
DATA swc<>+216(SB)/8, $0x3fc5555555555555
DATA swc<>+224(SB)/8, $0xbf66c16c16bebd93
DATA swc<>+232(SB)/8, $0xbf66c16c16bebd93
DATA swc<>+240(SB)/8, $0xbf66c16c16bebd93
DATA swc<>+248(SB)/8, $0xbf66c16c16bebd93
DATA swc<>+256(SB)/8, $0x3f11566aaf25de2c
DATA swc<>+264(SB)/8, $0x3f11566aaf25de2c
DATA swc<>+272(SB)/8, $0x3f11566aaf25de2c
DATA swc<>+280(SB)/8, $0x3f11566aaf25de2c
DATA swc<>+288(SB)/8, $0xbebbbd41c5d26bf1
DATA swc<>+296(SB)/8, $0xbebbbd41c5d26bf1
DATA swc<>+304(SB)/8, $0xbebbbd41c5d26bf1
DATA swc<>+312(SB)/8, $0xbebbbd41c5d26bf1
DATA swc<>+320(SB)/8, $0x3e66376972bea4d0
DATA swc<>+328(SB)/8, $0x3e66376972bea4d0
DATA swc<>+336(SB)/8, $0x3e66376972bea4d0
DATA swc<>+344(SB)/8, $0x3e66376972bea4d0
DATA swc<>+352(SB)/8, $0x3ff0000000000000
DATA swc<>+360(SB)/8, $0x3ff0000000000000
DATA swc<>+368(SB)/8, $0x3ff0000000000000
DATA swc<>+376(SB)/8, $0x3ff0000000000000
DATA swc<>+384(SB)/8, $0x4000000000000000
DATA swc<>+392(SB)/8, $0x4000000000000000
DATA swc<>+400(SB)/8, $0x4000000000000000
DATA swc<>+408(SB)/8, $0x4000000000000000
DATA swc<>+416(SB)/8, $0x3e30000000000000
DATA swc<>+424(SB)/8, $0x3e30000000000000
DATA swc<>+432(SB)/8, $0x3e30000000000000
DATA swc<>+440(SB)/8, $0x3e30000000000000
DATA swc<>+448(SB)/8, $0x4085e00000000000
DATA swc<>+456(SB)/8, $0x4085e00000000000
DATA swc<>+464(SB)/8, $0x4085e00000000000
DATA swc<>+472(SB)/8, $0x4085e00000000000
GLOBL swc<>(SB), RODATA|NOPTR, $480

// ONPATH(x, out) jumps to out unless every lane of x takes the vector
// path: 2**-28 ≤ |x| ≤ 700 (false for NaN). It uses Y2–Y4 and BX.
#define ONPATH(x, out) \
	VANDPD swc<>+0(SB), x, Y2 \
	VCMPPD $0x1D, swc<>+416(SB), Y2, Y3 \
	VCMPPD $0x12, swc<>+448(SB), Y2, Y4 \
	VANDPD Y4, Y3, Y3 \
	VMOVMSKPD Y3, BX \
	CMPL BX, $15 \
	JNE out

// ONPATHSM(x, out) jumps to out unless every lane of x is within
// |x| ≤ 700 (false for NaN): softmax's vector path, which also takes
// |x| < 2**-28 (Exp's 1 + x, NEARZERO), as its largest element's x = 0
// is. It uses Y2–Y3 and BX.
#define ONPATHSM(x, out) \
	VANDPD swc<>+0(SB), x, Y2 \
	VCMPPD $0x12, swc<>+448(SB), Y2, Y3 \
	VMOVMSKPD Y3, BX \
	CMPL BX, $15 \
	JNE out

// NEARZERO sets Y12's lanes whose |x| (x in Y1) is below 2**-28 to 1 + x,
// Exp's value there, after EXPPD (1 in Y13). It uses Y2–Y4.
#define NEARZERO \
	VANDPD swc<>+0(SB), Y1, Y2 \
	VCMPPD $0x11, swc<>+416(SB), Y2, Y3 \
	VADDPD Y13, Y1, Y4 \
	VBLENDVPD Y3, Y4, Y12, Y12

// EXPPD sets Y12 to e**x for x in Y1, each lane pmath.Exp's main path op
// for op (no FMA): k = int(float64(log2e·x) ± 0.5) with the sign of x's,
// hi = x - float64(k)·ln2Hi, lo = float64(k)·ln2Lo, r = hi - lo, t = r·r,
// q = t·(…) + p… from p5 down, c = r - t·q, y = 1 - ((lo - float64(r·c)/(2-c)) - hi),
// and y·2**k as an add to the exponent, which needs a normal result
// (2**-28 ≤ |x| ≤ 700). It leaves 1 in Y13 and clobbers Y2, Y3 and Y5…Y11.
#define EXPPD \
	VMULPD swc<>+96(SB), Y1, Y2 \
	VANDPD swc<>+32(SB), Y1, Y3 \
	VORPD swc<>+64(SB), Y3, Y3 \
	VADDPD Y3, Y2, Y2 \
	VCVTTPD2DQY Y2, X5 \
	VCVTDQ2PD X5, Y6 \
	VMULPD swc<>+128(SB), Y6, Y7 \
	VSUBPD Y7, Y1, Y7 \
	VMULPD swc<>+160(SB), Y6, Y8 \
	VSUBPD Y8, Y7, Y9 \
	VMULPD Y9, Y9, Y10 \
	VMULPD swc<>+320(SB), Y10, Y11 \
	VADDPD swc<>+288(SB), Y11, Y11 \
	VMULPD Y11, Y10, Y11 \
	VADDPD swc<>+256(SB), Y11, Y11 \
	VMULPD Y11, Y10, Y11 \
	VADDPD swc<>+224(SB), Y11, Y11 \
	VMULPD Y11, Y10, Y11 \
	VADDPD swc<>+192(SB), Y11, Y11 \
	VMULPD Y11, Y10, Y11 \
	VSUBPD Y11, Y9, Y11 \
	VMULPD Y11, Y9, Y12 \
	VMOVUPD swc<>+384(SB), Y13 \
	VSUBPD Y11, Y13, Y13 \
	VDIVPD Y13, Y12, Y12 \
	VSUBPD Y12, Y8, Y12 \
	VSUBPD Y7, Y12, Y12 \
	VMOVUPD swc<>+352(SB), Y13 \
	VSUBPD Y12, Y13, Y12 \
	VPMOVSXDQ X5, Y5 \
	VPSLLQ $52, Y5, Y5 \
	VPADDQ Y5, Y12, Y12

// func swigluAVX2(a, b, out *float32, n int) int
// out[i] = float32(float32(a[i]·sig)·b[i]), sig = float32(1/(1 + Exp(-a[i]))),
// four at a time for i < n (a multiple of 4), as SwiGLU computes it; it
// stops at the first four with an argument off the vector path and
// returns how many it did.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ out+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ AX, AX

swloop:
	CMPQ AX, CX
	JAE swdone
	VMOVUPS (SI)(AX*4), X0            // v
	VCVTPS2PD X0, Y1                  // float64(v), exact
	VXORPD swc<>+32(SB), Y1, Y1     // x = -v
	ONPATH(Y1, swdone)

	EXPPD

	// sig = float32(1/(1 + e**x)); out = float32(float32(v·sig)·b)
	VADDPD Y13, Y12, Y12
	VDIVPD Y12, Y13, Y12
	VCVTPD2PSY Y12, X12
	VMULPS X12, X0, X0
	VMULPS (DI)(AX*4), X0, X0
	VMOVUPS X0, (DX)(AX*4)
	ADDQ $4, AX
	JMP swloop

swdone:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET

// func expSubAVX2(s *float32, m float32, n int) int
// s[i] = float32(Exp(float64(s[i] - m))), the difference rounded to
// float32, four at a time for i < n (a multiple of 4), as softmax computes
// it; it stops at the first four with an argument off its vector path
// (ONPATHSM: |x| ≤ 700, the near-zero ones by NEARZERO) and returns how
// many it did.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), SI
	VBROADCASTSS m+8(FP), X14
	MOVQ n+16(FP), CX
	XORQ AX, AX

exloop:
	CMPQ AX, CX
	JAE exdone
	VMOVUPS (SI)(AX*4), X0
	VSUBPS X14, X0, X0                // x - m, rounded to float32
	VCVTPS2PD X0, Y1                  // x = float64(x - m), exact
	ONPATHSM(Y1, exdone)

	EXPPD
	NEARZERO

	VCVTPD2PSY Y12, X12               // float32(e**x)
	VMOVUPS X12, (SI)(AX*4)
	ADDQ $4, AX
	JMP exloop

exdone:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET

// func expAVX2(x, out *float64, n int) int
// out[i] = Exp(x[i]) four at a time for i < n (a multiple of 4), stopping
// at the first four with an argument off the vector path; it returns how
// many it did. The tests' window on EXPPD.
TEXT ·expAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ out+8(FP), DI
	MOVQ n+16(FP), CX
	XORQ AX, AX

e64loop:
	CMPQ AX, CX
	JAE e64done
	VMOVUPD (SI)(AX*8), Y1
	ONPATH(Y1, e64done)
	EXPPD
	VMOVUPD Y12, (DI)(AX*8)
	ADDQ $4, AX
	JMP e64loop

e64done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
