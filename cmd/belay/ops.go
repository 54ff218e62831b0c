package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/internal/suggest"
	belayrun "github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/open"
)

// defaultStore is the --store default: the embedded store in the working
// directory, where `belay serve` puts it without a config file.
const defaultStore = "sqlite://belay.db"

// opsCommands returns the operations commands: runs, trace, approvals,
// kill and unkill. Each reads or writes the store named by --store.
// Kill flags and approval decisions written here reach running gateways
// through the store (kill-flag polling, or LISTEN/NOTIFY on PostgreSQL).
func opsCommands() []*cobra.Command {
	cmds := []*cobra.Command{runsCmd(), traceCmd(), approvalsCmd(), killCmd(), unkillCmd(), budgetsCmd()}
	for _, c := range cmds {
		c.PersistentFlags().String("store", defaultStore, "store URL: sqlite://PATH or postgres://USER@HOST/DB")
		if c.Flags().Lookup("config") == nil { // kill, unkill and budgets have their own
			c.PersistentFlags().String("config", "", "the gateway's YAML config, for its store when --store is not given")
		}
	}
	return cmds
}

// withStore opens the store named by --store (see store/open.Open for the
// URL forms), or by the config file --config names when --store is not
// given, runs fn and closes it. An unsupported scheme is bad input
// (exit 2); an SQLite file that does not exist is an error (exit 1) rather
// than a new empty store, so that a kill or an approval is never written
// where no gateway reads it. Other errors from fn are exit 1.
func withStore(cmd *cobra.Command, fn func(ctx context.Context, st store.Store) error) error {
	url, named, err := storeOf(cmd)
	if err != nil {
		return err
	}
	if path, ok := open.SQLitePath(url); ok {
		if _, err := os.Stat(path); err != nil {
			hint := "pass --store with the store belay serve uses, or start belay serve first"
			switch {
			case cmd.Flags().Changed("store"):
				hint = "check the path given to --store: belay serve creates the file when it starts"
			case strings.HasPrefix(named, "store ") && !filepath.IsAbs(path):
				hint = "the store of --config, a relative path, is taken from this working directory as belay serve takes it " +
					"from its own: run this from belay serve's folder, or pass --store with the file's absolute path"
			case strings.HasPrefix(named, "store "):
				hint = "the store of --config: belay serve --config creates it when it starts"
			}
			return exit(1, fmt.Errorf("store %s: %w (%s)", open.Redacted(url), err, hint))
		}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := open.Open(ctx, url)
	switch {
	case errors.Is(err, open.ErrScheme), errors.Is(err, open.ErrURL):
		return badInput(fmt.Errorf("%s: %w", named, err))
	case err != nil:
		return exit(1, fmt.Errorf("open store %s: %w", open.Redacted(url), err))
	}
	err = fn(ctx, st)
	if cerr := st.Close(); err == nil && cerr != nil {
		err = cerr
	}
	var ee *exitError
	if err != nil && !errors.As(err, &ee) {
		err = exit(1, err) // a store failure, not bad input
	}
	return err
}

// goldenNotFound is notFound for golden name, naming the store it was
// looked for in: in CI the usual cause is a job given another store than
// the one the goldens were saved to.
func goldenNotFound(cmd *cobra.Command, err error, name string) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	where := ""
	if url, _, serr := storeOf(cmd); serr == nil {
		where = " in store " + open.Redacted(url) + " (--store names the store the goldens were saved to)"
	}
	return exit(1, fmt.Errorf("golden %s not found%s", name, where))
}

// notFound turns store.ErrNotFound into exit 1 with "WHAT ID not found";
// for a run it adds that a call refused before it counted in a run
// leaves none (an Agents SDK test looked for the run of a call refused
// for its unknown model), and, for an id without gateway.RunKeySep, that a
// gateway with tenants stores a client's run as TENANT~ID.
func notFound(err error, what, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		hint := ""
		if what == "run" {
			hint = " (a call refused before it counted in a run, for its key, body or model, leaves none)" +
				(&gateway.NoRunError{ID: id}).Hint()
		}
		return exit(1, fmt.Errorf("%s %s not found%s", what, id, hint))
	}
	return err
}

