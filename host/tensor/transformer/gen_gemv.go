//go:build ignore

// gen_gemv writes gemv_amd64.s, the exact-mode GEMV kernels: for each weight
// type (f32, f16, bf16, q8_0) and each of AVX-512 and AVX2, a function
//
//	func gemv<Type><ISA>(out, x *float32, w *byte, k, rows, stride, group int)
//
// that sets out[j] to the 16-lane dot product of x (k values, padded with
// zeros to a multiple of 16) and row j of w, for rows rows that start
// stride bytes apart. Run it with go generate; the output is checked in.
//
// Each row's 16 lanes live in one zmm register (AVX-512) or two ymm (lanes
// 0–7 and 8–15, AVX2). Every weight is converted to float32 first; each
// product is rounded by VMULPS before VADDPS adds it (never an FMA), so the
// bits are those of the Go code in dot.go. With group 4, four rows run at
// once, four independent addition chains, for rows in cache that x passes
// over many times; a last loop takes the rows one by one. With group 1 that
// loop takes every row: one stream through memory, which the prefetchers
// follow best when the weights come from DRAM (a decode step's GEMV: 1.4×
// to 1.75× faster than four interleaved rows on an AMD EPYC). A
// row's tail (k mod 16 values) is copied to a zeroed scratch vector on the
// stack, so the missing lanes add +0 products, which changes no lane: a
// lane that starts at +0 never holds -0.
//
// It also writes gemmQ8R<n>AVX512 for n = 1…8 (q8Rows): q8_0 rows against n
// rows of x at once, each weight block decoded once for all n, with the
// bits of gemvQ8AVX512 for each row of x. And tolerance mode's q8_0
// kernels, gemvQ8FMA<ISA> and gemmQ8R<n>FMAAVX512: the same loops with
// each lane's product and addition fused into one FMA (VFMADD231PS,
// rounded once), which halves the multi-row kernels' arithmetic; their
// bits are fma32's in dot.go.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }

func label(name string) { fmt.Fprintf(&out, "%s:\n", name) }

// isa is a vector instruction set.
type isa struct {
	name  string // function name suffix
	reg   string // "Z" or "Y"
	parts int    // vectors per 16 lanes
}

var (
	avx512 = isa{"AVX512", "Z", 1}
	avx2   = isa{"AVX2", "Y", 2}
)

// wtype is a weight type: es bytes per element, 0 for q8_0's blocks.
type wtype struct {
	name string
	es   int
}

// Registers: DI out, SI x, BX the first row of the group, CX k, DX rows
// left, R8 the stride, R9–R12 the group's rows, AX x's offset, R13 the
// rows' offset, R14 a loop count, R15 a byte index.
var rowRegs = []string{"R9", "R10", "R11", "R12"}

// pf is how far ahead in each row the loops prefetch, in bytes: the loops
// of the 16-bit types consume a row slowly, and without it the core keeps
// too few cache misses in flight to reach DRAM bandwidth.
var pf = 512

// pfF32 is how far ahead the one-row f32 loop (a decode step's GEMV, from
// DRAM) prefetches, into L2 (PREFETCHT2): an f32 row streams 64 bytes per
// multiply-add, which the L1 prefetch at pf bytes keeps up with poorly; a
// page ahead, the next 4 KiB page is already on its way when the hardware
// prefetchers, which stop at page boundaries, would start it (one-row GEMV over 440 MB on an Intel Xeon (Emerald
// Rapids), 25 interleaved rounds: 12.3 GB/s against 9.8-10.1 at pf).
const pfF32 = 4096

// kernel is one generated function.
type kernel struct {
	isa
	wtype
	fn string
	// fused: each product is added by an FMA, rounded once (tolerance
	// mode's q8_0 kernels), instead of VMULPS then VADDPS.
	fused bool
}

