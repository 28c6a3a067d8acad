package meter

import (
	"encoding/binary"
	"math/bits"
)

// rewriter rewrites instruction sequences: it shifts function indices past
// the tick import and inserts fuel checks. Scratch slices are reused across
// function bodies so a module costs a handful of allocations.
type rewriter struct {
	importedFuncs uint32 // function indices below this keep their index
	funcs         uint32 // original function count, imports included
	globals       uint32 // original global count, imports included

	// The check sequence is checkHead, i64.const COST, checkTail.
	checkHead, checkTail []byte

	edits []edit
	costs []int   // static instruction count per region; 0 is the function entry
	stack []int32 // control frames: enclosing region of a loop, or -1
}

// edit replaces src[pos:end] (empty for an insertion) while copying.
type edit struct {
	pos, end int
	check    bool   // insert the check of region val
	val      uint32 // region index, or the new function index
}

func newRewriter(importedFuncs, funcs, globals, fuel, tick uint32) *rewriter {
	w := &rewriter{importedFuncs: importedFuncs, funcs: funcs, globals: globals}
	// fuel -= COST
	w.checkHead = appendU32([]byte{opGlobalG}, fuel)
	w.checkHead = append(w.checkHead, opI64)
	w.checkTail = append([]byte{opI64Sub, opGlobalS}, appendU32(nil, fuel)...)
	// if fuel < 0 { fuel = tick(fuel) }
	w.checkTail = append(w.checkTail, opGlobalG)
	w.checkTail = appendU32(w.checkTail, fuel)
	w.checkTail = append(w.checkTail, opI64, 0, opI64LtS, opIf, 0x40, opGlobalG)
	w.checkTail = appendU32(w.checkTail, fuel)
	w.checkTail = append(w.checkTail, opCall)
	w.checkTail = appendU32(w.checkTail, tick)
	w.checkTail = append(w.checkTail, opGlobalS)
	w.checkTail = appendU32(w.checkTail, fuel)
	w.checkTail = append(w.checkTail, opEnd)
	return w
}

// funcIndex maps an original function index to its index after the tick
// import is inserted behind the imported functions.
func (w *rewriter) funcIndex(idx uint32) uint32 {
	if idx >= w.importedFuncs {
		return idx + 1
	}
	return idx
}

// function rewrites one code section entry (locals and body, without the
// size prefix) and appends it, size-prefixed, to out.
func (w *rewriter) function(out []byte, r *reader) []byte {
	groups := r.count(2)
	var locals uint64
	for i := 0; i < groups && r.err == nil; i++ {
		locals += uint64(r.u32())
		switch t := r.byte(); t {
		case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		default:
			if r.err == nil {
				r.fail("invalid local type %#x", t)
			}
		}
	}
	if locals > 1<<32-1 {
		r.fail("too many locals: %d", locals)
	}
	w.scan(r, true)
	if r.err == nil && r.pos != len(r.buf) {
		r.fail("%d bytes after the function's final end", len(r.buf)-r.pos)
	}
	if r.err != nil {
		return out
	}
	out = appendU32(out, uint32(len(r.buf)+w.growth()))
	return w.emit(out, r.buf, 0, len(r.buf))
}

// constExpr rewrites a constant expression (global initialiser, element
// offset or item) starting at r.pos, appending it to out.
func (w *rewriter) constExpr(out []byte, r *reader) []byte {
	start := r.pos
	w.scan(r, false)
	if r.err != nil {
		return out
	}
	return w.emit(out, r.buf, start, r.pos)
}

// scan decodes one expression up to and including its final end, recording
// the edits emit will apply. When metered, it also counts instructions per
// region and plans a check at the entry and at the top of every loop.
//
// A region's cost is the number of instructions that can execute between two
// checks: the loop (or function) body minus the bodies of nested loops, which
// pay for themselves. Counting both arms of an if, and every end, keeps fuel
// an upper bound on executed instructions.
func (w *rewriter) scan(r *reader, metered bool) {
	w.edits, w.costs, w.stack = w.edits[:0], w.costs[:0], w.stack[:0]
	// cost counts instructions of the current region since it was last
	// flushed into w.costs[region].
	region, cost := int32(0), 0
	if metered {
		w.costs = append(w.costs, 0)
		w.edits = append(w.edits, edit{pos: r.pos, end: r.pos, check: true})
	}
	w.stack = append(w.stack, -1) // the expression's implicit block

	// The hot loop keeps the position in a local and syncs r.pos around
	// calls to reader methods, which handle the rare multi-byte cases.
	buf, pos := r.buf, r.pos
	for {
		if pos >= len(buf) {
			r.pos = pos
			r.eof()
			return
		}
		start := pos
		op := buf[pos]
		pos++
		cost++
		switch k := opImm[op]; k {
		case immNone:
			if op != opEnd {
				continue
			}
			top := w.stack[len(w.stack)-1]
			w.stack = w.stack[:len(w.stack)-1]
			if top >= 0 { // end of a metered loop
				w.costs[region] += cost
				region, cost = top, 0
			}
			if len(w.stack) == 0 {
				if metered {
					w.costs[region] += cost
				}
				r.pos = pos
				return
			}
			continue
		case immU32, immI32, immI64:
			// Short immediates are by far the most common.
			if n := shortLEB(buf, pos); n > 0 {
				pos += n
				continue
			}
			r.pos = pos
			r.skip(k)
		case immMemarg:
			if pos < len(buf) && buf[pos] < 64 {
				if n := shortLEB(buf, pos+1); n > 0 {
					pos += 1 + n
					continue
				}
			}
			r.pos = pos
			r.memarg()
		case immGlobal:
			// Rejecting dangling indices matters: after instrumentation
			// index w.globals is the fuel global.
			if pos < len(buf) && uint32(buf[pos]) < min(w.globals, 0x80) {
				pos++
				continue
			}
			r.pos = pos
			if idx := r.u32(); r.err == nil && idx >= w.globals {
				r.failAt(pos, "global index %d out of range (%d globals)", idx, w.globals)
			}
		case immBlock:
			if pos < len(buf) && buf[pos] == 0x40 {
				pos++
			} else {
				r.pos = pos
				r.blockType()
				pos = r.pos
			}
			w.stack = append(w.stack, -1)
			continue
		case immLoop:
			r.pos = pos
			r.blockType()
			if !metered {
				w.stack = append(w.stack, -1)
				break
			}
			w.costs[region] += cost
			w.stack = append(w.stack, region)
			region, cost = int32(len(w.costs)), 0
			w.costs = append(w.costs, 0)
			w.edits = append(w.edits, edit{pos: r.pos, end: r.pos, check: true, val: uint32(region)})
		case immCall, immRefFunc:
			r.pos = pos
			idx := r.u32()
			if r.err == nil && idx >= w.funcs {
				r.failAt(pos, "function index %d out of range (%d functions)", idx, w.funcs)
			}
			if idx >= w.importedFuncs {
				w.edits = append(w.edits, edit{pos: pos, end: r.pos, val: idx + 1})
			}
		case immPrefix:
			r.pos = pos
			sub := r.u32()
			if k = subImm(op, sub); k == immInvalid && r.err == nil {
				r.failAt(start, "unsupported opcode %#x %d", op, sub)
			}
			r.skip(k)
		case immInvalid:
			r.failAt(start, "unsupported opcode %#x (%s)", op, opName(op))
		default:
			r.pos = pos
			r.skip(k)
		}
		if r.err != nil {
			return
		}
		pos = r.pos
	}
}

