package trace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// OTLPConfig configures export to an OpenTelemetry collector or backend
// (Jaeger, Tempo, Langfuse) over OTLP/HTTP with protobuf bodies.
type OTLPConfig struct {
	// Endpoint is the collector's base URL, e.g. "http://127.0.0.1:4318".
	// With no path (or "/"), "/v1/traces" is appended, as for
	// OTEL_EXPORTER_OTLP_ENDPOINT; a URL with a path is used as it is.
	// "http" sends in clear text, "https" uses TLS.
	Endpoint string `yaml:"endpoint"`
	// Headers are sent with every request (an API key for a hosted backend).
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one export request. Default 10 s.
	Timeout time.Duration `yaml:"timeout"`
	// ServiceName is the resource's service.name. Default "belay".
	ServiceName string `yaml:"service_name"`
}

// Exporter sends belay spans as OTLP spans. It is a SpanWriter: wrap it in
// a Recorder (NewRecorder(exp, opts)) to get batching and backpressure, and
// put that Recorder in another Recorder's Fanout to export what is stored.
// The exporter's own retries are off; the Recorder retries. Safe for
// concurrent use.
type Exporter struct {
	exp   *otlptrace.Exporter
	res   *resource.Resource
	scope instrumentation.Scope
}

var _ SpanWriter = (*Exporter)(nil)

// NewExporter builds an OTLP/HTTP exporter for cfg. It does not connect; an
// unreachable endpoint shows up as WriteSpans errors. A bad Endpoint is an
// error wrapping ErrInvalidConfig.
func NewExporter(ctx context.Context, cfg OTLPConfig) (*Exporter, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: otlp endpoint %q: want http(s)://host:port[/path]", ErrInvalidConfig, cfg.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(u.String()),
		otlptracehttp.WithTimeout(timeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("trace: otlp exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "belay"
	}
	return &Exporter{
		exp:   exp,
		res:   resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(name)),
		scope: instrumentation.Scope{Name: "github.com/belay-run/belay/trace"},
	}, nil
}

// WriteSpans converts spans (see ToOTel) and exports them in one request.
func (e *Exporter) WriteSpans(ctx context.Context, spans []Span) error {
	if len(spans) == 0 {
		return nil
	}
	ro := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		stub := ToOTel(s)
		stub.Resource, stub.InstrumentationScope = e.res, e.scope
		ro[i] = stub.Snapshot()
	}
	if err := e.exp.ExportSpans(ctx, ro); err != nil {
		return fmt.Errorf("trace: otlp export: %w", err)
	}
	return nil
}

// Shutdown flushes and closes the exporter's HTTP client.
func (e *Exporter) Shutdown(ctx context.Context) error { return e.exp.Shutdown(ctx) }

// ToOTel converts a belay span to an OpenTelemetry span stub. Ids are
// derived deterministically: the trace id is the first 16 bytes of
// SHA-256(RunID) (TraceID when RunID is empty), so every span of a run lands
// in one trace; a span id of 16 hex digits (NewID) is used as it is, any
// other is hashed to 8 bytes. Kinds: model and attempt are client spans (a
// call to a provider), run and tool internal. StatusError carries error.type
// as its description. Values that OTLP attributes cannot hold (maps, mixed
// slices) are sent as JSON strings.
func ToOTel(s Span) tracetest.SpanStub {
	traceKey := s.RunID
	if traceKey == "" {
		traceKey = s.TraceID
	}
	tid := TraceIDFor(traceKey)
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: tid, SpanID: spanIDFor(s.SpanID), TraceFlags: oteltrace.FlagsSampled,
	})
	var parent oteltrace.SpanContext
	if s.ParentID != "" {
		parent = oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
			TraceID: tid, SpanID: spanIDFor(s.ParentID), TraceFlags: oteltrace.FlagsSampled,
		})
	}
	stub := tracetest.SpanStub{
		Name: s.Name, SpanContext: sc, Parent: parent, SpanKind: otelKind(s.Kind),
		StartTime: s.Start, EndTime: s.End, Attributes: otelAttrs(s.Attrs),
	}
	if stub.EndTime.IsZero() {
		stub.EndTime = s.Start
	}
	switch s.Status {
	case StatusOK:
		stub.Status = sdktrace.Status{Code: codes.Ok}
	case StatusError:
		desc, _ := s.Attrs[AttrErrorType].(string)
		stub.Status = sdktrace.Status{Code: codes.Error, Description: desc}
	}
	for _, ev := range s.Events {
		stub.Events = append(stub.Events, sdktrace.Event{Name: ev.Name, Time: ev.Time, Attributes: otelAttrs(ev.Attrs)})
	}
	return stub
}

// TraceIDFor returns the OpenTelemetry trace id of a run: the first 16 bytes
// of SHA-256(runID).
func TraceIDFor(runID string) oteltrace.TraceID {
	sum := sha256.Sum256([]byte(runID))
	var id oteltrace.TraceID
	copy(id[:], sum[:16])
	return id
}

func spanIDFor(id string) oteltrace.SpanID {
	var out oteltrace.SpanID
	if len(id) == 16 {
		if b, err := hex.DecodeString(id); err == nil && !allZero(b) {
			copy(out[:], b)
			return out
		}
	}
	sum := sha256.Sum256([]byte(id))
	copy(out[:], sum[:8])
	return out
}

func allZero(b []byte) bool { return strings.Trim(string(b), "\x00") == "" }

func otelKind(k SpanKind) oteltrace.SpanKind {
	switch k {
	case KindModel, KindAttempt:
		return oteltrace.SpanKindClient
	}
	return oteltrace.SpanKindInternal
}

func otelAttrs(attrs map[string]any) []attribute.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		out = append(out, otelAttr(k, v))
	}
	return out
}

// intAttrs hold counts: a float64 with an integral value (what a JSON round
// trip through the store makes of an int64) is sent as an integer.
var intAttrs = map[string]bool{
	AttrInputTokens: true, AttrOutputTokens: true, AttrCachedInputTokens: true, AttrCacheWriteTokens: true, AttrCacheWrite1hTokens: true,
	AttrReasoningTokens: true, AttrAttempt: true, AttrWaitMS: true, AttrLatencyMS: true,
}

func otelAttr(k string, v any) attribute.KeyValue {
	switch x := v.(type) {
	case string:
		return attribute.String(k, x)
	case bool:
		return attribute.Bool(k, x)
	case int:
		return attribute.Int(k, x)
	case int64:
		return attribute.Int64(k, x)
	case float64:
		if intAttrs[k] && x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return attribute.Int64(k, int64(x))
		}
		return attribute.Float64(k, x)
	case []string:
		return attribute.StringSlice(k, x)
	case []any:
		if ss, ok := allStrings(x); ok {
			return attribute.StringSlice(k, ss)
		}
	case fmt.Stringer:
		return attribute.String(k, x.String())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return attribute.String(k, fmt.Sprint(v))
	}
	return attribute.String(k, string(b))
}

func allStrings(xs []any) ([]string, bool) {
	out := make([]string, len(xs))
	for i, x := range xs {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}