func (k kernel) v(i int) string { return fmt.Sprintf("%s%d", k.reg, i) }
func (k kernel) y(i int) string { return fmt.Sprintf("Y%d", i) }
func (k kernel) x(i int) string { return fmt.Sprintf("X%d", i) }

// acc is the register of part part of row i's lanes.
func (k kernel) acc(i, part int) int { return i*k.parts + part }

// vecBytes is the size of one vector register.
func (k kernel) vecBytes() int { return 64 / k.parts }

// prologue writes the header of function fn(out, x *float32, w *byte, k,
// rows, stride, last int), with frame bytes on the stack, and loads its
// first six arguments: DI out, SI x, BX w, CX k, DX rows, R8 stride.
func prologue(fn, last string, frame int) {
	fmt.Fprintf(&out, "\n// func %s(out, x *float32, w *byte, k, rows, stride, %s int)\n", fn, last)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $%d-56\n", fn, frame)
	p("MOVQ out+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ w+16(FP), BX")
	p("MOVQ k+24(FP), CX")
	p("MOVQ rows+32(FP), DX")
	p("MOVQ stride+40(FP), R8")
}

func (k kernel) gen() {
	prologue(k.fn, "group", 64)
	p("CMPQ group+48(FP), $4")
	p("JLT %s_rows1", k.fn)
	for _, nr := range []int{4, 1} {
		top := startRows(k.fn, nr)
		zero := "VXORPS" // AVX; VXORPS on zmm would need AVX512DQ
		if k.reg == "Z" {
			zero = "VPXORD"
		}
		for i := range nr * k.parts {
			p("%s %s, %s, %s", zero, k.v(i), k.v(i), k.v(i))
		}
		if k.es == 0 {
			k.q8Body(top, nr)
		} else {
			k.body(top, nr)
		}
		k.reduce(nr)
		nextRows(top, nr)
	}
	p("VZEROUPPER")
	p("RET")
}

// startRows begins the loop of fn over nr weight rows at a time: its
// label, the exit once fewer are left, and the rows' pointers; it returns
// the label (nextRows ends the loop).
func startRows(fn string, nr int) string {
	top := fmt.Sprintf("%s_rows%d", fn, nr)
	label(top)
	p("CMPQ DX, $%d", nr)
	p("JL %s_done", top)
	for i := range nr {
		if i == 0 {
			p("MOVQ BX, %s", rowRegs[0])
		} else {
			p("LEAQ (%s)(R8*1), %s", rowRegs[i-1], rowRegs[i])
		}
	}
	return top
}

// nextRows ends a pass over nr weight rows: the output and weight
// pointers move on (by 4 rows' stride at once for 4), the rows left count
// down, and the loop at top goes round again.
func nextRows(top string, nr int) {
	p("ADDQ $%d, DI", 4*nr)
	if nr == 4 {
		p("LEAQ (BX)(R8*4), BX")
	} else {
		p("ADDQ R8, BX")
	}
	p("SUBQ $%d, DX", nr)
	p("JMP %s", top)
	label(top + "_done")
}

// xRegs is the first register holding x's values.
func (k kernel) xReg(nr int) int { return nr * k.parts }

