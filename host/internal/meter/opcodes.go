package meter

// imm classifies the immediates that follow an opcode.
type imm uint8

const (
	immInvalid    imm = iota // not an opcode we accept
	immNone                  // no immediates
	immBlock                 // block type (block, if)
	immLoop                  // block type; starts a metered region
	immU32                   // one u32 (br, local.*, table.get, memory.size, ...)
	immU32x2                 // two u32s (call_indirect, memory.copy, table.init, ...)
	immBr                    // label depth (br, br_if)
	immBrTable               // vec(u32) u32
	immCall                  // function index (call)
	immRefFunc               // function index (ref.func)
	immGlobal                // global index (global.get, global.set)
	immMemarg                // align u32, offset u32
	immMemargLane            // memarg and a lane byte (SIMD load/store lane)
	immI32                   // s32
	immI64                   // s64
	immF32                   // 4 bytes
	immF64                   // 8 bytes
	immV128                  // 16 bytes (v128.const, i8x16.shuffle)
	immLane                  // one lane byte
	immSelectT               // vec(valtype)
	immRefNull               // reference type byte
	immZeroByte              // a single 0x00 byte (atomic.fence)
	immPrefix                // 0xFC/0xFD/0xFE: a u32 sub-opcode follows
)

const (
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opElse         = 0x05
	opEnd          = 0x0b
	opBr           = 0x0c
	opBrIf         = 0x0d
	opReturn       = 0x0f
	opCall         = 0x10
	opCallIndirect = 0x11
	opLocalG       = 0x20
	opLocalS       = 0x21
	opGlobalG      = 0x23
	opGlobalS      = 0x24
	opI64          = 0x42
	opI64LtS       = 0x53
	opI64Add       = 0x7c
	opI64Sub       = 0x7d
	opRefFunc      = 0xd2

	prefixMisc   = 0xfc
	prefixSIMD   = 0xfd
	prefixAtomic = 0xfe
)

// Opcode tables cover exactly what wazero v1.11 decodes with
// api.CoreFeaturesV2 plus threads: MVP, sign extension, non-trapping
// float-to-int, bulk memory, reference types, multi-value, SIMD and atomics.
// Anything else (tail calls, exceptions, GC, relaxed SIMD, ...) is rejected,
// since an opcode we cannot size would desynchronise the rewrite.
var (
	opImm     [256]imm
	miscImm   [18]imm   // 0xFC sub-opcodes
	simdImm   [256]imm  // 0xFD sub-opcodes
	atomicImm [0x4f]imm // 0xFE sub-opcodes
)

func init() {
	set := func(t []imm, k imm, ops ...int) {
		for _, op := range ops {
			t[op] = k
		}
	}
	span := func(t []imm, k imm, lo, hi int) {
		for op := lo; op <= hi; op++ {
			t[op] = k
		}
	}

	o := opImm[:]
	set(o, immNone, 0x00, 0x01, opElse, opEnd, 0x0f, 0x1a, 0x1b, 0xd1)
	set(o, immBlock, opBlock, opIf)
	set(o, immLoop, opLoop)
	set(o, immBr, opBr, opBrIf)
	set(o, immU32, 0x20, 0x21, 0x22, 0x25, 0x26, 0x3f, 0x40)
	set(o, immBrTable, 0x0e)
	set(o, immCall, opCall)
	set(o, immU32x2, opCallIndirect) // type index, table index
	set(o, immSelectT, 0x1c)
	set(o, immGlobal, opGlobalG, opGlobalS)
	span(o, immMemarg, 0x28, 0x3e)
	set(o, immI32, 0x41)
	set(o, immI64, opI64)
	set(o, immF32, 0x43)
	set(o, immF64, 0x44)
	span(o, immNone, 0x45, 0xc4) // numeric, conversions, sign extension
	set(o, immRefNull, 0xd0)
	set(o, immRefFunc, opRefFunc)
	set(o, immPrefix, prefixMisc, prefixSIMD, prefixAtomic)

	m := miscImm[:]
	span(m, immNone, 0, 7)  // trunc_sat
	set(m, immU32x2, 8)     // memory.init data, mem
	set(m, immU32, 9)       // data.drop
	set(m, immU32x2, 10)    // memory.copy mem, mem
	set(m, immU32, 11)      // memory.fill mem
	set(m, immU32x2, 12)    // table.init elem, table
	set(m, immU32, 13)      // elem.drop
	set(m, immU32x2, 14)    // table.copy table, table
	span(m, immU32, 15, 17) // table.grow, table.size, table.fill

	s := simdImm[:]
	span(s, immMemarg, 0x00, 0x0b) // loads, splat loads, v128.store
	set(s, immV128, 0x0c, 0x0d)    // v128.const, i8x16.shuffle
	span(s, immNone, 0x0e, 0x14)   // swizzle, splats
	span(s, immLane, 0x15, 0x22)   // extract/replace lane
	span(s, immNone, 0x23, 0x53)   // comparisons, bitwise, any_true
	span(s, immMemargLane, 0x54, 0x5b)
	set(s, immMemarg, 0x5c, 0x5d) // load32_zero, load64_zero
	span(s, immNone, 0x5e, 0x99)
	span(s, immNone, 0x9b, 0xa1)
	span(s, immNone, 0xa3, 0xa4)
	span(s, immNone, 0xa7, 0xae)
	set(s, immNone, 0xb1)
	span(s, immNone, 0xb5, 0xba)
	span(s, immNone, 0xbc, 0xc1)
	span(s, immNone, 0xc3, 0xc4)
	span(s, immNone, 0xc7, 0xce)
	set(s, immNone, 0xd1)
	span(s, immNone, 0xd5, 0xe1)
	span(s, immNone, 0xe3, 0xed)
	span(s, immNone, 0xef, 0xff)

	a := atomicImm[:]
	set(a, immMemarg, 0x00, 0x01, 0x02) // notify, wait32, wait64
	set(a, immZeroByte, 0x03)           // atomic.fence
	span(a, immMemarg, 0x10, 0x4e)      // loads, stores, rmw, cmpxchg
}

// subImm looks up the immediates of a prefixed opcode.
func subImm(prefix byte, sub uint32) imm {
	var t []imm
	switch prefix {
	case prefixMisc:
		t = miscImm[:]
	case prefixSIMD:
		t = simdImm[:]
	case prefixAtomic:
		t = atomicImm[:]
	}
	if sub < uint32(len(t)) {
		return t[sub]
	}
	return immInvalid
}

// opName gives rejected opcodes a recognisable name in errors.
func opName(op byte) string {
	switch op {
	case 0x06, 0x07, 0x08, 0x09, 0x0a, 0x18, 0x19, 0x1f:
		return "exception handling"
	case 0x12, 0x13:
		return "tail call"
	case 0x14, 0x15, 0xd3, 0xd4, 0xd5, 0xd6:
		return "typed function references"
	case 0xfb:
		return "GC"
	}
	return "unknown"
}
