package redundancy

import (
	"cmp"
	"slices"
)

// Vote is one replica's result.
type Vote struct {
	// Key must be equal for votes to agree at all (the caller puts outcome
	// and exit code in it).
	Key string
	// Digest is the SHA-256 of Output; exact mode compares only this.
	Digest [32]byte
	// Output is the replica's output, needed in tolerance mode only. Tally
	// only reads it.
	Output []byte
}

// Verdict is what a set of votes decides. All indices point into the votes
// slice given to [Tally].
type Verdict struct {
	// Decided reports whether one group won.
	Decided bool
	// Winner holds the indices of the accepted group, ascending; its first
	// index is the representative whose output is accepted. Nil when not
	// Decided.
	Winner []int
	// Losers holds the indices outvoted (in other groups), sorted. Nil when
	// not Decided or when every vote agreed.
	Losers []int
	// Groups holds every group, largest first (ties in order of their first
	// index), indices ascending inside.
	Groups [][]int
}

// Tally groups votes and decides which result to accept.
//
// With t nil (exact mode) two votes are in one group when their Key and
// Digest are equal. With t set (tolerance mode) a vote joins the first group,
// in vote order, whose first member has the same Key and an Output that
// [Equal] accepts under *t; otherwise it starts a new group. Tolerance is not
// transitive, so with outputs spread wider than the tolerance the grouping can
// depend on vote order. A malformed output agrees with nothing, not even an
// identical copy, and an invalid t (see [Tolerance.Validate]) puts every vote
// in a group of its own and decides nothing.
//
// The verdict is decided when the largest group has at least quorum members
// (a quorum below 1 counts as 1) and strictly more than any other group.
// Without a decision the caller should add replicas and tally again.
func Tally(votes []Vote, t *Tolerance, quorum int) Verdict {
	quorum = max(quorum, 1)
	valid := t == nil || t.Validate() == nil
	var groups [][]int
	switch {
	case t == nil:
		type key struct {
			key    string
			digest [32]byte
		}
		at := make(map[key]int, len(votes))
		for i, v := range votes {
			k := key{v.Key, v.Digest}
			if g, ok := at[k]; ok {
				groups[g] = append(groups[g], i)
				continue
			}
			at[k] = len(groups)
			groups = append(groups, []int{i})
		}
	default:
	vote:
		for i, v := range votes {
			for g := range groups {
				rep := votes[groups[g][0]]
				if !valid || rep.Key != v.Key {
					continue
				}
				if ok, _ := Equal(rep.Output, v.Output, t); ok {
					groups[g] = append(groups[g], i)
					continue vote
				}
			}
			groups = append(groups, []int{i})
		}
	}
	// Groups were created in order of their first index; a stable sort by
	// size keeps that order among equal sizes.
	slices.SortStableFunc(groups, func(x, y []int) int { return cmp.Compare(len(y), len(x)) })

	verdict := Verdict{Groups: groups}
	if !valid || len(groups) == 0 || len(groups[0]) < quorum ||
		(len(groups) > 1 && len(groups[1]) == len(groups[0])) {
		return verdict
	}
	verdict.Decided = true
	verdict.Winner = slices.Clone(groups[0])
	for _, g := range groups[1:] {
		verdict.Losers = append(verdict.Losers, g...)
	}
	slices.Sort(verdict.Losers)
	return verdict
}
