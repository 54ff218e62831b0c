package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadStreamClassifiesEndings(t *testing.T) {
	start := time.Now()
	cases := []struct {
		name       string
		body       string
		done, errE bool
		ttft       bool
	}{
		{"complete", strings.Join(streamEvents, "") + usageEvent + doneEvent, true, false, true},
		{"cut before [DONE]", strings.Join(streamEvents, ""), false, false, true},
		{"openai error event", streamEvents[1] + `data: {"error":{"message":"boom","type":"server_error"}}` + "\n\n", false, true, true},
		{"event: error line", "event: error\ndata: {\"type\":\"error\"}\n\n", false, true, false},
		{"role chunk only", streamEvents[0], false, false, false},
		{"error field null is not an error", `data: {"error":null,"choices":[]}` + "\n\n" + doneEvent, true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r result
			readStream(strings.NewReader(c.body), start, &r)
			if r.done != c.done || r.errEv != c.errE || (r.ttft > 0) != c.ttft || r.readErr != nil {
				t.Errorf("done=%v errEv=%v ttft=%v readErr=%v; want done=%v errEv=%v ttft>0=%v",
					r.done, r.errEv, r.ttft, r.readErr, c.done, c.errE, c.ttft)
			}
		})
	}
}

func TestQuantileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := quantile(ds, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("quantile sorted its input in place")
	}
}

func TestParseMetricsAndSum(t *testing.T) {
	text := `# HELP belay_attempts_total Upstream attempts.
# TYPE belay_attempts_total counter
belay_attempts_total{deployment="down",reason="server_error"} 4
belay_attempts_total{deployment="down",reason="circuit_open"} 1
belay_attempts_total{deployment="none",reason="ok"} 120
belay_breaker_state{deployment="down"} 2
process_resident_memory_bytes 5.1e+07
`
	ss, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(ss, "belay_attempts_total", map[string]string{"deployment": "down"}); got != 5 {
		t.Errorf("down attempts = %v, want 5", got)
	}
	if got := sum(ss, "belay_attempts_total", nil); got != 125 {
		t.Errorf("all attempts = %v, want 125", got)
	}
	if got := sum(ss, "process_resident_memory_bytes", nil); got != 5.1e7 {
		t.Errorf("rss = %v, want 5.1e7", got)
	}
}

// TestMemoryReadingIsTheMedian checks that a memory reading is the median
// of its samples, and that the report shows their range.
func TestMemoryReadingIsTheMedian(t *testing.T) {
	samples := []int64{71000, 90000, 70000, 72000, 69000}
	if got := median(samples); got != 71000 {
		t.Errorf("median = %d, want 71000", got)
	}
	if samples[0] != 71000 || samples[1] != 90000 {
		t.Errorf("median reordered its input: %v", samples)
	}
	if got := median([]int64{4, 1, 3, 2}); got != 2 {
		t.Errorf("median of an even count = %d, want the lower middle 2", got)
	}
	got := rssText([]rssReading{{requests: 100000, kb: 71680, samples: []int64{70656, 71680, 92160}}})
	want := "70.0 MiB at 100000 requests (median of 3: 69.0–90.0)"
	if got != want {
		t.Errorf("rssText = %q, want %q", got, want)
	}
}

// TestUpstreamThroughRelays checks the helper roles together: the
// upstream's answers, its permanent-failure marker and counters, and the
// bare proxy and the -relay diagnostic each relaying a plain answer, a
// complete stream and the upstream's 400; the relay refuses a body
// without a model itself.
func TestUpstreamThroughRelays(t *testing.T) {
	for _, c := range []struct {
		name  string
		relay func(*url.URL) http.Handler
	}{{"proxy", bareProxy}, {"relay", parsingRelay}} {
		t.Run(c.name, func(t *testing.T) {
			st := &upstreamStats{}
			up := httptest.NewServer(upstreamHandler(st))
			defer up.Close()
			u, _ := url.Parse(up.URL)
			px := httptest.NewServer(c.relay(u))
			defer px.Close()
			ctx := context.Background()
			tg := newTarget(c.name, px.URL+"/v1", "gpt-4o-mini", nil)

			r, err := tg.do(ctx, tg.plain, false, nil)
			if err != nil || !r.ok(false) {
				t.Fatalf("plain: status %d, err %v", r.status, err)
			}
			r, err = tg.do(ctx, tg.stream, true, nil)
			if err != nil || !r.ok(true) || r.ttft <= 0 {
				t.Fatalf("stream: status %d done %v errEv %v ttft %v err %v", r.status, r.done, r.errEv, r.ttft, err)
			}
			r, err = tg.do(ctx, body("gpt-4o-mini", false, "x "+permanentMarker), false, nil)
			if err != nil || r.status != http.StatusBadRequest {
				t.Fatalf("permanent: status %d, err %v; want 400", r.status, err)
			}
			sent := int64(3)
			if c.name == "relay" {
				r, err = tg.do(ctx, []byte(`{"messages":[]}`), false, nil)
				if err != nil || r.status != http.StatusBadRequest {
					t.Fatalf("no model: status %d, err %v; want 400", r.status, err)
				}
				sent++
			}
			reqs, perm, err := upstreamCounts(ctx, up.URL)
			if err != nil || reqs != 3 || perm != 1 {
				t.Errorf("upstream counts = %d requests, %d permanent, %v; want 3, 1", reqs, perm, err)
			}
			if n := tg.sent.Load(); n != sent {
				t.Errorf("sent = %d, want %d", n, sent)
			}
		})
	}
}

// statCPU reads utime and stime (fields 14 and 15, in ticks of 10 ms)
// after the command name, which may hold spaces and parentheses.
func TestStatCPU(t *testing.T) {
	line := "8359 (belay (b) x) S 1 8359 1 0 -1 4194304 1234 0 0 0 731 254 0 0 20 0 9 0 2046 1464147968 17523\n"
	got, err := statCPU([]byte(line))
	if err != nil || got != 9850*time.Millisecond {
		t.Errorf("statCPU = %v, %v; want 9.85s (731 + 254 ticks)", got, err)
	}
	if _, err := statCPU([]byte("8359 (belay) S 1 2")); err == nil {
		t.Error("a short line was read")
	}
	if d, err := cpuTime(os.Getpid()); err != nil || d < 0 {
		t.Errorf("cpuTime of this process: %v, %v", d, err)
	}
}
