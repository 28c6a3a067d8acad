package models

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/store"
)

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "llama", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stories260K reads testdata's stories260K checkpoint and its vocabulary.
func stories260K(t *testing.T) (*llama.Model, *llama.Vocab) {
	t.Helper()
	stories, tok := testdata(t, "stories260K.bin"), testdata(t, "tok512.bin")
	m, err := llama.ReadCheckpoint(bytes.NewReader(stories), int64(len(stories)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := llama.ReadTokenizerBin(bytes.NewReader(tok), m.Config.VocabSize)
	if err != nil {
		t.Fatal(err)
	}
	return m, v
}

// gguf is stories260K converted to GGUF (F32), its vocabulary inside.
func gguf(t *testing.T) []byte {
	t.Helper()
	m, v := stories260K(t)
	stories := testdata(t, "stories260K.bin")
	var b bytes.Buffer
	if _, err := llama.ConvertToGGUF(&b, bytes.NewReader(stories), m, v, abi.F32, "stories260K"); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSniff(t *testing.T) {
	stories, gg := testdata(t, "stories260K.bin"), gguf(t)
	header := func(b []byte) []byte {
		b = append([]byte("GGUF"), b...)
		return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(b, 0), 0)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want store.ModelFormat
	}{
		{"stories260K", stories, store.ModelLlama2C},
		{"gguf", gg, store.ModelGGUF},
		{"gguf header alone", header([]byte{3, 0, 0, 0}), 0},
		{"gguf truncated", gg[:len(gg)/2], 0},
		{"empty", nil, 0},
		{"text", []byte("Once upon a time, there was a model file that was not one."), 0},
		{"stories truncated", stories[:len(stories)-20000], 0},
		{"tokenizer", testdata(t, "tok512.bin"), 0},
		{"llama2c v1 export", append([]byte("24ka"), make([]byte, 252)...), 0},
		{"zero header", make([]byte, 1024), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := Sniff(bytes.NewReader(tc.b), int64(len(tc.b)))
			if tc.want == 0 {
				if !errors.Is(err, ErrBadModel) || !errors.Is(err, llama.ErrFormat) {
					t.Fatalf("Sniff: %+v, %v; want ErrBadModel", info, err)
				}
				// Said by the format the file is in (a GGUF of a type not
				// read here had been called neither format).
				gguf := bytes.HasPrefix(tc.b, []byte("GGUF"))
				if strings.Contains(err.Error(), "a GGUF file it cannot read") != gguf || strings.Contains(err.Error(), "neither a GGUF file") == gguf {
					t.Errorf("GGUF magic %v: %v", gguf, err)
				}
				t.Log(err)
				return
			}
			if err != nil || info.Format != tc.want || info.NeedsTokenizer() != (tc.want == store.ModelLlama2C) {
				t.Fatalf("Sniff: %+v, %v; want %s", info, err, tc.want)
			}
			if c := info.Config; c.Dim != 64 || c.HiddenDim != 172 || c.Layers != 5 || c.Heads != 8 || c.KVHeads != 4 || c.VocabSize != 512 || c.SeqLen != 512 {
				t.Errorf("config %+v; want stories260K's", c)
			}
		})
	}
}

func TestCheckTokenizer(t *testing.T) {
	tok := testdata(t, "tok512.bin")
	for _, tc := range []struct {
		name  string
		b     []byte
		vocab int
		ok    bool
	}{
		{"tok512", tok, 512, true},
		{"more tokens than the file", tok, 513, false},
		{"truncated", tok[:len(tok)-1], 512, false},
		{"empty", nil, 512, false},
		{"model", testdata(t, "stories260K.bin"), 512, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTokenizer(bytes.NewReader(tc.b), tc.vocab)
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrBadTokenizer) {
				t.Fatalf("CheckTokenizer: %v; want ok %v", err, tc.ok)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"stories260K", true}, {"llama-2_7b.q8", true}, {"7B", true}, {strings.Repeat("a", 64), true},
		{"", false}, {"a/b", false}, {"../etc", false}, {"..", false}, {".hidden", false}, {"-rf", false},
		{"a b", false}, {"naïve", false}, {strings.Repeat("a", 65), false}, {"a\\b", false}, {"a\x00", false},
	} {
		if err := CheckName(tc.name); tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrBadName) {
			t.Errorf("CheckName(%q): %v; want ok %v", tc.name, err, tc.ok)
		}
	}
}

