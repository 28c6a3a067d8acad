//go:build ignore

// gen_kernels writes kernel_amd64.s, the register-blocked SGEMM micro-kernels.
// Run it with go generate; the output is checked in, so builds need no generator.
package main

import (
	"bytes"
	"fmt"
	"os"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }

// Modes of the store phase (see kernel.go).
const (
	modeStoreF32 = 0
	modeAddF32   = 1
	modeStoreI32 = 2
	modeAddI32   = 3
)

// spec describes one micro-kernel: mr rows broadcast from packed A, nr
// columns loaded as vw-byte vectors from packed B.
type spec struct {
	name   string
	reg    string // "Z" or "Y"
	mr, nr int
	vw     int // vector width in bytes
	unroll int
	pfB    int    // prefetch distance into packed B, in bytes (0 = none)
	zero   string // zeroing instruction
	// exact makes the bit-exact kernel: each product is rounded (VMULPS)
	// before it is added (VADDPS), in ascending k, to an accumulator that
	// starts from C (mode 1) or +0 (mode 0); the result is stored as is.
	exact bool
}

func (s spec) nv() int { return s.nr * 4 / s.vw } // vectors per C row

func (s spec) gen() {
	nv := s.nv()
	acc := s.mr * nv
	bReg := acc       // first B register
	bcReg := acc + nv // first broadcast register
	nbc := 32 - bcReg // broadcast registers to rotate through
	if s.reg == "Y" {
		nbc = 16 - bcReg
	}
	tReg := 0 // the exact kernel's product register (the last one)
	if s.exact {
		nbc--
		tReg = bcReg + nbc
	}
	if nbc < 1 {
		panic("not enough registers")
	}
	r := func(i int) string { return fmt.Sprintf("%s%d", s.reg, i) }
	aStep, bStep := s.mr*4, s.nr*4

	p("// func %s(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)", s.name)
	p("TEXT ·%s(SB), NOSPLIT, $0-48", s.name)
	p("\tMOVQ kc+0(FP), CX")
	p("\tMOVQ a+8(FP), AX")
	p("\tMOVQ b+16(FP), BX")
	p("\tMOVQ c+24(FP), DI")
	p("\tMOVQ ldc+32(FP), DX")
	p("\tSHLQ $2, DX")
	if s.exact {
		// Mode 1 (add) starts from C, mode 0 from +0.
		p("\tMOVQ mode+40(FP), R9")
		p("\tCMPQ R9, $%d", modeAddF32)
		p("\tJNE %s_zero", s.name)
		p("\tMOVQ DI, R10")
		for i := 0; i < s.mr; i++ {
			for v := 0; v < nv; v++ {
				p("\tVMOVUPS %d(R10), %s", v*s.vw, r(i*nv+v))
			}
			if i < s.mr-1 {
				p("\tADDQ DX, R10")
			}
		}
		p("\tJMP %s_start", s.name)
		p("%s_zero:", s.name)
	}
	for i := 0; i < acc; i++ {
		p("\t%s %s, %s, %s", s.zero, r(i), r(i), r(i))
	}
	if s.exact {
		p("%s_start:", s.name)
	}
	// Bring the C tile towards L1 while the k loop runs.
	p("\tMOVQ DI, R10")
	for i := 0; i < s.mr; i++ {
		p("\tPREFETCHT0 (R10)")
		p("\tPREFETCHT0 %d(R10)", s.nr*4-1)
		if i < s.mr-1 {
			p("\tADDQ DX, R10")
		}
	}
	step := func(u int) {
		for v := 0; v < nv; v++ {
			p("\tVMOVUPS %d(BX), %s", u*bStep+v*s.vw, r(bReg+v))
		}
		if s.pfB > 0 {
			for off := 0; off < bStep; off += 64 {
				p("\tPREFETCHT0 %d(BX)", u*bStep+off+s.pfB)
			}
		}
		for i := 0; i < s.mr; i++ {
			bc := r(bcReg + i%nbc)
			p("\tVBROADCASTSS %d(AX), %s", u*aStep+4*i, bc)
			for v := 0; v < nv; v++ {
				if s.exact {
					p("\tVMULPS %s, %s, %s", r(bReg+v), bc, r(tReg))
					p("\tVADDPS %s, %s, %s", r(tReg), r(i*nv+v), r(i*nv+v))
					continue
				}
				p("\tVFMADD231PS %s, %s, %s", r(bReg+v), bc, r(i*nv+v))
			}
		}
	}
	p("\tMOVQ CX, R8")
	p("\tSHRQ $%d, R8", log2(s.unroll))
	p("\tJZ %s_tail", s.name)
	p("%s_loop:", s.name)
	for u := 0; u < s.unroll; u++ {
		step(u)
	}
	p("\tADDQ $%d, AX", s.unroll*aStep)
	p("\tADDQ $%d, BX", s.unroll*bStep)
	p("\tDECQ R8")
	p("\tJNZ %s_loop", s.name)
	p("%s_tail:", s.name)
	p("\tANDQ $%d, CX", s.unroll-1)
	p("\tJZ %s_store", s.name)
	p("%s_tail1:", s.name)
	step(0)
	p("\tADDQ $%d, AX", aStep)
	p("\tADDQ $%d, BX", bStep)
	p("\tDECQ CX")
	p("\tJNZ %s_tail1", s.name)
	p("%s_store:", s.name)
	if s.exact {
		store := func() {
			for i := 0; i < s.mr; i++ {
				for v := 0; v < nv; v++ {
					p("\tVMOVUPS %s, %d(DI)", r(i*nv+v), v*s.vw)
				}
				if i < s.mr-1 {
					p("\tADDQ DX, DI")
				}
			}
			p("\tVZEROUPPER")
			p("\tRET")
		}
		store()
		p("")
		return
	}
	p("\tMOVQ mode+40(FP), R9")
	p("\tCMPQ R9, $%d", modeAddF32)
	p("\tJEQ %s_addf32", s.name)
	p("\tCMPQ R9, $%d", modeStoreI32)
	p("\tJEQ %s_storei32", s.name)
	p("\tCMPQ R9, $%d", modeAddI32)
	p("\tJEQ %s_addi32", s.name)
	store := func(label, pre string) {
		if label != "" {
			p("%s_%s:", s.name, label)
		}
		for i := 0; i < s.mr; i++ {
			for v := 0; v < nv; v++ {
				x := r(i*nv + v)
				switch pre {
				case "addf32":
					p("\tVADDPS %d(DI), %s, %s", v*s.vw, x, x)
				case "storei32":
					p("\tVCVTPS2DQ %s, %s", x, x)
				case "addi32":
					p("\tVCVTPS2DQ %s, %s", x, x)
					p("\tVPADDD %d(DI), %s, %s", v*s.vw, x, x)
				}
				p("\tVMOVUPS %s, %d(DI)", x, v*s.vw)
			}
			if i < s.mr-1 {
				p("\tADDQ DX, DI")
			}
		}
		p("\tVZEROUPPER")
		p("\tRET")
	}
	store("", "")
	store("addf32", "addf32")
	store("storei32", "storei32")
	store("addi32", "addi32")
	p("")
}

func log2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	if 1<<l != n {
		panic("unroll must be a power of two")
	}
	return l
}

func main() {
	p("// Code generated by gen_kernels.go; DO NOT EDIT.")
	p("")
	p("//go:build !purego")
	p("")
	p("#include \"textflag.h\"")
	p("")
	spec{name: "kernel12x32", reg: "Z", mr: 12, nr: 32, vw: 64, unroll: 4, pfB: 1024, zero: "VPXORD"}.gen()
	spec{name: "kernel6x16", reg: "Y", mr: 6, nr: 16, vw: 32, unroll: 4, pfB: 512, zero: "VXORPS"}.gen()
	spec{name: "kernel12x32exact", reg: "Z", mr: 12, nr: 32, vw: 64, unroll: 4, pfB: 1024, zero: "VPXORD", exact: true}.gen()
	spec{name: "kernel6x16exact", reg: "Y", mr: 6, nr: 16, vw: 32, unroll: 4, pfB: 512, zero: "VXORPS", exact: true}.gen()
	if err := os.WriteFile("kernel_amd64.s", out.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
