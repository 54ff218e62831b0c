package gateway

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the gateway's Prometheus metrics, on a registry of its own
// (so two Servers in one process do not collide). All names start with
// belay_. The run layer's counters (belay_stops_total, runs in memory,
// store writes) are exported when Deps.Runs reports them, as RunTurns
// does (see watchRuns).
type metrics struct {
	reg            *prometheus.Registry
	requests       *prometheus.CounterVec   // dialect, status
	attempts       *prometheus.CounterVec   // deployment, reason ("ok" for success)
	retries        *prometheus.CounterVec   // deployment
	retriesRefused *prometheus.CounterVec   // deployment
	fallbacks      *prometheus.CounterVec   // alias
	breaker        *prometheus.GaugeVec     // deployment: 0 closed, 1 half-open, 2 open
	breakerOpens   *prometheus.CounterVec   // deployment: transitions to open
	spend          *spendCounter            // tenant
	latency        *prometheus.HistogramVec // dialect, stream
	ttft           *prometheus.HistogramVec // dialect
	alerts         *prometheus.CounterVec   // scope ("run" or "tenant"), threshold
	refusals       *prometheus.CounterVec   // dialect, reason
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_requests_total",
			Help: "Model calls answered, by client dialect and HTTP status."}, []string{"dialect", "status"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_attempts_total",
			Help: "Upstream attempts, by deployment and failure reason (ok for success)."}, []string{"deployment", "reason"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_retries_total",
			Help: "Attempts that retried the same deployment."}, []string{"deployment"}),
		retriesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_retries_refused_total",
			Help: "Retries the retry policy wanted but the deployment's retry budget refused (retry.budget_ratio): the call moved to the next deployment, or failed with attempts left."}, []string{"deployment"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_fallbacks_total",
			Help: "Calls served by other than the alias's first deployment."}, []string{"alias"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "belay_breaker_state",
			Help: "Circuit breaker state per deployment: 0 closed, 1 half-open, 2 open."}, []string{"deployment"}),
		breakerOpens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_breaker_opens_total",
			Help: "Times a deployment's circuit breaker opened (an open period shorter than the scrape interval shows here, not in belay_breaker_state)."}, []string{"deployment"}),
		spend: &spendCounter{desc: prometheus.NewDesc("belay_spend_usd_total",
			"Money charged for model calls, in USD.", []string{"tenant"}, nil)},
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "belay_request_duration_seconds",
			Help: "Time from request to the end of the response.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}, []string{"dialect", "stream"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "belay_time_to_first_token_seconds",
			Help: "Time from request to the first model output relayed to a streaming client.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 10)}, []string{"dialect"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_budget_alerts_total",
			Help: "Budget alert thresholds crossed (a tenant budget's alert_at), by scope (tenant; run where run alerts are set) and threshold."}, []string{"scope", "threshold"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_refusals_total",
			Help: "Model calls belay refused itself, answered with x-should-retry: false, by client dialect and failure reason (max_turns_exceeded, deadline_exceeded, budget_exceeded, killed, run_ended, invalid_request, authentication, ...): a call to a run whose deadline passed after its last call counts here as deadline_exceeded, while the run, ended by that last call's outcome, is not in belay_stops_total."}, []string{"dialect", "reason"}),
	}
	m.reg.MustRegister(m.requests, m.attempts, m.retries, m.retriesRefused, m.fallbacks, m.breaker, m.breakerOpens, m.spend, m.latency, m.ttft, m.alerts, m.refusals,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// alert counts a crossed budget threshold.
func (m *metrics) alert(a budget.Alert) {
	m.alerts.WithLabelValues(a.Scope.Kind(), strconv.FormatFloat(a.Threshold, 'g', -1, 64)).Inc()
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func (m *metrics) breakerState(deployment string, s breaker.State) {
	v := 0.0
	switch s {
	case breaker.HalfOpen:
		v = 1
	case breaker.Open:
		v = 2
		m.breakerOpens.WithLabelValues(deployment).Inc()
	}
	m.breaker.WithLabelValues(deployment).Set(v)
}

// observe records one finished call. A refused call (bad key, malformed
// body, unknown model, a run's limit) is counted here by its status, and
// by its reason in belay_refusals_total; the runs belay stops are counted
// by the run layer (belay_stops_total).
func (m *metrics) observe(c *call, status int) {
	d := string(c.f.dialect())
	m.requests.WithLabelValues(d, strconv.Itoa(status)).Inc()
	if c.refused != "" {
		m.refusals.WithLabelValues(d, string(c.refused)).Inc()
	}
	m.latency.WithLabelValues(d, strconv.FormatBool(c.req != nil && c.req.stream)).Observe(time.Since(c.start).Seconds())
	if c.ttft > 0 {
		m.ttft.WithLabelValues(d).Observe(c.ttft.Seconds())
	}
}

// observeRoute records the attempts of one routed call.
func (m *metrics) observeRoute(alias string, res *route.Result) {
	prev := ""
	for _, a := range res.Attempts() {
		reason := "ok"
		if a.Failure != nil {
			reason = string(a.Failure.Reason)
		}
		m.attempts.WithLabelValues(a.Deployment, reason).Inc()
		if a.RetryRefused {
			m.retriesRefused.WithLabelValues(a.Deployment).Inc()
		}
		if a.Deployment == prev {
			m.retries.WithLabelValues(a.Deployment).Inc()
		}
		prev = a.Deployment
	}
	if res.Degraded {
		m.fallbacks.WithLabelValues(alias).Inc()
	}
}

func (m *metrics) addSpend(tenant string, cost budget.USD) {
	if cost > 0 {
		m.spend.add(tenant, cost)
	}
}

// spendCounter is belay_spend_usd_total: per tenant, the exact sum of the
// costs charged (budget.USD), exported as dollars. A float counter summed
// costs with rounding noise ($0.0152270999…).
type spendCounter struct {
	desc  *prometheus.Desc
	total sync.Map // tenant → *atomic.Int64 (budget.USD)
}

func (c *spendCounter) add(tenant string, cost budget.USD) {
	v, ok := c.total.Load(tenant)
	if !ok {
		v, _ = c.total.LoadOrStore(tenant, new(atomic.Int64))
	}
	n := v.(*atomic.Int64)
	for { // USD.Add saturates where an int64 sum would wrap negative
		old := n.Load()
		if n.CompareAndSwap(old, int64(budget.USD(old).Add(cost))) {
			return
		}
	}
}

func (c *spendCounter) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *spendCounter) Collect(ch chan<- prometheus.Metric) {
	c.total.Range(func(k, v any) bool {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, budget.USD(v.(*atomic.Int64).Load()).Float(), k.(string))
		return true
	})
}

