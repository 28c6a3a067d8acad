package llama

// RNG is llama2.c's random number generator (run.c's random_u32 and
// random_f32: xorshift64*), the source of the coins of seeded sampling.
type RNG struct{ state uint64 }

// NewRNG returns a generator seeded with seed; 0, which xorshift cannot
// leave, means 1.
func NewRNG(seed uint64) *RNG {
	if seed == 0 {
		seed = 1
	}
	return &RNG{state: seed}
}

// Uint32 returns the next 32 random bits.
func (r *RNG) Uint32() uint32 {
	r.state ^= r.state >> 12
	r.state ^= r.state << 25
	r.state ^= r.state >> 27
	return uint32((r.state * 0x2545F4914F6CDD1D) >> 32)
}

// Float32 returns a random float32 in [0, 1): the top 24 bits of Uint32
// over 2²⁴.
func (r *RNG) Float32() float32 { return float32(r.Uint32()>>8) / 16777216.0 }
