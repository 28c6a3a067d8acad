package host

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestStdinReader: Job.Stdin feeds the guest as Input would, however the
// reader splits its bytes, is used only when Input is nil, and is not
// closed by Run.
func TestStdinReader(t *testing.T) {
	sb := newSandbox(t, Config{})
	echo := readFile(t, "../testdata/jobs/echo/echo.wasm")
	text := strings.Repeat("streamed stdin\n", 10_000)
	tests := []struct {
		name  string
		input []byte
		stdin io.Reader
		want  string
	}{
		{"reader", nil, strings.NewReader(text), text},
		{"one byte per read", nil, iotest.OneByteReader(strings.NewReader(text)), text},
		{"input wins", []byte("input"), strings.NewReader(text), "input"},
		{"empty input wins", []byte{}, strings.NewReader(text), ""},
		{"neither", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closer := &closeRecorder{Reader: tt.stdin}
			job := Job{Module: echo, Input: tt.input}
			if tt.stdin != nil {
				job.Stdin = closer
			}
			res, err := sb.Run(context.Background(), job, NewJobConfig())
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("err %v exit %d", err, res.ExitCode)
			}
			if !bytes.Equal(res.Output, []byte(tt.want)) {
				t.Fatalf("output %d bytes, want %d", len(res.Output), len(tt.want))
			}
			if closer.closed {
				t.Fatal("Run closed Job.Stdin")
			}
		})
	}
}

// closeRecorder is a ReadCloser that records Close.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }
