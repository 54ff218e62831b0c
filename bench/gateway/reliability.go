package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stormResult is the outcome of client requests to the "storm" alias.
type stormResult struct {
	requests  int
	succeeded int
	failures  map[string]int // "status reason" → count
	attempts  float64        // upstream attempts, from belay_attempts_total
	byReason  map[string]float64
	// refused: retries the retry budget refused, by deployment (from
	// belay_retries_refused_total): a call that failed with attempts
	// left was cut short by the budget.
	refused map[string]float64
	elapsed time.Duration
	// opens: times each deployment's breaker opened during the storm
	// (belay_breaker_opens_total).
	opens map[string]float64
	// examples: the first 3 client failures, each with its attempts count
	// and error body, for the report.
	examples []string
}

// storm sends n non-streaming requests from conc workers to alias "storm"
// (two deployments under the storm profile) and counts what the client
// saw and what belay attempted upstream.
func storm(ctx context.Context, p *belayProc, n, conc int) (stormResult, error) {
	t := newTarget("belay-sim", p.base+"/v1", "storm", nil)
	t.client.Timeout = 90 * time.Second
	before, err := scrape(ctx, p.base)
	if err != nil {
		return stormResult{}, err
	}
	res := stormResult{requests: n, failures: map[string]int{}, byReason: map[string]float64{}, refused: map[string]float64{}, opens: map[string]float64{}}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n) && ctx.Err() == nil; i = next.Add(1) {
				// distinct bodies, so the simulator draws afresh for each
				b := body("storm", false, "storm request "+strconv.FormatInt(i, 10))
				r, err := t.do(ctx, b, false, nil)
				mu.Lock()
				switch {
				case err != nil:
					res.failures["transport: "+shortErr(err)]++
				case r.ok(false):
					res.succeeded++
				default:
					res.failures[fmt.Sprintf("%d %s", r.status, r.header.Get("X-Belay-Deployment"))]++
					if len(res.examples) < 3 {
						res.examples = append(res.examples, fmt.Sprintf("%d after %s attempts: %s", r.status,
							r.header.Get("X-Belay-Attempts"), strings.TrimSpace(string(r.errBody))))
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	after, err := scrape(ctx, p.base)
	if err != nil {
		return res, err
	}
	for _, dep := range []string{depStormA, depStormB} {
		res.attempts += sum(after, "belay_attempts_total", map[string]string{"deployment": dep}) -
			sum(before, "belay_attempts_total", map[string]string{"deployment": dep})
		if o := sum(after, "belay_breaker_opens_total", map[string]string{"deployment": dep}) -
			sum(before, "belay_breaker_opens_total", map[string]string{"deployment": dep}); o > 0 {
			res.opens[dep] = o
		}
		if r := sum(after, "belay_retries_refused_total", map[string]string{"deployment": dep}) -
			sum(before, "belay_retries_refused_total", map[string]string{"deployment": dep}); r > 0 {
			res.refused[dep] = r
		}
	}
	for _, s := range after {
		if s.name == "belay_attempts_total" && (s.labels["deployment"] == depStormA || s.labels["deployment"] == depStormB) {
			res.byReason[s.labels["reason"]] += s.value
		}
	}
	for _, s := range before {
		if s.name == "belay_attempts_total" && (s.labels["deployment"] == depStormA || s.labels["deployment"] == depStormB) {
			res.byReason[s.labels["reason"]] -= s.value
		}
	}
	return res, nil
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// permanentResult is the outcome of requests whose upstream answer is a
// permanent failure (400 context_length_exceeded).
type permanentResult struct {
	requests      int
	clientStatus  map[int]int
	upstreamHits  int64 // requests the upstream saw for them
	attemptsHdr   int   // sum of x-belay-attempts
	shouldRetryNo int   // answers carrying x-should-retry: false
}

// permanent sends n requests that the upstream refuses permanently and
// counts how many reached the upstream: more than n means belay retried a
// permanent failure.
func permanent(ctx context.Context, bt *target, upstreamBase string, n int) (permanentResult, error) {
	_, before, err := upstreamCounts(ctx, upstreamBase)
	if err != nil {
		return permanentResult{}, err
	}
	res := permanentResult{requests: n, clientStatus: map[int]int{}}
	b := body(bt.model, false, "please fail "+permanentMarker)
	for range n {
		r, err := bt.do(ctx, b, false, nil)
		if err != nil {
			return res, err
		}
		res.clientStatus[r.status]++
		a, _ := strconv.Atoi(r.header.Get("X-Belay-Attempts"))
		res.attemptsHdr += a
		if strings.EqualFold(r.header.Get("X-Should-Retry"), "false") {
			res.shouldRetryNo++
		}
	}
	_, after, err := upstreamCounts(ctx, upstreamBase)
	res.upstreamHits = after - before
	return res, err
}

// downResult is the outcome of client requests to alias "halfdown", whose
// first deployment is always down.
type downResult struct {
	requests       int
	succeeded      int
	attempts       float64 // all upstream attempts for these requests
	downAttempts   float64 // of which on the down deployment
	openedAfter    float64 // attempts on the down deployment when its breaker was first seen open (-1: never)
	openedRequests int     // client requests sent when it was first seen open
	finalState     string
}

// halfDown sends requests to alias "halfdown": first one at a time,
// reading the down deployment's breaker after each, until it opens (at
// most 50); then n in total from conc workers. It counts client successes
// and belay's upstream attempts.
func halfDown(ctx context.Context, p *belayProc, n, conc int) (downResult, error) {
	t := newTarget("belay-sim", p.base+"/v1", "halfdown", nil)
	t.client.Timeout = 90 * time.Second
	res := downResult{requests: n, openedAfter: -1}
	attempts := func() (all, down float64, err error) {
		ss, err := scrape(ctx, p.base)
		if err != nil {
			return 0, 0, err
		}
		down = sum(ss, "belay_attempts_total", map[string]string{"deployment": depDown})
		return down + sum(ss, "belay_attempts_total", map[string]string{"deployment": depHealthy}), down, nil
	}
	all0, down0, err := attempts()
	if err != nil {
		return res, err
	}
	var okN atomic.Int64
	send := func(i int64) {
		r, err := t.do(ctx, body("halfdown", false, "halfdown request "+strconv.FormatInt(i, 10)), false, nil)
		if err == nil && r.ok(false) {
			okN.Add(1)
		}
	}
	sent := 0
	for sent < min(n, 50) {
		sent++
		send(int64(sent))
		st, err := breakers(ctx, p.base)
		if err != nil {
			return res, err
		}
		if st[depDown] == "open" {
			_, d, err := attempts()
			if err != nil {
				return res, err
			}
			res.openedAfter, res.openedRequests = d-down0, sent
			break
		}
	}
	var next atomic.Int64
	next.Store(int64(sent))
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n) && ctx.Err() == nil; i = next.Add(1) {
				send(i)
			}
		})
	}
	wg.Wait()
	all1, down1, err := attempts()
	if err != nil {
		return res, err
	}
	res.succeeded = int(okN.Load())
	res.attempts, res.downAttempts = all1-all0, down1-down0
	if st, err := breakers(ctx, p.base); err == nil {
		res.finalState = st[depDown]
	}
	return res, nil
}

// formatCounts prints a count map, largest first.
func formatCounts[K comparable](m map[K]int) string {
	type kv struct {
		k K
		v int
	}
	var list []kv
	for k, v := range m {
		list = append(list, kv{k, v})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v })
	var parts []string
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%v×%d", e.k, e.v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
