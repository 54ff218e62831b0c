package gate

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// WriteText writes r as a table for people: a verdict line, the settings
// the verdict depends on, one line per scenario and one for overall, then
// the reason for each row. Rates are percentages, intervals are the
// candidate/baseline ratio. It returns the first write error.
func (r Result) WriteText(w io.Writer) error {
	cfg := r.Config
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "belay gate: %s\n", r)
	fmt.Fprintf(ew, "pass rate: one-sided tests at α = %g, %s\n", cfg.Alpha, r.familyText())
	switch {
	case cfg.BootstrapIters < 0:
		fmt.Fprintf(ew, "cost per success, p95 latency: not checked (turned off: --bootstrap %d, Config.BootstrapIters, is negative)\n", cfg.BootstrapIters)
	case !r.anyRatioChecked():
		fmt.Fprintf(ew, "cost per success, p95 latency: not checked (needs ≥ %d per-run samples on both sides)\n", minBootstrapSamples)
	default:
		latency := "a warning"
		if cfg.LatencyFails {
			latency = "a regression"
		}
		each := cfg.Alpha / float64(max(1, r.ratioRows))
		shared := ""
		if r.ratioRows > 1 {
			shared = fmt.Sprintf(", α = %g shared by the %d rows checked (Bonferroni)", cfg.Alpha, r.ratioRows)
		}
		fmt.Fprintf(ew, "cost per success, p95 latency: %.4g%% bootstrap interval of candidate/baseline (%d rounds, seed %d%s); flagged above +%g%% cost, +%g%% latency (%s)\n",
			100*(1-2*each), cfg.BootstrapIters, cfg.Seed, shared, 100*cfg.CostTolerance, 100*cfg.LatencyTolerance, latency)
	}
	fmt.Fprintln(ew)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tBASELINE\tCANDIDATE\tTEST\tZ\tP\tP(HOLM)\tCOST×\tP95×\tVERDICT")
	for _, row := range r.Scenarios {
		writeRow(tw, row)
	}
	writeRow(tw, r.Overall)
	tw.Flush()

	fmt.Fprintln(ew, "\nwhy:")
	for _, row := range append(r.Scenarios[:len(r.Scenarios):len(r.Scenarios)], r.Overall) {
		fmt.Fprintf(ew, "  %s: %s\n", row.Name, row.Why)
	}
	return ew.err
}

func (r Result) anyRatioChecked() bool {
	for _, row := range append(r.Scenarios[:len(r.Scenarios):len(r.Scenarios)], r.Overall) {
		if row.Cost.Checked || row.Latency.Checked {
			return true
		}
	}
	return false
}

// family counts the scenarios in the pass-rate family, and the tested ones
// left out of it.
func (r Result) family() (in, out int) {
	for _, row := range r.Scenarios {
		switch {
		case row.inFamily():
			in++
		case row.Test != TestNone:
			out++
		}
	}
	return in, out
}

// familyText says how the pass-rate tests were corrected, as family
// decided: nothing tested (no scenario has runs on both sides); no
// correction when no row can reject, or when overall is the only row that
// can (tested alone at α); one test at α when the only scenario that can
// reject is the whole overall table; weighted Holm over overall and the
// scenarios otherwise.
func (r Result) familyText() string {
	in, out := r.family()
	var s string
	switch {
	case r.Overall.Test == TestNone:
		return "nothing tested: no scenario has runs on both sides"
	case !r.Overall.inFamily():
		return "no correction: every scenario passes all or fails all on both sides, so no test below can reject (their p-values are shown for reference)"
	case in == 0:
		return fmt.Sprintf("no correction: overall is the only row that can reject, tested alone at α "+
			"(the %d tested scenarios all pass or all fail on both sides)", out)
	case in == 1 && r.mergedOverall():
		s = "one scenario: it and overall are one test at α"
	default:
		w := r.Config.OverallWeight
		if in == 1 {
			s = fmt.Sprintf("weighted Holm over overall (weight %.3g) and 1 scenario (%.3g)", w, 1-w)
		} else {
			s = fmt.Sprintf("weighted Holm over overall (weight %.3g) and %d scenarios (%.3g each)", w, in, (1-w)/float64(in))
		}
	}
	if out > 0 {
		s += fmt.Sprintf("; %d more all-pass or all-fail on both sides, not counted", out)
	}
	return s
}

// mergedOverall reports whether the overall row is the table of the only
// scenario in the family.
func (r Result) mergedOverall() bool {
	for _, row := range r.Scenarios {
		if row.inFamily() {
			return sameTable(row, r.Overall)
		}
	}
	return false
}

func writeRow(w io.Writer, row Row) {
	test, z, p, adj := "-", "-", "-", "-"
	if row.Test != TestNone {
		test, z, p, adj = string(row.Test), fmt.Sprintf("%.2f", row.Z), pfmt(row.PValue), pfmt(row.AdjustedP)
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Name,
		side(row.Base, row.Presence != CandidateOnly), side(row.Cand, row.Presence != BaselineOnly),
		test, z, p, adj, interval(row.Cost), interval(row.Latency), verdict(row))
}

func side(c Counts, present bool) string {
	if !present {
		return "-"
	}
	return fmt.Sprintf("%d/%d %s", c.Passes, c.Runs, pct(c.Rate))
}

func interval(c RatioCheck) string {
	if !c.Checked {
		return "-"
	}
	return fmt.Sprintf("%.2f–%.2f", c.Low, c.High)
}

func verdict(row Row) string {
	switch {
	case slices.Equal(row.Flags, []Flag{FlagMissing}):
		return "MISSING"
	case row.Regressed():
		s := "REGRESSED"
		for i, f := range row.Flags {
			sep := " "
			if i > 0 {
				sep = ","
			}
			s += sep + string(f)
		}
		return s
	case row.Presence == BaselineOnly:
		return "removed"
	case row.Presence == CandidateOnly:
		return "new"
	case row.Test == TestNone:
		return "no runs"
	case len(row.Warnings) > 0:
		return "ok, warning " + string(row.Warnings[0])
	}
	return "ok"
}

// errWriter remembers the first write error and drops later writes.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
