//go:build !faults

package itest

// buildTags are the tags the infernet binary under test is built with.
const buildTags = ""
