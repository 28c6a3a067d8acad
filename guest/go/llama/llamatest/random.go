package llamatest

import (
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
)

// GeneratorVersion names the way WriteRandom draws weights. It is part of
// every cache key (Cached), and changes whenever WriteRandom would write
// different bytes for the same shape and seed, so that no stale file is
// read as a new one.
const GeneratorVersion = "v1"

// How WriteRandom draws the weights. Every value is uniform on a symmetric
// interval (of the standard deviation given), not Gaussian: a normal draw
// needs exp and log, whose last bits Go computes differently on machines
// that fuse multiply-adds, while a uniform draw is an integer scaled by a
// power of two, the same everywhere. What matters for generation is the
// scale of each kind of tensor, chosen so that greedy text from a random
// model varies token to token, as a trained model's does, rather than
// settling into a token repeated:
//
//   - The token embedding, which is also the classifier (shared, as in the
//     stories models), has standard deviation 0.02, small beside what the
//     blocks add to the residual stream: were the current token's embedding
//     e a large part of the final state, its own logit e·e would beat every
//     other token's and greedy decoding would repeat it.
//   - Matrices reading a normalized input (wq, wk, wv, w1, w3) have standard
//     deviation inGain/sqrt(fan-in), so their outputs are of unit scale or a
//     little more: attention scores q·k/sqrt(head size) spread over a few
//     units, so attention, rotated by RoPE, weights positions unevenly and
//     differently at every step rather than averaging the context into a
//     constant, and SiLU in the feed-forward layers sees inputs of unit
//     scale, where it bends.
//   - Matrices writing the residual stream (wo, w2) have standard deviation
//     outGain/sqrt(fan-in): each block adds about unit scale.
//   - RMSNorm gains are 1 ± normNoise: near the identity, as trained models'
//     are, but not exactly 1, so a runner that skips a gain is caught.
//
// Measured with run.c, greedy, 196 tokens after each of three prompts, on
// the Stories15M shape: with N(0, 0.02)-like scales for every matrix (the
// usual initialization) the text is one token repeated; with inGain 1 and
// outGain 0.5 or 1, 50 to 70 distinct tokens, a third of them repeating the
// one before; with inGain 1.5 and outGain 1 (these), 194 to 196 distinct
// tokens and no token repeated at once; on the Stories110M shape, 56 of 57
// distinct (20 to 34 with inGain 1). The -Ofast build of run.c, whose sums
// are ordered differently, chose the same greedy tokens throughout, so this
// is not chaos that rounding decides. scripts/llama-goldens.sh fails if a
// random model's greedy golden has fewer than half its tokens distinct;
// TestGoldens wants nine in ten.
const (
	embedStd  = 0.02
	inGain    = 1.5
	outGain   = 1.0
	normNoise = 0.1
)

// WriteRandom writes a llama2.c checkpoint of shape s with random weights
// drawn from seed: the legacy (version 0) format that run.c's
// read_checkpoint reads, a 28-byte header (Shape.Header), then the f32
// weights in run.c's order (token embedding, rms_att, wq, wk, wv, wo,
// rms_ffn, w1, w2, w3, rms_final), then the two legacy freq_cis blocks
// (RoPE's cos and sin, which run.c skips), the classifier shared with the
// token embedding. It writes s.Size() bytes, streamed through a small
// buffer, and the same bytes for the same shape and seed on every machine:
// each tensor draws from its own PCG stream (math/rand/v2), seeded by seed
// and the tensor's place in the file.
func WriteRandom(w io.Writer, s Shape, seed uint64) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if _, err := w.Write(s.Header()); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<20)
	flush := func() error {
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	for i, t := range s.tensors() {
		if t.kind == kindFreq {
			for v := range freqCis(s, t.sin) {
				if len(buf) == cap(buf) {
					if err := flush(); err != nil {
						return err
					}
				}
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
			continue
		}
		src := rand.NewPCG(seed, uint64(i)+1)
		// Uniform on [-a, a] has standard deviation a/sqrt(3). Each value
		// is (2k+1)·a/2^24 for a 24-bit k, so the interval is symmetric,
		// zero never drawn, and every product exact but the last rounding.
		var std float64
		var offset float32
		switch t.kind {
		case kindEmbed:
			std = embedStd
		case kindNorm:
			std, offset = normNoise/sqrt3, 1
		case kindIn:
			std = inGain / math.Sqrt(float64(t.fanIn))
		case kindOut:
			std = outGain / math.Sqrt(float64(t.fanIn))
		}
		// math.Sqrt is correctly rounded everywhere, so scale is too.
		scale := float32(std * sqrt3 / (1 << 24))
		for n := t.n; n > 0; {
			if cap(buf)-len(buf) < 8 {
				if err := flush(); err != nil {
					return err
				}
			}
			// Two values per draw, 24 bits each (the second dropped at the
			// end of an odd-sized tensor).
			r := src.Uint64()
			for _, k := range [2]uint64{r >> 40, r >> 8 & (1<<24 - 1)} {
				if n == 0 {
					break
				}
				// The explicit float32 conversion rounds the product before
				// the offset is added: Go may otherwise fuse the two into
				// one multiply-add on some machines and round once.
				v := float32(float32(int32(2*k)-(1<<24-1))*scale) + offset
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				n--
			}
		}
	}
	return flush()
}

// sqrt3 is √3: uniform on [-a, a] has standard deviation a/√3.
const sqrt3 = 1.7320508075688772935274463415058723669428

// freqCis yields one legacy freq_cis block, position-major: cos (or sin,
// for the imaginary part) of pos·10000^(-2i/headSize) for every position
// and every pair i of a head. run.c no longer reads these blocks; they are
// written as llama2.c's legacy export wrote them, so that older readers
// work too. They are the only values computed with float64 math.Pow, Cos
// and Sin, then rounded to float32; their last bits could differ on a
// machine whose math library rounds differently, but no reader depends on
// them.
func freqCis(s Shape, sin bool) func(yield func(float32) bool) {
	return func(yield func(float32) bool) {
		hs := s.HeadSize()
		for pos := range s.SeqLen {
			for i := 0; i < hs/2; i++ {
				theta := float64(pos) * math.Pow(10000, -float64(2*i)/float64(hs))
				v := math.Cos(theta)
				if sin {
					v = math.Sin(theta)
				}
				if !yield(float32(v)) {
					return
				}
			}
		}
	}
}
