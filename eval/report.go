package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/eval/gate"
	"github.com/belay-run/belay/eval/stats"
)

// ReportFormat is the version tag of the JSON report, which is also the
// baseline format `belay gate` reads.
const ReportFormat = "belay.eval/v1"

// ErrFormat is returned when a baseline file has another format version.
var ErrFormat = errors.New("unsupported report format")

// Interval is a 95% confidence interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Summary aggregates runs: one scenario's, or the whole suite's.
type Summary struct {
	Name     string   `json:"name"`
	Runs     int      `json:"runs"`
	Passes   int      `json:"passes"`
	PassRate float64  `json:"pass_rate"`
	Wilson   Interval `json:"wilson95"`
	// PassHatK maps k (1, 2, 4, 8 where runs allow) to the chance that k
	// independent runs all pass: C(c,k)/C(n,k), averaged over scenarios
	// for the overall summary.
	PassHatK map[string]float64 `json:"pass_hat_k"`
	// Latencies in milliseconds.
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	P99MS float64 `json:"p99_ms"`
	// Costs in USD (decimal strings, exact).
	MeanCostUSD       string         `json:"mean_cost_usd"`
	CostPerSuccessUSD string         `json:"cost_per_success_usd"`
	TotalCostUSD      string         `json:"total_cost_usd"`
	InputTokens       int64          `json:"input_tokens"`
	OutputTokens      int64          `json:"output_tokens"`
	FailuresByReason  map[string]int `json:"failures_by_reason"`
	TurnCapRate       float64        `json:"turn_cap_rate"`
	UnsafeActionRate  float64        `json:"unsafe_action_rate"`
	GoldenChecked     int            `json:"golden_checked"`
	GoldenMismatch    float64        `json:"golden_mismatch_rate"`
}

// Sample is one run as kept in the report for the gate's bootstrap.
type Sample struct {
	Passed    bool    `json:"passed"`
	CostUSD   float64 `json:"cost_usd"`
	LatencyMS float64 `json:"latency_ms"`
	Reason    string  `json:"reason,omitempty"`
	RunID     string  `json:"run_id"`
}

// ScenarioReport is one scenario's summary and samples.
type ScenarioReport struct {
	Summary
	// Samples holds every run, for the gate's cost and latency checks.
	// Empty (or null) means no samples: `belay gate` then compares the
	// scenario's pass rate only; a non-empty list must hold Runs samples.
	Samples []Sample `json:"samples"`
	// Example holds up to three failed runs, with why, for a reader.
	Examples []Outcome `json:"failed_examples,omitempty"`
}

// Report is the result of `belay eval`, and the baseline format.
type Report struct {
	Format      string           `json:"format"`
	Suite       string           `json:"suite"`
	Agent       string           `json:"agent"`
	Seed        int64            `json:"seed"`
	Started     time.Time        `json:"started"`
	Duration    float64          `json:"duration_s"`
	MinPassRate *float64         `json:"min_pass_rate,omitempty"`
	Overall     Summary          `json:"overall"`
	Scenarios   []ScenarioReport `json:"scenarios"`

	// Outcomes holds every run, in scenario order (not in the JSON: the
	// samples carry what the gate needs).
	Outcomes []Outcome `json:"-"`
}

func buildReport(s *Suite, seed int64, outs []Outcome) *Report {
	r := &Report{Format: ReportFormat, Suite: s.Name, Seed: seed, MinPassRate: s.MinPassRate, Outcomes: outs}
	r.Agent = s.Agent.Label()
	by := map[string][]Outcome{}
	for _, o := range outs {
		by[o.Scenario] = append(by[o.Scenario], o)
	}
	var passK = map[string][]float64{}
	for _, sc := range s.Scenarios {
		os := by[sc.Name]
		sr := ScenarioReport{Summary: summarize(sc.Name, os)}
		for _, o := range os {
			sr.Samples = append(sr.Samples, Sample{Passed: o.Passed, CostUSD: o.Cost.Float(),
				LatencyMS: float64(o.Latency) / 1e6, Reason: o.Reason, RunID: o.RunID})
			if !o.Passed && len(sr.Examples) < 3 {
				sr.Examples = append(sr.Examples, o)
			}
		}
		for k, v := range sr.PassHatK {
			passK[k] = append(passK[k], v)
		}
		r.Scenarios = append(r.Scenarios, sr)
	}
	r.Overall = summarize("overall", outs)
	// Overall pass^k averages the scenarios' unbiased estimates, for the k
	// every scenario allows.
	r.Overall.PassHatK = map[string]float64{}
	for k, vs := range passK {
		if len(vs) == len(s.Scenarios) {
			sum := 0.0
			for _, v := range vs {
				sum += v
			}
			r.Overall.PassHatK[k] = sum / float64(len(vs))
		}
	}
	return r
}

