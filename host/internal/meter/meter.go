// Package meter rewrites WebAssembly modules so that they meter their own
// execution and periodically yield to the host, which can then stop them.
//
// Stopping a guest through wazero's RuntimeConfig.WithCloseOnContextDone
// makes tight loops several times slower, so instead every module is
// instrumented once, before compilation. Instrument adds a mutable i64 global
// holding the remaining fuel, exported as ExportFuel, and a function import
// ImportModule.ImportTick of type (i64) -> (i64). At the entry of every
// function and at the top of every loop it inserts a check equivalent to:
//
//	fuel -= COST
//	if fuel < 0 {
//		fuel = tick(fuel)
//	}
//
// COST counts the instructions of the straight-line region the check guards:
// for a function entry, its body outside any loop; for a loop, its body
// outside nested loops. Every backward branch and every call is therefore
// metered, and the fuel consumed is an upper bound on the number of
// instructions executed. Fuel is measured in these "fuel units": one unit per
// static instruction (including end and else) of each region entered.
// Accounting is exact and deterministic: the same run consumes the same fuel.
//
// Two refinements keep instrumented code within a few percent of the
// original's speed under wazero's optimizing compiler, where even a call that
// never runs makes a loop spill its values: a loop's check branches out of
// the loop to call tick and then re-enters it (see code.go), and the entry
// of a function that calls nothing only subtracts its cost, since the checks
// of its callers and loops come around within a bounded number of
// instructions anyway. Within a function, fuel is kept in a local and
// synchronised with the global at calls, ticks and exits (see code.go).
//
// The fuel global starts at zero, so the first check calls tick. The host
// refuels by returning the new remaining fuel (typically the argument plus a
// grant, paying off the debt) and stops the guest by closing the module and
// panicking with a sys.ExitError from tick. If tick returns a negative value,
// a loop calls it again before running, while a function entry goes on. The
// total consumed is the sum of grants minus the remaining fuel, read back
// through the export; the host may also set it there between calls.
package meter

import (
	"bytes"
	"errors"
	"fmt"
)

const (
	// ImportModule is the import module name reserved for the metering
	// host functions. Modules that already import from it are rejected.
	ImportModule = "infernet_meter"

	// ImportTick is the function ImportModule.ImportTick, of type
	// (fuel i64) -> i64, that a check calls when fuel drops below zero. Its
	// argument is the (negative) remaining fuel and its result becomes the
	// new remaining fuel. Results must stay below math.MaxInt64 - 2^32,
	// since a loop adds its cost back before re-entering.
	ImportTick = "tick"

	// ExportFuel is the export name of the mutable i64 global holding the
	// remaining fuel. The host may read or set it between calls.
	ExportFuel = "infernet_meter_fuel"
)

// Options configures Instrument.
type Options struct {
	// MaxMemoryPages caps the maximum size, in 64 KiB pages, of memories the
	// module defines. Zero leaves memory limits alone.
	MaxMemoryPages uint32

	// MaxTableElements caps the size of tables the module defines: each
	// element is host memory (8 bytes in wazero) that no memory limit sees.
	// A table whose minimum is larger is refused with ErrMemoryLimit. Zero
	// leaves table limits alone.
	MaxTableElements uint32
}

// MaxLocals is the most locals a function may declare (V8's limit): wazero
// allocates per declared local while compiling, so a 56-byte module declaring
// 2^32 locals would otherwise cost gigabytes before any limit applies.
const MaxLocals = 50000