// body is the loop of the float types over full chunks of 16, then the tail.
func (k kernel) body(top string, nr int) {
	xr := k.xReg(nr)
	t := xr + k.parts // product register
	p("XORQ AX, AX")
	p("XORQ R13, R13")
	p("MOVQ CX, R14")
	p("SHRQ $4, R14")
	p("JZ %s_tail", top)
	label(top + "_loop")
	k.loadX(xr)
	for i := range nr {
		if k.wtype.name == "F32" && nr == 1 {
			p("PREFETCHT2 %d(%s)(R13*1)", pfF32, rowRegs[i])
		} else if pf > 0 {
			p("PREFETCHT0 %d(%s)(R13*1)", pf, rowRegs[i])
		}
		for part := range k.parts {
			k.mulAdd(fmt.Sprintf("%d(%s)(R13*1)", part*16*k.es/k.parts, rowRegs[i]), xr+part, t, k.acc(i, part))
		}
	}
	p("ADDQ $64, AX")
	p("ADDQ $%d, R13", 16*k.es)
	p("DECQ R14")
	p("JNZ %s_loop", top)
	label(top + "_tail")
	p("MOVQ CX, R14")
	p("ANDQ $15, R14")
	p("JZ %s_reduce", top)
	k.loadX(xr) // x is zero-padded to whole chunks
	p("IMULQ $%d, R14", k.es)
	for i := range nr {
		// Copy the row's tail into 64 zeroed bytes at 0(SP).
		p("VXORPS %s, %s, %s", k.y(t), k.y(t), k.y(t))
		p("VMOVUPS %s, (SP)", k.y(t))
		p("VMOVUPS %s, 32(SP)", k.y(t))
		p("LEAQ (%s)(R13*1), AX", rowRegs[i])
		p("XORQ R15, R15")
		label(fmt.Sprintf("%s_copy%d", top, i))
		p("MOVB (AX)(R15*1), CX")
		p("MOVB CX, (SP)(R15*1)")
		p("INCQ R15")
		p("CMPQ R15, R14")
		p("JB %s_copy%d", top, i)
		for part := range k.parts {
			k.mulAdd(fmt.Sprintf("%d(SP)", part*16*k.es/k.parts), xr+part, t, k.acc(i, part))
		}
	}
	p("MOVQ k+24(FP), CX")
	label(top + "_reduce")
}

// loadX loads the chunk of x at AX into registers xr….
func (k kernel) loadX(xr int) {
	for part := range k.parts {
		p("VMOVUPS %d(SI)(AX*1), %s", part*k.vecBytes(), k.v(xr+part))
	}
}

// mulAdd adds to acc the products of x (register xr) and the weights at
// mem, converted to float32 in register t.
func (k kernel) mulAdd(mem string, xr, t, acc int) {
	switch k.wtype.name {
	case "F32":
		p("VMULPS %s, %s, %s", mem, k.v(xr), k.v(t))
	case "F16":
		p("VCVTPH2PS %s, %s", mem, k.v(t))
		p("VMULPS %s, %s, %s", k.v(xr), k.v(t), k.v(t))
	case "BF16":
		p("VPMOVZXWD %s, %s", mem, k.v(t))
		p("VPSLLD $16, %s, %s", k.v(t), k.v(t))
		p("VMULPS %s, %s, %s", k.v(xr), k.v(t), k.v(t))
	}
	p("VADDPS %s, %s, %s", k.v(t), k.v(acc), k.v(acc))
}

// q8Body is the loop over q8_0 blocks of 32: d broadcast as float32, each
// group of int8 widened, converted, scaled by d (exact), multiplied by x.
func (k kernel) q8Body(top string, nr int) {
	xr := k.xReg(nr)
	groups := 2 * k.parts // vectors per block
	d := xr + groups
	t := d + 1
	p("XORQ AX, AX")
	p("MOVQ CX, R14")
	p("SHRQ $5, R14")
	p("JZ %s_reduce", top)
	label(top + "_loop")
	for g := range groups {
		p("VMOVUPS %d(SI)(AX*1), %s", g*k.vecBytes(), k.v(xr+g))
	}
	for i := range nr {
		r := rowRegs[i]
		if pf > 0 {
			p("PREFETCHT0 %d(%s)", pf, r)
		}
		if k.reg == "Z" {
			p("VPBROADCASTW (%s), %s", r, k.y(d))
			p("VCVTPH2PS %s, %s", k.y(d), k.v(d))
		} else {
			p("VPBROADCASTW (%s), %s", r, k.x(d))
			p("VCVTPH2PS %s, %s", k.x(d), k.v(d))
		}
		per := 32 / groups // values per vector
		for g := range groups {
			p("VPMOVSXBD %d(%s), %s", 2+g*per, r, k.v(t))
			p("VCVTDQ2PS %s, %s", k.v(t), k.v(t))
			p("VMULPS %s, %s, %s", k.v(d), k.v(t), k.v(t))
			a := k.acc(i, g%k.parts)
			if k.fused {
				p("VFMADD231PS %s, %s, %s", k.v(xr+g), k.v(t), k.v(a))
				continue
			}
			p("VMULPS %s, %s, %s", k.v(xr+g), k.v(t), k.v(t))
			p("VADDPS %s, %s, %s", k.v(t), k.v(a), k.v(a))
		}
		p("ADDQ $34, %s", r)
	}
	p("ADDQ $128, AX")
	p("DECQ R14")
	p("JNZ %s_loop", top)
	label(top + "_reduce")
}

