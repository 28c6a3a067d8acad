package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainDataFlagsNamed: a mistake in --eval-data is named as such, not
// as --data's (a newcomer read "--data: labels given twice" for a flag it
// had given once), and is refused before anything is sent.
func TestTrainDataFlagsNamed(t *testing.T) {
	module := filepath.Join("..", "..", "..", "..", "testdata", "jobs", "cat", "cat.wasm")
	dir := filepath.Join(t.TempDir(), "no-node")
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--eval-data", "labels=F", "--eval-data", "labels=F"}, "--eval-data: labels given twice"},
		{[]string{"--eval-data", "/path"}, `--eval-data "/path": want NAME=FILE`},
		{[]string{"--data", "x"}, `--data "x": want NAME=FILE`},
	} {
		args := append([]string{"train", module, "--reduce", module, "--shards", "1", "--eval", module, "--datadir", dir}, tc.flags...)
		if code, _, errOut := infernet(t, args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want %q", tc.flags, code, errOut, tc.want)
		}
	}
}