// Structural limits that bound the time wazero takes to compile a module.
// Compilation happens before a job's time limit applies and costs the
// provider, not the job, so these are checked here, before wazero sees the
// module; a module over one is refused with ErrLimit, deterministically, so
// every provider refuses the same modules. Measured with wazero v1.11.0's
// optimizing compiler on the project's 2-core machines (see
// host/compile_test.go): its time grows with the square of the number of
// basic blocks in a function (100,000 nested blocks, a 300 KB module, took
// tens of seconds; so did 64,000 blocks side by side or 32,000 br_ifs) and
// superlinearly with the loads of one function; it is linear otherwise, at
// up to ~1.7 µs per byte of code (Go guests).
//
// The largest test guests (Go, 2.3–2.9 MB) have 1.4–1.8 MB of code, 2,000
// functions, bodies up to 29 KB, nesting 549 and a control cost up to
// 7.2×10^7 (MaxControlCost is 3.7 times that);
// C and Rust guests are far below.
const (
	// MaxFunctions is the most functions a module may define (V8 allows
	// 10^6; wazero spends a few µs on each even when empty).
	MaxFunctions = 1 << 16

	// MaxCodeBytes caps the code section (all function bodies): compile
	// time is at least linear in it. Twice the code of a large Go guest.
	MaxCodeBytes = 4 << 20

	// MaxFunctionBytes caps one function body: the time of a function of
	// memory loads grows faster than its size.
	MaxFunctionBytes = 512 << 10

	// MaxNesting is the deepest control nesting (blocks, loops and ifs
	// inside one another) a function may have.
	MaxNesting = 4096

	// MaxControlCost caps the sum over functions of the square of each
	// function's count of blocks and branches, which drives wazero's
	// quadratic cost: blocks count 1, ifs, br and br_if 2, loops 4 (they
	// are wrapped in three blocks by the metering) and br_table 1 plus its
	// targets, weights fitted to the measured cost of each. One function
	// may have up to 16,384 of them; a module at the limit compiles in
	// about a second.
	MaxControlCost = 1 << 28
)

// ImportKind is the kind of an import.
type ImportKind byte

// Import kinds, as encoded in the binary.
const (
	ImportFunc   ImportKind = 0
	ImportTable  ImportKind = 1
	ImportMemory ImportKind = 2
	ImportGlobal ImportKind = 3
)

// String returns "function", "table", "memory" or "global".
func (k ImportKind) String() string {
	switch k {
	case ImportFunc:
		return "function"
	case ImportTable:
		return "table"
	case ImportMemory:
		return "memory"
	case ImportGlobal:
		return "global"
	}
	return "import(?)"
}

// Import is one import of the module.
type Import struct {
	Module, Name string
	Kind         ImportKind
}

// Info describes an instrumented module.
type Info struct {
	// Functions is the number of functions the module defines.
	Functions int

	// Checks is the number of check sites inserted: one per function
	// (which only charges its cost if the function calls nothing) plus one
	// per loop.
	Checks int

	// MemoryMinPages and MemoryMaxPages are the limits of the module's
	// memory after capping, 65536 pages standing for "no declared maximum".
	// Both are zero when the module has no memory.
	MemoryMinPages, MemoryMaxPages uint32

	// MaxNesting is the deepest control nesting of any function (0 for
	// straight-line code), MaxFunctionBytes the size of the largest
	// function body (locals included), CodeBytes the size of all bodies
	// and ControlCost the sum over functions of their squared count of
	// blocks and branches: the quantities the structural limits (MaxNesting,
	// MaxFunctionBytes, MaxCodeBytes, MaxControlCost) apply to.
	MaxNesting, MaxFunctionBytes, CodeBytes, ControlCost int

	// Imports lists the module's own imports (not the tick import), so the
	// caller can enforce an allow-list on every kind.
	Imports []Import
}

var (
	// ErrInvalid is returned for a malformed binary or one using features
	// Instrument does not support. The wrapping error names the section,
	// the function index and the byte offset.
	ErrInvalid = errors.New("meter: invalid or unsupported module")

	// ErrMemoryLimit is returned when a memory's declared minimum exceeds
	// Options.MaxMemoryPages.
	ErrMemoryLimit = errors.New("meter: memory minimum exceeds limit")

	// ErrLimit is returned for a module over one of the structural limits
	// (MaxFunctions, MaxCodeBytes, MaxFunctionBytes, MaxNesting,
	// MaxControlCost) that bound its compile time. (MaxLocals, older,
	// gives ErrInvalid.)
	ErrLimit = errors.New("meter: module over a structural limit")

	// ErrReserved is returned when a module imports from ImportModule or
	// exports ExportFuel.
	ErrReserved = errors.New("meter: module uses a reserved name")
)

