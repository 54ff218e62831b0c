package eval

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteText writes the terminal report: one row per scenario and overall,
// then failures by reason and examples of failed runs. It returns the
// first write error.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	w = ew
	fmt.Fprintf(w, "suite %s — agent %s — seed %d — %.1fs\n\n", r.Suite, r.Agent, r.Seed, r.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\truns\tpass\trate\t95% Wilson\tpass^k (1/2/4/8)\tp50 ms\tp95 ms\tp99 ms\tmean $/run\t$/success\ttokens in/out (sum)\tturn-cap\tunsafe\tgolden≠")
	row := func(s Summary) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t[%.3f, %.3f]\t%s\t%.1f\t%.1f\t%.1f\t%s\t%s\t%d/%d\t%s\t%s\t%s\n",
			s.Name, s.Runs, s.Passes, s.PassRate, s.Wilson.Low, s.Wilson.High, passK(s.PassHatK),
			s.P50MS, s.P95MS, s.P99MS, shortUSD(s.MeanCostUSD), shortUSD(s.CostPerSuccessUSD),
			s.InputTokens, s.OutputTokens, pct(s.TurnCapRate), pct(s.UnsafeActionRate), golden(s))
	}
	for _, sc := range r.Scenarios {
		row(sc.Summary)
	}
	row(r.Overall)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Overall.FailuresByReason) > 0 {
		fmt.Fprintln(w, "\nfailures by reason:")
		for _, k := range sortedKeys(r.Overall.FailuresByReason) {
			fmt.Fprintf(w, "  %-34s %d\n", k, r.Overall.FailuresByReason[k])
		}
		fmt.Fprintln(w, "\nexamples (scenario #run run-id: what failed):")
		for _, sc := range r.Scenarios {
			for _, o := range sc.Examples {
				fmt.Fprintf(w, "  %s #%d %s: %s\n", o.Scenario, o.Index, o.RunID, clip(strings.Join(o.Failures, "; "), 200))
			}
		}
	}
	if r.MinPassRate != nil {
		verdict := "met"
		if !r.MinPassRateMet() {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "\nmin_pass_rate %.3f: %s (overall upper bound %.3f)\n", *r.MinPassRate, verdict, r.Overall.Wilson.High)
	}
	return ew.err
}

// WriteMarkdown writes a summary for a pull request comment.
// It returns the first write error (a full disk): the caller must not
// keep what was written.
func (r *Report) WriteMarkdown(w io.Writer) error {
	ew := &errWriter{w: w}
	w = ew
	fmt.Fprintf(w, "### belay eval: %s\n\n", r.Suite)
	perSuccess := "– (no run passed)"
	if r.Overall.CostPerSuccessUSD != "" {
		perSuccess = "$" + shortUSD(r.Overall.CostPerSuccessUSD)
	}
	fmt.Fprintf(w, "Overall pass rate **%.1f%%** (95%% CI %.1f–%.1f%%) over %d runs; cost per success %s; p95 %.0f ms.\n\n",
		100*r.Overall.PassRate, 100*r.Overall.Wilson.Low, 100*r.Overall.Wilson.High, r.Overall.Runs,
		perSuccess, r.Overall.P95MS)
	fmt.Fprintln(w, "| scenario | runs | pass rate | 95% CI | pass^k | p95 ms | $/success | top failure |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|---:|---:|---|")
	for _, sc := range r.Scenarios {
		top := "—"
		if ks := sortedKeys(sc.FailuresByReason); len(ks) > 0 {
			top = fmt.Sprintf("%s (%d)", ks[0], sc.FailuresByReason[ks[0]])
		}
		fmt.Fprintf(w, "| %s | %d | %.1f%% | %.1f–%.1f%% | %s | %.0f | %s | %s |\n", sc.Name, sc.Runs, 100*sc.PassRate,
			100*sc.Wilson.Low, 100*sc.Wilson.High, passK(sc.PassHatK), sc.P95MS, shortUSD(sc.CostPerSuccessUSD), top)
	}
	return ew.err
}

// errWriter keeps the first error of w's writes and writes nothing after
// it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes one test case per run, grouped by scenario.
func (r *Report) WriteJUnit(w io.Writer) error {
	outs := r.Outcomes
	js := junitSuites{}
	by := map[string]*junitSuite{}
	var order []string
	for _, o := range outs {
		s := by[o.Scenario]
		if s == nil {
			s = &junitSuite{Name: r.Suite + "/" + o.Scenario}
			by[o.Scenario] = s
			order = append(order, o.Scenario)
		}
		c := junitCase{Name: fmt.Sprintf("%s#%d", o.Scenario, o.Index), Classname: r.Suite + "." + o.Scenario,
			Time: o.Latency.Seconds()}
		if !o.Passed {
			c.Failure = &junitFailure{Message: o.Reason, Type: o.Reason,
				Text: "run " + o.RunID + "\n" + strings.Join(o.Failures, "\n")}
			s.Failures++
		}
		s.Tests++
		s.Time += c.Time
		s.Cases = append(s.Cases, c)
	}
	sort.Strings(order)
	for _, n := range order {
		js.Suites = append(js.Suites, *by[n])
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(js); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func passK(m map[string]float64) string {
	var parts []string
	for _, k := range []string{"1", "2", "4", "8"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%.2f", v))
		} else {
			parts = append(parts, "–")
		}
	}
	return strings.Join(parts, "/")
}

// shortUSD shows a dollar amount with at most six decimals, for the table
// (the JSON report keeps the exact value).
func shortUSD(s string) string {
	if s == "" {
		return "–"
	}
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		return s
	}
	return fmt.Sprintf("%.6f", f)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func golden(s Summary) string {
	if s.GoldenChecked == 0 {
		return "–"
	}
	return pct(s.GoldenMismatch)
}
