// Command belay is the one binary: the gateway (serve), the simulator (sim),
// evaluation (eval, gate, trace) and operations (runs, approvals, kill).
// Each command only wires flags to packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exit returns an error that makes belay exit with code after printing err
// (a nil err prints nothing).
func exit(code int, err error) error { return &exitError{code: code, err: err} }

// badInput is exit code 2 with err.
func badInput(err error) error { return exit(2, err) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	code := 2 // a usage error from cobra is bad input
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			os.Exit(code)
		}
	}
	fmt.Fprintln(os.Stderr, "belay:", err)
	os.Exit(code)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "belay",
		Short:         "belay makes LLM agents safe to run unattended: bounded, visible, measured",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(evalCmd(), gateCmd())
	addMore(root)
	return root
}