func summarize(name string, outs []Outcome) Summary {
	s := Summary{Name: name, Runs: len(outs), FailuresByReason: map[string]int{}, PassHatK: map[string]float64{}}
	var lat []float64
	var total budget.USD
	turnCap, unsafe, mismatch := 0, 0, 0
	for _, o := range outs {
		if o.Passed {
			s.Passes++
		} else {
			s.FailuresByReason[o.Reason]++
		}
		lat = append(lat, float64(o.Latency)/1e6)
		total = total.Add(o.Cost)
		s.InputTokens += o.InputTokens
		s.OutputTokens += o.OutputTokens
		if o.StopReason == "max_turns_exceeded" {
			turnCap++
		}
		if o.Unsafe {
			unsafe++
		}
		if o.GoldenChecked {
			s.GoldenChecked++
			if o.GoldenMismatch {
				mismatch++
			}
		}
	}
	if s.Runs == 0 {
		s.Wilson = Interval{0, 1}
		s.MeanCostUSD, s.CostPerSuccessUSD, s.TotalCostUSD = "0", "", "0"
		return s
	}
	s.PassRate = float64(s.Passes) / float64(s.Runs)
	s.Wilson.Low, s.Wilson.High = stats.Wilson(s.Passes, s.Runs, 0.95)
	for _, k := range []int{1, 2, 4, 8} {
		if v, ok := stats.PassHatK(s.Passes, s.Runs, k); ok {
			s.PassHatK[fmt.Sprint(k)] = v
		}
	}
	s.P50MS, s.P95MS, s.P99MS = stats.Quantile(lat, 0.50), stats.Quantile(lat, 0.95), stats.Quantile(lat, 0.99)
	s.TotalCostUSD = total.Decimal()
	s.MeanCostUSD = (total / budget.USD(s.Runs)).Decimal()
	if s.Passes > 0 {
		s.CostPerSuccessUSD = (total / budget.USD(s.Passes)).Decimal()
	}
	s.TurnCapRate = float64(turnCap) / float64(s.Runs)
	s.UnsafeActionRate = float64(unsafe) / float64(s.Runs)
	if s.GoldenChecked > 0 {
		s.GoldenMismatch = float64(mismatch) / float64(s.GoldenChecked)
	}
	return s
}

// MinPassRateMet reports whether the suite's min_pass_rate holds: it fails
// only when the overall Wilson interval's upper bound is below it.
func (r *Report) MinPassRateMet() bool {
	return r.MinPassRate == nil || r.Overall.Wilson.High >= *r.MinPassRate
}

// WriteJSON writes the report in its versioned JSON format.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadReport reads a JSON report (a baseline); another format version is
// refused with ErrFormat, naming the versions understood.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%s: not a belay eval report: %w", path, err)
	}
	if head.Format != ReportFormat {
		return nil, fmt.Errorf("%w: %s has format %q; this belay understands %q", ErrFormat, path, head.Format, ReportFormat)
	}
	r := &Report{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// GateGroups converts a report's scenarios into the gate's input.
func (r *Report) GateGroups() []gate.Group {
	gs := make([]gate.Group, 0, len(r.Scenarios))
	for _, sc := range r.Scenarios {
		g := gate.Group{Name: sc.Name, Runs: sc.Runs, Passes: sc.Passes}
		for _, s := range sc.Samples {
			g.Samples = append(g.Samples, gate.Sample{Passed: s.Passed, CostUSD: s.CostUSD, LatencyMS: s.LatencyMS})
		}
		gs = append(gs, g)
	}
	return gs
}

// sortedKeys returns m's keys by descending count, then name.
func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if m[ks[i]] != m[ks[j]] {
			return m[ks[i]] > m[ks[j]]
		}
		return ks[i] < ks[j]
	})
	return ks
}