// reduce adds each row's lanes pairwise (i += i+8, +4, +2, +1) and stores
// lane 0 to out.
func (k kernel) reduce(nr int) {
	t := nr * k.parts // a free register
	for i := range nr {
		k.reduceTo(k.acc(i, 0), t)
		p("VMOVSS %s, %d(DI)", k.x(k.acc(i, 0)), 4*i)
	}
}

// reduceTo adds the 16 lanes whose first part is register a pairwise
// (i += i+8, +4, +2, +1) into lane 0 of X<a>, with t as scratch.
func (k kernel) reduceTo(a, t int) {
	if k.reg == "Z" {
		p("VEXTRACTF64X4 $1, %s, %s", k.v(a), k.y(t))
		p("VADDPS %s, %s, %s", k.y(t), k.y(a), k.y(a))
	} else {
		p("VADDPS %s, %s, %s", k.y(a+1), k.y(a), k.y(a))
	}
	p("VEXTRACTF128 $1, %s, %s", k.y(a), k.x(t))
	p("VADDPS %s, %s, %s", k.x(t), k.x(a), k.x(a))
	p("VMOVHLPS %s, %s, %s", k.x(a), k.x(a), k.x(t))
	p("VADDPS %s, %s, %s", k.x(t), k.x(a), k.x(a))
	p("VMOVSHDUP %s, %s", k.x(a), k.x(t))
	p("VADDSS %s, %s, %s", k.x(t), k.x(a), k.x(a))
}

// maxXRows is the most rows of x one multi-row kernel takes.
const maxXRows = 8

