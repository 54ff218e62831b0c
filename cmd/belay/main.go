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
	"runtime/debug"
	"strings"
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
	msg := err.Error()
	if !strings.HasPrefix(msg, "belay ") && !strings.HasPrefix(msg, "belay:") { // one that names its command ("belay runs: …") has its prefix
		msg = "belay: " + msg
	}
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(code)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "belay",
		Short:         "belay makes LLM agents safe to run unattended: bounded, visible, measured",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.AddCommand(evalCmd(), gateCmd())
	addMore(root)
	withUsage(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		hint := ""
		if typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok {
			if flag, ok := flagAliases[typed]; ok && c.Flags().Lookup(flag) != nil {
				hint = fmt.Sprintf("; did you mean --%s?", flag)
			}
		}
		return fmt.Errorf("%s: %w%s (usage: %s; %s --help for its flags)", c.CommandPath(), err, hint, c.UseLine(), c.CommandPath())
	})
	return root
}

// version is the build's module version, with its VCS revision and time
// when the build recorded them (go build in a git checkout):
// "(devel) 0896581a3b2c 2026-12-01T10:20:00Z".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value[:min(12, len(s.Value))]
		case "vcs.time":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v
}

// flagAliases are flag names other tools use, by the flag belay has for
// the same thing (a newcomer's `belay serve --port 4001`).
var flagAliases = map[string]string{"port": "listen", "addr": "listen", "address": "listen", "bind": "listen",
	"db": "store", "database": "store", "dsn": "store", "file": "config", "cfg": "config"}

// withUsage makes the argument errors of c and its subcommands name the
// command and its usage line ("belay trace show: accepts 1 arg(s),
// received 0 (usage: belay trace show RUN [flags])"), not only the count;
// a command that takes no arguments says so. A command group (trace,
// trace golden, approvals) given an unknown subcommand is a usage error
// naming it, with cobra's suggestions, not its help with exit 0; alone it
// prints its help.
func withUsage(c *cobra.Command) {
	if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		c.Args = func(cmd *cobra.Command, a []string) error {
			if len(a) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", a[0], cmd.CommandPath())
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra sets it on the root only
			}
			if sugg := cmd.SuggestionsFor(a[0]); len(sugg) > 0 {
				msg += "; did you mean " + strings.Join(sugg, " or ") + "?"
			}
			var subs []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() {
					subs = append(subs, sub.Name())
				}
			}
			return fmt.Errorf("%s (its commands: %s)", msg, strings.Join(subs, ", "))
		}
	} else if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			err := args(cmd, a)
			switch {
			case err == nil:
				return nil
			case !cmd.HasSubCommands() && len(a) > 0 && strings.HasPrefix(err.Error(), "unknown command"): // cobra.NoArgs
				return fmt.Errorf("%s takes no arguments; got %q (usage: %s)", cmd.CommandPath(), a[0], cmd.UseLine())
			case len(a) > 0 && strings.HasPrefix(err.Error(), "unknown command"): // runs, with its prune
				var subs []string
				for _, sub := range cmd.Commands() {
					if sub.IsAvailableCommand() {
						subs = append(subs, sub.Name())
					}
				}
				return fmt.Errorf("%s takes no arguments but a command (%s); got %q (usage: %s)", cmd.CommandPath(), strings.Join(subs, ", "), a[0], cmd.UseLine())
			}
			return fmt.Errorf("%s: %w (usage: %s)", cmd.CommandPath(), err, cmd.UseLine())
		}
	}
	for _, sub := range c.Commands() {
		withUsage(sub)
	}
}
