package failure

import (
	"net/http"
	"testing"
	"time"
)

func TestParseDelay(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		// delay-seconds, integer and fractional.
		{"17", 17 * time.Second, true},
		{" 0 ", 0, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0.25", 250 * time.Millisecond, true},
		{"007", 7 * time.Second, true},
		// Durations with units (Go style, protobuf Duration JSON).
		{"19s", 19 * time.Second, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"6m0s", 6 * time.Minute, true},
		{"20ms", 20 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"3.000000001s", 3*time.Second + 1, true},
		{"250us", 250 * time.Microsecond, true},
		{"1d", MaxDelay, true},
		// HTTP-dates, RFC 9110 §5.6.7: IMF-fixdate, RFC 850, asctime.
		{"Sun, 29 Nov 2026 10:00:30 GMT", 30 * time.Second, true},
		{"Sunday, 29-Nov-26 10:01:00 GMT", time.Minute, true},
		{"Sun Nov 29 10:00:05 2026", 5 * time.Second, true},
		// RFC 3339 (Anthropic reset headers).
		{"2026-11-29T10:00:17Z", 17 * time.Second, true},
		{"2026-11-29T11:00:17.5+01:00", 17500 * time.Millisecond, true},
		// Dates in the past: wait 0.
		{"Sat, 28 Nov 2026 10:00:00 GMT", 0, true},
		{"1994-11-06T08:49:37Z", 0, true},
		// Huge values clamp instead of overflowing.
		{"999999999999999999999999", MaxDelay, true},
		{"86401", MaxDelay, true},
		{"100000000h", MaxDelay, true},
		{"Fri, 31 Dec 9999 23:59:59 GMT", MaxDelay, true},
		{"1e400", 0, false},
		// Garbage, negatives, NaN, Inf, empty.
		{"", 0, false},
		{"   ", 0, false},
		{"soon", 0, false},
		{"-1", 0, false},
		{"-1.5s", 0, false},
		{"+3", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"1_000", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1.2.3", 0, false},
		{"5 s", 0, false},
		{"5sec", 0, false},
		{"s", 0, false},
		{"Sun, 32 Nov 2026 10:00:30 GMT", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseDelay(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseDelay(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"none", http.Header{}, 0, false},
		{"nil header", nil, 0, false},
		{"seconds", hdr("retry-after", "2"), 2 * time.Second, true},
		{"ms wins", hdr("retry-after-ms", "250", "retry-after", "1"), 250 * time.Millisecond, true},
		{"fractional ms", hdr("retry-after-ms", "1500.5"), 1500*time.Millisecond + 500*time.Microsecond, true},
		{"garbage ms falls back", hdr("retry-after-ms", "-5", "retry-after", "7"), 7 * time.Second, true},
		{"http date", hdr("retry-after", "Sun, 29 Nov 2026 10:00:30 GMT"), 30 * time.Second, true},
		{"past date", hdr("retry-after", "Sun, 29 Nov 2026 09:00:00 GMT"), 0, true},
		{"huge ms clamps", hdr("retry-after-ms", "99999999999999999999"), MaxDelay, true},
		{"both garbage", hdr("retry-after-ms", "x", "retry-after", "y"), 0, false},
		{"lower-case key not canonicalised", http.Header{"retry-after": {"9"}}, 9 * time.Second, true},
		{"reset headers are not retry-after", hdr("x-ratelimit-reset-requests", "1s"), 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: got %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseRateLimitReset(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"none", http.Header{}, 0, false},
		{"exhausted limit chosen", hdr("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1.5s",
			"x-ratelimit-remaining-tokens", "5000", "x-ratelimit-reset-tokens", "6m0s"), 1500 * time.Millisecond, true},
		{"longest when none exhausted", hdr("x-ratelimit-reset-requests", "20ms", "x-ratelimit-reset-tokens", "2s"), 2 * time.Second, true},
		{"anthropic rfc3339", hdr("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-11-29T10:00:17Z"), 17 * time.Second, true},
		{"anthropic past reset", hdr("anthropic-ratelimit-tokens-reset", "2026-11-29T09:59:00Z"), 0, true},
		{"garbage ignored", hdr("x-ratelimit-reset-tokens", "later"), 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRateLimitReset(tt.h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: got %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
