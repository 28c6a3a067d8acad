package requirement

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/expr-lang/expr"

	"github.com/infernet/infernet/node/wire"
)

// hostile are expressions of at most wire.MaxRequire bytes that cost the
// most without the limits: deep nesting, long chains, closures within
// closures (5^8 steps here; 1024 bytes nest 60 deep), ranges, regexps.
var hostile = map[string]string{
	"deep not":        strings.Repeat("!", wire.MaxRequire-4) + "true",
	"deep parens":     strings.Repeat("(", 510) + "true" + strings.Repeat(")", 510),
	"long chain":      strings.Repeat(`has("x")||`, 101) + "true",
	"nested closures": strings.Repeat("all(backends,{", 8) + "true" + strings.Repeat("})", 8),
	"ranges":          `all(1..1000,{all(1..1000,{true})})`,
	"regexp":          `gpu matches "` + strings.Repeat(`[^a]{999}`, 20) + `"`,
	"repeat":          `len(repeat("x", 100000000)) > 0`,
}

// costliest are accepted expressions near the limits, for the benchmark
// and the time bound.
var costliest = map[string]string{
	"max cost":  "any(backends, {" + strings.Repeat("has(#) && ", 11) + "has(#)})",
	"max nodes": strings.Repeat(`has("x") || `, 31) + "true",
	"long list": `gpu in [` + strings.Repeat(`"aaaaa",`, 120) + `"b"]`,
}

func fullEnv() Env {
	a := &wire.CapabilityAdvert{Cores: 2, GPUs: []wire.GPU{{Name: "NVIDIA RTX 4090", MemoryBytes: 24 << 30}}}
	for i := range MaxList {
		a.Backends = append(a.Backends, fmt.Sprintf("backend-%d", i))
	}
	return FromAdvert(a, 1)
}

func TestCompileLimits(t *testing.T) {
	type compileCase struct {
		name string
		src  string
		want error // nil: compiles
	}
	tests := []compileCase{
		{"closure over backends", `any(backends, {# startsWith "cuda"})`, nil},
		{"closure over a literal", `count(["cuda", "rocm"], {has(#)}) >= 1`, nil},
		{"filter then len", `len(filter(backends, {# contains "cpu"})) > 1`, nil},
		{"string helpers", `lower(gpu) contains "rtx" && hasPrefix(version, "0.")`, nil},
		{"brackets in strings do not nest", `gpu != "` + strings.Repeat("(", 40) + `"`, nil},
		{"closure in a closure", `any(backends, {any(backends, {# == "x"})})`, ErrTooComplex},
		{"closure over a closure", `all(filter(backends, {true}), {true})`, ErrTooComplex},
		{"range", `cores in 1..8`, ErrTooComplex},
		{"matches", `gpu matches "RTX"`, ErrTooComplex},
		{"variables", `let x = cores; x > 1`, ErrTooComplex},
		{"deep brackets", strings.Repeat("(", MaxDepth+1) + "true" + strings.Repeat(")", MaxDepth+1), ErrTooComplex},
		{"deep unary", strings.Repeat("!", MaxDepth+2) + "true", ErrTooComplex},
		{"over cost", "any(backends, {" + strings.Repeat("has(#) && ", 15) + "has(#)})", ErrTooComplex},
		{"disabled builtin", `len(split(gpu, "")) > 1`, ErrInvalid},
		{"clock builtin", `now().Year() > 2000`, ErrInvalid},
	}
	for name, src := range hostile {
		tests = append(tests, compileCase{"hostile " + name, src, ErrInvalid})
	}
	for name, src := range costliest {
		tests = append(tests, compileCase{"costliest " + name, src, nil})
	}
	for _, tt := range tests {
		p, err := Compile(tt.src)
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
				continue
			}
			if _, err := p.Match(fullEnv()); err != nil {
				t.Errorf("%s: Match: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestMatchRefusesLongLists(t *testing.T) {
	p, err := Compile(`has("cuda")`)
	if err != nil {
		t.Fatal(err)
	}
	env := fullEnv()
	env.Backends = append(env.Backends, "cuda")
	if ok, err := p.Match(env); ok || err == nil {
		t.Fatalf("%d backends: %v, %v; want an error", len(env.Backends), ok, err)
	}
}

func TestCompileCache(t *testing.T) {
	src := fmt.Sprintf("cores >= %d", time.Now().UnixNano()%1000+1)
	p1, err1 := Compile(src)
	p2, err2 := Compile(src)
	if err1 != nil || err2 != nil || p1 != p2 {
		t.Fatalf("repeat: %p %v, %p %v; want the same program", p1, err1, p2, err2)
	}
	// Errors are cached too, and stay matchable.
	for range 2 {
		if _, err := Compile("cores >"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("bad expression: %v", err)
		}
	}
	// The cache is bounded: the oldest text is compiled again.
	c := newCache(4)
	first, _ := c.get("cores > 0")
	for i := range 8 {
		c.get(fmt.Sprintf("cores > %d", i+1))
	}
	if n := c.lru.Len(); n != 4 || len(c.m) != 4 {
		t.Fatalf("cache holds %d, %d entries; want 4", n, len(c.m))
	}
	again, _ := c.get("cores > 0")
	if again == first {
		t.Fatal("evicted text still cached")
	}
	// Use keeps an entry: the most recent survives.
	last, _ := c.get("cores > 8")
	if p, _ := c.get("cores > 8"); p != last {
		t.Fatal("recent text not cached")
	}
}

// TestConcurrentCompileMatch shares programs between goroutines (run with
// -race): the same text compiles to one immutable Program.
func TestConcurrentCompileMatch(t *testing.T) {
	srcs := []string{`has("backend-1") && cores >= 2`, `any(backends, {# endsWith "-3"})`, `vram > 100`, `cores >`}
	want := []bool{true, true, false, false}
	env := fullEnv()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := (g + i) % len(srcs)
				p, err := Compile(srcs[k])
				if err != nil {
					if k != 3 {
						t.Error(err)
					}
					continue
				}
				if ok, err := p.Match(env); err != nil || ok != want[k] {
					t.Errorf("%q: %v, %v", srcs[k], ok, err)
				}
			}
		}()
	}
	wg.Wait()
}

