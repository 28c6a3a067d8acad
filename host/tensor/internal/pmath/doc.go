// Package pmath holds portable float64 transcendental functions for the
// exact tensor kernels: Exp, Log, Sin and Cos give the same bits on every
// architecture.
//
// The standard library's are not portable. math.Exp and math.Log run
// assembly on amd64 (and math.Exp on arm64 and s390x), and math.Pow calls
// them; math.Sin and math.Cos are pure Go, but the compiler fuses their
// x*y + z into fused multiply-adds on arm64 and other targets, which round
// differently. The functions here are ports of Go's pure-Go code with every
// product wrapped in float64(...), which the Go spec says must round and so
// forbids the fusion.
package pmath
