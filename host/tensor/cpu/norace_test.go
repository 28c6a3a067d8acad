//go:build !race

package cpu

// raceEnabled relaxes timing assertions: the race detector slows Go code 10×.
const raceEnabled = false
