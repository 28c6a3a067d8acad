package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
)

// ModelsOptions are the settings of `infernet models` and its verbs.
type ModelsOptions struct {
	IO IO
	listOptions
	// Name, File and Tokenizer are add's NAME, FILE and --tokenizer; rm's
	// NAME.
	Name, File, Tokenizer string
}

// NewCmdModels returns `infernet models` with its verbs add and rm. runF
// replaces the actions in tests; verb is "list", "add" or "rm".
func NewCmdModels(stdio IO, runF func(ctx context.Context, verb string, o *ModelsOptions) error) *cobra.Command {
	o := &ModelsOptions{IO: stdio}
	run := func(verb string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			switch verb {
			case "add":
				o.Name, o.File = args[0], args[1]
			case "rm":
				o.Name = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), verb, o)
			}
			return runModels(cmd.Context(), verb, o)
		}
	}
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the language models the local node holds by name",
		Long: `List the named models of the local node: each a model's weights (a llama2.c
checkpoint or a GGUF file) and, for a llama2.c checkpoint, its tokenizer, as
blobs the node keeps until the model is removed. infernet generate takes a
model by name. With no node running for --datadir, models, add and rm work
on its database directly (a node started there later serves the models).`,
		Example: `  infernet models add stories ./stories260K.bin --tokenizer ./tok512.bin
  infernet models
  infernet generate stories --prompt "Once upon a time"
  infernet models rm stories`,
		Args: cobra.NoArgs,
		RunE: run("list"),
	}
	o.flags(cmd)
	add := &cobra.Command{
		Use:   "add NAME FILE",
		Short: "Store a model's weights (and tokenizer) in the local node under a name",
		Long: `Store FILE, a llama2.c checkpoint (.bin, with --tokenizer: its tokenizer.bin)
or a GGUF file (of the llama or qwen2 architecture; its vocabulary is inside), in the
local node as blobs, and name it NAME: 1 to 64 letters, digits, '.', '_' or
'-', starting with a letter or digit. The format is told from the file's
first bytes; anything else is refused before it is uploaded.`,
		Args: cobra.ExactArgs(2),
		RunE: run("add"),
	}
	add.Flags().StringVar(&o.Tokenizer, "tokenizer", "", "the llama2.c tokenizer.bin `FILE` of a .bin model")
	o.flags(add)
	rm := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Forget a named model (its blobs then age out like others)",
		Args:    cobra.ExactArgs(1),
		RunE:    run("rm"),
	}
	o.flags(rm)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the models (as infernet models does)",
		Args:  cobra.NoArgs,
		RunE:  run("list"),
	}
	o.flags(list)
	cmd.AddCommand(add, rm, list)
	return cmd
}