// Section IDs.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory", "global",
	"export", "start", "element", "code", "data", "data count"}

// sectionOrder is the position a section must appear in; data count sits
// between element and code.
var sectionOrder = [...]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 10}

const maxPages = 65536 // 4 GiB of 64 KiB pages, the wasm32 limit

var magic = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// section locates one section of the input.
type section struct {
	id         byte
	header     int    // offset of the section ID
	start, end int    // content, after a custom section's name
	custom     string // custom section name
}

// instrumenter carries the state of one Instrument call.
type instrumenter struct {
	wasm     []byte
	opts     Options
	sections []section
	info     Info

	importedFuncs, importedGlobals uint32
	definedFuncs, definedGlobals   uint32
	tickType                       uint32   // type index of (i64) -> (i64)
	appendType                     bool     // tickType is a new type
	typeParams                     []bool   // whether each type has parameters
	paramCounts                    []uint32 // number of parameters of each type
	funcTypes                      []uint32 // type index of each defined function
	sawCode, sawMemory             bool

	w   *rewriter
	out []byte
}

// Instrument returns a copy of the WebAssembly binary wasm with fuel metering
// added, as described in the package documentation. The output is
// deterministic. wasm is only decoded as far as rewriting needs: the result
// still has to be validated by compiling it.
func Instrument(wasm []byte, opts Options) ([]byte, Info, error) {
	m := &instrumenter{wasm: wasm, opts: opts}
	if err := m.split(); err != nil {
		return nil, Info{}, err
	}
	if err := m.prescan(); err != nil {
		return nil, Info{}, err
	}
	out, err := m.rewrite()
	if err != nil {
		return nil, Info{}, err
	}
	return out, m.info, nil
}

// split checks the header and locates every section, enforcing their order.
func (m *instrumenter) split() error {
	if len(m.wasm) < len(magic) || !bytes.Equal(m.wasm[:len(magic)], magic) {
		return fmt.Errorf("%w: bad magic number or version", ErrInvalid)
	}
	r := newReader(m.wasm, 0)
	r.pos = len(magic)
	last := 0
	for r.remaining() > 0 {
		header := r.pos
		id := r.byte()
		size := r.u32()
		r.bytes(int(size))
		if r.err != nil {
			return fmt.Errorf("%w: section header: %w", ErrInvalid, r.err)
		}
		if int(id) >= len(sectionOrder) {
			return fmt.Errorf("%w: offset %#x: unsupported section id %d", ErrInvalid, header, id)
		}
		s := section{id: id, header: header, start: r.pos - int(size), end: r.pos}
		if id == secCustom {
			cr := newReader(m.wasm[s.start:s.end], s.start)
			name := cr.name()
			if cr.err != nil {
				return fmt.Errorf("%w: custom section name: %w", ErrInvalid, cr.err)
			}
			s.custom, s.start = string(name), s.start+cr.pos
		} else {
			if sectionOrder[id] <= last {
				return fmt.Errorf("%w: offset %#x: %s section out of order", ErrInvalid, header, sectionNames[id])
			}
			last = sectionOrder[id]
		}
		m.sections = append(m.sections, s)
	}
	return nil
}

func (m *instrumenter) reader(s section) *reader {
	return newReader(m.wasm[s.start:s.end], s.start)
}

