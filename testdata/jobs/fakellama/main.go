// Command fakellama speaks the llama runner's protocol (package
// guest/go/llama) without a model, for tests of what carries it (infernet
// generate, named models, sharded batches) that need no real runner. It
// reads /data/model (and, unless the model starts with GGUF's magic,
// /data/tokenizer; it exits 1 without them), then answers each request
// line on stdin with max_tokens (default 16) words, one event each, then a
// Done event: the words are a hash of the model's bytes, the prompt, the
// position and, when sampling (temperature > 0), the seed, so the output
// is a function of the model and the requests. About one hash in 61 is
// the fake's end of sequence (stop "eos", not printed); a prompt holding
// FAIL gets a Done event with an error instead.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o fakellama.wasm .
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"hash/fnv"
	"os"
	"strings"

	"github.com/infernet/infernet/guest/go/llama"
)

const defaultTokens = 16

var words = strings.Fields("Once upon a time there was a little girl named Lily who loved to play in the park with her big red ball and one day she saw a dog")

// mix is splitmix64's finalizer: FNV's low bits vary too little.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func fail(msg string) {
	os.Stderr.WriteString("fakellama: " + msg + "\n")
	os.Exit(1)
}

func main() {
	model, err := os.ReadFile("/data/" + llama.DataModel)
	if err != nil {
		fail(err.Error())
	}
	if !bytes.HasPrefix(model, []byte("GGUF")) {
		if _, err := os.Stat("/data/" + llama.DataTokenizer); err != nil {
			fail("a llama2.c model needs /data/tokenizer: " + err.Error())
		}
	}
	h := fnv.New64a()
	h.Write(model)
	weights := h.Sum64()
	enc := json.NewEncoder(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var q llama.Request
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			fail("bad request: " + err.Error())
		}
		done := llama.Event{ID: q.ID, Done: true, PromptTokens: len(strings.Fields(q.Prompt)) + 1, Stop: "length"}
		if strings.Contains(q.Prompt, "FAIL") {
			done = llama.Event{ID: q.ID, Done: true, Error: "the prompt asked to fail"}
			enc.Encode(done)
			continue
		}
		n := q.MaxTokens
		if n == 0 {
			n = defaultTokens
		}
		for i := range n {
			h := fnv.New64a()
			var b [8]byte
			for j := range 8 {
				b[j] = byte(weights >> (8 * j))
			}
			h.Write(b[:])
			h.Write([]byte(q.Prompt))
			h.Write([]byte{byte(i), byte(i >> 8)})
			if q.Temperature > 0 {
				for j := range 8 {
					b[j] = byte(q.Seed >> (8 * j))
				}
				h.Write(b[:])
			}
			x := mix(h.Sum64())
			if i > 0 && x%61 == 0 {
				done.Stop = "eos" // not printed, as run.c does not print it
				break
			}
			enc.Encode(llama.Event{ID: q.ID, Text: " " + words[x%uint64(len(words))]})
			done.CompletionTokens = i + 1
		}
		enc.Encode(done)
	}
	if err := sc.Err(); err != nil {
		fail(err.Error())
	}
}
