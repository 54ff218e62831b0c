package trace

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP receiver on 127.0.0.1 that keeps each request.
type collector struct {
	srv  *httptest.Server
	reqs chan *coltracepb.ExportTraceServiceRequest
}

func newCollector(t *testing.T, status int) *collector {
	c := &collector{reqs: make(chan *coltracepb.ExportTraceServiceRequest, 16)}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("request %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if got := r.Header.Get("X-Api-Key"); got != "k1" {
			t.Errorf("header X-Api-Key = %q", got)
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decode: %v", err)
		}
		c.reqs <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(status)
		if status == http.StatusOK {
			b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
			_, _ = w.Write(b)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

func TestExporterSendsOTLP(t *testing.T) {
	c := newCollector(t, http.StatusOK)
	exp, err := NewExporter(t.Context(), OTLPConfig{Endpoint: c.srv.URL, Headers: map[string]string{"X-Api-Key": "k1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	spans := refundRun(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 10)
	spans[1].SetAttr(AttrInputTokens, float64(130)) // as after a JSON round trip
	spans[1].Status = StatusError
	spans[1].SetAttr(AttrErrorType, "rate_limited")
	if err := exp.WriteSpans(t.Context(), spans); err != nil {
		t.Fatalf("WriteSpans: %v", err)
	}
	req := <-c.reqs
	if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("resource/scope spans: %v", req)
	}
	rs := req.ResourceSpans[0]
	if v := attr(rs.Resource.Attributes, "service.name"); v.GetStringValue() != "belay" {
		t.Errorf("service.name = %v", v)
	}
	got := rs.ScopeSpans[0].Spans
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	want := []string{"invoke_agent support", "chat gpt-4o", "attempt openai/gpt-4o", "execute_tool issue_refund", "chat gpt-4o"}
	if !slices.Equal(names, want) {
		t.Fatalf("span names = %v, want %v", names, want)
	}
	tid := TraceIDFor(spans[0].RunID)
	root, chat := got[0], got[1]
	for i, s := range got {
		if hex.EncodeToString(s.TraceId) != tid.String() {
			t.Errorf("span %d trace id %x, want %s (from the run id)", i, s.TraceId, tid)
		}
		if hex.EncodeToString(s.SpanId) != spans[i].SpanID {
			t.Errorf("span %d span id %x, want %s", i, s.SpanId, spans[i].SpanID)
		}
	}
	if len(root.ParentSpanId) != 0 || hex.EncodeToString(chat.ParentSpanId) != spans[0].SpanID {
		t.Errorf("parents: root %x, chat %x", root.ParentSpanId, chat.ParentSpanId)
	}
	if v := attr(chat.Attributes, AttrRequestModel); v.GetStringValue() != "gpt-4o" {
		t.Errorf("%s = %v", AttrRequestModel, v)
	}
	if v := attr(chat.Attributes, AttrInputTokens); v.GetIntValue() != 130 {
		t.Errorf("%s = %v, want int 130", AttrInputTokens, v)
	}
	if chat.Kind != tracepb.Span_SPAN_KIND_CLIENT || root.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("kinds: chat %v, root %v", chat.Kind, root.Kind)
	}
	if chat.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || chat.Status.GetMessage() != "rate_limited" {
		t.Errorf("chat status = %v", chat.Status)
	}
	if v := attr(got[3].Attributes, AttrToolArguments); v.GetStringValue() != `{"amount":10}` {
		t.Errorf("map attribute sent as %v, want JSON text", v)
	}
	if ev := got[4].Events; len(ev) != 1 || ev[0].Name != "breaker.closed" {
		t.Errorf("events = %v", ev)
	}
	if got[2].StartTimeUnixNano != uint64(spans[2].Start.UnixNano()) || got[2].EndTimeUnixNano != uint64(spans[2].End.UnixNano()) {
		t.Errorf("attempt times %d..%d", got[2].StartTimeUnixNano, got[2].EndTimeUnixNano)
	}
}

// Through a Recorder, the OTLP side gets what capture allows.
func TestExporterThroughRecorder(t *testing.T) {
	c := newCollector(t, http.StatusOK)
	exp, err := NewExporter(t.Context(), OTLPConfig{Endpoint: c.srv.URL + "/", Headers: map[string]string{"X-Api-Key": "k1"}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(exp, RecorderOptions{Payload: PayloadPolicy{Capture: CaptureRedacted}})
	s := ToolSpan(RunSpan("t", "run-9", "a", time.Unix(1, 0)), "send_email", time.Unix(2, 0))
	s.SetAttr(AttrToolArguments, `{"to":"eve@example.com"}`)
	r.Record(s)
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	req := <-c.reqs
	sp := req.ResourceSpans[0].ScopeSpans[0].Spans
	if len(sp) != 1 {
		t.Fatalf("%d spans exported, want 1", len(sp))
	}
	if v := attr(sp[0].Attributes, AttrToolArguments); v.GetStringValue() != `{"to":"[REDACTED:email]"}` {
		t.Errorf("exported arguments %v", v)
	}
}

func TestExporterErrors(t *testing.T) {
	c := newCollector(t, http.StatusBadRequest)
	exp, err := NewExporter(t.Context(), OTLPConfig{Endpoint: c.srv.URL, Headers: map[string]string{"X-Api-Key": "k1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.WriteSpans(t.Context(), []Span{{SpanID: NewID(), RunID: "r", Name: "x"}}); err == nil {
		t.Error("WriteSpans succeeded against a 400")
	}
	for _, bad := range []string{"", "127.0.0.1:4318", "ftp://h/x", "http://"} {
		if _, err := NewExporter(t.Context(), OTLPConfig{Endpoint: bad}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewExporter(%q) err = %v", bad, err)
		}
	}
}