// storeOf returns the store URL cmd reads: --store, else the store of
// --config's gateway config (as belay serve --config uses), else the
// default; named says where it came from, for messages.
func storeOf(cmd *cobra.Command) (url, named string, err error) {
	url, err = cmd.Flags().GetString("store")
	if err != nil {
		return "", "", badInput(err)
	}
	named = "--store " + open.Redacted(url)
	if f := cmd.Flags().Lookup("config"); f != nil && f.Value.String() != "" && !cmd.Flags().Changed("store") {
		cfg, err := config.LoadWith(f.Value.String(), unresolved)
		if err != nil {
			return "", "", badInput(err)
		}
		url = cfg.Store
		named = fmt.Sprintf("store %s (of --config %s)", open.Redacted(url), f.Value.String())
	}
	return url, named, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func runsCmd() *cobra.Command {
	var (
		f      store.RunFilter
		status string
		since  string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first: status, stop reason, turns, tool calls, tokens, cost, duration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch s := store.RunStatus(status); s {
			case "", store.RunRunning, store.RunSucceeded, store.RunFailed, store.RunStopped:
				f.Status = s
			default:
				return badInput(fmt.Errorf("--status %q: want running, succeeded, failed or stopped", status))
			}
			if f.Limit < 1 {
				return badInput(fmt.Errorf("--limit %d: must be ≥ 1", f.Limit))
			}
			if since != "" {
				age, err := config.ParseAge(since)
				if err != nil {
					return badInput(fmt.Errorf("--since %q: %w", since, err))
				}
				if age <= 0 {
					return badInput(fmt.Errorf("--since %s: want a time > 0 (leave --since out for every run)", since))
				}
				f.Since = time.Now().Add(-age)
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				want := f.Limit
				f.Limit++ // one more: whether runs were left out
				runs, err := st.ListRuns(ctx, f)
				if err != nil {
					return err
				}
				if len(runs) > want {
					runs = runs[:want]
					fmt.Fprintf(cmd.ErrOrStderr(), "(older runs not shown; --limit N shows more)\n")
				}
				if len(runs) == 0 && (f.Agent != "" || f.Tenant != "") {
					// A name that matches nothing is most often a slip
					// (newcomer finding: --agent Support for support).
					noteNames(ctx, cmd.ErrOrStderr(), st, f)
				}
				if !cmd.Flags().Changed("store") {
					// Which store was read, when the command line does
					// not say (a newcomer read another gateway's runs
					// from the default ./belay.db, its --config having
					// no store: line).
					_, named, _ := storeOf(cmd)
					fmt.Fprintf(cmd.ErrOrStderr(), "(runs of %s)\n", strings.TrimPrefix(named, "--"))
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNilSlice(runs))
				}
				return writeRuns(cmd.OutOrStdout(), runs, time.Now())
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.Tenant, "tenant", "", "only this tenant's runs")
	fl.StringVar(&f.Agent, "agent", "", "only this agent's runs (the X-Belay-Agent header, the suite's agent name)")
	fl.StringVar(&status, "status", "", "only runs in this status: running, succeeded, failed, stopped")
	fl.IntVar(&f.Limit, "limit", 50, "at most this many runs")
	fl.StringVar(&since, "since", "", "only runs started within this long ago: a duration (90m, 2h) or days (7d)")
	fl.BoolVar(&asJSON, "json", false, "print the run records as JSON")
	c.AddCommand(pruneCmd())
	return c
}

// minPruneAge is the youngest a run pruned may be: a run's last writes
// (its spans, a settle retried in the background) may follow its end.
const minPruneAge = time.Hour

func pruneCmd() *cobra.Command {
	var older string
	var batch int
	c := &cobra.Command{
		Use:   "prune --older-than AGE",
		Short: "Delete the runs that ended more than AGE ago, with their spans and ledger scopes",
		Long: `prune deletes the runs that ended more than AGE ago (a duration: 720h, or days: 30d), with
their spans and their own ledger scopes (cost, turns, tokens), in transactions of --batch runs,
oldest first. Running runs, tenants' budgets, approvals, kill flags, idempotency keys and golden
traces (which keep their own copy) are kept. A gateway may serve from the store meanwhile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			age, err := config.ParseAge(older)
			if err != nil {
				return badInput(fmt.Errorf("--older-than %q: %w", older, err))
			}
			if age < minPruneAge {
				return badInput(fmt.Errorf("--older-than %s: want at least %s (a run's last writes may follow its end)", older,
					strings.TrimSuffix(minPruneAge.String(), "0m0s")))
			}
			if batch < 1 {
				return badInput(fmt.Errorf("--batch %d: must be ≥ 1", batch))
			}
			before := time.Now().Add(-age)
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				p, ok := st.(store.RunPruner)
				if !ok {
					return exit(1, errors.New("this store cannot prune runs"))
				}
				total, err := belayrun.Prune(ctx, p, before, batch)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pruned %d runs that ended before %s\n", total, before.Local().Format(time.DateTime))
				return nil
			})
		},
	}
	c.Flags().StringVar(&older, "older-than", "", "delete the runs that ended more than this long ago: a duration (720h) or days (30d); at least 1h")
	c.Flags().IntVar(&batch, "batch", 1000, "runs deleted per transaction")
	_ = c.MarkFlagRequired("older-than")
	return c
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeRuns prints runs as a table; a running run's duration is up to now.
func writeRuns(w io.Writer, runs []store.Run, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tAGENT\tSTATUS\tREASON\tTURNS\tTOOLS\tTOKENS IN/OUT\tCOST\tSTARTED\tDURATION")
	for _, r := range runs {
		end := r.Ended
		if end.IsZero() {
			end = now
		}
		cost := r.Cost.String()
		if r.CostEstimated { // part of the usage was estimated (a cut answer, a lost attempt), as trace show marks it
			cost += " (estimated)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\t%s\t%s\n",
			r.ID, orDash(r.Tenant), orDash(r.Agent), r.Status, orDash(runReason(r)), r.Turns, r.ToolCalls,
			r.InputTokens, r.OutputTokens, cost, r.Started.Local().Format(time.DateTime), shortDuration(end.Sub(r.Started)))
	}
	if len(runs) == 0 {
		fmt.Fprintln(tw, "(no runs)")
	}
	return tw.Flush()
}

// runReason is why a run ended other than succeeding: a stopped run's
// stop reason, or a failed run's failure reason, read from its recorded
// error when it names one this build knows ("transient: connection_error
// from d: ..." gives connection_error). An error of another form (a
// command agent's "agent exited non-zero; its stderr ended: ...", or the
// text a client ended its run with, "fatal: not a git repository") gives
// its first clause, up to the first ";" or line break, with control and
// bidirectional-formatting characters dropped (it is a table cell on an
// operator's terminal) and at most runReasonMax runes (the last one "…"
// when cut): --json has it whole.
func runReason(r store.Run) string {
	if r.StopReason != "" || r.Error == "" {
		return r.StopReason
	}
	if _, reason, _, ok := failure.ParseText(r.Error); ok && reason.Known() {
		return string(reason)
	}
	head, _, _ := strings.Cut(r.Error, ";")
	head, _, _ = strings.Cut(head, "\n")
	head = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, head)
	head = strings.Join(strings.Fields(head), " ")
	if head == "" {
		return "error"
	}
	if rs := []rune(head); len(rs) > runReasonMax {
		head = string(rs[:runReasonMax-1]) + "…"
	}
	return head
}

// runReasonMax is the width, in runes, of a reason belay runs shows from
// an error that names no failure reason.
const runReasonMax = 40

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortDuration shortens a duration for a table: ms below a second, then 0.1 s.
func shortDuration(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

func approvalsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "approvals",
		Short: "List pending approvals of irreversible tool calls, and approve or deny them",
	}
	var all, asJSON bool
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List pending approvals, oldest first (--all: every state)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				state := store.ApprovalPending
				if all {
					state = ""
				}
				as, err := st.ListApprovals(ctx, state)
				if err != nil {
					return err
				}
				if limit > 0 && len(as) > limit { // the newest, still oldest first
					fmt.Fprintf(cmd.ErrOrStderr(), "(%d older approvals not shown; --limit 0 shows all)\n", len(as)-limit)
					as = as[len(as)-limit:]
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNilSlice(as))
				}
				return writeApprovals(cmd.OutOrStdout(), as)
			})
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include decided and expired approvals")
	list.Flags().IntVar(&limit, "limit", 100, "show at most this many, the newest (0: all)")
	list.Flags().BoolVar(&asJSON, "json", false, "print the approvals as JSON")
	c.AddCommand(list, decideCmd("approve", store.ApprovalApproved), decideCmd("deny", store.ApprovalDenied))
	return c
}

func decideCmd(verb string, state store.ApprovalState) *cobra.Command {
	var by, note string
	c := &cobra.Command{
		Use:   verb + " ID",
		Short: fmt.Sprintf("Mark a pending approval %s; a decided one is an error (exit 1)", state),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				a, err := st.DecideApproval(ctx, id, state, by, note, time.Now())
				switch {
				case errors.Is(err, store.ErrConflict):
					return exit(1, alreadyDecided(ctx, st, id, err))
				case err != nil:
					return notFound(err, "approval", id)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "approval %s %s by %s: %s on run %s\n", a.ID, a.State, a.DecidedBy, a.Tool, a.RunID)
				return nil
			})
		},
	}
	c.Flags().StringVar(&by, "by", currentUser(), "who decides (recorded with the decision)")
	c.Flags().StringVar(&note, "note", "", "a note recorded with the decision")
	return c
}

// alreadyDecided explains a conflicting decision with the stored one.
func alreadyDecided(ctx context.Context, st store.Store, id string, cause error) error {
	a, err := st.GetApproval(ctx, id)
	if err != nil {
		return cause
	}
	msg := fmt.Sprintf("approval %s is already %s", id, a.State)
	if a.DecidedBy != "" {
		msg += " by " + a.DecidedBy
	}
	if !a.Decided.IsZero() {
		msg += " at " + a.Decided.Local().Format(time.DateTime)
	}
	return conflictError(msg)
}

// conflictError says what conflicted in its own words and matches
// store.ErrConflict (errors.Is), without the store's words after them.
type conflictError string

func (e conflictError) Error() string { return string(e) }
func (e conflictError) Unwrap() error { return store.ErrConflict }

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" { // USER is unset under some shells and containers
		return u.Username
	}
	return "cli"
}

func writeApprovals(w io.Writer, as []store.Approval) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRUN\tTENANT\tTOOL\tSTATE\tREQUESTED\tDECIDED BY\tARGUMENTS")
	for _, a := range as {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.RunID, orDash(a.Tenant), a.Tool, a.State,
			a.Requested.Local().Format(time.DateTime), orDash(a.DecidedBy), clipRunes(string(a.Arguments), 60))
	}
	if len(as) == 0 {
		fmt.Fprintln(tw, "(no approvals)")
	}
	return tw.Flush()
}

// clip shortens s to at most n runes, marking a cut with "…".
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var killTargets = []store.KillTarget{store.KillRun, store.KillTenant, store.KillTool, store.KillModel, store.KillDeployment, store.KillAll}

// killArgs parses "TARGET NAME" or "all".
func killArgs(args []string) (store.KillTarget, string, error) {
	t := store.KillTarget(args[0])
	switch {
	case t == store.KillAll && len(args) == 1:
		return t, "", nil
	case t == store.KillAll:
		return "", "", fmt.Errorf("kill target all takes no name")
	case !slices.Contains(killTargets, t):
		return "", "", fmt.Errorf("kill target %q: want run, tenant, tool, model, deployment or all", args[0])
	case len(args) != 2 || args[1] == "":
		return "", "", fmt.Errorf("kill target %s needs one NAME", t)
	}
	return t, args[1], nil
}

func killCmd() *cobra.Command {
	var reason, by, file string
	var force bool
	c := &cobra.Command{
		Use:   "kill [run|tenant|tool|model|deployment NAME | all]",
		Short: "Set a kill flag: running gateways stop the matching runs and refuse new work; no arguments lists the flags",
		Long: `kill sets a kill flag in the store; gateways sharing the store pick it up (they poll for flags,
or PostgreSQL notifies them).

A model, deployment or tenant flag must name one the gateway's config serves: a model alias or a
provider model name (model), a deployment name (deployment), a tenant's name (tenant; "default"
when the config has no tenants). The names are read from --config FILE (its env:
secrets are not needed), or, without it, from the default config of belay serve; another name is
refused, listing those served, unless --force is given (a gateway with another config, or a Go
agent, sharing the store may serve it). A tool flag near a name in the config's tools (irreversible,
read_only) that matches none of them is refused as a likely typo, unless --force is given; a tool
the config does not name at all is taken. A run flag must name a run in the store, unless --force is
given (a run belay serve named itself is stored when its call ends). With --config and no --store,
the store is the config's.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := killConfig(cmd, file)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return withStore(cmd, func(ctx context.Context, st store.Store) error {
					return listKills(ctx, st, cmd.OutOrStdout())
				})
			}
			target, name, err := killArgs(args)
			if err != nil {
				return badInput(err)
			}
			if err := gateway.CheckKill(cfg, target, name); err != nil && !force {
				hint := "pass --force"
				if file == "" {
					hint = "pass the gateway's config (--config FILE), or --force"
				}
				return badInput(fmt.Errorf("%w; %s to set the flag anyway (a gateway with another config, or a Go agent, sharing the store may serve it)", err, hint))
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				if target == store.KillRun && !force {
					err := gateway.CheckKillRun(ctx, st, name)
					if nr, ok := errors.AsType[*gateway.NoRunError](err); ok {
						url, _ := cmd.Flags().GetString("store")
						return badInput(fmt.Errorf("%w %s%s; pass --force to set the flag anyway (a run belay serve named itself is stored when its call ends)", err, url, nr.Hint()))
					}
					if err != nil {
						return err
					}
				}
				k := store.Kill{Target: target, Name: name, Reason: reason, By: by, At: time.Now()}
				if err := st.SetKill(ctx, k); err != nil {
					return err
				}
				note := ""
				if target == store.KillRun {
					if r, err := st.GetRun(ctx, name); err == nil && r.Status != store.RunRunning {
						note = fmt.Sprintf(" (it had already ended, %s: the flag stops nothing of it now; belay unkill run %s clears it)", r.Status, name)
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "killed %s%s\n", killName(target, name), note)
				return nil
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why (recorded with the flag and in the runs it stops)")
	c.Flags().StringVar(&by, "by", currentUser(), "who sets the flag")
	c.Flags().StringVar(&file, "config", "", "the gateway's YAML config: the models and deployments a flag may name, and the store (default: those of belay serve without one)")
	c.Flags().BoolVar(&force, "force", false, "set a model, deployment or tenant flag on a name the config does not serve, a tool flag on a likely typo, or a run flag on a run the store does not hold")
	return c
}

func unkillCmd() *cobra.Command {
	var file string
	var ignoreAbsent bool
	c := &cobra.Command{
		Use:   "unkill run|tenant|tool|model|deployment NAME | all",
		Short: "Clear a kill flag, whatever its name; a flag that is not set is an error (exit 2) unless --ignore-absent",
		Long: `Clear a kill flag, whatever its name. "unkill all" clears the flag "belay kill all" set, not every flag.
A flag that is not set (a misspelt name, the wrong target) is an error naming the flags that are set, so that a
typo does not pass for a cleared flag; --ignore-absent makes it a no-op (exit 0).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, name, err := killArgs(args)
			if err != nil {
				return badInput(err)
			}
			if _, err := killConfig(cmd, file); err != nil {
				return err
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				set, err := st.ListKills(ctx)
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(set, func(k store.Kill) bool { return k.Target == target && k.Name == name }) {
					if ignoreAbsent {
						fmt.Fprintf(cmd.OutOrStdout(), "no kill %s was set\n", quotedKill(target, name))
						return nil
					}
					return badInput(fmt.Errorf("no kill %s is set; %s (--ignore-absent to accept that)", quotedKill(target, name), flagsSet(set)))
				}
				if err := st.ClearKill(ctx, target, name); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cleared kill %s\n", killName(target, name))
				return nil
			})
		},
	}
	c.Flags().StringVar(&file, "config", "", "the gateway's YAML config, for its store when --store is not given")
	c.Flags().BoolVar(&ignoreAbsent, "ignore-absent", false, "a flag that is not set is not an error")
	return c
}

// flagsSet names the kill flags in ks for a message: "the flags set: tool
// "issue_refund", all" or "no kill flag is set". Names are quoted: the
// difference from a misspelt name may be a blank, a name may hold ", ",
// and one set by a Go agent or the admin API may hold control characters
// (an adversarial review).
func flagsSet(ks []store.Kill) string {
	if len(ks) == 0 {
		return "no kill flag is set"
	}
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = quotedKill(k.Target, k.Name)
	}
	return "the flags set: " + strings.Join(names, ", ")
}

// quotedKill is killName with the name quoted (Go syntax).
func quotedKill(t store.KillTarget, name string) string {
	if t == store.KillAll {
		return "all"
	}
	return fmt.Sprintf("%s %q", t, name)
}

// killConfig returns the config a kill is checked against: the one file
// names, or the default config (that of belay serve without one). The
// file's env: secrets are not looked up (a kill needs names, not
// credentials). Unless --store is given, the store becomes the file's, as
// for belay serve --config. A file that cannot be read or is invalid is
// bad input (exit 2).
func killConfig(cmd *cobra.Command, file string) (*config.Config, error) {
	if file == "" {
		return config.Default(), nil
	}
	cfg, err := config.LoadWith(file, unresolved)
	if err != nil {
		return nil, badInput(err)
	}
	if !cmd.Flags().Changed("store") {
		if err := cmd.Flags().Set("store", cfg.Store); err != nil {
			return nil, badInput(err)
		}
	}
	return cfg, nil
}

// noteNames writes, for a --tenant or --agent that matched no run, the
// names the newest runs (of the status and time filters) have, with the
// nearest as a "did you mean".
func noteNames(ctx context.Context, w io.Writer, st store.Store, f store.RunFilter) {
	g := f
	g.Tenant, g.Agent, g.Limit = "", "", 500
	runs, err := st.ListRuns(ctx, g)
	if err != nil {
		return
	}
	for _, c := range []struct {
		flag, name string
		of         func(store.Run) string
	}{
		{"--tenant", f.Tenant, func(r store.Run) string { return r.Tenant }},
		{"--agent", f.Agent, func(r store.Run) string { return r.Agent }},
	} {
		if c.name == "" {
			continue
		}
		var names []string
		for _, r := range runs {
			if n := c.of(r); n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if len(names) == 0 || slices.Contains(names, c.name) {
			continue // none to show, or the name is right and another filter left nothing
		}
		hint := ""
		if near := suggest.Closest(c.name, names); near != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		slices.Sort(names)
		if len(names) > 10 {
			names = append(names[:10], "…")
		}
		fmt.Fprintf(w, "(no run has %s %q%s; the newest runs have %s)\n", c.flag, c.name, hint, strings.Join(names, ", "))
	}
}

// budgetsCmd shows each tenant's spend in its current budget period.
func budgetsCmd() *cobra.Command {
	var file string
	var asJSON bool
	c := &cobra.Command{
		Use:   "budgets",
		Short: "Each tenant's spend in its current budget period: spent, held by calls in flight, limit, left, when it ends",
		Long: `budgets reads the tenants and their budgets from --config FILE (its env: secrets are not needed;
without it, the default config of belay serve: one tenant, "default", without a budget) and their
spend from the store's ledger, which every gateway sharing the store writes to. Amounts are exact
decimal dollars; "none" is no limit. With --config and no --store, the store is the config's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := killConfig(cmd, file)
			if err != nil {
				return err
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				bs, err := gateway.Budgets(ctx, cfg, st, time.Now())
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), bs)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TENANT\tPERIOD\tSPENT\tHELD\tLIMIT\tLEFT\tENDS")
				for _, b := range bs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Tenant, b.Period, dollars(b.SpentUSD), dollars(b.HeldUSD),
						dollars(b.LimitUSD), dollars(b.LeftUSD), b.Ends.Format(time.RFC3339))
				}
				return tw.Flush()
			})
		},
	}
	c.Flags().StringVar(&file, "config", "", "the gateway's YAML config: its tenants and their budgets, and the store (default: those of belay serve without one)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the budgets as JSON")
	return c
}

// dollars shows a decimal amount as "$1.20" ("none" as it is).
func dollars(d string) string {
	if d == "none" {
		return d
	}
	return "$" + d
}

// unresolved stands for the environment when a config is read for its
// names: every env:NAME resolves to a stand-in, set and distinct per NAME.
func unresolved(name string) (string, bool) { return "env:" + name, true }

func killName(t store.KillTarget, name string) string {
	if t == store.KillAll {
		return "all"
	}
	return string(t) + " " + name
}

func listKills(ctx context.Context, st store.Store, w io.Writer) error {
	ks, err := st.ListKills(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tNAME\tREASON\tBY\tAT")
	for _, k := range ks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Target, orDash(k.Name), orDash(k.Reason), orDash(k.By), k.At.Local().Format(time.DateTime))
	}
	if len(ks) == 0 {
		fmt.Fprintln(tw, "(no kill flags)")
	}
	return tw.Flush()
}
