package setup

import "testing"

// Benchmarks on a 1,000-constraint chain (domain 1024); TestTimings measures
// bigger circuits end to end.

func BenchmarkPhase1Contribute(b *testing.B) {
	s0, _ := InitialPhase1(1024)
	for b.Loop() {
		if _, err := ContributePhase1(s0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPhase1VerifyStep(b *testing.B) {
	s0, _ := InitialPhase1(1024)
	c, _ := ContributePhase1(s0)
	for b.Loop() {
		if err := VerifyPhase1Step(s0, c); err != nil {
			b.Fatal(err)
		}
	}
}

func phase2Fixture(b *testing.B) *Phase2Start {
	ccs := compile(b, &chainCircuit{N: 1000})
	s0, _ := InitialPhase1(1024)
	c, _ := ContributePhase1(s0)
	commons, err := FinalizePhase1(1024, testBeacon1, [][]byte{c})
	if err != nil {
		b.Fatal(err)
	}
	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		b.Fatal(err)
	}
	return start
}

func BenchmarkPhase2Contribute(b *testing.B) {
	start := phase2Fixture(b)
	for b.Loop() {
		if _, err := ContributePhase2(start.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPhase2VerifyStep(b *testing.B) {
	start := phase2Fixture(b)
	c, _ := ContributePhase2(start.Bytes())
	for b.Loop() {
		if err := VerifyPhase2Step(start.Bytes(), c); err != nil {
			b.Fatal(err)
		}
	}
}