// watchRuns exports the run manager's counters: runs stopped by their
// limits or a kill, runs held in memory, and store writes (settles, run
// records) retried and given up — a given-up write is spend or a record
// the store does not hold.
func (m *metrics) watchRuns(stats func() run.Stats) {
	m.reg.MustRegister(
		stopsCollector{stats: stats, desc: prometheus.NewDesc("belay_stops_total",
			"Runs belay stopped, by stop reason: a limit of the run (max_turns_exceeded, deadline_exceeded, budget_exceeded) "+
				"or a kill (killed); each run once per process that ended it, as its record says (status stopped): replicas sharing a store that all held a killed run each count it. Refused requests are in belay_requests_total by status.",
			[]string{"reason"}, nil)},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "belay_runs_in_memory",
			Help: "Runs the gateway holds in memory."}, func() float64 { return float64(stats().Live) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "belay_store_write_retries_total",
			Help: "Store writes (settles, run records) that failed and were retried."},
			func() float64 { return float64(stats().StoreRetries) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "belay_store_write_failures_total",
			Help: "Store writes given up after retrying: spend or run records the store does not hold."},
			func() float64 { return float64(stats().StoreFailures) }),
	)
}

// stopsCollector exports run.Stats.Stops as belay_stops_total{reason}.
type stopsCollector struct {
	desc  *prometheus.Desc
	stats func() run.Stats
}

func (c stopsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c stopsCollector) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range c.stats().Stops {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), string(reason))
	}
}
