package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/gate"
	"github.com/belay-run/belay/eval/harness"
	"github.com/belay-run/belay/eval/stats"
	refund "github.com/belay-run/belay/examples/refund-agent/agent"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/internal/shellword"
	"github.com/belay-run/belay/store/open"
)

func init() {
	// The example agent, runnable in-process as `agent: {go: refund-agent}`.
	eval.RegisterAgent("refund-agent", refund.NewEvalAgent())
}

func evalCmd() *cobra.Command {
	var (
		runs                      int
		seed                      int64
		storeURL                  string
		jsonOut, junit, markdown  string
		detect                    float64
		baseline                  string
		runDetected, quiet, noBar bool
	)
	c := &cobra.Command{
		Use:   "eval SUITE",
		Short: "Run a scenario suite many times through belay and report pass rates with 95% Wilson intervals",
		Long: `eval runs every scenario of SUITE (a YAML file) the configured number of times through belay,
and reports per scenario and overall: pass rate with its 95% Wilson interval, pass^k, latency
percentiles, cost per successful run, tokens, failures by reason, turn-cap stops, unsafe actions and
golden-trace mismatches. Traces go to the store (--store); look at one with 'belay trace show RUN'.

Exit status: 0 when the suite ran (whatever the pass rates), 1 when the suite's min_pass_rate is not
met (the overall interval's upper bound is below it), 2 on bad input (the suite, a flag, the store)
or when a report file (--json, --junit, --markdown) cannot be written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := checkEvalFlags(cmd, runs, detect); err != nil {
				return badInput(err)
			}
			for _, f := range []struct{ flag, path string }{{"--json", jsonOut}, {"--junit", junit}, {"--markdown", markdown}} {
				if err := writableDir(f.path); err != nil {
					return badInput(fmt.Errorf("cannot write the %s report: %w", f.flag, err))
				}
			}
			s, err := eval.LoadSuite(args[0])
			if err != nil {
				return badInput(err)
			}
			out := cmd.OutOrStdout()
			opt := eval.Options{Runs: runs}
			if cmd.Flags().Changed("seed") {
				opt.Seed = &seed
			}
			if cmd.Flags().Changed("detect") {
				dw := out
				if quiet && runDetected { // the table is the answer only when nothing runs
					dw = io.Discard
				}
				n, err := detectRuns(dw, s, baseline, detect)
				if err != nil {
					return badInput(err)
				}
				if !runDetected {
					return nil
				}
				if n == 0 {
					return badInput(fmt.Errorf("--run-detected: no scenario of %s can drop by %v", baseline, detect))
				}
				if n > eval.MaxRuns {
					return badInput(fmt.Errorf("--run-detected: detecting a drop of %v takes %d runs per scenario, more than belay eval runs (%d); detect a larger drop", detect, n, eval.MaxRuns))
				}
				opt.Runs = n
			}
			if !quiet {
				for _, n := range harness.TimeoutNotes(s) {
					fmt.Fprintf(cmd.ErrOrStderr(), "belay eval: note: %s\n", n)
				}
			}
			if w := cmd.ErrOrStderr(); !noBar && !quiet && isTerminal(w) {
				opt.Progress = w // a bar redrawn in a log or a CI job's output is noise
			}
			st, err := open.Open(ctx, storeURL)
			if err != nil {
				return badInput(err)
			}
			defer st.Close()
			rep, err := eval.Run(ctx, s, harness.Factory(st), opt)
			if errors.Is(err, eval.ErrBadSuite) {
				return badInput(err)
			}
			if err != nil {
				return exit(1, err)
			}
			if !quiet {
				if err := rep.WriteText(out); err != nil {
					return err
				}
				if gateway.InMemoryStore(storeURL) {
					fmt.Fprintf(out, "\ntraces: none kept (--store %s holds them in memory until belay eval exits)\n", storeURL)
				} else {
					fmt.Fprintf(out, "\ntraces: %s — belay trace show RUN_ID --store %s\n", open.Redacted(storeURL), shellword.Quote(open.Redacted(storeURL)))
				}
			}
			for _, w := range []struct {
				flag, path string
				write      func(io.Writer) error
			}{{"--json", jsonOut, rep.WriteJSON}, {"--junit", junit, rep.WriteJUnit}, {"--markdown", markdown, rep.WriteMarkdown}} {
				if w.path == "" {
					continue
				}
				if err := writeFile(w.path, w.write); err != nil {
					// Not a verdict on the suite: CI must not read it as
					// "min_pass_rate not met".
					return badInput(fmt.Errorf("cannot write the %s report: %w", w.flag, err))
				}
			}
			if !rep.MinPassRateMet() {
				return exit(1, fmt.Errorf("min_pass_rate %.3f not met: overall pass rate %.3f, 95%% interval [%.3f, %.3f]",
					*rep.MinPassRate, rep.Overall.PassRate, rep.Overall.Wilson.Low, rep.Overall.Wilson.High))
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&runs, "runs", 0, fmt.Sprintf("runs per scenario, 1 to %d (overrides the suite)", eval.MaxRuns))
	f.Int64Var(&seed, "seed", 0, "seed (overrides the suite)")
	f.StringVar(&storeURL, "store", "sqlite://belay.db", "store for runs and traces: sqlite://PATH (or a bare file path), postgres://URL, or memory:// (nothing kept after the run)")
	f.StringVar(&jsonOut, "json", "", "write the JSON report (the baseline format for belay gate) to FILE")
	f.StringVar(&junit, "junit", "", "write JUnit XML to FILE")
	f.StringVar(&markdown, "markdown", "", "write a Markdown summary to FILE")
	f.Float64Var(&detect, "detect", 0, "print the runs per scenario needed to detect a drop of this size, in (0, 1) (e.g. 0.05), with 80% power at the level belay gate first tests a scenario at (its share of one-sided α=0.05), and exit")
	f.StringVar(&baseline, "baseline", "", "with --detect: the baseline report whose pass rates the drop is measured from")
	f.BoolVar(&runDetected, "run-detected", false, "with --detect: run the suite with that many runs per scenario")
	f.BoolVar(&quiet, "quiet", false, "print nothing but errors")
	f.BoolVar(&noBar, "no-progress", false, "do not show the progress bar (it is shown only when stderr is a terminal)")
	return c
}

// checkEvalFlags refuses flag values that would be silently ignored or
// mean nothing: --runs outside [1, eval.MaxRuns], a --detect drop outside (0, 1) (NaN
// included), --run-detected without --detect.
func checkEvalFlags(cmd *cobra.Command, runs int, detect float64) error {
	fl := cmd.Flags()
	if fl.Changed("runs") && (runs < 1 || runs > eval.MaxRuns) {
		return fmt.Errorf("--runs %d: must be between 1 and %d (runs per scenario)", runs, eval.MaxRuns)
	}
	if fl.Changed("detect") && !(detect > 0 && detect < 1) {
		return fmt.Errorf("--detect %v: must be a drop in pass rate between 0 and 1, e.g. 0.05", detect)
	}
	if fl.Changed("run-detected") && !fl.Changed("detect") {
		return errors.New("--run-detected needs --detect DROP")
	}
	if fl.Changed("baseline") && !fl.Changed("detect") {
		return errors.New("--baseline is read by --detect DROP only; belay gate BASELINE CANDIDATE compares two reports")
	}
	return nil
}

// writableDir checks, before a suite runs, that a report can be written
// at path ("" is no report): its folder exists and takes a new file (the
// report is written through a temporary file beside it). A long suite
// that found out at its end would be lost work.
func writableDir(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a folder; want a file name in it", path)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".belay-write-check-*")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: folder %s does not exist", path, dir)
		}
		return fmt.Errorf("%s: cannot create a file in folder %s: %w", path, dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// detectRuns prints, per scenario, the runs needed to detect a drop of
// size drop from the baseline's pass rate, and returns the largest.
func detectRuns(w io.Writer, s *eval.Suite, baseline string, drop float64) (int, error) {
	if baseline == "" {
		return 0, errors.New("--detect needs --baseline REPORT.json (the pass rates to detect a drop from)")
	}
	base, err := eval.ReadReport(baseline)
	if err != nil {
		return 0, err
	}
	if base.Suite != s.Name {
		// belay gate refuses the pair too (adversarial review: the runs
		// were computed for the other suite's scenarios).
		return 0, fmt.Errorf("--baseline %s is a report of suite %q, not of %s (suite %q): give a report of this suite", baseline, base.Suite, s.Path, s.Name)
	}
	// The scenarios the gate will compare: this suite's that the
	// baseline has.
	var compared []eval.ScenarioReport
	for _, sc := range s.Scenarios {
		i := slices.IndexFunc(base.Scenarios, func(b eval.ScenarioReport) bool { return b.Name == sc.Name })
		if i < 0 {
			fmt.Fprintf(w, "  %-32s not in the baseline: belay gate does not compare it\n", sc.Name)
			continue
		}
		compared = append(compared, base.Scenarios[i])
	}
	if len(compared) == 0 {
		return 0, fmt.Errorf("--baseline %s has none of %s's scenarios: nothing to detect a drop from", baseline, s.Name)
	}
	// The level the gate (belay gate's defaults) first tests a scenario
	// at: a drop in one scenario of several is tested at its share of
	// α=0.05, not at 0.05 (an adversarial review: runs advised at 0.05
	// caught a 10-point drop in one of four scenarios half the time).
	alpha := gate.Config{}.ScenarioAlpha(len(compared))
	most := 0
	fmt.Fprintf(w, "runs per scenario to detect a drop of %.3f in one scenario (80%% power; belay gate tests a scenario "+
		"of these %d at one-sided α=%.4g):\n", drop, len(compared), alpha)
	for _, sc := range compared {
		// From the counts, as the gate reads them, not the report's
		// pass_rate (an adversarial review: a hand-edited pass_rate
		// changed the answer while the gate went by the counts).
		if sc.Runs <= 0 || sc.Passes < 0 || sc.Passes > sc.Runs {
			return 0, fmt.Errorf("%s: scenario %s: passes %d, runs %d: need 0 ≤ passes ≤ runs and runs > 0", baseline, sc.Name, sc.Passes, sc.Runs)
		}
		rate := float64(sc.Passes) / float64(sc.Runs)
		if drop > rate+1e-9 { // a fall to 0 is a drop (stats.RunsToDetect: drop ≤ baseRate)
			fmt.Fprintf(w, "  %-32s baseline %.3f: a drop of %.3f is not possible\n", sc.Name, rate, drop)
			continue
		}
		n, err := stats.RunsToDetect(rate, drop, alpha, 0.8)
		if err != nil {
			return 0, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		fmt.Fprintf(w, "  %-32s baseline %.3f: %d runs\n", sc.Name, rate, n)
		most = max(most, n)
	}
	return most, nil
}

// writeFile writes through write to path, atomically (temp file, rename).
func writeFile(path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
