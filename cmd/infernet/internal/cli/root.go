// Package cli holds infernet's commands. Commands write only to the IO they
// are given; Main alone turns errors into exit codes.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/consensys/gnark/logger"
	"github.com/spf13/cobra"

	"github.com/infernet/infernet/node"
)

// IO is where commands read and write.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Exit codes of infernet. A job's own exit code passes through `infernet run`
// unchanged (codes above 255 become 255).
const (
	ExitOK     = 0
	ExitError  = 1   // usage or other error of infernet itself
	ExitNotRun = 125 // the job could not run or was stopped (invalid module, limit, trap)
	// ExitInterrupted is a command stopped by SIGINT (Ctrl-C) or SIGTERM,
	// 128 + SIGINT as shells count.
	ExitInterrupted = 130
	maxExitCode     = 255
	programName     = "infernet"
)

// exitError carries an exit code out of a command. Err is printed unless nil.
type exitError struct {
	Code int
	Err  error
}

func (e *exitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *exitError) Unwrap() error { return e.Err }

// NewRoot returns the root command with every subcommand.
func NewRoot(stdio IO) *cobra.Command {
	root := &cobra.Command{
		Use:   programName,
		Short: "Rent out and rent idle CPU/GPU cycles, peer to peer, verified",
		Long: `infernet runs WebAssembly jobs in a sandbox with tensor ops on the fastest
local hardware (infernet run), and on a peer-to-peer network of providers
(infernet node, infernet submit) whose results are checked by redundant
execution.`,
		Version:       node.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	root.AddCommand(NewCmdRun(stdio, nil), NewCmdInfo(stdio, nil), NewCmdID(stdio), NewCmdNode(stdio, nil),
		NewCmdSubmit(stdio, nil), NewCmdTrain(stdio, nil), NewCmdDashboard(stdio), NewCmdPeers(stdio), NewCmdJobs(stdio), NewCmdEarnings(stdio), NewCmdSpending(stdio),
		NewCmdCeremony(stdio, nil), NewCmdKeys(stdio), NewCmdModels(stdio, nil), NewCmdGenerate(stdio, nil),
		NewCmdGPUWorker(stdio))
	return root
}

// Main runs infernet with args and returns the process exit code. SIGINT and
// SIGTERM cancel the command's context.
func Main(args []string, stdio IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return execute(ctx, args, stdio)
}

// execute runs infernet with args until ctx, which a signal cancels, ends,
// and returns the process exit code.
func execute(ctx context.Context, args []string, stdio IO) int {
	// gnark logs every circuit compiled and every proof on stdout, where a
	// node prints its peer ID and a job its output: never wanted.
	logger.Disable()
	if os.Getenv("CUDA_DEVICE_ORDER") == "" {
		// CUDA numbers devices fastest first, NVML and nvidia-smi by PCI
		// bus: one order for both, here and in the GPU workers this
		// process starts, so "GPU 0" is one device everywhere.
		os.Setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	}
	root := NewRoot(stdio)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if ctx.Err() != nil {
		// Stopped by a signal: what failed after it is its consequence
		// ("progress stream: interrupt signal received"), not news.
		fmt.Fprintf(stdio.Err, "%s: interrupted\n", programName)
		return ExitInterrupted
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(stdio.Err, "%s: %s\n", programName, oneLine(ee.Err.Error()))
		}
		return ee.Code
	}
	if msg := err.Error(); strings.HasPrefix(msg, "unknown command") {
		// cobra's own words, with its suggestions on lines of their own.
		fmt.Fprintf(stdio.Err, "%s: %s\nRun '%s --help' for the commands.\n", programName, strings.TrimSpace(msg), programName)
		return ExitError
	}
	fmt.Fprintf(stdio.Err, "%s: %s\n", programName, oneLine(err.Error()))
	return ExitError
}

// count is n of noun, plural but for 1: "1 round", "3 rounds".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// oneLine keeps messages to one line on stderr: the lines of several
// errors (errors.Join's) are parted by "; ", so that they do not run
// together.
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