// q8Rows writes gemmQ8R<nx>AVX512(out, x *float32, w *byte, k, rows,
// stride, ldo int): for each of rows q8_0 weight rows j (stride bytes
// apart) and each of nx rows r of x, out[r·ldo/4 + j] = the 16-lane dot
// product, as gemvQ8AVX512 computes it for x row r alone. x is packed: for
// each chunk of 16 values in turn, that chunk of rows 0…nx-1. Each block
// of weights is widened, converted and scaled once for all nx rows, which
// is where the time goes when x has several rows; every lane of every row
// still adds the same rounded products in the same order, so the bits are
// gemv's.
//
// With fused, gemmQ8R<nx>FMAAVX512 has the bits of gemvQ8FMAAVX512.
func q8Rows(nx int, fused bool) {
	k := kernel{isa: avx512, wtype: wtype{"Q8", 0}, fn: fmt.Sprintf("gemmQ8R%dAVX512", nx), fused: fused}
	if fused {
		k.fn = fmt.Sprintf("gemmQ8R%dFMAAVX512", nx)
	}
	prologue(k.fn, "ldo", 0)
	p("MOVQ ldo+48(FP), R10")
	d, t, prod := maxXRows, maxXRows+1, maxXRows+2 // accumulators are Z0…Z<nx-1>
	label(k.fn + "_row")
	p("TESTQ DX, DX")
	p("JZ %s_done", k.fn)
	for r := range nx {
		p("VPXORD %s, %s, %s", k.v(r), k.v(r), k.v(r))
	}
	p("MOVQ BX, R12")
	p("XORQ AX, AX")
	p("MOVQ CX, R14")
	p("SHRQ $5, R14")
	p("JZ %s_reduce", k.fn)
	label(k.fn + "_loop")
	if pf > 0 {
		p("PREFETCHT0 %d(R12)", pf)
	}
	p("VPBROADCASTW (R12), %s", k.y(d))
	p("VCVTPH2PS %s, %s", k.y(d), k.v(d))
	for g := range 2 {
		p("VPMOVSXBD %d(R12), %s", 2+16*g, k.v(t))
		p("VCVTDQ2PS %s, %s", k.v(t), k.v(t))
		p("VMULPS %s, %s, %s", k.v(d), k.v(t), k.v(t))
		for r := range nx {
			if fused {
				p("VFMADD231PS %d(SI)(AX*1), %s, %s", 64*(g*nx+r), k.v(t), k.v(r))
				continue
			}
			pr := prod + r%2
			p("VMULPS %d(SI)(AX*1), %s, %s", 64*(g*nx+r), k.v(t), k.v(pr))
			p("VADDPS %s, %s, %s", k.v(pr), k.v(r), k.v(r))
		}
	}
	p("ADDQ $34, R12")
	p("ADDQ $%d, AX", 128*nx)
	p("DECQ R14")
	p("JNZ %s_loop", k.fn)
	label(k.fn + "_reduce")
	p("MOVQ DI, R13")
	for r := range nx {
		k.reduceTo(r, t)
		p("VMOVSS %s, (R13)", k.x(r))
		p("ADDQ R10, R13")
	}
	p("ADDQ $4, DI")
	p("ADDQ R8, BX")
	p("DECQ DX")
	p("JMP %s_row", k.fn)
	label(k.fn + "_done")
	p("VZEROUPPER")
	p("RET")
}

