package meter

import (
	"encoding/binary"
	"math/bits"
)

// Where checks go and what they look like.
//
// A check charges the static cost of the region it guards and calls tick
// when fuel drops below zero. A call inside a loop is expensive in wazero's
// optimizing compiler even when it never runs: every value live across it
// is spilled and reloaded around the loop. So a loop's check only branches
// out of the loop, and the call happens outside it, in three blocks wrapped
// around the loop:
//
//	block bt                  ;; done
//	  loop bt                 ;; retry
//	    block                 ;; tick
//	      loop bt             ;; the original loop
//	        fuel -= COST
//	        br_if tick (fuel < 0)
//	        ...body...        ;; branches out of the loop skip 3 more labels
//	      end
//	      br done
//	    end
//	    fuel = tick(fuel) + COST  ;; the check runs again on re-entry
//	    br retry                  ;; re-enter the loop at its top
//	  end
//	end
//
// Re-entering at the top is exact because the check is the first thing the
// loop does. Loops with parameters would need a new type for the tick
// block, so they get the inline check that function entries use:
//
//	fuel -= COST
//	if fuel < 0 { fuel = tick(fuel) }
//
// The entry of a function that calls nothing only charges (fuel -= COST):
// straight-line code that cannot loop or call is bounded, and the checks of
// its callers and loops come around soon enough.
//
// Inside a function body fuel lives in an extra i64 local appended to the
// function's locals, which the compiler keeps in a register: loading and
// storing the global at every check cost Go guests, whose functions are one
// dispatch loop, a third of their speed. The entry loads the global into
// the local (and charges it); the local is stored back to the global before
// every call, tick, return, branch to the function's label and the final
// end, and reloaded after every call, since callees and host functions
// charge and may set the global. So whenever control leaves the function
// the global holds the exact remaining fuel. After a trap it may be stale.

// wrapLabels is the number of labels wrapped around a loop.
const wrapLabels = 3

// editKind says what an edit does.
type editKind uint8

const (
	editIndex    editKind = iota // replace a LEB128 index (function or label) with val
	editEntry                    // insert the entry check or charge of region 0
	editLoop                     // insert the inline check of region val
	editWrapHead                 // replace "loop bt" with the wrapper head and the check of region val
	editWrapEnd                  // replace the loop's end with the wrapper tail
	editFlush                    // insert global fuel = local fuel
	editLoad                     // insert local fuel = global fuel
)

// edit replaces src[pos:end] (empty for an insertion) while copying.
type edit struct {
	pos, end int
	kind     editKind
	val      uint32
}

// frame is an entry of the control stack.
type frame struct {
	parent  int32  // region enclosing a metered loop, or -1 for other blocks
	wrapped bool   // a loop with wrapper labels around it
	shift   uint32 // wrapper labels around this frame and all enclosing ones
}

// rewriter rewrites instruction sequences: it shifts function indices past
// the tick import and inserts fuel checks. Scratch slices are reused across
// function bodies so a module costs a handful of allocations.
type rewriter struct {
	importedFuncs uint32   // function indices below this keep their index
	funcs         uint32   // original function count, imports included
	globals       uint32   // original global count, imports included
	typeParams    []bool   // whether each original type has parameters
	paramCounts   []uint32 // number of parameters of each original type
	funcTypes     []uint32 // type index of each defined function
	fuel, tick    uint32   // indices of the fuel global and the tick function
	local         uint32   // index of the fuel local of the current function
	header        []byte   // rewritten locals declaration of the current function

	// Code fragments; see above. Each check starts with chargeHead and
	// i64.const COST.
	entryHead  []byte // global.get fuel; i64.const
	chargeHead []byte // local.get fuel; i64.const
	flush      []byte // global fuel = local fuel
	load       []byte // local fuel = global fuel
	chargeTail []byte // i64.sub; global.set fuel
	inlineTail []byte // chargeTail, then if fuel < 0 { fuel = tick(fuel) }
	wrapTail   []byte // chargeTail, then br_if 1 (fuel < 0)
	wrapEnd    []byte // replaces the loop's end, up to fuel = tick(fuel)
	wrapRetry  []byte // after wrapEnd and COST: i64.add; global.set; br retry

	edits  []edit
	costs  []int // static instruction count per region; 0 is the function entry
	stack  []frame
	calls  bool // the expression calls a function
	depth  int  // deepest control nesting of the last scan (blocks, loops, ifs)
	blocks int  // weighted control instructions of the last scan: see controlWeight
	limit  bool // the last scan failed on a structural limit, not a decoding error
}