// prescan gathers what rewriting needs before the first section is written:
// the tick type, import counts and the number of defined functions and
// globals.
func (m *instrumenter) prescan() error {
	typeCount := uint32(0)
	found := false
	for _, s := range m.sections {
		r := m.reader(s)
		switch s.id {
		case secType:
			n := r.count(3)
			typeCount = uint32(n)
			for i := 0; i < n && r.err == nil; i++ {
				if form := r.byte(); form != 0x60 && r.err == nil {
					r.fail("unsupported type form %#x", form)
				}
				params := r.valTypes()
				results := r.valTypes()
				m.typeParams = append(m.typeParams, len(params) > 0)
				m.paramCounts = append(m.paramCounts, uint32(len(params)))
				if !found && string(params) == "\x7e" && string(results) == "\x7e" {
					m.tickType, found = uint32(i), true
				}
			}
		case secImport:
			if err := m.imports(r); err != nil {
				return err
			}
		case secFunction:
			n := r.count(1)
			if n > MaxFunctions {
				return fmt.Errorf("%w: %d functions over limit %d", ErrLimit, n, MaxFunctions)
			}
			m.definedFuncs = uint32(n)
			for i := 0; i < n && r.err == nil; i++ {
				m.funcTypes = append(m.funcTypes, r.u32())
			}
		case secGlobal:
			m.definedGlobals = uint32(r.count(3))
			continue // entries are checked while rewriting
		default:
			continue
		}
		if r.err == nil && r.remaining() != 0 {
			r.fail("%d unread bytes at end of section", r.remaining())
		}
		if r.err != nil {
			return fmt.Errorf("%w: %s section: %w", ErrInvalid, sectionNames[s.id], r.err)
		}
	}
	if !found {
		m.tickType, m.appendType = typeCount, true
	}
	funcs := m.importedFuncs + m.definedFuncs
	globals := m.importedGlobals + m.definedGlobals
	m.w = newRewriter(m.importedFuncs, funcs, globals, globals, m.importedFuncs, m.typeParams)
	m.w.paramCounts, m.w.funcTypes = m.paramCounts, m.funcTypes
	m.info.Functions = int(m.definedFuncs)
	return nil
}

// imports counts imported functions and globals and rejects the reserved
// import module.
func (m *instrumenter) imports(r *reader) error {
	n := r.count(4)
	for i := 0; i < n && r.err == nil; i++ {
		module := r.name()
		field := r.name()
		if r.err == nil && string(module) == ImportModule {
			return fmt.Errorf("%w: module imports %s.%s", ErrReserved, module, field)
		}
		kind := r.byte()
		if r.err == nil && kind <= byte(ImportGlobal) {
			m.info.Imports = append(m.info.Imports, Import{Module: string(module), Name: string(field), Kind: ImportKind(kind)})
		}
		switch kind {
		case 0x00: // function
			r.u32()
			m.importedFuncs++
		case 0x01: // table
			r.refType()
			r.limits(false)
		case 0x02: // memory
			m.noteMemory(r.limits(true))
		case 0x03: // global
			r.globalType()
			m.importedGlobals++
		default:
			if r.err == nil {
				r.fail("unsupported import kind %#x", kind)
			}
		}
	}
	return nil
}

// rewrite writes the instrumented module, adding the type, import, global
// and export sections where the input has none.
func (m *instrumenter) rewrite() ([]byte, error) {
	// Checks and remapped indices grow code by a few percent.
	m.out = make([]byte, 0, len(m.wasm)+len(m.wasm)/4+256)
	m.out = append(m.out, magic...)

	var has [len(sectionOrder)]bool
	for _, s := range m.sections {
		has[s.id] = true
	}
	// Sections that must exist, in order; absent ones are synthesised from
	// an empty vector.
	var missing []byte
	for _, id := range []byte{secType, secImport, secGlobal, secExport} {
		if !has[id] && (id != secType || m.appendType) {
			missing = append(missing, id)
		}
	}
	synthesise := func(id byte) error {
		return m.section(section{id: id}, newReader([]byte{0}, 0))
	}

	for _, s := range m.sections {
		for s.id != secCustom && len(missing) > 0 && sectionOrder[missing[0]] < sectionOrder[s.id] {
			if err := synthesise(missing[0]); err != nil {
				return nil, err
			}
			missing = missing[1:]
		}
		if err := m.section(s, m.reader(s)); err != nil {
			return nil, err
		}
	}
	for _, id := range missing {
		if err := synthesise(id); err != nil {
			return nil, err
		}
	}
	if m.definedFuncs > 0 && !m.sawCode {
		return nil, fmt.Errorf("%w: %d functions declared but no code section", ErrInvalid, m.definedFuncs)
	}
	return m.out, nil
}

