package requirement

import (
	"errors"
	"testing"

	"github.com/infernet/infernet/node/wire"
)

// FuzzCompileMatch compiles arbitrary text: ErrInvalid, or a program that
// matches a full Env without panicking, the same program again from the
// cache, and a clean error or a boolean.
func FuzzCompileMatch(f *testing.F) {
	for _, src := range []string{
		"", "vram >= 16 && reputation > 0.8", `has("cuda")`, `"cpu-avx2" in backends`, `gpu contains "4090" && cc >= 8.9`,
		`any(backends, {# startsWith "cuda"})`, `backends[5] == "cuda"`, `len(filter(backends, {# contains "cpu"})) > 1`,
		`cores + 1`, `vram >=`, `all(1..10, {true})`, `gpu matches "x"`, `let x = 1; x > 0`, `(((true)))`, `!!!true`,
		`version == "0.2.0" ? free > 0 : slots >= 2`, `{"a": 1}.a == 1`, `backends[1:2] == ["x"]`, `max(cores, 2) > 1`,
	} {
		f.Add(src)
	}
	for _, src := range hostile {
		f.Add(src)
	}
	env := fullEnv()
	empty := FromAdvert(&wire.CapabilityAdvert{}, 0)
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Compile(src)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Compile(%q): %v, want ErrInvalid", src, err)
			}
			return
		}
		if len(src) > wire.MaxRequire {
			t.Fatalf("Compile(%q) accepted %d bytes", src, len(src))
		}
		if again, err := Compile(src); err != nil || again != p {
			t.Fatalf("Compile(%q) again: %p, %v; want %p", src, again, err, p)
		}
		for _, e := range []Env{env, empty} {
			if ok, err := p.Match(e); ok && err != nil {
				t.Fatalf("Match(%q) = true with error %v", src, err)
			}
		}
	})
}