func runModels(ctx context.Context, verb string, o *ModelsOptions) error {
	var files modelFiles
	if verb == "add" {
		// Checked here first: a bad name or file is refused before
		// anything is uploaded.
		if err := models.CheckName(o.Name); err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		var err error
		if files, err = checkModelFiles(o.File, o.Tokenizer); err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
	}
	reg, err := o.registry(ctx, verb)
	if err != nil {
		return err
	}
	defer reg.close()
	var ms []store.Model
	switch verb {
	case "list":
		ms, err = reg.list(ctx)
	case "add":
		var m *store.Model
		if m, err = reg.add(ctx, o.Name, files); m != nil {
			ms = []store.Model{*m}
		}
	case "rm":
		var m *store.Model
		if m, err = reg.remove(ctx, o.Name); err == nil {
			ms = []store.Model{*m}
		}
	}
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if o.JSON {
		if verb == "list" {
			return printJSON(o.IO, ms)
		}
		return printJSON(o.IO, ms[0])
	}
	if verb == "rm" {
		fmt.Fprintf(o.IO.Err, "removed model %s\n", o.Name)
		return nil
	}
	tw := tabwriter.NewWriter(o.IO.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFORMAT\tSIZE\tMODEL\tTOKENIZER\tADDED")
	for _, m := range ms {
		tok := "-"
		if !m.Tokenizer.Digest.IsZero() {
			tok = m.Tokenizer.Digest.Short()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Format, humanBytes(m.Model.Size+m.Tokenizer.Size),
			m.Model.Digest.Short(), tok, m.Added.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

// registry is where `infernet models` finds the named models: the node
// that runs for --datadir, through its API (nodeModels), or, when none
// runs, the data directory's database itself (localModels), so that a
// model can be named before any node has started.
type registry interface {
	list(ctx context.Context) ([]store.Model, error)
	add(ctx context.Context, name string, files modelFiles) (*store.Model, error)
	remove(ctx context.Context, name string) (*store.Model, error)
	close()
}

// registry returns the registry of o's data directory for verb. With no
// node running, only add makes the directory's database: listing or
// removing where there is none finds no models, and a --datadir that does
// not exist is taken for a typo, as submit takes it.
func (o *ModelsOptions) registry(ctx context.Context, verb string) (registry, error) {
	c, err := dialNode(o.IO.Err, o.DataDir, o.API)
	if err == nil {
		if _, err = c.Node(ctx); err == nil {
			return nodeModels{c}, nil
		}
	}
	if o.API != "" || !errors.Is(err, api.ErrNoNode) {
		return nil, err
	}
	if _, err := os.Stat(o.DataDir); errors.Is(err, fs.ErrNotExist) && o.DataDir != defaultDataDir() {
		if verb == "add" {
			return nil, fmt.Errorf("--datadir %s: no such directory (a typo? to name models there before a node first starts on it, create it: mkdir -p %s)", o.DataDir, o.DataDir)
		}
		return nil, fmt.Errorf("--datadir %s: no such directory, so no node runs there and no model is named there", o.DataDir)
	}
	if _, err := os.Stat(filepath.Join(o.DataDir, "node.db")); errors.Is(err, fs.ErrNotExist) && verb != "add" {
		return noModels{}, nil
	}
	l, err := api.OpenLocalModels(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("no node runs for %s, and its database: %w", o.DataDir, err)
	}
	return localModels{l}, nil
}

// nodeModels are a running node's models.
type nodeModels struct{ c *api.Client }

func (r nodeModels) list(ctx context.Context) ([]store.Model, error) { return r.c.Models(ctx) }

func (r nodeModels) add(ctx context.Context, name string, files modelFiles) (*store.Model, error) {
	return files.add(ctx, r.c, name)
}

func (r nodeModels) remove(ctx context.Context, name string) (*store.Model, error) {
	return r.c.RemoveModel(ctx, name)
}

func (nodeModels) close() {}

// localModels are the models of a data directory no node runs for.
type localModels struct{ l *api.LocalModels }

func (r localModels) list(context.Context) ([]store.Model, error) {
	ms, err := r.l.List()
	if ms == nil && err == nil {
		ms = []store.Model{} // the JSON is [], as a node's
	}
	return ms, err
}

func (r localModels) add(_ context.Context, name string, files modelFiles) (*store.Model, error) {
	model, tok, err := files.store(r.l.PutFile)
	if err != nil {
		return nil, err
	}
	return r.l.Add(name, model, tok)
}

func (r localModels) remove(_ context.Context, name string) (*store.Model, error) {
	return r.l.Remove(name)
}

func (r localModels) close() { r.l.Close() }

// noModels are those of a data directory with no database yet.
type noModels struct{}

func (noModels) list(context.Context) ([]store.Model, error) { return []store.Model{}, nil }

func (noModels) add(context.Context, string, modelFiles) (*store.Model, error) {
	return nil, errors.New("models: no database to add to")
}

func (noModels) remove(_ context.Context, name string) (*store.Model, error) {
	return nil, fmt.Errorf("model %s: %w", name, models.ErrUnknown)
}

func (noModels) close() {}

// modelFiles are a model file and its tokenizer ("" for none), checked.
type modelFiles struct {
	model, tokenizer string
	info             models.Info
}

// checkModelFiles tells the format of the model file at path and checks
// that a llama2.c checkpoint comes with its tokenizer and a GGUF file
// without one (models.Sniff, models.CheckTokenizer).
func checkModelFiles(path, tokenizer string) (modelFiles, error) {
	mf := modelFiles{model: path, tokenizer: tokenizer}
	info, err := sniffFile(path)
	if err != nil {
		return mf, err
	}
	mf.info = info
	if err := models.TokenizerGiven(info, tokenizer != ""); err != nil {
		return mf, fmt.Errorf("%s is %s: %w", path, info.Format, err)
	}
	if tokenizer != "" {
		f, err := os.Open(tokenizer)
		if err != nil {
			return mf, fmt.Errorf("--tokenizer: %w", err)
		}
		defer f.Close()
		if err := models.CheckTokenizer(f, info.Config.VocabSize); err != nil {
			return mf, fmt.Errorf("--tokenizer %s: %w", tokenizer, err)
		}
	}
	return mf, nil
}

// sniffFile tells the format of the model file at path.
func sniffFile(path string) (models.Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return models.Info{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return models.Info{}, err
	}
	if !st.Mode().IsRegular() {
		return models.Info{}, fmt.Errorf("%s: not a regular file", path)
	}
	info, err := models.Sniff(f, st.Size())
	if err != nil {
		return info, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// upload stores the files in the node as blobs.
func (mf modelFiles) upload(ctx context.Context, c *api.Client) (model, tokenizer store.BlobRef, err error) {
	return mf.store(func(path string) (store.BlobRef, error) { return putFile(ctx, c, path) })
}

// store stores the files as blobs with put: the model's, then the
// tokenizer's if there is one.
func (mf modelFiles) store(put func(path string) (store.BlobRef, error)) (model, tokenizer store.BlobRef, err error) {
	if model, err = put(mf.model); err != nil {
		return model, tokenizer, fmt.Errorf("model: %w", err)
	}
	if mf.tokenizer != "" {
		if tokenizer, err = put(mf.tokenizer); err != nil {
			return model, tokenizer, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return model, tokenizer, nil
}

// add uploads the files and names them.
func (mf modelFiles) add(ctx context.Context, c *api.Client, name string) (*store.Model, error) {
	model, tok, err := mf.upload(ctx, c)
	if err != nil {
		return nil, err
	}
	return c.AddModel(ctx, api.AddModelRequest{Name: name, Model: model, Tokenizer: tok})
}