func newRewriter(importedFuncs, funcs, globals, fuel, tick uint32, typeParams []bool) *rewriter {
	w := &rewriter{importedFuncs: importedFuncs, funcs: funcs, globals: globals, typeParams: typeParams, fuel: fuel, tick: tick}
	w.setLocal(0)
	return w
}

// setLocal builds the code fragments for a function whose fuel local has
// index l. Inside a function body fuel lives in that local; the global is
// loaded at entry and after every call, and stored before every call, every
// exit and every tick.
func (w *rewriter) setLocal(l uint32) {
	w.local = l
	g := appendU32(nil, w.fuel)
	lb := appendU32(nil, l)
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	getGlobal := cat([]byte{opGlobalG}, g)
	setGlobal := cat([]byte{opGlobalS}, g)
	getFuel := cat([]byte{opLocalG}, lb)
	setFuel := cat([]byte{opLocalS}, lb)
	w.flush = cat(getFuel, setGlobal)
	w.load = cat(getGlobal, setFuel)
	isNegative := cat(getFuel, []byte{opI64, 0, opI64LtS})
	callTick := cat(w.flush, getFuel, appendU32([]byte{opCall}, w.tick), setFuel)

	w.entryHead = cat(getGlobal, []byte{opI64})
	w.chargeHead = cat(getFuel, []byte{opI64})
	w.chargeTail = cat([]byte{opI64Sub}, setFuel)
	w.inlineTail = cat(w.chargeTail, isNegative, []byte{opIf, 0x40}, callTick, []byte{opEnd})
	w.wrapTail = cat(w.chargeTail, isNegative, []byte{opBrIf, 1})
	w.wrapEnd = cat([]byte{opEnd, opBr, 2, opEnd}, w.flush, getFuel, appendU32([]byte{opCall}, w.tick), []byte{opI64})
	w.wrapRetry = cat([]byte{opI64Add}, setFuel, []byte{opBr, 0, opEnd, opEnd})
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
func (w *rewriter) function(out []byte, r *reader, fn int) []byte {
	groups := r.count(2)
	declStart := r.pos
	var locals uint64
	for i := 0; i < groups && r.err == nil; i++ {
		locals += uint64(r.u32())
		if t := r.byte(); !isValType(t) && r.err == nil {
			r.fail("invalid local type %#x", t)
		}
	}
	if locals > MaxLocals {
		r.fail("too many locals: %d, limit %d", locals, MaxLocals)
	}
	if r.err != nil {
		return out
	}
	if fn >= len(w.funcTypes) || w.funcTypes[fn] >= uint32(len(w.paramCounts)) {
		r.fail("function %d has no valid type", fn)
		return out
	}
	// The fuel local follows the parameters and the declared locals.
	w.setLocal(w.paramCounts[w.funcTypes[fn]] + uint32(locals))
	w.header = appendU32(w.header[:0], uint32(groups)+1)
	w.header = append(w.header, r.buf[declStart:r.pos]...)
	w.header = append(w.header, 1, 0x7e)
	bodyStart := r.pos
	w.scan(r, true)
	if r.err == nil && r.pos != len(r.buf) {
		r.fail("%d bytes after the function's final end", len(r.buf)-r.pos)
	}
	if r.err != nil {
		return out
	}
	out = appendU32(out, uint32(len(w.header)+len(r.buf)-bodyStart+w.growth()))
	out = append(out, w.header...)
	return w.emit(out, r.buf, bodyStart, len(r.buf))
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
	w.edits, w.costs, w.stack, w.calls, w.depth, w.blocks, w.limit = w.edits[:0], w.costs[:0], w.stack[:0], false, 0, 0, false
	// cost counts instructions of the current region since it was last
	// flushed into w.costs[region].
	region, cost := int32(0), 0
	if metered {
		w.costs = append(w.costs, 0)
		w.edits = append(w.edits, edit{pos: r.pos, end: r.pos, kind: editEntry})
	}
	w.stack = append(w.stack, frame{parent: -1}) // the expression's implicit block

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
		k := opImm[op]
		if k == immNone && op != opEnd && op != opReturn {
			continue // the most common case, kept out of the switch's jump table
		}
		switch k {
		case immNone: // end or return
			if op == opReturn {
				if metered {
					w.edits = append(w.edits, edit{pos: start, end: start, kind: editFlush})
				}
				continue
			}
			top := w.stack[len(w.stack)-1]
			w.stack = w.stack[:len(w.stack)-1]
			if top.wrapped {
				w.edits = append(w.edits, edit{pos: start, end: pos, kind: editWrapEnd, val: uint32(region)})
			}
			if top.parent >= 0 { // end of a metered loop
				w.costs[region] += cost
				region, cost = top.parent, 0
			}
			if len(w.stack) == 0 {
				if metered {
					w.edits = append(w.edits, edit{pos: start, end: start, kind: editFlush})
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
			w.stack = append(w.stack, frame{parent: -1, shift: w.stack[len(w.stack)-1].shift})
			if !w.nest(r, start, op) {
				return
			}
			continue
		case immLoop:
			r.pos = pos
			params := w.blockParams(r)
			f := frame{parent: -1, shift: w.stack[len(w.stack)-1].shift}
			if metered {
				w.costs[region] += cost
				f.parent = region
				region, cost = int32(len(w.costs)), 0
				w.costs = append(w.costs, 0)
				if params {
					w.edits = append(w.edits, edit{pos: r.pos, end: r.pos, kind: editLoop, val: uint32(region)})
				} else {
					w.edits = append(w.edits, edit{pos: start, end: r.pos, kind: editWrapHead, val: uint32(region)})
					f.wrapped = true
					f.shift += wrapLabels
				}
			}
			w.stack = append(w.stack, f)
			if !w.nest(r, start, op) {
				return
			}
		case immBr:
			w.blocks += 2 // see controlWeight: measured, a br_if costs wazero as much as two blocks
			r.pos = pos
			if metered && r.u32() == uint32(len(w.stack)-1) && r.err == nil {
				w.edits = append(w.edits, edit{pos: start, end: start, kind: editFlush})
			}
			r.pos = pos
			w.branch(r)
		case immBrTable:
			r.pos = pos
			if metered {
				n, top, out := r.count(1), uint32(len(w.stack)-1), false
				for i := 0; i <= n && r.err == nil; i++ {
					out = r.u32() == top || out
				}
				if r.err != nil {
					return
				}
				if out {
					w.edits = append(w.edits, edit{pos: start, end: start, kind: editFlush})
				}
				r.pos = pos
			}
			n := r.count(1)
			w.blocks += 1 + n // wazero's cost grows with the targets too
			for i := 0; i <= n && r.err == nil; i++ {
				w.branch(r)
			}
		case immCall, immRefFunc:
			w.calls = w.calls || op == opCall
			if metered && op == opCall {
				w.edits = append(w.edits, edit{pos: start, end: start, kind: editFlush})
			}
			r.pos = pos
			idx := r.u32()
			if r.err == nil && idx >= w.funcs {
				r.failAt(pos, "function index %d out of range (%d functions)", idx, w.funcs)
			}
			if idx >= w.importedFuncs {
				w.edits = append(w.edits, edit{pos: pos, end: r.pos, val: idx + 1})
			}
			if metered && op == opCall {
				w.edits = append(w.edits, edit{pos: r.pos, end: r.pos, kind: editLoad})
			}
		case immU32x2: // call_indirect
			w.calls = true
			r.pos = pos
			// As with globals, the tick type must stay out of reach.
			if t := r.u32(); r.err == nil && t >= uint32(len(w.typeParams)) {
				r.failAt(pos, "type index %d out of range (%d types)", t, len(w.typeParams))
			}
			r.u32()
			if metered {
				w.edits = append(w.edits, edit{pos: start, end: start, kind: editFlush}, edit{pos: r.pos, end: r.pos, kind: editLoad})
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

// nest records the control frame just pushed by the instruction op at
// start and refuses nesting deeper than MaxNesting.
func (w *rewriter) nest(r *reader, start int, op byte) bool {
	d := len(w.stack) - 1 // the expression's implicit block is not nesting
	if d > MaxNesting {
		r.failAt(start, "control nesting %d over limit %d", d, MaxNesting)
		w.limit = true
		return false
	}
	w.depth = max(w.depth, d)
	w.blocks += controlWeight(op)
	return true
}

// controlWeight is what a block, loop or if adds to its function's count
// of basic blocks (see MaxControlCost), after instrumentation: a loop gets
// three wrapper blocks, an if has two arms. Measured on wazero v1.11.0,
// compiling n nested loops costs about 16 times as much as n blocks, n ifs
// 3 to 4 times as much, n br_ifs 4 times as much (br and br_if count 2).
func controlWeight(op byte) int {
	switch op {
	case opLoop:
		return 1 + wrapLabels
	case opIf:
		return 2
	}
	return 1
}

// branch reads a branch's label depth and, if wrapper labels now lie
// between the branch and its target, plans the depth's adjustment. Depths
// beyond the function's own label are rejected: they would now reach the
// wrapper labels.
func (w *rewriter) branch(r *reader) {
	p := r.pos
	depth := r.u32()
	top := len(w.stack) - 1
	if r.err != nil {
		return
	}
	if uint64(depth) > uint64(top) {
		r.failAt(p, "branch depth %d out of range (%d labels)", depth, top+1)
		return
	}
	if extra := w.stack[top].shift - w.stack[top-int(depth)].shift; extra > 0 {
		w.edits = append(w.edits, edit{pos: p, end: r.pos, val: depth + extra})
	}
}

// blockParams skips a block type and reports whether it has parameters.
func (w *rewriter) blockParams(r *reader) bool {
	start := r.pos
	if r.pos < len(r.buf) && (r.buf[r.pos] == 0x40 || isValType(r.buf[r.pos])) {
		r.pos++
		return false
	}
	idx := r.signed(33)
	if r.err != nil {
		return false
	}
	if idx < 0 || idx >= int64(len(w.typeParams)) {
		r.failAt(start, "invalid block type %d", idx)
		return false
	}
	return w.typeParams[idx]
}

// skip reads the immediates of kind k that need no rewriting.
func (r *reader) skip(k imm) {
	switch k {
	case immU32, immBr:
		r.u32()
	case immU32x2:
		r.u32()
		r.u32()
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
	if r.pos < len(r.buf) && (r.buf[r.pos] == 0x40 || isValType(r.buf[r.pos])) {
		r.pos++
		return
	}
	start := r.pos
	if v := r.signed(33); r.err == nil && v < 0 {
		r.failAt(start, "invalid block type %d", v)
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
		n += w.size(e) - (e.end - e.pos)
	}
	return n
}

// size is the length of what e inserts.
func (w *rewriter) size(e edit) int {
	var buf [10]byte
	switch e.kind {
	case editIndex:
		return sizeU32(e.val)
	case editFlush:
		return len(w.flush)
	case editLoad:
		return len(w.load)
	case editWrapEnd:
		return len(w.wrapEnd) + len(appendS64(buf[:0], int64(w.costs[e.val]))) + len(w.wrapRetry)
	case editWrapHead:
		bt := e.end - e.pos - 1
		return 5 + 3*bt + len(w.chargeHead) + len(appendS64(buf[:0], int64(w.costs[e.val]))) + len(w.wrapTail)
	case editEntry:
		return len(w.entryHead) + len(appendS64(buf[:0], int64(w.costs[e.val]))) + len(w.checkTail(e))
	}
	return len(w.chargeHead) + len(appendS64(buf[:0], int64(w.costs[e.val]))) + len(w.checkTail(e))
}

// checkTail picks the end of an entry or inline check.
func (w *rewriter) checkTail(e edit) []byte {
	if e.kind == editEntry && !w.calls {
		return w.chargeTail
	}
	return w.inlineTail
}

// emit copies src[from:to] to out, applying the recorded edits.
func (w *rewriter) emit(out, src []byte, from, to int) []byte {
	for _, e := range w.edits {
		out = append(out, src[from:e.pos]...)
		switch e.kind {
		case editIndex:
			out = appendU32(out, e.val)
		case editFlush:
			out = append(out, w.flush...)
		case editLoad:
			out = append(out, w.load...)
		case editEntry:
			out = append(out, w.entryHead...)
			out = appendS64(out, int64(w.costs[e.val]))
			out = append(out, w.checkTail(e)...)
		case editWrapEnd:
			out = append(out, w.wrapEnd...)
			out = appendS64(out, int64(w.costs[e.val]))
			out = append(out, w.wrapRetry...)
		case editWrapHead:
			bt := src[e.pos+1 : e.end]
			out = append(out, opBlock)
			out = append(out, bt...)
			out = append(out, opLoop)
			out = append(out, bt...)
			out = append(out, opBlock, 0x40, opLoop)
			out = append(out, bt...)
			out = append(out, w.chargeHead...)
			out = appendS64(out, int64(w.costs[e.val]))
			out = append(out, w.wrapTail...)
		default:
			out = append(out, w.chargeHead...)
			out = appendS64(out, int64(w.costs[e.val]))
			out = append(out, w.checkTail(e)...)
		}
		from = e.end
	}
	return append(out, src[from:to]...)
}

// checks is the number of check sites the last scan planned.
func (w *rewriter) checks() int {
	n := 0
	for _, e := range w.edits {
		if e.kind == editEntry || e.kind == editLoop || e.kind == editWrapHead {
			n++
		}
	}
	return n
}