// f32Rows writes gemmF32X<nx>AVX512(out, x *float32, w *byte, k, rows,
// stride, ldx, ldo, groups int): for each of rows f32 weight rows j
// (stride bytes apart) and each of nx rows r of x (ldx bytes apart),
// out[r·ldo/4 + j] = the 16-lane dot product, as gemvF32AVX512 computes
// it for x row r alone, NaNs canonical (each sum checked as it is
// stored, so matMul needs no pass over its output); k is a multiple of
// 16. Then the next nx rows of x and of out, groups times in all: a
// prompt's rows of x over a block of weight rows in one call (a call
// per four rows from Go cost 1-2% of the matmul). Four weight rows against the nx x rows
// at a time, 4·nx accumulators (a register-blocked micro-kernel: each
// chunk of a weight row and of an x row is loaded once for four products,
// and sixteen independent addition chains keep both FP ports busy; eight
// or twelve for a prompt's last two or three rows, which a one-row GEMV
// each ran at about half the speed), then the last rows one at a time
// against the nx x rows. Each lane of each
// accumulator adds the same rounded products in the same order as the
// one-row kernel, so the bits are gemv's: the prompt rows of exact mode's
// matmul over f32 (or dequantized) weights in cache.
func f32Rows(nx int) {
	k := kernel{isa: avx512, wtype: wtype{"F32", 4}, fn: fmt.Sprintf("gemmF32X%dAVX512", nx)}
	fn := k.fn
	fmt.Fprintf(&out, "\n// func %s(out, x *float32, w *byte, k, rows, stride, ldx, ldo, groups int)\n", fn)
	fmt.Fprintf(&out, "TEXT ·%s(SB), NOSPLIT, $0-72\n", fn)
	label(fn + "_group")
	p("MOVQ out+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ w+16(FP), BX")
	p("MOVQ k+24(FP), CX")
	p("SHLQ $2, CX") // bytes of a row
	p("MOVQ rows+32(FP), DX")
	p("MOVQ stride+40(FP), R8")
	p("MOVQ ldx+48(FP), AX")
	xrow := []string{"SI", "R13", "R14", "R15"}[:nx]
	for r := 1; r < nx; r++ {
		p("LEAQ (%s)(AX*1), %s", xrow[r-1], xrow[r])
	}
	for _, nr := range []int{4, 1} {
		top := startRows(fn, nr)
		// acc(r, j) = Z<4r+j>; weights Z16…; x Z20…; products Z24…Z31.
		acc := func(r, j int) int { return 4*r + j }
		for r := range nx {
			for j := range nr {
				a := acc(r, j)
				p("VPXORD Z%d, Z%d, Z%d", a, a, a)
			}
		}
		p("XORQ AX, AX")
		label(top + "_loop")
		for j := range nr {
			p("VMOVUPS (%s)(AX*1), Z%d", rowRegs[j], 16+j)
		}
		for r := range nx {
			p("VMOVUPS (%s)(AX*1), Z%d", xrow[r], 20+r)
		}
		n := 0
		for r := range nx {
			for j := range nr {
				t := 24 + n%8
				n++
				p("VMULPS Z%d, Z%d, Z%d", 16+j, 20+r, t)
				p("VADDPS Z%d, Z%d, Z%d", t, acc(r, j), acc(r, j))
			}
		}
		p("ADDQ $64, AX")
		p("CMPQ AX, CX")
		p("JLT %s_loop", top)
		// Reduce each accumulator (i += i+8, +4, +2, +1) and store lane 0,
		// a NaN as abi.CanonicalNaN32 (Z30).
		p("VBROADCASTSS canonf32<>(SB), Z30")
		p("MOVQ ldo+56(FP), AX")
		p("LEAQ (DI)(AX*2), R9")
		dst := []string{"(DI)", "(DI)(AX*1)", "(R9)", "(R9)(AX*1)"}
		if nr == 4 {
			reduce4x4(nx, acc, dst)
			nextRows(top, nr)
			continue
		}
		n = 0
		for r := range nx {
			for j := range nr {
				a, t := acc(r, j), 24+n%8
				n++
				p("VEXTRACTF64X4 $1, Z%d, Y%d", a, t)
				p("VADDPS Y%d, Y%d, Y%d", t, a, a)
				p("VEXTRACTF32X4 $1, Y%d, X%d", a, t)
				p("VADDPS X%d, X%d, X%d", t, a, a)
				p("VMOVHLPS X%d, X%d, X%d", a, a, t)
				p("VADDPS X%d, X%d, X%d", t, a, a)
				p("VMOVSHDUP X%d, X%d", a, t)
				p("VADDSS X%d, X%d, X%d", t, a, a)
				p("VCMPPS $3, Z%d, Z%d, K1", a, a) // unordered: NaN
				p("VMOVAPS Z30, K1, Z%d", a)
				m := strings.Replace(dst[r], "(", fmt.Sprintf("%d(", 4*j), 1)
				p("VMOVSS X%d, %s", a, m)
			}
		}
		nextRows(top, nr)
	}
	// The next nx rows of x and of out, if groups are left: the
	// arguments, read again at the top, move on.
	p("MOVQ groups+64(FP), AX")
	p("DECQ AX")
	p("JLE %s_end", fn)
	p("MOVQ AX, groups+64(FP)")
	p("MOVQ ldo+56(FP), AX")
	p("IMUL3Q $%d, AX, AX", nx)
	p("ADDQ AX, out+0(FP)")
	p("MOVQ ldx+48(FP), AX")
	p("IMUL3Q $%d, AX, AX", nx)
	p("ADDQ AX, x+8(FP)")
	p("JMP %s_group", fn)
	label(fn + "_end")
	p("VZEROUPPER")
	p("RET")
}

