//go:build race

package reference

// raceEnabled reports a -race build, which makes memory-bound code (the
// transposes) an order of magnitude slower and wall-clock bounds meaningless.
const raceEnabled = true
