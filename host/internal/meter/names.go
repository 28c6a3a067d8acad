package meter

// Name section subsections that refer to function indices.
const (
	nameFunctions = 1 // name map: function index -> name
	nameLocals    = 2 // indirect name map: function index -> local index -> name
	nameLabels    = 3 // indirect name map: function index -> label index -> name
)

// tickName names the tick import in the function names subsection, so stack
// traces through it read well.
const tickName = ImportModule + "." + ImportTick

// nameSection rewrites the function indices of the "name" custom section.
// Subsections that do not refer to functions are kept verbatim. Errors are
// left in r.err.
func (m *instrumenter) nameSection(r *reader) {
	for r.remaining() > 0 && r.err == nil {
		id := r.byte()
		size := r.u32()
		start := r.pos
		content := r.bytes(int(size))
		if r.err != nil {
			return
		}
		sr := newReader(content, r.base+start)
		m.out = append(m.out, id)
		switch id {
		case nameFunctions, nameLocals, nameLabels:
			var mark int
			m.out, mark = beginSized(m.out)
			m.out = m.nameMap(m.out, sr, id == nameFunctions)
			if sr.err == nil && sr.remaining() != 0 {
				sr.fail("%d unread bytes at end of name subsection %d", sr.remaining(), id)
			}
			if sr.err != nil {
				r.err = sr.err
				return
			}
			m.out = endSized(m.out, mark)
		default:
			m.out = appendU32(m.out, size)
			m.out = append(m.out, content...)
		}
	}
}

// nameMap rewrites a name map keyed by function index (direct) or an
// indirect name map whose inner maps are kept verbatim. The direct map gains
// an entry for the tick import, keeping indices ascending.
func (m *instrumenter) nameMap(out []byte, r *reader, direct bool) []byte {
	n := r.count(2)
	if direct {
		out = appendU32(out, uint32(n)+1)
	} else {
		out = appendU32(out, uint32(n))
	}
	added := !direct
	for i := 0; i < n && r.err == nil; i++ {
		idx := r.u32()
		if !added && idx >= m.importedFuncs {
			out = appendU32(out, m.importedFuncs)
			out = appendName(out, tickName)
			added = true
		}
		out = appendU32(out, m.w.funcIndex(idx))
		mark := r.pos
		if direct {
			r.name()
		} else {
			inner := r.count(2)
			for j := 0; j < inner && r.err == nil; j++ {
				r.u32()
				r.name()
			}
		}
		out = append(out, r.buf[mark:r.pos]...)
	}
	if !added {
		out = appendU32(out, m.importedFuncs)
		out = appendName(out, tickName)
	}
	return out
}
