// Command infernet is the peer-to-peer compute network's single binary: it
// runs jobs locally (infernet run) and, in later versions, nodes and clients.
package main

// The documents' tables of flags, defaults and limits (README.md, docs/*.md).
//go:generate go run ./internal/docgen -root ../..

import (
	"os"

	"github.com/infernet/infernet/cmd/infernet/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
