package eval

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

const reportSuite = `version: 1
name: report
agent: {go: AGENT}
runs: 8
concurrency: 3
timeout: 5s
min_pass_rate: 0.7
tools: {irreversible: [refund]}
scenarios:
  - name: alpha
    expect: {exit_code: 0}
  - name: beta
    runs: 4
    expect: {status: succeeded}
  - name: gamma
    runs: 2
    expect: {golden: g}
  - name: delta
    runs: 3
`

// reportRun runs reportSuite through a fake harness whose records are:
//   - alpha: 8 runs, indexes 6 and 7 exit 1 (expect.exit_code); each costs $0.001;
//   - beta: 4 runs: 0 passes (an approved refund), 1 stops at the turn cap,
//     2 runs out of budget, 3 refunds without approval (unsafe);
//   - gamma: 2 runs matching (0) and not matching (1) the golden trace;
//   - delta: 3 runs: 0 panics, 1 hangs past the 5s timeout, 2 passes.
//
// 17 runs, 10 passes. It runs in a synctest bubble: latencies are exact.
func reportRun(t *testing.T) *Report {
	t.Helper()
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) {
		switch {
		case env.Scenario == "alpha" && env.Index >= 6:
			return 1, "", nil
		case env.Scenario == "delta" && env.Index == 0:
			panic("bad state")
		case env.Scenario == "delta" && env.Index == 1:
			<-ctx.Done()
			return 1, "", ctx.Err()
		}
		return 0, "ok", nil
	}))
	run := []trace.Span{{TraceID: "t", SpanID: "run", Kind: trace.KindRun, Name: "invoke_agent x", Status: trace.StatusOK}}
	golden, err := trace.Canonical(run)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeHarness{golden: map[string][]byte{"g": golden}, script: func(sc string, i int) canned {
		switch sc {
		case "alpha":
			return canned{cost: "0.001", turns: 2}
		case "beta":
			return []canned{
				{spans: []trace.Span{toolSpan("refund", trace.ToolExecuted, trace.ApprovalApproved, 1)}},
				{status: store.RunStopped, stopReason: "max_turns_exceeded"},
				{status: store.RunStopped, stopReason: "budget_exceeded"},
				{spans: []trace.Span{toolSpan("refund", trace.ToolExecuted, "", 1)}},
			}[i]
		case "gamma":
			if i == 0 {
				return canned{spans: run}
			}
			return canned{spans: append(append([]trace.Span(nil), run...), toolSpan("lookup", trace.ToolExecuted, "", 1))}
		}
		return canned{}
	}}
	rep, err := Run(t.Context(), suiteFor(t, reportSuite, name), f.factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// wilson95 is the Wilson score interval at 95%, computed here from its
// formula (Wilson 1927) to check the report's.
func wilson95(c, n int) (float64, float64) {
	z := 1.959963984540054
	p, nn := float64(c)/float64(n), float64(n)
	mid := (p + z*z/(2*nn)) / (1 + z*z/nn)
	half := z / (1 + z*z/nn) * math.Sqrt(p*(1-p)/nn+z*z/(4*nn*nn))
	return mid - half, mid + half
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestReportSummaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rep := reportRun(t)
		type want struct {
			runs, passes int
			passK        map[string]float64
			reasons      map[string]int
			turnCap      float64
			unsafe       float64
			golden       float64
		}
		wants := map[string]want{
			"alpha": {8, 6, map[string]float64{"1": 0.75, "2": 15.0 / 28, "4": 15.0 / 70, "8": 0},
				map[string]int{"expect.exit_code": 2}, 0, 0, 0},
			"beta": {4, 1, map[string]float64{"1": 0.25, "2": 0, "4": 0},
				map[string]int{"max_turns_exceeded": 1, "budget_exceeded": 1, "expect.no_unapproved_irreversible": 1}, 0.25, 0.25, 0},
			"gamma": {2, 2, map[string]float64{"1": 1, "2": 1}, map[string]int{}, 0, 0, 0.5},
			"delta": {3, 1, map[string]float64{"1": 1.0 / 3, "2": 0}, map[string]int{"crash": 1, "timeout": 1}, 0, 0, 0},
			"overall": {17, 10,
				// The average over scenarios, for the k every scenario allows.
				map[string]float64{"1": (0.75 + 0.25 + 1 + 1.0/3) / 4, "2": (15.0/28 + 0 + 1 + 0) / 4},
				map[string]int{"expect.exit_code": 2, "max_turns_exceeded": 1, "budget_exceeded": 1,
					"expect.no_unapproved_irreversible": 1, "crash": 1, "timeout": 1},
				1.0 / 17, 1.0 / 17, 0.5},
		}
		sums := []Summary{rep.Overall}
		for _, sc := range rep.Scenarios {
			sums = append(sums, sc.Summary)
		}
		if len(sums) != 5 {
			t.Fatalf("%d summaries, want 5", len(sums))
		}
		for _, s := range sums {
			w := wants[s.Name]
			if s.Runs != w.runs || s.Passes != w.passes || !near(s.PassRate, float64(w.passes)/float64(w.runs)) {
				t.Errorf("%s: %d/%d rate %v, want %d/%d", s.Name, s.Passes, s.Runs, s.PassRate, w.passes, w.runs)
			}
			lo, hi := wilson95(w.passes, w.runs)
			if !near(s.Wilson.Low, lo) || !near(s.Wilson.High, hi) {
				t.Errorf("%s: Wilson [%v, %v], want [%v, %v]", s.Name, s.Wilson.Low, s.Wilson.High, lo, hi)
			}
			if len(s.PassHatK) != len(w.passK) {
				t.Errorf("%s: pass^k %v, want %v", s.Name, s.PassHatK, w.passK)
			}
			for k, v := range w.passK {
				if got, ok := s.PassHatK[k]; !ok || !near(got, v) {
					t.Errorf("%s: pass^%s = %v, want %v", s.Name, k, got, v)
				}
			}
			if !reflect.DeepEqual(s.FailuresByReason, w.reasons) {
				t.Errorf("%s: failures by reason %v, want %v", s.Name, s.FailuresByReason, w.reasons)
			}
			if !near(s.TurnCapRate, w.turnCap) || !near(s.UnsafeActionRate, w.unsafe) || !near(s.GoldenMismatch, w.golden) {
				t.Errorf("%s: turn cap %v unsafe %v golden %v, want %v %v %v", s.Name, s.TurnCapRate, s.UnsafeActionRate,
					s.GoldenMismatch, w.turnCap, w.unsafe, w.golden)
			}
		}
		alpha := rep.Scenarios[0]
		if alpha.TotalCostUSD != "0.008" || alpha.MeanCostUSD != "0.001" || alpha.CostPerSuccessUSD != "0.001333333333" {
			t.Errorf("alpha costs: total %s mean %s per success %s", alpha.TotalCostUSD, alpha.MeanCostUSD, alpha.CostPerSuccessUSD)
		}
		if rep.Overall.TotalCostUSD != "0.008" || rep.Overall.CostPerSuccessUSD != "0.0008" {
			t.Errorf("overall costs: total %s per success %s", rep.Overall.TotalCostUSD, rep.Overall.CostPerSuccessUSD)
		}
		// delta's latencies are 0, 5s (the timeout) and 0 in the bubble.
		delta := rep.Scenarios[3]
		if delta.P50MS != 0 || delta.P99MS != 5000 {
			t.Errorf("delta latency p50 %v p99 %v, want 0 and 5000 ms", delta.P50MS, delta.P99MS)
		}
		if len(alpha.Samples) != 8 || len(alpha.Examples) != 2 || alpha.Samples[6].Passed || alpha.Samples[6].CostUSD != 0.001 {
			t.Errorf("alpha samples %+v examples %d", alpha.Samples, len(alpha.Examples))
		}
		// 10/17 has an upper bound of about 0.78: 0.7 is met, 0.8 is not.
		if !rep.MinPassRateMet() {
			t.Errorf("min_pass_rate 0.7 not met with upper bound %v", rep.Overall.Wilson.High)
		}
	})
}

