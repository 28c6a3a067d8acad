// Command echo is the smallest useful infernet job: it copies stdin to stdout.
// It measures the fixed cost of running a (cached) Go module: start-up of the
// Go runtime, WASI I/O and the sandbox around it.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o echo.wasm .
package main

import (
	"io"
	"os"
)

func main() {
	if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
		os.Stderr.WriteString("echo: " + err.Error() + "\n")
		os.Exit(1)
	}
}
