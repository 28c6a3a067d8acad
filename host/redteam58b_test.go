package host

import (
	"context"
	"errors"
	"testing"
)

func rtU32(v uint32) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
		} else {
			return append(out, b)
		}
	}
}

func rtSec(id byte, body ...[]byte) []byte {
	var b []byte
	for _, p := range body {
		b = append(b, p...)
	}
	return append(append([]byte{id}, rtU32(uint32(len(b)))...), b...)
}

func rtName(s string) []byte { return append(rtU32(uint32(len(s))), s...) }

func rtMod(secs ...[]byte) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range secs {
		m = append(m, s...)
	}
	return m
}

var (
	rtTypeVoid = rtSec(1, []byte{1, 0x60, 0, 0})
	rtFunc0    = rtSec(3, []byte{1, 0})
	rtMem      = rtSec(5, []byte{1, 0, 1})
	rtCode     = rtSec(10, []byte{1, 2, 0, 0x0b})
	rtExpStart = rtSec(7, []byte{1}, rtName("_start"), []byte{0, 0})
)

// TestRedteam58bModuleABIAsTheSandbox: what the client's check passes,
// no host refuses for its header's reasons (FuzzModuleABI's property), and
// both say the same of each module here: a module exporting the meter's
// reserved global name (every sandbox: import not allowed), one exporting
// _start twice (invalid), and one of a later ABI without _start (the
// sandbox said "host too old", the provider's limit, of a module every
// host refuses).
func TestRedteam58bModuleABIAsTheSandbox(t *testing.T) {
	sb := newSandbox(t, Config{})
	pages := uint32(NewJobConfig().memoryLimit / 65536)
	for _, tc := range []struct {
		name   string
		module []byte
		err    error
	}{
		{"exports the meter's global", rtMod(rtTypeVoid, rtFunc0, rtMem,
			rtSec(7, []byte{2}, rtName("_start"), []byte{0, 0}, rtName("infernet_meter_fuel"), []byte{0, 0}), rtCode), ErrImportNotAllowed},
		{"exports _start twice", rtMod(rtTypeVoid, rtFunc0, rtMem,
			rtSec(7, []byte{2}, rtName("_start"), []byte{0, 0}, rtName("_start"), []byte{0, 0}), rtCode), ErrInvalidModule},
		{"a later ABI's function, no _start", rtMod(rtTypeVoid,
			rtSec(2, []byte{1}, rtName("infernet"), rtName("no_such_function_yet"), []byte{0, 0}), rtFunc0, rtMem,
			rtSec(7, []byte{1}, rtName("main"), []byte{0, 1}), rtCode), ErrInvalidModule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ModuleABI(tc.module)
			mod, cerr := sb.compile(context.Background(), tc.module, pages)
			if mod != nil {
				mod.Close(context.Background())
			}
			if !errors.Is(err, tc.err) || !errors.Is(cerr, tc.err) {
				t.Errorf("ModuleABI: %v; sandbox: %v; want %v of both", err, cerr, tc.err)
			}
		})
	}
}