// skip reads the immediates of kind k that need no rewriting.
func (r *reader) skip(k imm) {
	switch k {
	case immU32:
		r.u32()
	case immU32x2:
		r.u32()
		r.u32()
	case immBrTable:
		n := r.count(1)
		for i := 0; i <= n && r.err == nil; i++ {
			r.u32()
		}
	case immMemarg:
		r.memarg()
	case immMemargLane:
		r.memarg()
		r.byte()
	case immI32:
		r.signed(32)
	case immI64:
		r.signed(64)
	case immF32:
		r.bytes(4)
	case immF64:
		r.bytes(8)
	case immV128:
		r.bytes(16)
	case immLane:
		r.byte()
	case immSelectT:
		r.bytes(r.count(1))
	case immRefNull:
		start := r.pos
		if t := r.byte(); t != 0x70 && t != 0x6f && r.err == nil {
			r.failAt(start, "unsupported ref.null type %#x", t)
		}
	case immZeroByte:
		start := r.pos
		if b := r.byte(); b != 0 && r.err == nil {
			r.failAt(start, "atomic.fence: expected 0x00, got %#x", b)
		}
	}
}

// shortLEB returns the length of the LEB128 number at buf[pos] if it is at
// most 4 bytes long, which makes it valid for any width, and 0 otherwise.
func shortLEB(buf []byte, pos int) int {
	if pos+4 > len(buf) {
		return 0
	}
	// Bytes with a clear high bit end the number.
	ends := ^binary.LittleEndian.Uint32(buf[pos:]) & 0x80808080
	if ends == 0 {
		return 0
	}
	return bits.TrailingZeros32(ends)/8 + 1
}

// blockType skips a block type: empty, a value type, or an s33 type index.
func (r *reader) blockType() {
	if r.pos < len(r.buf) {
		switch r.buf[r.pos] {
		case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			r.pos++
			return
		}
	}
	start := r.pos
	if v := r.signed(33); r.err == nil && v < 0 {
		r.failAt(start, "unsupported block type %d", v)
	}
}

// memarg skips an alignment and an offset. Alignment flags of 64 or more
// would announce multi-memory or memory64, which wazero does not support.
func (r *reader) memarg() {
	start := r.pos
	if a := r.u32(); a >= 64 && r.err == nil {
		r.failAt(start, "unsupported memarg alignment %d", a)
	}
	r.u32()
}

// growth is how many bytes the recorded edits add.
func (w *rewriter) growth() int {
	n := 0
	for _, e := range w.edits {
		if e.check {
			n += w.checkSize(w.costs[e.val])
		} else {
			n += sizeU32(e.val) - (e.end - e.pos)
		}
	}
	return n
}

func (w *rewriter) checkSize(cost int) int {
	return len(w.checkHead) + len(appendS64(make([]byte, 0, 10), int64(cost))) + len(w.checkTail)
}

// emit copies src[from:to] to out, applying the recorded edits.
func (w *rewriter) emit(out, src []byte, from, to int) []byte {
	for _, e := range w.edits {
		out = append(out, src[from:e.pos]...)
		if e.check {
			out = append(out, w.checkHead...)
			out = appendS64(out, int64(w.costs[e.val]))
			out = append(out, w.checkTail...)
		} else {
			out = appendU32(out, e.val)
		}
		from = e.end
	}
	return append(out, src[from:to]...)
}

// checks is the number of check sites the last scan planned.
func (w *rewriter) checks() int {
	n := 0
	for _, e := range w.edits {
		if e.check {
			n++
		}
	}
	return n
}
