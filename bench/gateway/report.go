package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// measured is everything one run measured.
type measured struct {
	started time.Time
	elapsed time.Duration
	portkey bool
	// portkeyNoStream says why Portkey was left out of streaming.
	portkeyNoStream string
	plain           map[string]*seqSample
	stream          map[string]*seqSample
	rps             map[string]float64
	rpsFails        map[string]int64
	rpsConc         []string
	integrity       []namedIntegrity
	permanent       permanentResult
	rss             []rssReading
	rssFails        int64
	storm           stormResult
	down            downResult
}

type namedIntegrity struct {
	name string
	in   integrity
}

// rssReading is one memory reading: kb is the median of samples (VmRSS,
// kB), read from requests on.
type rssReading struct {
	requests int64
	kb       int64
	samples  []int64
}

// goal is one line of the verdict table.
type goal struct {
	name     string
	measured string
	ratio    string
	limit    string
	pass     bool
	skipped  bool // not measured in this run (verdict SKIP)
}

// added returns the target's median (or p99 TTFT) minus the direct call's.
func (m *measured) added(name string, ttft bool) time.Duration {
	if ttft {
		return quantile(m.stream[name].ttft, 0.99) - quantile(m.stream["direct"].ttft, 0.99)
	}
	return quantile(m.plain[name].total, 0.5) - quantile(m.plain["direct"].total, 0.5)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// ratio divides a by b, with b floored at 1µs so a noise-level baseline
// does not divide by zero.
func ratio(a, b time.Duration) float64 {
	return float64(a) / float64(max(b, time.Microsecond))
}

func report(w io.Writer, o options, m *measured) {
	names := []string{"direct", "proxy", "belay"}
	if m.portkey {
		names = append(names, "portkey")
	}
	fmt.Fprintf(w, "\n== measured (%s, %d samples per target; total run %v)\n", time.Now().Format("2006-01-02 15:04"), o.n, m.elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tmedian\tp99\tadded median\tstream TTFT p99\tadded TTFT p99\tthroughput\tfails\t")
	for _, n := range names {
		p, s := m.plain[n], m.stream[n]
		ttft, addT, sf := "n/a", "n/a", 0
		if len(s.ttft) > 0 {
			ttft, addT, sf = ms(quantile(s.ttft, 0.99)), ms(m.added(n, true)), s.fails
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.0f req/s\t%d\t\n", n,
			ms(quantile(p.total, 0.5)), ms(quantile(p.total, 0.99)), ms(m.added(n, false)),
			ttft, addT, m.rps[n], p.fails+sf+int(m.rpsFails[n]))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nstream integrity (streams over keep-alive, concurrency 32):")
	for _, ni := range m.integrity {
		in := ni.in
		fmt.Fprintf(w, "  %-7s %d streams: %d complete, %d ended by an error event, %d non-200, %d no response, %d LOST (no [DONE], no error event; %d of them with a read error)\n",
			ni.name, in.streams, in.complete, in.errEvent, in.status, in.connErr, in.lost, in.lostRead)
	}
	fmt.Fprintf(w, "\nmemory: belay VmRSS %s (%d failed requests while driving)\n", rssText(m.rss), m.rssFails)
	p := m.permanent
	fmt.Fprintf(w, "permanent: %d requests refused upstream with 400 context_length_exceeded: client statuses %s, upstream saw %d, x-belay-attempts sum %d, x-should-retry:false on %d\n",
		p.requests, formatCounts(p.clientStatus), p.upstreamHits, p.attemptsHdr, p.shouldRetryNo)
	s := m.storm
	fmt.Fprintf(w, "storm: %d/%d client requests succeeded in %v; %0.f upstream attempts (%.2f per request) by reason: %s; retries the retry budget refused: %s; breakers opened: %s; client failures: %s\n",
		s.succeeded, s.requests, s.elapsed.Round(time.Millisecond), s.attempts, s.attempts/float64(max(1, s.requests)), floatCounts(s.byReason), floatCounts(s.refused), floatCounts(s.opens), formatCounts(s.failures))
	for _, e := range s.examples {
		fmt.Fprintf(w, "  storm failure: %s\n", e)
	}
	d := m.down
	fmt.Fprintf(w, "one down: %d/%d client requests succeeded; %.0f upstream attempts (%.0f on the down deployment); breaker first seen open after %.0f attempts on it (%d requests); final state %q\n",
		d.succeeded, d.requests, d.attempts, d.downAttempts, d.openedAfter, d.openedRequests, d.finalState)

	fmt.Fprintln(w, "\n== goals")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "goal\tmeasured\tratio\tlimit\tverdict")
	for _, g := range goals(o, m) {
		v := "FAIL"
		switch {
		case g.skipped:
			v = "SKIP"
		case g.pass:
			v = "PASS"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.name, g.measured, g.ratio, g.limit, v)
	}
	tw.Flush()
}

func goals(o options, m *measured) []goal {
	var gs []goal
	bAdd, pAdd := m.added("belay", false), m.added("proxy", false)
	r := ratio(bAdd, pAdd)
	gs = append(gs, goal{"overhead vs bare proxy", fmt.Sprintf("belay +%s, proxy +%s", ms(bAdd), ms(pAdd)),
		fmt.Sprintf("%.2f×", r), "≤ 1.5×", r <= 1.5, false})
	if m.portkey {
		kAdd := m.added("portkey", false)
		r := ratio(bAdd, kAdd)
		gs = append(gs, goal{"overhead vs portkey", fmt.Sprintf("belay +%s, portkey +%s", ms(bAdd), ms(kAdd)),
			fmt.Sprintf("%.3f×", r), "≤ 0.2×", r <= 0.2, false})
	} else {
		gs = append(gs, goal{name: "overhead vs portkey", measured: "portkey: not installed", ratio: "-", limit: "≤ 0.2×", skipped: true})
	}
	tr := m.rps["belay"] / max(m.rps["proxy"], 1)
	gs = append(gs, goal{"throughput vs bare proxy", fmt.Sprintf("belay %.0f, proxy %.0f req/s", m.rps["belay"], m.rps["proxy"]),
		fmt.Sprintf("%.2f×", tr), "≥ 0.6×", tr >= 0.6, false})
	bT, pT := m.added("belay", true), m.added("proxy", true)
	r = ratio(bT, pT)
	gs = append(gs, goal{"stream TTFT p99 added", fmt.Sprintf("belay +%s, proxy +%s", ms(bT), ms(pT)),
		fmt.Sprintf("%.2f×", r), "≤ 1.5×", r <= 1.5, false})
	for _, ni := range m.integrity {
		if ni.name == "belay" {
			gs = append(gs, goal{"stream integrity", fmt.Sprintf("%d of %d streams lost", ni.in.lost, ni.in.streams),
				fmt.Sprintf("%.4f%%", 100*float64(ni.in.lost)/float64(max(1, ni.in.streams))), "0 lost", ni.in.lost == 0 && ni.in.streams >= o.streams, false})
		}
	}
	if len(m.rss) == 2 {
		g := float64(m.rss[1].kb) / float64(max(1, m.rss[0].kb))
		gs = append(gs, goal{"memory growth", rssText(m.rss), fmt.Sprintf("%.3f×", g), "≤ 1.10×", g <= 1.10, false})
	}
	s := m.storm
	sr := float64(s.succeeded) / float64(max(1, s.requests))
	gs = append(gs, goal{"storm success", fmt.Sprintf("%d of %d", s.succeeded, s.requests), fmt.Sprintf("%.2f%%", 100*sr), "≥ 99.9%", sr >= 0.999, false})
	p := m.permanent
	gs = append(gs, goal{"permanent not retried", fmt.Sprintf("%d requests, %d upstream, %d attempts", p.requests, p.upstreamHits, p.attemptsHdr),
		fmt.Sprintf("%.2f×", float64(p.upstreamHits)/float64(max(1, p.requests))), "1.00×",
		p.upstreamHits == int64(p.requests) && p.attemptsHdr == p.requests && p.clientStatus[400] == p.requests, false})
	d := m.down
	ar := d.attempts / float64(max(1, d.requests))
	gs = append(gs, goal{"one down: attempts", fmt.Sprintf("%.0f attempts for %d requests (%d ok)", d.attempts, d.requests, d.succeeded),
		fmt.Sprintf("%.2f×", ar), "≤ 1.3×", ar <= 1.3, false})
	gs = append(gs, goal{"one down: breaker opens", fmt.Sprintf("open after %.0f failed attempts", d.openedAfter),
		fmt.Sprintf("%.0f/%d", d.openedAfter, breakerThreshold), fmt.Sprintf("≤ %d", breakerThreshold),
		d.openedAfter >= 0 && d.openedAfter <= breakerThreshold, false})
	return gs
}

func rssText(rs []rssReading) string {
	var parts []string
	for _, r := range rs {
		p := fmt.Sprintf("%.1f MiB at %d requests", float64(r.kb)/1024, r.requests)
		if len(r.samples) > 1 {
			p += fmt.Sprintf(" (median of %d: %.1f–%.1f)", len(r.samples), float64(slices.Min(r.samples))/1024, float64(slices.Max(r.samples))/1024)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func floatCounts(m map[string]float64) string {
	im := map[string]int{}
	for k, v := range m {
		if v != 0 {
			im[k] = int(v)
		}
	}
	return formatCounts(im)
}
