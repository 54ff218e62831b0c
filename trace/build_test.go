package trace

import (
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/belay-run/belay/failure"
)

func TestNewIDs(t *testing.T) {
	id, tid := NewID(), NewTraceID()
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(id) {
		t.Errorf("NewID() = %q", id)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(tid) {
		t.Errorf("NewTraceID() = %q", tid)
	}
	if NewID() == id {
		t.Error("two NewID calls gave the same id")
	}
}

func TestBuilders(t *testing.T) {
	t0 := time.Unix(10, 0)
	run := RunSpan("tr", "run-1", "support", t0)
	m := ModelSpan(run, "gpt-4o", t0)
	a := AttemptSpan(m, "openai/gpt-4o", 2, t0)
	tool := ToolSpan(run, "issue_refund", t0)
	if run.ParentID != "" || run.Name != "invoke_agent support" || run.Attrs[AttrAgentName] != "support" {
		t.Errorf("run = %+v", run)
	}
	if m.ParentID != run.SpanID || m.TraceID != "tr" || m.RunID != "run-1" || m.Name != "chat gpt-4o" || m.Kind != KindModel {
		t.Errorf("model = %+v", m)
	}
	if a.ParentID != m.SpanID || a.Attrs[AttrAttempt] != int64(2) || a.Attrs[AttrDeployment] != "openai/gpt-4o" {
		t.Errorf("attempt = %+v", a)
	}
	if tool.Name != "execute_tool issue_refund" || tool.Attrs[AttrToolName] != "issue_refund" {
		t.Errorf("tool = %+v", tool)
	}
}

func TestFinish(t *testing.T) {
	end := time.Unix(20, 0)
	var s Span
	s.Finish(end, nil)
	if s.Status != StatusOK || !s.End.Equal(end) || s.Attrs != nil {
		t.Errorf("ok finish = %+v", s)
	}
	fe := failure.New(failure.RateLimited, "slow down")
	fe.RequestID = "req_123"
	s = Span{}
	s.Finish(end, fe)
	want := map[string]any{
		AttrErrorType: "rate_limited", AttrFailureKind: "transient", AttrFailureReason: "rate_limited", AttrRequestID: "req_123",
	}
	for k, v := range want {
		if s.Attrs[k] != v {
			t.Errorf("%s = %v, want %v", k, s.Attrs[k], v)
		}
	}
	if s.Status != StatusError {
		t.Errorf("status = %q", s.Status)
	}
	s = Span{}
	s.Finish(end, errors.New("boom"))
	if s.Attrs[AttrErrorType] != "_OTHER" || s.Status != StatusError {
		t.Errorf("plain error finish = %+v", s)
	}
}
