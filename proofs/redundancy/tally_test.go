package redundancy

import (
	"crypto/sha256"
	"slices"
	"testing"
)

// vote builds a Vote whose Digest matches out.
func vote(key string, out []byte) Vote {
	return Vote{Key: key, Digest: sha256.Sum256(out), Output: out}
}

func TestTally(t *testing.T) {
	var (
		a, b, c  = []byte("result A"), []byte("result B"), []byte("result C")
		tolF32   = &Tolerance{Rtol: 1e-5, Format: FormatF32}
		ok       = "ok/0"
		exit1    = "ok/1"
		outF32   = f32s(1, 2, 3)
		closeF32 = f32s(1.000001, 2, 3.000002)
		farF32   = f32s(1, 2, 3.1)
	)
	tests := []struct {
		name    string
		votes   []Vote
		tol     *Tolerance
		quorum  int
		decided bool
		winner  []int
		losers  []int
		groups  [][]int
	}{
		{"no votes", nil, nil, 1, false, nil, nil, nil},
		{"all agree", []Vote{vote(ok, a), vote(ok, a), vote(ok, a)}, nil, 2,
			true, []int{0, 1, 2}, nil, [][]int{{0, 1, 2}}},
		{"2 vs 1", []Vote{vote(ok, a), vote(ok, b), vote(ok, a)}, nil, 2,
			true, []int{0, 2}, []int{1}, [][]int{{0, 2}, {1}}},
		{"2 vs 1 liar first", []Vote{vote(ok, b), vote(ok, a), vote(ok, a)}, nil, 2,
			true, []int{1, 2}, []int{0}, [][]int{{1, 2}, {0}}},
		{"1 vs 1", []Vote{vote(ok, a), vote(ok, b)}, nil, 2,
			false, nil, nil, [][]int{{0}, {1}}},
		{"2 vs 2", []Vote{vote(ok, a), vote(ok, b), vote(ok, b), vote(ok, a)}, nil, 2,
			false, nil, nil, [][]int{{0, 3}, {1, 2}}},
		{"3 singletons", []Vote{vote(ok, a), vote(ok, b), vote(ok, c)}, nil, 1,
			false, nil, nil, [][]int{{0}, {1}, {2}}},
		{"3 vs 1 vs 1", []Vote{vote(ok, c), vote(ok, a), vote(ok, b), vote(ok, a), vote(ok, a)}, nil, 2,
			true, []int{1, 3, 4}, []int{0, 2}, [][]int{{1, 3, 4}, {0}, {2}}},
		{"key mismatch same output", []Vote{vote(ok, a), vote(exit1, a)}, nil, 1,
			false, nil, nil, [][]int{{0}, {1}}},
		{"key mismatch outvoted", []Vote{vote(ok, a), vote(exit1, a), vote(ok, a)}, nil, 2,
			true, []int{0, 2}, []int{1}, [][]int{{0, 2}, {1}}},
		{"exact compares only digest", []Vote{vote(ok, a), {Key: ok, Digest: sha256.Sum256(a), Output: b}}, nil, 2,
			true, []int{0, 1}, nil, [][]int{{0, 1}}},
		{"below quorum", []Vote{vote(ok, a), vote(ok, a), vote(ok, b)}, nil, 3,
			false, nil, nil, [][]int{{0, 1}, {2}}},
		{"quorum 1 one vote", []Vote{vote(ok, a)}, nil, 1,
			true, []int{0}, nil, [][]int{{0}}},
		{"quorum 0 counts as 1", []Vote{vote(ok, a)}, nil, 0,
			true, []int{0}, nil, [][]int{{0}}},
		{"tolerance close outputs agree", []Vote{vote(ok, outF32), vote(ok, closeF32)}, tolF32, 2,
			true, []int{0, 1}, nil, [][]int{{0, 1}}},
		{"tolerance far output outvoted", []Vote{vote(ok, farF32), vote(ok, outF32), vote(ok, closeF32)}, tolF32, 2,
			true, []int{1, 2}, []int{0}, [][]int{{1, 2}, {0}}},
		{"tolerance key mismatch", []Vote{vote(ok, outF32), vote(exit1, outF32)}, tolF32, 1,
			false, nil, nil, [][]int{{0}, {1}}},
		{"tolerance malformed copies do not agree", []Vote{vote(ok, []byte{1, 2, 3}), vote(ok, []byte{1, 2, 3})}, tolF32, 1,
			false, nil, nil, [][]int{{0}, {1}}},
		{"tolerance text", []Vote{vote(ok, []byte("loss 0.25")), vote(ok, []byte("loss 0.2500001\n")), vote(ok, []byte("loss 0.3"))},
			&Tolerance{Rtol: 1e-5, Format: FormatText}, 2,
			true, []int{0, 1}, []int{2}, [][]int{{0, 1}, {2}}},
		{"invalid tolerance decides nothing", []Vote{vote(ok, outF32)}, &Tolerance{Rtol: -1, Format: FormatF32}, 1,
			false, nil, nil, [][]int{{0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Tally(tt.votes, tt.tol, tt.quorum)
			if v.Decided != tt.decided || !slices.Equal(v.Winner, tt.winner) || !slices.Equal(v.Losers, tt.losers) ||
				!slices.EqualFunc(v.Groups, tt.groups, slices.Equal) {
				t.Errorf("Tally = %+v\nwant  {Decided:%v Winner:%v Losers:%v Groups:%v}",
					v, tt.decided, tt.winner, tt.losers, tt.groups)
			}
		})
	}
}
