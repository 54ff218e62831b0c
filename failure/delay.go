package failure

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxDelay is the longest delay ParseDelay, ParseRetryAfter and the
// classifiers report. A server that asks for more (or for a number too large
// to represent) gets MaxDelay: 24 hours, far past any retry policy's cap, so
// a clamped value still means "do not wait for this".
const MaxDelay = 24 * time.Hour

// ParseDelay parses one server-supplied delay and returns it, clamped to
// [0, MaxDelay]. It accepts every form the providers send:
//
//   - delay-seconds, integer or fractional: "17", "1.5" (Retry-After,
//     RFC 9110 §10.2.3, plus the fractional form some servers send);
//   - a duration with units, as Go prints them and as protobuf's JSON
//     Duration is written: "19s", "1.5s", "6m0s", "20ms", "1h2m3.5s"
//     (units ns, us, µs, ms, s, m, h, d);
//   - an HTTP-date in any of the three forms of RFC 9110 §5.6.7
//     ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 850, asctime);
//   - an RFC 3339 time ("2026-11-29T10:00:17Z", Anthropic's
//     anthropic-ratelimit-*-reset headers).
//
// A date is converted to a delay relative to now; a date in the past gives 0.
// ok is false for an empty string, garbage, a negative value, NaN or Inf.
func ParseDelay(s string, now time.Time) (d time.Duration, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if v, ok := parseDecimal(s); ok {
		return scaleDelay(v, time.Second), true
	}
	if d, ok := parseUnitDuration(s); ok {
		return d, true
	}
	if t, err := http.ParseTime(s); err == nil {
		return delayUntil(t, now), true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return delayUntil(t, now), true
	}
	return 0, false
}

// ParseRetryAfter returns the delay a response's headers ask for before a
// retry. retry-after-ms (milliseconds, integer or fractional; sent by OpenAI
// and Azure OpenAI) is read first because it is more precise; then
// retry-after (RFC 9110 §10.2.3: delay-seconds or an HTTP-date, taken
// relative to now; fractional seconds are accepted too). A header that does
// not parse is ignored in favour of the next. The result is clamped to
// [0, MaxDelay]. ok is false when neither header gives a delay.
//
// The rate-limit reset headers are not read here; see ParseRateLimitReset.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := headerValue(h, "retry-after-ms"); v != "" {
		if ms, ok := parseDecimal(strings.TrimSpace(v)); ok {
			return scaleDelay(ms, time.Millisecond), true
		}
	}
	if v := headerValue(h, "retry-after"); v != "" {
		if d, ok := ParseDelay(v, now); ok {
			return d, true
		}
	}
	return 0, false
}

// rateLimitHeaders pairs each provider's "remaining" header with its "reset"
// header. Sources: OpenAI rate limits guide (x-ratelimit-*, reset as a
// duration such as "1s" or "6m0s"); Anthropic rate limits page
// (anthropic-ratelimit-*, reset as an RFC 3339 time).
var rateLimitHeaders = [][2]string{
	{"x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
	{"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	{"anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"},
	{"anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"},
	{"anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"},
	{"anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"},
}

// ParseRateLimitReset returns the wait until the exhausted rate limit resets,
// from OpenAI's x-ratelimit-reset-{requests,tokens} or Anthropic's
// anthropic-ratelimit-*-reset headers. When some limits report remaining 0,
// the longest reset among those is returned; otherwise the longest reset of
// all (waiting for it frees every limit). The classifiers use it only for a
// rate-limit failure with no retry-after, retry-after-ms or RetryInfo, since
// these headers come with every response, successful or not.
func ParseRateLimitReset(h http.Header, now time.Time) (time.Duration, bool) {
	var exhausted, longest time.Duration
	var haveExhausted, haveAny bool
	for _, p := range rateLimitHeaders {
		d, ok := ParseDelay(headerValue(h, p[1]), now)
		if !ok {
			continue
		}
		longest, haveAny = max(longest, d), true
		if strings.TrimSpace(headerValue(h, p[0])) == "0" {
			exhausted, haveExhausted = max(exhausted, d), true
		}
	}
	if haveExhausted {
		return exhausted, true
	}
	return longest, haveAny
}

// headerValue is h.Get(name), also finding a key stored without
// canonicalisation (http.Header{"retry-after": ...}).
func headerValue(h http.Header, name string) string {
	if h == nil {
		return ""
	}
	if v := h.Get(name); v != "" {
		return v
	}
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// parseDecimal accepts only unsigned decimal numbers: digits with an optional
// fraction ("17", "1.5"). Signs, exponents, NaN, Inf, hex and underscores are
// refused. Values too large for a float64 come back as +Inf, which
// scaleDelay clamps.
func parseDecimal(s string) (float64, bool) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if !allDigits(intPart) || (hasDot && !allDigits(frac)) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(v, 1) {
		return 0, false
	}
	return v, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// durationUnits lists the units parseUnitDuration accepts, longer spellings
// first so that "ms" is not read as "m".
var durationUnits = []struct {
	name string
	unit time.Duration
}{
	{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"µs", time.Microsecond},
	{"μs", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second},
	{"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour},
}

// parseUnitDuration parses a sequence of number+unit pairs ("6m0s", "1.5s").
// Unlike time.ParseDuration it clamps instead of failing on overflow, refuses
// signs, and knows "d".
func parseUnitDuration(s string) (time.Duration, bool) {
	var total float64
	for s != "" {
		i := 0
		for i < len(s) && (s[i] == '.' || (s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		v, ok := parseDecimal(s[:i])
		if !ok {
			return 0, false
		}
		s = s[i:]
		matched := false
		for _, u := range durationUnits {
			if strings.HasPrefix(s, u.name) {
				total += v * float64(u.unit)
				s = s[len(u.name):]
				matched = true
				break
			}
		}
		if !matched {
			return 0, false
		}
	}
	return scaleDelay(total, 1), true
}

// scaleDelay converts v units to a Duration clamped to [0, MaxDelay], rounding
// to the nearest nanosecond.
func scaleDelay(v float64, unit time.Duration) time.Duration {
	ns := v * float64(unit)
	switch {
	case math.IsNaN(ns) || ns <= 0:
		return 0
	case ns >= float64(MaxDelay):
		return MaxDelay
	}
	return time.Duration(math.Round(ns))
}

// delayUntil is t - now clamped to [0, MaxDelay] (Time.Sub saturates, so
// extreme dates cannot overflow).
func delayUntil(t, now time.Time) time.Duration {
	return min(max(t.Sub(now), 0), MaxDelay)
}
