package api

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
)

func TestModels(t *testing.T) {
	_, _, dir := startNode(t)
	c, err := Dial(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(name string) store.BlobRef {
		f, err := os.Open(filepath.Join("..", "..", "testdata", "llama", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		bi, err := c.PutBlobFrom(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return bi
	}
	model, tok := put("stories260K.bin"), put("tok512.bin")
	junk, err := c.PutBlob(ctx, []byte("neither format"))
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := c.Models(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("Models on a new node: %v, %v", ms, err)
	}
	m, err := c.AddModel(ctx, AddModelRequest{Name: "stories", Model: model, Tokenizer: tok})
	if err != nil || m.Name != "stories" || m.Format != store.ModelLlama2C || m.Model != model || m.Tokenizer != tok {
		t.Fatalf("AddModel: %+v, %v", m, err)
	}
	for _, tc := range []struct {
		req  AddModelRequest
		want string
	}{
		{AddModelRequest{Name: "stories", Model: model, Tokenizer: tok}, "409"},
		{AddModelRequest{Name: "a/b", Model: model, Tokenizer: tok}, "400"},
		{AddModelRequest{Name: "junk", Model: junk}, "not a model the runner reads"},
		{AddModelRequest{Name: "notok", Model: model}, "tokenizer"},
		{AddModelRequest{Name: "absent", Model: store.BlobRef{Digest: blob.Sum([]byte("x")), Size: 1}}, "400"},
	} {
		if _, err := c.AddModel(ctx, tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddModel(%s): %v; want %q", tc.req.Name, err, tc.want)
		}
	}
	if ms, err := c.Models(ctx); err != nil || len(ms) != 1 || ms[0].Name != "stories" || ms[0].Added.IsZero() {
		t.Fatalf("Models: %+v, %v", ms, err)
	}
	if got, err := c.Model(ctx, "stories"); err != nil || got.Model != model {
		t.Fatalf("Model: %+v, %v", got, err)
	}
	for _, name := range []string{"nope", "a%2Fb"} {
		if _, err := c.Model(ctx, name); name == "nope" && !errors.Is(err, models.ErrUnknown) || err == nil {
			t.Errorf("Model(%s): %v", name, err)
		}
	}
	if got, err := c.RemoveModel(ctx, "stories"); err != nil || got.Name != "stories" {
		t.Fatalf("RemoveModel: %+v, %v", got, err)
	}
	if _, err := c.RemoveModel(ctx, "stories"); !errors.Is(err, models.ErrUnknown) {
		t.Fatalf("RemoveModel again: %v", err)
	}

	bi, err := c.Runner(ctx)
	if len(llama.Runner()) == 0 {
		if err == nil || !strings.Contains(err.Error(), "501") {
			t.Fatalf("Runner in a build without one: %+v, %v", bi, err)
		}
		return
	}
	if err != nil || bi.Size != int64(len(llama.Runner())) {
		t.Fatalf("Runner: %+v, %v", bi, err)
	}
	if b, err := c.Blob(ctx, bi.Digest, bi.Size); err != nil || len(b) != int(bi.Size) {
		t.Fatalf("the runner's blob: %v", err)
	}
}
