package llamatest

import (
	"io"
	"testing"
)

// BenchmarkWriteRandom is WriteRandom's speed, to io.Discard: a 110M model
// should take a few seconds at most (the weights/s metric).
func BenchmarkWriteRandom(b *testing.B) {
	for _, s := range []Shape{Stories15M, Stories110M} {
		b.Run(s.Name, func(b *testing.B) {
			b.SetBytes(s.Size())
			for b.Loop() {
				if err := WriteRandom(io.Discard, s, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.Params())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mweights/s")
		})
	}
}
