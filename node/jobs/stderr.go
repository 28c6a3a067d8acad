package jobs

import (
	"strings"
	"unicode"
)

// StderrWidth is the most runes of a line StderrTail keeps.
const StderrWidth = 200

// StderrTail returns the last n lines of a job's stderr as a provider sent
// it (wire.Result.Stderr), safe to print: it is the provider's word, and
// any provider may lie in it, so what could steer a terminal or disguise
// text (control and format characters: escapes, bidirectional overrides,
// zero-width and line separators) is replaced with U+FFFD, and each line
// is cut to StderrWidth runes. Trailing empty lines are left out.
func StderrTail(stderr []byte, n int) []string {
	text := strings.TrimRight(strings.ToValidUTF8(string(stderr), "\uFFFD"), "\n")
	if text == "" || n <= 0 {
		return nil
	}
	lines := strings.Split(text, "\n")
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		l = strings.Map(func(c rune) rune {
			if c != '\t' && (unicode.IsControl(c) || unicode.In(c, unicode.Cf, unicode.Zl, unicode.Zp)) {
				return '\uFFFD'
			}
			return c
		}, l)
		if rs := []rune(l); len(rs) > StderrWidth {
			l = string(rs[:StderrWidth]) + "…"
		}
		lines[i] = l
	}
	return lines
}