// reduce4x4 reduces f32Rows's 4·nx accumulators, an x row's four
// (weight rows j = 0…3, acc(r, j)) at a time, transposed: the four are
// added pairwise within shuffled registers, lane i += lane i+8 (two
// VADDPS for the four: each 256-bit half beside its other half),
// then +4 (one, each 128-bit lane one accumulator's four), +2 and +1
// (one each, within 128-bit lanes), and lanes 0, 4, 8 and 12, the four
// sums, go out in one store. Each sum adds the same lanes in the same
// order as the one-accumulator reduction (and an addition's operands
// commute), so the bits are gemv's, in 14 operations rather than 32
// for the four. Z16 holds the indices 0, 4, 8, 12; Z24…Z29 are scratch;
// a NaN sum goes out as Z30 (abi.CanonicalNaN32 in every lane).
func reduce4x4(nx int, acc func(r, j int) int, dst []string) {
	p("VMOVDQU32 red4x4<>(SB), Z16")
	for r := range nx {
		a := func(j int) int { return acc(r, j) }
		// lane i += lane i+8: [a0 lo, a1 lo] + [a0 hi, a1 hi], and a2, a3.
		p("VSHUFF32X4 $0x44, Z%d, Z%d, Z24", a(1), a(0))
		p("VSHUFF32X4 $0xEE, Z%d, Z%d, Z25", a(1), a(0))
		p("VADDPS Z25, Z24, Z24")
		p("VSHUFF32X4 $0x44, Z%d, Z%d, Z26", a(3), a(2))
		p("VSHUFF32X4 $0xEE, Z%d, Z%d, Z27", a(3), a(2))
		p("VADDPS Z27, Z26, Z26")
		// lane i += lane i+4: 128-bit lane j holds accumulator j's four.
		p("VSHUFF32X4 $0x88, Z26, Z24, Z28")
		p("VSHUFF32X4 $0xDD, Z26, Z24, Z29")
		p("VADDPS Z29, Z28, Z28")
		// lane i += lane i+2, then lane 0 += lane 1, in each 128-bit lane.
		p("VPERMILPS $0x4E, Z28, Z29")
		p("VADDPS Z29, Z28, Z28")
		p("VMOVSHDUP Z28, Z29")
		p("VADDPS Z29, Z28, Z28")
		p("VPERMPS Z28, Z16, Z28")
		p("VCMPPS $3, Z28, Z28, K1") // unordered: NaN
		p("VMOVAPS Z30, K1, Z28")
		p("VMOVUPS X28, %s", dst[r])
	}
}

