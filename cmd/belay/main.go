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
	withUsage(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (usage: %s; %s --help for its flags)", c.CommandPath(), err, c.UseLine(), c.CommandPath())
	})
	return root
}

// withUsage makes the argument-count errors of c and its subcommands name
// the command and its usage line ("belay trace show: accepts 1 arg(s),
// received 0 (usage: belay trace show RUN [flags])"), not only the count.
func withUsage(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return fmt.Errorf("%s: %w (usage: %s)", cmd.CommandPath(), err, cmd.UseLine())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		withUsage(sub)
	}
}