// section appends section s, rewritten if it refers to function indices or
// needs additions, otherwise verbatim.
func (m *instrumenter) section(s section, r *reader) error {
	switch {
	case s.id == secType && !m.appendType,
		s.id == secCustom && s.custom != "name",
		s.id == secFunction, s.id == secData, s.id == secDataCount,
		s.id == secTable && m.opts.MaxTableElements == 0:
		m.out = append(m.out, m.wasm[s.header:s.end]...)
		return nil
	case s.id == secMemory && m.opts.MaxMemoryPages == 0:
		m.memoryInfo(r)
		m.out = append(m.out, m.wasm[s.header:s.end]...)
		return wrapSection(s, r.err)
	}

	header := len(m.out)
	m.out = append(m.out, s.id)
	var start int
	m.out, start = beginSized(m.out)
	var err error
	switch s.id {
	case secType:
		m.typeSection(r)
	case secImport:
		m.importSection(r)
	case secMemory:
		err = m.memorySection(r)
	case secTable:
		err = m.tableSection(r)
	case secGlobal:
		m.globalSection(r)
	case secExport:
		err = m.exportSection(r)
	case secStart:
		m.out = appendU32(m.out, m.funcRef(r))
	case secElement:
		m.elementSection(r)
	case secCode:
		err = m.codeSection(r)
	case secCustom:
		m.out = appendName(m.out, "name")
		if m.nameSection(r); r.err != nil {
			// Names are debug information, and the spec lets a malformed
			// name section be ignored, as wazero mostly does: drop it.
			m.out = m.out[:header]
			return nil
		}
	}
	if err != nil {
		return err
	}
	if r.err == nil && r.remaining() != 0 {
		r.fail("%d unread bytes at end of section", r.remaining())
	}
	if err := wrapSection(s, r.err); err != nil {
		return err
	}
	m.out = endSized(m.out, start)
	return nil
}

func wrapSection(s section, err error) error {
	if err == nil {
		return nil
	}
	if s.id == secCustom {
		return fmt.Errorf("%w: custom section %q: %w", ErrInvalid, s.custom, err)
	}
	return fmt.Errorf("%w: %s section: %w", ErrInvalid, sectionNames[s.id], err)
}

// typeSection appends the tick type (validated by prescan).
func (m *instrumenter) typeSection(r *reader) {
	n := r.count(3)
	m.out = appendU32(m.out, uint32(n)+1)
	m.out = append(m.out, r.bytes(r.remaining())...)
	m.out = append(m.out, 0x60, 1, 0x7e, 1, 0x7e)
}

// importSection appends the tick import after the existing imports (validated
// by prescan), so its function index is the number of imported functions.
func (m *instrumenter) importSection(r *reader) {
	n := r.count(4)
	m.out = appendU32(m.out, uint32(n)+1)
	m.out = append(m.out, r.bytes(r.remaining())...)
	m.out = appendName(m.out, ImportModule)
	m.out = appendName(m.out, ImportTick)
	m.out = append(m.out, 0x00)
	m.out = appendU32(m.out, m.tickType)
}

// memorySection caps every defined memory's maximum at MaxMemoryPages.
func (m *instrumenter) memorySection(r *reader) error {
	limit := m.opts.MaxMemoryPages
	n := r.count(2)
	m.out = appendU32(m.out, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		flags := r.byte()
		r.pos--
		lo, hi := r.limits(true)
		if r.err != nil {
			break
		}
		if lo > limit {
			return fmt.Errorf("%w: memory %d: minimum %d pages, limit %d", ErrMemoryLimit, i, lo, limit)
		}
		hi = min(hi, limit)
		m.out = append(m.out, flags|1) // keep the shared flag, force a maximum
		m.out = appendU32(m.out, lo)
		m.out = appendU32(m.out, hi)
		m.noteMemory(lo, hi)
	}
	return nil
}

