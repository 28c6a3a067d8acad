// Command docgen writes the tables of README.md and docs/*.md that restate
// the code: each command's flags, from the real flag sets of `infernet`, and
// the defaults and limits, from the exported constants. A table lies between
//
//	<!-- generated: flags COMMAND -->   or   <!-- generated: limits TABLE -->
//	<!-- end generated -->
//
// and is rewritten whole; the prose around it is the author's. It runs as
// `go generate ./...` (the directive is in cmd/infernet/main.go), and its
// test fails when a checked-in document differs from what it writes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/infernet/infernet/cmd/infernet/internal/cli"
)

// docEnv is the environment the flag sets are built in: defaults that come
// from the user's home or environment (--datadir, --cache-dir) are written
// as a reader would find them on their own machine, not as on the one that
// ran the generator.
var docEnv = map[string]string{"HOME": "~", "XDG_CACHE_HOME": "", "INFERNET_DATADIR": ""}

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	for k, v := range docEnv {
		if err := os.Setenv(k, v); err != nil {
			log.Fatal(err)
		}
	}
	changed, err := generate(*root)
	if err != nil {
		log.Fatal(err)
	}
	for _, file := range sortedKeys(changed) {
		if err := os.WriteFile(filepath.Join(*root, file), changed[file], 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// docFiles are the documents, relative to the repository root.
func docFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// generate returns the documents under root whose generated tables are not
// what the code says, with the tables rewritten.
func generate(root string) (map[string][]byte, error) {
	files, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	cmds := commands(cli.NewRoot(cli.IO{}))
	changed := map[string][]byte{}
	for _, file := range files {
		old, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		b, err := rewrite(old, func(kind, arg string) (string, error) {
			switch kind {
			case "flags":
				cmd, ok := cmds[arg]
				if !ok {
					return "", fmt.Errorf("no command %q", arg)
				}
				return flagTable(cmd), nil
			case "limits":
				rows, ok := limitTables[arg]
				if !ok {
					return "", fmt.Errorf("no table of limits %q", arg)
				}
				return limitTable(rows), nil
			}
			return "", fmt.Errorf("unknown kind %q", kind)
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if !bytes.Equal(b, old) {
			changed[file] = b
		}
	}
	return changed, nil
}

var (
	beginRe = regexp.MustCompile(`^<!-- generated: (\w+) ([\w -]+?) -->$`)
	endLine = "<!-- end generated -->"
)

// rewrite replaces the body of each generated block of doc with what table
// makes of the block's kind and argument.
func rewrite(doc []byte, table func(kind, arg string) (string, error)) ([]byte, error) {
	lines := strings.SplitAfter(string(doc), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		m := beginRe.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != endLine {
			if beginRe.MatchString(strings.TrimSpace(lines[end])) {
				return nil, fmt.Errorf("line %d: block %q has no %s before the next", i+1, m[0], endLine)
			}
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: block %q has no %s", i+1, m[0], endLine)
		}
		body, err := table(m[1], m[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		// Blank lines around the table keep it a table of its own in
		// every Markdown renderer, not a part of the comments' HTML.
		out.WriteString("\n" + body + "\n")
		out.WriteString(lines[end])
		i = end
	}
	return []byte(out.String()), nil
}

// commands are root's visible commands by their path under it ("node",
// "ceremony init").
func commands(root *cobra.Command) map[string]*cobra.Command {
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			out[strings.TrimPrefix(sub.CommandPath(), root.Name()+" ")] = sub
			walk(sub)
		}
	}
	walk(root)
	return out
}

// flagTable is a Markdown table of cmd's visible flags in the order
// `--help` lists them: flag, default, meaning.
func flagTable(cmd *cobra.Command) string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n| --- | --- | --- |\n")
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		cell := "`--" + f.Name
		if name != "" {
			cell += " " + name
		}
		cell += "`"
		if f.Shorthand != "" {
			cell = "`-" + f.Shorthand + "`, " + cell
		}
		def := ""
		switch f.DefValue {
		case "", "[]", "false":
		default:
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell, def, cellText(usage))
	})
	return b.String()
}

// cellText makes s safe in a table cell.
func cellText(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