// testRegistry is a registry over a fresh store and blob store.
func testRegistry(t *testing.T) (*Registry, *blob.Store, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	blobs, err := blob.OpenStore(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(db, blobs)
	if err != nil {
		t.Fatal(err)
	}
	return r, blobs, db
}

func put(t *testing.T, blobs *blob.Store, b []byte) store.BlobRef {
	t.Helper()
	d, err := blobs.PutBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return store.BlobRef{Digest: d, Size: int64(len(b))}
}

func TestRegistry(t *testing.T) {
	r, blobs, db := testRegistry(t)
	model, tok := put(t, blobs, testdata(t, "stories260K.bin")), put(t, blobs, testdata(t, "tok512.bin"))
	gg := put(t, blobs, gguf(t))
	junk := put(t, blobs, []byte("not a model"))
	llama2 := put(t, blobs, testdata(t, "tokenizer.bin")) // 32,000 pieces
	absent := store.BlobRef{Digest: blob.Sum([]byte("absent")), Size: 6}

	m, err := r.Add("stories", model, tok)
	if err != nil || m.Format != store.ModelLlama2C || m.Model != model || m.Tokenizer != tok || m.Added.IsZero() {
		t.Fatalf("Add: %+v, %v", m, err)
	}
	if _, err := r.Add("g", gg, store.BlobRef{}); err != nil {
		t.Fatalf("Add gguf: %v", err)
	}
	for _, tc := range []struct {
		name       string
		model, tok store.BlobRef
		want       error
	}{
		{"stories", model, tok, ErrExists},
		{"a/b", model, tok, ErrBadName},
		{"junk", junk, store.BlobRef{}, ErrBadModel},
		{"notok", model, store.BlobRef{}, ErrTokenizer},
		{"gtok", gg, tok, ErrTokenizer},
		{"badtok", model, junk, ErrBadTokenizer},
		{"othervocab", model, llama2, ErrBadTokenizer},
		{"tokasmodel", tok, store.BlobRef{}, ErrBadModel},
		{"absent", absent, store.BlobRef{}, blob.ErrNotFound},
		{"wrongsize", store.BlobRef{Digest: model.Digest, Size: 1}, tok, nil},
	} {
		_, err := r.Add(tc.name, tc.model, tc.tok)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Add(%s): %v; want %v", tc.name, err, tc.want)
		}
	}
	list, err := r.List()
	if err != nil || len(list) != 2 || list[0].Name != "g" || list[1].Name != "stories" {
		t.Fatalf("List: %+v, %v", list, err)
	}
	for _, d := range []blob.Digest{model.Digest, tok.Digest, gg.Digest} {
		if !r.Holds(d) {
			t.Errorf("Holds(%s) false for a model's blob", d.Short())
		}
	}
	if r.Holds(junk.Digest) {
		t.Error("Holds a blob no model names")
	}
	if got, err := r.Get("stories"); err != nil || got.Model != model {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if data := JobData(m); len(data) != 2 || data[0].Name != llama.DataModel || data[1].Name != llama.DataTokenizer || data[1].Digest != tok.Digest {
		t.Errorf("JobData: %+v", data)
	}

	// A second model on the same blobs: removing one keeps them held.
	if _, err := r.Add("stories2", model, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Remove("stories"); err != nil {
		t.Fatal(err)
	}
	if !r.Holds(model.Digest) {
		t.Error("a blob another model names is no longer held")
	}
	// A new registry over the same store holds what it recorded.
	r2, err := New(db, blobs)
	if err != nil || !r2.Holds(model.Digest) || r2.Holds(gg.Digest) == false {
		t.Fatalf("reopened: %v", err)
	}
	for _, name := range []string{"stories2", "g"} {
		if _, err := r.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if r.Holds(model.Digest) || r.Holds(tok.Digest) || r.Holds(gg.Digest) {
		t.Error("blobs held after every model is removed")
	}
	for _, name := range []string{"stories", "a/b"} {
		if _, err := r.Remove(name); !errors.Is(err, ErrUnknown) && !errors.Is(err, ErrBadName) {
			t.Errorf("Remove(%s): %v", name, err)
		}
		if _, err := r.Get(name); !errors.Is(err, ErrUnknown) && !errors.Is(err, ErrBadName) {
			t.Errorf("Get(%s): %v", name, err)
		}
	}
}

func TestRunnerBlob(t *testing.T) {
	r, blobs, _ := testRegistry(t)
	ref, err := r.Runner()
	if len(llama.Runner()) == 0 {
		if !errors.Is(err, ErrNoRunner) {
			t.Fatalf("Runner without a runner: %v", err)
		}
		return
	}
	if err != nil || ref.Size != int64(len(llama.Runner())) || !r.Holds(ref.Digest) {
		t.Fatalf("Runner: %+v, %v", ref, err)
	}
	if _, ok := blobs.Has(ref.Digest); !ok {
		t.Fatal("the runner is not in the blob store")
	}
	blobs.Remove(ref.Digest)
	if again, err := r.Runner(); err != nil || again != ref {
		t.Fatalf("Runner after its blob went: %+v, %v", again, err)
	}
}

func TestReadRequests(t *testing.T) {
	good := "{\"prompt\":\"Once upon a time\"}\n\n  {\"prompt\":\"\",\"max_tokens\":8,\"temperature\":0.8,\"top_p\":0.9,\"seed\":42}  \n{\"prompt\":\"x\"}\n" +
		"{\"prompt\":\"y\",\"temperature\":0.8,\"top_p\":0}" // top_p 0: the top token alone, greedy
	reqs, err := ReadRequests(strings.NewReader(good), llama.Request{ID: 9, Prompt: "unused", MaxTokens: 5, TopP: 1}, LineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []llama.Request{{ID: 1, Prompt: "Once upon a time", MaxTokens: 5, TopP: 1}, {ID: 3, MaxTokens: 8, Temperature: 0.8, TopP: 0.9, Seed: 42},
		{ID: 4, Prompt: "x", MaxTokens: 5, TopP: 1}, {ID: 5, Prompt: "y", MaxTokens: 5}}
	if len(reqs) != len(want) {
		t.Fatalf("got %+v", reqs)
	}
	for i := range want {
		if !reflect.DeepEqual(reqs[i], want[i]) {
			t.Errorf("request %d: %+v; want %+v", i, reqs[i], want[i])
		}
	}
	// The OpenAI API's forms: "stop" a string or an array; "logprobs" a
	// count of top tokens (a completion's) or true with "top_logprobs"
	// (chat's); null leaves the default.
	forms := `{"prompt":"a","stop":"x"}
{"prompt":"a","stop":["x","y"],"logprobs":2}
{"prompt":"a","logprobs":true,"top_logprobs":3}
{"prompt":"a","logprobs":0}
{"prompt":"a","logprobs":null,"stop":null}`
	reqs, err = ReadRequests(strings.NewReader(forms), llama.Request{Stop: []string{"z"}, Logprobs: true, TopLogprobs: 1}, LineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = []llama.Request{{ID: 1, Prompt: "a", Stop: []string{"x"}, Logprobs: true, TopLogprobs: 1},
		{ID: 2, Prompt: "a", Stop: []string{"x", "y"}, Logprobs: true, TopLogprobs: 2},
		{ID: 3, Prompt: "a", Stop: []string{"z"}, Logprobs: true, TopLogprobs: 3},
		{ID: 4, Prompt: "a", Stop: []string{"z"}, Logprobs: true},
		{ID: 5, Prompt: "a", Stop: []string{"z"}, Logprobs: true, TopLogprobs: 1}}
	if !reflect.DeepEqual(reqs, want) {
		t.Errorf("OpenAI's forms: %+v; want %+v", reqs, want)
	}
	// A sampled line without a seed gets opts.Seed's; one with a seed, 0
	// too, or greedy, keeps its own or the defaults'.
	seeds := `{"prompt":"a","temperature":0.8}
{"prompt":"a","temperature":0.8,"seed":0}
{"prompt":"a","temperature":0.8,"seed":5}
{"prompt":"a"}`
	reqs, err = ReadRequests(strings.NewReader(seeds), llama.Request{Seed: 3}, LineOptions{Seed: func() uint64 { return 77 }})
	if err != nil {
		t.Fatal(err)
	}
	if got := []uint64{reqs[0].Seed, reqs[1].Seed, reqs[2].Seed, reqs[3].Seed}; !slices.Equal(got, []uint64{77, 0, 5, 3}) {
		t.Errorf("seeds %v; want 77, 0, 5, 3", got)
	}
	// A chat, rendered by the template given; none given, it is refused.
	chats := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":3}
{"prompt":"plain"}`
	reqs, err = ReadRequests(strings.NewReader(chats), llama.Request{}, LineOptions{Chat: (&ChatTemplate{}).Render})
	if err != nil {
		t.Fatal(err)
	}
	want = []llama.Request{{ID: 1, Prompt: "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]", MaxTokens: 3}, {ID: 2, Prompt: "plain"}}
	if !reflect.DeepEqual(reqs, want) {
		t.Errorf("chat lines: %+v; want %+v", reqs, want)
	}
	for _, tc := range []struct{ in, line string }{
		{"{\"prompt\":\"a\"}\n{\"prompt\":", "line 2"},
		{`{"messages":[{"role":"user","content":"a"}]}`, `line 1: "messages" are not taken here`},
		{`{"prompt":"a","messages":[{"role":"user","content":"a"}]}`, `line 1: "prompt" or "messages", not both`},
		{"{\"prompt\":\"a\",\"max_tokens\":\"5\"}", `line 1: "max_tokens" is a JSON string: want an integer`},
		{"{\"prompt\":\"a\",\"logprobs\":\"x\"}", `line 1: "logprobs" is "x": want true, false or a count`},
		{"{\"prompt\":\"a\",\"logprobs\":2,\"top_logprobs\":3}", `line 1: "logprobs": N is the count of top tokens`},
		{"{\"prompt\":\"a\",\"stop\":7}", `line 1: "stop" is 7: want a string or an array`},
		{"{\"prompt\":\"a\"}\nnot json\n", "line 2"},
		{"{\"prompt\":\"a\",\"id\":7}", "line 1"},
		{"{\"prompt\":\"a\",\"max_tokens\":-1}", "line 1"},
		{"{\"prompt\":\"a\",\"temperature\":-0.5}", "line 1"},
		{"{\"prompt\":\"a\",\"top_p\":1.5}", "line 1"},
		{"{\"max_tokens\":5}", "line 1"},
		{`{"messages":[{"role":"tool","content":"a"}],"prompt":null}`, `line 1: messages[0].role "tool"`},
		{"\n\n[\"a\"]", "line 3"},
		{"{\"prompt\":\"a\"} {\"prompt\":\"b\"}", "line 1"},
		{"{\"prompt\":\"" + strings.Repeat("a", MaxPromptLine) + "\"}", "line 1"},
	} {
		var chat func([]Message) (string, error)
		if strings.Contains(tc.in, "prompt") {
			chat = (&ChatTemplate{}).Render
		}
		reqs, err := ReadRequests(strings.NewReader(tc.in), llama.Request{}, LineOptions{Chat: chat})
		if err == nil || reqs != nil || !strings.Contains(err.Error(), tc.line) {
			t.Errorf("%.60q: %v, %v; want an error at %s", tc.in, reqs, err, tc.line)
		}
	}
}

func TestDecoder(t *testing.T) {
	reqs := []llama.Request{{ID: 1, Prompt: "a"}, {ID: 2, Prompt: "b"}}
	if got := EncodeRequests(reqs); string(got) != "{\"id\":1,\"prompt\":\"a\"}\n{\"id\":2,\"prompt\":\"b\"}\n" {
		t.Fatalf("EncodeRequests: %q", got)
	}
	out := `{"id":1,"text":"Once"}
{"id":1,"text":" upon"}
{"id":1,"done":true,"prompt_tokens":2,"completion_tokens":2,"stop":"length"}
{"id":2,"done":true,"error":"prompt too long"}
`
	// Written a byte at a time, as a guest may.
	var texts []string
	var dones []int
	d := Decoder{OnText: func(id int, s string) { texts = append(texts, s) }, OnDone: func(c Completion) { dones = append(dones, c.ID) }}
	for i := range len(out) {
		if _, err := d.Write([]byte{out[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	cs := d.Completions()
	want := []Completion{{ID: 1, Completion: "Once upon", PromptTokens: 2, CompletionTokens: 2, Stop: "length"}, {ID: 2, Error: "prompt too long"}}
	if !reflect.DeepEqual(cs, want) || strings.Join(texts, "|") != "Once| upon" || len(dones) != 2 {
		t.Fatalf("completions %+v, texts %q, dones %v", cs, texts, dones)
	}
	// Output without its last newline decodes the same.
	if cs, err := Decode([]byte(strings.TrimSuffix(out, "\n"))); err != nil || len(cs) != 2 {
		t.Fatalf("Decode without the last newline: %+v, %v", cs, err)
	}
	for _, bad := range []string{"not json\n", "{\"id\":1,\"text\":\"x\"}\n", "{\"id\":1,\"text\":\"x\"}\n{\"id\":1"} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrBadOutput) {
			t.Errorf("Decode(%q): %v; want ErrBadOutput", bad, err)
		}
	}
	var stop Decoder
	if _, err := stop.Write([]byte("garbage\n")); err == nil {
		t.Error("a write of bad output succeeded: it should stop the job")
	}
}

// TestDecoderStops: a request's stop strings are cut from its text with
// what follows; text that may start one is held back until the next piece
// tells (and given back at Done if none came); other requests are
// untouched.
func TestDecoderStops(t *testing.T) {
	reqs := []llama.Request{{ID: 1, Stop: []string{"END", "\n\n"}}, {ID: 2, Stop: []string{"zz"}}, {ID: 3}}
	out := `{"id":1,"text":"Once E"}
{"id":1,"text":"N"}
{"id":1,"text":"d? no: EN"}
{"id":1,"text":"D and"}
{"id":1,"done":true,"completion_tokens":4,"stop":"stop"}
{"id":2,"text":"a z"}
{"id":2,"done":true,"completion_tokens":1,"stop":"length"}
{"id":3,"text":"END"}
{"id":3,"done":true,"completion_tokens":1,"stop":"length"}
`
	texts := map[int][]string{}
	d := Decoder{Stops: StopsOf(reqs), OnText: func(id int, s string) { texts[id] = append(texts[id], s) }}
	if _, err := d.Write([]byte(out)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	cs := d.Completions()
	if len(cs) != 3 || cs[0].Completion != "Once ENd? no: " || cs[0].Stop != "stop" || cs[1].Completion != "a z" || cs[2].Completion != "END" {
		t.Fatalf("completions %+v", cs)
	}
	// "Once E" holds "E" back; "N" holds "EN"; "d? no: EN" is no stop yet,
	// so "ENd? no: " goes and "EN" waits; "D and" completes the stop.
	if got := strings.Join(texts[1], "|"); got != "Once |ENd? no: " {
		t.Errorf("request 1 streamed %q", got)
	}
	if got := strings.Join(texts[2], "|"); got != "a |z" {
		t.Errorf("request 2 streamed %q: the held \"z\" comes at Done", got)
	}
	if cs, err := DecodeStops([]byte(out), StopsOf(reqs)); err != nil || cs[0].Completion != "Once ENd? no: " {
		t.Errorf("DecodeStops: %+v, %v", cs, err)
	}
	stop, hold := llama.Cut("abc", []string{"cd", "bcx"})
	if stop != -1 || hold != 2 {
		t.Errorf("Cut: %d, %d; want -1, 2", stop, hold)
	}
}

// TestDecoderLogprobs: each token's logprobs come before its text, and
// only for the tokens whose text is the completion's: none for a token
// whose text starts at a stop string, nor after it.
func TestDecoderLogprobs(t *testing.T) {
	lp := func(v float32) string { return fmt.Sprintf(`,"logprobs":{"logprob":%g,"piece":"p"}`, v) }
	out := `{"id":1,"text":"Once E","token":1` + lp(-1) + `}
{"id":1,"text":"N","token":2` + lp(-2) + `}
{"id":1,"text":"D","token":3` + lp(-3) + `}
{"id":1,"text":"more","token":4` + lp(-4) + `}
{"id":1,"done":true,"completion_tokens":4,"stop":"stop"}
{"id":2,"text":"a","token":1` + lp(-5) + `}
{"id":2,"text":" END","token":2` + lp(-6) + `}
{"id":2,"done":true,"completion_tokens":2,"stop":"stop"}
{"id":3,"text":"x","token":1` + lp(-7) + `}
{"id":3,"text":"y","token":2}
{"id":3,"done":true,"completion_tokens":2,"stop":"length"}
`
	stops := map[int][]string{1: {"END"}, 2: {"a END"}}
	var order []string
	d := Decoder{Stops: stops,
		OnText:     func(id int, s string) { order = append(order, fmt.Sprintf("%d:%q", id, s)) },
		OnLogprobs: func(id int, lp *llama.Logprobs) { order = append(order, fmt.Sprintf("%d:%g", id, lp.Logprob)) },
	}
	if _, err := d.Write([]byte(out)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Request 1: "Once " is text, "E" held; "N" and "D" complete "END", the
	// stop starting in the held text: tokens 2 and 3 give no text. Request
	// 2: the stop "a END" starts in token 1's text, which is cut whole.
	want := `1:-1 1:"Once " 3:-7 3:"x" 3:"y"`
	if got := strings.Join(order, " "); got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
	cs := d.Completions()
	if len(cs) != 3 || len(cs[0].Logprobs) != 1 || len(cs[1].Logprobs) != 0 || len(cs[2].Logprobs) != 1 || cs[2].Completion != "xy" {
		t.Errorf("completions %+v", cs)
	}
}

// TestTokenizerGiven: a missing tokenizer and an extra one are both
// ErrTokenizer, each said its own way (a GGUF file given one was told
// that a llama2.c checkpoint needs one).
func TestTokenizerGiven(t *testing.T) {
	for _, tt := range []struct {
		format store.ModelFormat
		given  bool
		want   string // "" no error
	}{
		{store.ModelLlama2C, true, ""},
		{store.ModelGGUF, false, ""},
		{store.ModelLlama2C, false, "needs its tokenizer file"},
		{store.ModelGGUF, true, "has its own tokenizer"},
	} {
		err := TokenizerGiven(Info{Format: tt.format}, tt.given)
		if (err == nil) != (tt.want == "") || err != nil && (!errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s, tokenizer given %v: %v; want %q", tt.format, tt.given, err, tt.want)
		}
	}
}