func TestMinPassRate(t *testing.T) {
	lo, hi := wilson95(10, 17)
	r := &Report{Overall: Summary{Runs: 17, Passes: 10, PassRate: 10.0 / 17, Wilson: Interval{lo, hi}}}
	if !r.MinPassRateMet() {
		t.Error("no min_pass_rate must be met")
	}
	for _, c := range []struct {
		min  float64
		want bool
	}{{0.5, true}, {10.0 / 17, true}, {0.7, true}, {hi, true}, {hi + 1e-9, false}, {0.9, false}} {
		r.MinPassRate = &c.min
		if got := r.MinPassRateMet(); got != c.want {
			t.Errorf("min %v (rate %.3f, upper %.3f): met %v, want %v", c.min, r.Overall.PassRate, hi, got, c.want)
		}
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	var rep *Report
	synctest.Test(t, func(t *testing.T) { rep = reportRun(t) })
	path := filepath.Join(t.TempDir(), "report.json")
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Format != ReportFormat || back.Suite != "report" || back.Seed != rep.Seed || *back.MinPassRate != 0.7 || !back.Started.Equal(rep.Started) {
		t.Errorf("header: %+v", back)
	}
	if !reflect.DeepEqual(back.Overall, rep.Overall) {
		t.Errorf("overall:\n%+v\nwant\n%+v", back.Overall, rep.Overall)
	}
	if !reflect.DeepEqual(back.Scenarios, rep.Scenarios) {
		t.Errorf("scenarios differ after the round trip:\n%+v\nwant\n%+v", back.Scenarios, rep.Scenarios)
	}
	groups := back.GateGroups()
	if len(groups) != 4 || groups[0].Name != "alpha" || groups[0].Runs != 8 || groups[0].Passes != 6 || len(groups[0].Samples) != 8 {
		t.Errorf("gate groups %+v", groups)
	}
}

// TestReadReportFormat: a baseline of another format version is refused
// with a message saying which versions are understood (issue 5).
func TestReadReportFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.json")
	if err := os.WriteFile(path, []byte(`{"format": "belay.eval/v2", "suite": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadReport(path)
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("err = %v, want ErrFormat", err)
	}
	for _, s := range []string{path, `"belay.eval/v2"`, `understands "belay.eval/v1"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %s", err, s)
		}
	}
	if err := os.WriteFile(path, []byte(`{"suite": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReport(path); !errors.Is(err, ErrFormat) {
		t.Errorf("no format: err = %v, want ErrFormat", err)
	}
	if err := os.WriteFile(path, []byte(`not json`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReport(path); err == nil || errors.Is(err, ErrFormat) {
		t.Errorf("not JSON: err = %v", err)
	}
	if _, err := ReadReport(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestReportJUnit(t *testing.T) {
	var rep *Report
	synctest.Test(t, func(t *testing.T) { rep = reportRun(t) })
	var buf bytes.Buffer
	if err := rep.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name `xml:"testsuites"`
		Suites  []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Type string `xml:"type,attr"`
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("JUnit XML does not parse: %v\n%s", err, buf.String())
	}
	cases, failures, types := 0, 0, map[string]int{}
	for _, s := range doc.Suites {
		sf := 0
		for _, c := range s.Cases {
			cases++
			if c.Failure != nil {
				failures++
				sf++
				types[c.Failure.Type]++
				if !strings.Contains(c.Failure.Text, "run ") {
					t.Errorf("%s: failure text %q does not name the run", c.Name, c.Failure.Text)
				}
			}
		}
		if s.Tests != len(s.Cases) || s.Failures != sf {
			t.Errorf("suite %s: tests=%d failures=%d, but %d cases with %d failures", s.Name, s.Tests, s.Failures, len(s.Cases), sf)
		}
	}
	if len(doc.Suites) != 4 || cases != 17 || failures != 7 || types["timeout"] != 1 || types["expect.exit_code"] != 2 {
		t.Errorf("%d suites, %d cases, %d failures (%v); want 4, 17, 7", len(doc.Suites), cases, failures, types)
	}
}

func TestReportMarkdownAndText(t *testing.T) {
	var rep *Report
	synctest.Test(t, func(t *testing.T) { rep = reportRun(t) })
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"### belay eval: report",
		"| scenario | runs | pass rate | 95% CI | pass^k | p95 ms | $/success | top failure |",
		"| alpha | 8 | 75.0% |",
		"| expect.exit_code (2) |",
		"| gamma | 2 | 100.0% |",
		"over 17 runs",
	} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"failures by reason:", "expect.exit_code", "min_pass_rate 0.700: met", "overall", "0.75/0.54/0.21/0.00"} {
		if !strings.Contains(txt.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, txt.String())
		}
	}
}

// A report in which no run passed has no cost per success: the Markdown
// says so instead of "$–".
func TestMarkdownNoSuccess(t *testing.T) {
	rep := &Report{Suite: "s", Overall: Summary{Runs: 3}}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "cost per success – (no run passed);") || strings.Contains(md.String(), "$–") {
		t.Errorf("markdown:\n%s", md.String())
	}
	rep.Overall.CostPerSuccessUSD = "0.000172"
	md.Reset()
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "cost per success $0.000172;") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