// axpy writes axpyRowsAVX2(o, v, a *float32, n, rows, stride int): for each
// row t < rows in turn, o[i] += a[t]·v[t·stride/4 + i] for i < n (n a
// multiple of 8), each product rounded before the addition: attention's
// weighted sum of v rows, with o kept in registers across the rows rather
// than loaded and stored once per row. With zmm (axpyRowsAVX512), the
// lanes go 64 at a time (a 64-wide head in one pass over the rows, its
// four dependent chains of additions rather than two passes of four
// ymm), then 16, then 8 in a ymm: per lane the same operations.
func axpy(zmm bool) {
	name, reg, bytes := "AVX2", "Y", 32
	if zmm {
		name, reg, bytes = "AVX512", "Z", 64
	}
	fmt.Fprintf(&out, "\n// func axpyRows%s(o, v, a *float32, n, rows, stride int)\n", name)
	fmt.Fprintf(&out, "TEXT ·axpyRows%s(SB), NOSPLIT, $0-48\n", name)
	p("MOVQ o+0(FP), DI")
	p("MOVQ v+8(FP), SI")
	p("MOVQ a+16(FP), DX")
	p("MOVQ n+24(FP), CX")
	p("MOVQ rows+32(FP), R8")
	p("MOVQ stride+40(FP), R9")
	// Lanes in chunks of 4 registers, then 1 (and in zmm then a ymm of
	// 8), each chunk of o in registers while every row of v passes: per
	// lane the same additions in the same order as one axpy per row.
	type chunk struct {
		w, bytes int
		reg      string
	}
	chunks := []chunk{}
	for _, w := range []int{4, 1} {
		chunks = append(chunks, chunk{w, bytes, reg})
	}
	if zmm {
		chunks = append(chunks, chunk{1, 32, "Y"})
	}
	for _, c := range chunks {
		lanes := c.w * c.bytes / 4
		top := fmt.Sprintf("axpy%s_chunk%d", strings.ToLower(name), lanes)
		if !zmm {
			top = fmt.Sprintf("axpy_chunk%d", lanes)
		}
		label(top)
		p("CMPQ CX, $%d", lanes)
		p("JL %s_done", top)
		for i := range c.w {
			p("VMOVUPS %d(DI), %s%d", c.bytes*i, c.reg, i)
		}
		p("MOVQ SI, R10")
		p("XORQ R11, R11")
		label(top + "_row")
		p("CMPQ R11, R8")
		p("JGE %s_store", top)
		p("VBROADCASTSS (DX)(R11*4), %s4", c.reg)
		for i := range c.w {
			p("VMULPS %d(R10), %s4, %s%d", c.bytes*i, c.reg, c.reg, 5+i)
			p("VADDPS %s%d, %s%d, %s%d", c.reg, i, c.reg, 5+i, c.reg, i) // product + o, as the one-row axpy adds
		}
		p("ADDQ R9, R10")
		p("INCQ R11")
		p("JMP %s_row", top)
		label(top + "_store")
		for i := range c.w {
			p("VMOVUPS %s%d, %d(DI)", c.reg, i, c.bytes*i)
		}
		p("ADDQ $%d, DI", c.bytes*c.w)
		p("ADDQ $%d, SI", c.bytes*c.w)
		p("SUBQ $%d, CX", lanes)
		p("JMP %s", top)
		label(top + "_done")
	}
	p("VZEROUPPER")
	p("RET")
}

func main() {
	if len(os.Args) > 1 {
		fmt.Sscan(os.Args[1], &pf)
	}
	out.WriteString("// Code generated by gen_gemv.go; DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n")
	// red4x4 is the indices 0, 4, 8, 12 (then zeros) for reduce4x4's
	// VPERMPS.
	out.WriteString("\nDATA red4x4<>+0(SB)/8, $0x0000000400000000\nDATA red4x4<>+8(SB)/8, $0x0000000c00000008\nDATA red4x4<>+16(SB)/8, $0\nDATA red4x4<>+24(SB)/8, $0\nDATA red4x4<>+32(SB)/8, $0\nDATA red4x4<>+40(SB)/8, $0\nDATA red4x4<>+48(SB)/8, $0\nDATA red4x4<>+56(SB)/8, $0\nGLOBL red4x4<>(SB), RODATA|NOPTR, $64\n")
	// canonf32 is abi.CanonicalNaN32, for f32Rows's stores.
	out.WriteString("\nDATA canonf32<>+0(SB)/4, $0x7fc00000\nGLOBL canonf32<>(SB), RODATA|NOPTR, $4\n")
	for _, is := range []isa{avx512, avx2} {
		for _, wt := range []wtype{{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"Q8", 0}} {
			kernel{isa: is, wtype: wt, fn: "gemv" + wt.name + is.name}.gen()
		}
		kernel{isa: is, wtype: wtype{"Q8", 0}, fn: "gemvQ8FMA" + is.name, fused: true}.gen()
	}
	for _, fused := range []bool{false, true} {
		for nx := 1; nx <= maxXRows; nx++ {
			q8Rows(nx, fused)
		}
	}
	for nx := 2; nx <= 4; nx++ {
		f32Rows(nx)
	}
	axpy(false)
	axpy(true)
	s := strings.ReplaceAll(out.String(), "\n\n\n", "\n\n")
	if err := os.WriteFile("gemv_amd64.s", []byte(s), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
