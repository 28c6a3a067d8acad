package meter

import "testing"

func BenchmarkExpWalk(b *testing.B) {
	wasm := goGuest(b)
	m := &instrumenter{wasm: wasm}
	m.split()
	m.prescan()
	var code section
	for _, s := range m.sections {
		if s.id == secCode {
			code = s
		}
	}
	buf := wasm[code.start:code.end]
	b.SetBytes(int64(len(buf)))
	cpu := cpuTime()
	for b.Loop() {
		// just a byte-class histogram: lower bound on touching every byte
		var hist [256]int
		for _, c := range buf {
			hist[c]++
		}
		_ = hist
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

func BenchmarkExpScanOnly(b *testing.B) {
	wasm := goGuest(b)
	m := &instrumenter{wasm: wasm}
	m.split()
	m.prescan()
	var code section
	for _, s := range m.sections {
		if s.id == secCode {
			code = s
		}
	}
	cpu := cpuTime()
	for b.Loop() {
		r := m.reader(code)
		n := r.count(2)
		for i := 0; i < n; i++ {
			size := r.u32()
			start := r.pos
			body := r.bytes(int(size))
			br := newReader(body, r.base+start)
			groups := br.count(2)
			for j := 0; j < groups; j++ {
				br.u32()
				br.byte()
			}
			m.w.scan(br, true)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

func BenchmarkExpHist(b *testing.B) {
	wasm := goGuest(b)
	m := &instrumenter{wasm: wasm}
	m.split()
	m.prescan()
	var code section
	for _, s := range m.sections {
		if s.id == secCode {
			code = s
		}
	}
	// opcode class histogram
	var kinds [32]int
	var ops [256]int
	r := m.reader(code)
	n := r.count(2)
	for i := 0; i < n; i++ {
		size := r.u32()
		start := r.pos
		body := r.bytes(int(size))
		br := newReader(body, r.base+start)
		groups := br.count(2)
		for j := 0; j < groups; j++ {
			br.u32()
			br.byte()
		}
		for br.pos < len(body) {
			op := br.byte()
			ops[op]++
			k := opImm[op]
			kinds[k]++
			if k == immPrefix {
				k = subImm(op, br.u32())
			}
			switch k {
			case immBlock, immLoop:
				br.blockType()
			case immCall, immRefFunc, immGlobal:
				br.u32()
			default:
				br.skip(k)
			}
		}
	}
	b.Log(kinds)
	type kv struct{ op, n int }
	var top []kv
	for op, c := range ops {
		top = append(top, kv{op, c})
	}
	for i := range top {
		for j := i + 1; j < len(top); j++ {
			if top[j].n > top[i].n {
				top[i], top[j] = top[j], top[i]
			}
		}
	}
	b.Log(top[:25])
}