// compileBefore is Compile as it was before the limits and the cache.
func compileBefore(src string) (*Program, error) {
	p, err := expr.Compile(src, expr.Env(Env{}), expr.AsBool())
	if err != nil {
		return nil, err
	}
	return &Program{src: src, prog: p}, nil
}

// BenchmarkCompile compares, in one run, the CPU per compile (and match)
// before the limits and the cache and after: for hostile expressions
// (before: their full cost; after: refused), for the costliest accepted
// ones, and for a repeated announce's expression.
//
//	go test ./node/requirement -run '^$' -bench Compile -benchmem
func BenchmarkCompile(b *testing.B) {
	env := fullEnv()
	run := func(b *testing.B, src string, compile func(string) (*Program, error)) {
		b.ReportAllocs()
		for range b.N {
			if p, err := compile(src); err == nil {
				p.Match(env)
			}
		}
	}
	for _, name := range []string{"deep not", "long chain", "nested closures", "regexp"} {
		src := hostile[name]
		if name == "nested closures" {
			// 5 levels: 16^5 steps before; 8 would take seconds.
			src = strings.Repeat("all(backends,{", 5) + "true" + strings.Repeat("})", 5)
		}
		b.Run("hostile="+name+"/before", func(b *testing.B) { run(b, src, compileBefore) })
		b.Run("hostile="+name+"/after", func(b *testing.B) { run(b, src, compile) })
	}
	for name, src := range costliest {
		b.Run("costliest="+name+"/after", func(b *testing.B) { run(b, src, compile) })
	}
	announce := `vram >= 16 && reputation > 0.8 && has("cuda") && price <= 500`
	b.Run("announce/before", func(b *testing.B) { run(b, announce, compileBefore) })
	b.Run("announce/after-uncached", func(b *testing.B) { run(b, announce, compile) })
	b.Run("announce/after", func(b *testing.B) { run(b, announce, Compile) })
}
