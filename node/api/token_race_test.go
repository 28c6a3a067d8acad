package api

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLoadTokenConcurrent: two LoadTokens of one new data directory return
// the token the file holds. (The empty file's removal can take the file
// another LoadToken created and has not written yet.)
func TestLoadTokenConcurrent(t *testing.T) {
	for i := range 2000 {
		dir := filepath.Join(t.TempDir(), "d")
		var wg sync.WaitGroup
		toks := make([]string, 2)
		for k := range toks {
			wg.Go(func() {
				b, err := LoadToken(dir)
				if err != nil {
					t.Error(err)
				}
				toks[k] = string(b)
			})
		}
		wg.Wait()
		onDisk, _ := os.ReadFile(filepath.Join(dir, TokenFile))
		for _, tok := range toks {
			if tok != strings.TrimSpace(string(onDisk)) {
				t.Fatalf("run %d: LoadToken returned %q, the file holds %q", i, tok, onDisk)
			}
		}
	}
}
