package gate

import (
	"encoding/json"
	"fmt"
	"math"
)

// jsonRow mirrors Row with the floats that may be NaN as pointers.
type jsonRow struct {
	Name      string     `json:"name"`
	Presence  Presence   `json:"presence"`
	Base      Counts     `json:"base"`
	Cand      Counts     `json:"cand"`
	Test      Test       `json:"test"`
	Z         *float64   `json:"z"`
	PValue    *float64   `json:"p_value"`
	AdjustedP *float64   `json:"adjusted_p"`
	Cost      RatioCheck `json:"cost"`
	Latency   RatioCheck `json:"latency"`
	Flags     []Flag     `json:"flags"`
	Warnings  []Flag     `json:"warnings"`
	Why       string     `json:"why"`
}

// MarshalJSON encodes the row; NaN and ±Inf become null.
func (r Row) MarshalJSON() ([]byte, error) {
	flags := r.Flags
	if flags == nil {
		flags = []Flag{}
	}
	warnings := r.Warnings
	if warnings == nil {
		warnings = []Flag{}
	}
	return json.Marshal(jsonRow{
		Name: r.Name, Presence: r.Presence, Base: r.Base, Cand: r.Cand, Test: r.Test,
		Z: finite(r.Z), PValue: finite(r.PValue), AdjustedP: finite(r.AdjustedP),
		Cost: r.Cost, Latency: r.Latency, Flags: flags, Warnings: warnings, Why: r.Why,
	})
}

// MarshalJSON encodes the counts; a NaN rate becomes null.
func (c Counts) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Runs   int      `json:"runs"`
		Passes int      `json:"passes"`
		Rate   *float64 `json:"rate"`
	}{c.Runs, c.Passes, finite(c.Rate)})
}

// MarshalJSON encodes the check; NaN and ±Inf become null.
func (c RatioCheck) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Checked   bool     `json:"checked"`
		Base      *float64 `json:"base"`
		Cand      *float64 `json:"cand"`
		Low       *float64 `json:"low"`
		High      *float64 `json:"high"`
		Regressed bool     `json:"regressed"`
	}{c.Checked, finite(c.Base), finite(c.Cand), finite(c.Low), finite(c.High), c.Regressed})
}

// MarshalText gives p's String form.
func (p Presence) MarshalText() ([]byte, error) {
	switch p {
	case Both, BaselineOnly, CandidateOnly:
		return []byte(p.String()), nil
	}
	return nil, fmt.Errorf("gate: unknown presence %d", int(p))
}

// UnmarshalText parses the String form of a Presence.
func (p *Presence) UnmarshalText(b []byte) error {
	for _, q := range []Presence{Both, BaselineOnly, CandidateOnly} {
		if string(b) == q.String() {
			*p = q
			return nil
		}
	}
	return fmt.Errorf("gate: unknown presence %q", b)
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