// tableSection caps every defined table's maximum at MaxTableElements.
func (m *instrumenter) tableSection(r *reader) error {
	limit := m.opts.MaxTableElements
	n := r.count(3)
	m.out = appendU32(m.out, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		ref := r.byte()
		r.pos--
		r.refType()
		flags := r.byte()
		r.pos--
		lo, hi := r.limits(false)
		if r.err != nil {
			break
		}
		if lo > limit {
			return fmt.Errorf("%w: table %d: minimum %d elements, limit %d", ErrMemoryLimit, i, lo, limit)
		}
		if flags&1 == 0 {
			hi = limit // no declared maximum: table.grow may go up to the cap
		}
		m.out = append(m.out, ref, 1)
		m.out = appendU32(m.out, lo)
		m.out = appendU32(m.out, min(hi, limit))
	}
	return nil
}

// memoryInfo records uncapped memory limits for Info.
func (m *instrumenter) memoryInfo(r *reader) {
	n := r.count(2)
	for i := 0; i < n && r.err == nil; i++ {
		m.noteMemory(r.limits(true))
	}
}

// noteMemory reports memory 0 in Info: the first imported memory, else the
// first defined one.
func (m *instrumenter) noteMemory(lo, hi uint32) {
	if !m.sawMemory {
		m.info.MemoryMinPages, m.info.MemoryMaxPages = lo, hi
		m.sawMemory = true
	}
}

// globalSection rewrites initialisers (ref.func) and appends the fuel global,
// initialised to zero.
func (m *instrumenter) globalSection(r *reader) {
	n := r.count(3)
	m.out = appendU32(m.out, uint32(n)+1)
	for i := 0; i < n && r.err == nil; i++ {
		mark := r.pos
		r.globalType()
		m.out = append(m.out, r.buf[mark:r.pos]...)
		m.out = m.w.constExpr(m.out, r)
	}
	m.out = append(m.out, 0x7e, 0x01, opI64, 0, opEnd)
}

// exportSection remaps function exports and exports the fuel global.
func (m *instrumenter) exportSection(r *reader) error {
	n := r.count(3)
	m.out = appendU32(m.out, uint32(n)+1)
	for i := 0; i < n && r.err == nil; i++ {
		mark := r.pos
		name := r.name()
		if r.err == nil && string(name) == ExportFuel {
			return fmt.Errorf("%w: module exports %q", ErrReserved, name)
		}
		kind := r.byte()
		m.out = append(m.out, r.buf[mark:r.pos]...)
		switch kind {
		case 0x00:
			m.out = appendU32(m.out, m.funcRef(r))
		case 0x01, 0x02:
			m.out = appendU32(m.out, r.u32())
		case 0x03:
			m.out = appendU32(m.out, m.globalRef(r))
		default:
			if r.err == nil {
				r.fail("unsupported export kind %#x", kind)
			}
		}
	}
	m.out = appendName(m.out, ExportFuel)
	m.out = append(m.out, 0x03)
	m.out = appendU32(m.out, m.w.globals)
	return nil
}

// elementSection remaps function indices in all eight segment encodings.
// Flag bit 0 marks passive or declarative segments, bit 1 an explicit table
// index (active) or declarative (otherwise), bit 2 expression items.
func (m *instrumenter) elementSection(r *reader) {
	n := r.count(2)
	m.out = appendU32(m.out, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		mark := r.pos
		flags := r.u32()
		if flags > 7 {
			if r.err == nil {
				r.failAt(mark, "unsupported element segment flags %d", flags)
			}
			break
		}
		if flags == 2 || flags == 6 {
			r.u32() // table index
		}
		m.out = append(m.out, r.buf[mark:r.pos]...)
		if flags&1 == 0 {
			m.out = m.w.constExpr(m.out, r) // offset
		}
		mark = r.pos
		if flags&3 != 0 { // element kind or reference type
			if flags&4 == 0 {
				if k := r.byte(); k != 0x00 && r.err == nil {
					r.fail("unsupported element kind %#x", k)
				}
			} else {
				r.refType()
			}
		}
		items := r.count(1)
		m.out = append(m.out, r.buf[mark:r.pos]...)
		for j := 0; j < items && r.err == nil; j++ {
			if flags&4 == 0 {
				m.out = appendU32(m.out, m.funcRef(r))
			} else {
				m.out = m.w.constExpr(m.out, r)
			}
		}
	}
}

