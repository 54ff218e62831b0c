package budget

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// RunScope returns the scope of one run: "run:<runID>".
func RunScope(runID string) Scope { return Scope("run:" + runID) }

// Period is the length of a tenant budget period, in UTC.
type Period string

const (
	Day   Period = "day"
	Month Period = "month"
)

// ParsePeriod returns the Period named s ("day" or "month"; "" is Month).
func ParsePeriod(s string) (Period, error) {
	switch Period(s) {
	case Day:
		return Day, nil
	case Month, "":
		return Month, nil
	}
	return "", fmt.Errorf("budget: period %q is unknown; want day or month", s)
}

// End returns when the period holding t (in UTC) ends: the start of the
// next UTC day for Day, of the next UTC month for any other Period, as
// TenantScope counts them.
func (p Period) End(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	if p == Day {
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// TenantScope returns the scope of a tenant's spend in the period holding t
// (converted to UTC): "tenant:acme:2026-11" for Month,
// "tenant:acme:2026-11-29" for Day. Any other Period is treated as Month.
func TenantScope(tenant string, p Period, t time.Time) Scope {
	b := make([]byte, 0, len("tenant:")+len(tenant)+1+len("2006-01-02"))
	b = append(append(append(b, "tenant:"...), tenant...), ':')
	y, m, d := t.UTC().Date()
	if y < 0 || y > 9999 { // time's own formatting, sign and all
		layout := "2006-01"
		if p == Day {
			layout = "2006-01-02"
		}
		return Scope(t.UTC().AppendFormat(b, layout))
	}
	// On every call's admission: digits by hand, not a layout parsed.
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10),
		'-', byte('0'+m/10), byte('0'+m%10))
	if p == Day {
		b = append(b, '-', byte('0'+d/10), byte('0'+d%10))
	}
	return Scope(b)
}

// Alert reports that a scope's settled spend crossed a threshold of its
// limit for the first time.
type Alert struct {
	Scope     Scope
	Threshold float64 // a fraction of Limit, such as 0.8
	Limit     USD
	Settled   USD // the settled spend when the crossing was seen
}

func (a Alert) String() string {
	return fmt.Sprintf("%s spent %s of %s (crossed %g%%)", a.Scope, a.Settled, a.Limit, a.Threshold*100)
}

// CheckAlerts reads the balance of s and, for each threshold whose share of
// limit the settled spend has reached (Settled ≥ threshold·limit), marks it
// with l.MarkAlert; it returns the alerts marked for the first time, in
// ascending threshold order. Reserved money does not count: an alert is
// about money spent. A limit of 0 or less has no alerts. Thresholds outside
// (0, 1] are ignored. Safe for concurrent use as l is: MarkAlert decides
// which caller is first, so each alert is returned once per scope.
func CheckAlerts(ctx context.Context, l Ledger, s Scope, limit USD, thresholds []float64) ([]Alert, error) {
	if limit <= 0 || len(thresholds) == 0 {
		return nil, nil
	}
	b, err := l.Balance(ctx, s)
	if err != nil {
		return nil, err
	}
	ths := slices.Clone(thresholds)
	slices.Sort(ths)
	var out []Alert
	for _, th := range ths {
		if th <= 0 || th > 1 || b.Settled < thresholdAmount(limit, th) {
			continue
		}
		first, err := l.MarkAlert(ctx, s, th)
		if err != nil {
			return out, err
		}
		if first {
			out = append(out, Alert{Scope: s, Threshold: th, Limit: limit, Settled: b.Settled})
		}
	}
	return out, nil
}

// thresholdAmount returns ceil(limit·th) to the picodollar. The float
// product is exact to far below a cent for any realistic limit.
func thresholdAmount(limit USD, th float64) USD {
	return USD(math.Ceil(float64(limit) * th))
}