// codeSection rewrites every function body.
func (m *instrumenter) codeSection(r *reader) error {
	m.sawCode = true
	if size := len(r.buf); size > MaxCodeBytes {
		return fmt.Errorf("%w: code section of %d bytes over limit %d", ErrLimit, size, MaxCodeBytes)
	}
	n := r.count(2)
	if r.err == nil && uint32(n) != m.definedFuncs {
		r.fail("%d bodies for %d declared functions", n, m.definedFuncs)
	}
	m.out = appendU32(m.out, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		size := r.u32()
		start := r.pos
		if r.err == nil && size > MaxFunctionBytes {
			return fmt.Errorf("%w: function %d: body of %d bytes over limit %d", ErrLimit, m.importedFuncs+uint32(i), size, MaxFunctionBytes)
		}
		body := r.bytes(int(size))
		if r.err != nil {
			break
		}
		br := newReader(body, r.base+start)
		m.out = m.w.function(m.out, br, i)
		if br.err != nil {
			cause := ErrInvalid
			if m.w.limit {
				cause = ErrLimit
			}
			return fmt.Errorf("%w: code section: function %d: %w", cause, m.importedFuncs+uint32(i), br.err)
		}
		m.info.Checks += m.w.checks()
		m.info.MaxNesting = max(m.info.MaxNesting, m.w.depth)
		m.info.MaxFunctionBytes = max(m.info.MaxFunctionBytes, len(body))
		m.info.CodeBytes += len(body)
		m.info.ControlCost += m.w.blocks * m.w.blocks
		if m.info.ControlCost > MaxControlCost {
			return fmt.Errorf("%w: control cost %d over limit %d after function %d (sum of squared counts of blocks and branches per function)",
				ErrLimit, m.info.ControlCost, MaxControlCost, m.importedFuncs+uint32(i))
		}
	}
	return nil
}

// funcRef reads a function index, checks it and returns its new index.
func (m *instrumenter) funcRef(r *reader) uint32 {
	p := r.pos
	idx := r.u32()
	if r.err == nil && idx >= m.w.funcs {
		r.failAt(p, "function index %d out of range (%d functions)", idx, m.w.funcs)
	}
	return m.w.funcIndex(idx)
}

// globalRef reads a global index and checks that it existed before the fuel
// global was added.
func (m *instrumenter) globalRef(r *reader) uint32 {
	p := r.pos
	idx := r.u32()
	if r.err == nil && idx >= m.w.globals {
		r.failAt(p, "global index %d out of range (%d globals)", idx, m.w.globals)
	}
	return idx
}

// valTypes reads a vector of value types.
func (r *reader) valTypes() []byte {
	ts := r.bytes(r.count(1))
	for _, t := range ts {
		if !isValType(t) {
			r.fail("unsupported value type %#x", t)
		}
	}
	return ts
}

func isValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

func (r *reader) refType() {
	if t := r.byte(); t != 0x70 && t != 0x6f && r.err == nil {
		r.fail("unsupported reference type %#x", t)
	}
}

func (r *reader) globalType() {
	if t := r.byte(); !isValType(t) && r.err == nil {
		r.fail("unsupported global type %#x", t)
	}
	if mut := r.byte(); mut > 1 && r.err == nil {
		r.fail("invalid global mutability %#x", mut)
	}
}

// limits reads table or memory limits. A missing maximum reads as maxPages.
// Memories may carry the threads proposal's shared flag; 64-bit limits are
// not supported.
func (r *reader) limits(memory bool) (min, max uint32) {
	flags := r.byte()
	if flags > 3 || (!memory && flags > 1) {
		if r.err == nil {
			r.fail("unsupported limits flags %#x", flags)
		}
		return 0, 0
	}
	min, max = r.u32(), maxPages
	if flags&1 != 0 {
		max = r.u32()
	}
	return min, max
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
