package trace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/belay-run/belay/failure"
)

// NewID returns a random span id: 16 lowercase hex digits (8 bytes from
// crypto/rand), the width of an OpenTelemetry span id. Safe for concurrent use.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// NewTraceID returns a random trace id: 32 lowercase hex digits (16 bytes),
// the width of an OpenTelemetry trace id.
func NewTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RunSpan starts the span of a run: kind run, name "invoke_agent {agent}"
// (OpenTelemetry GenAI agent span), a new span id, no parent. traceID is
// usually NewTraceID(). The run id lives in the RunID field of this span and
// of every span started under it, not in an attribute.
func RunSpan(traceID, runID, agent string, start time.Time) Span {
	name := "invoke_agent"
	if agent != "" {
		name += " " + agent
	}
	s := Span{TraceID: traceID, SpanID: NewID(), RunID: runID, Kind: KindRun, Name: name, Start: start}
	s.SetAttr(AttrOperationName, "invoke_agent")
	if agent != "" {
		s.SetAttr(AttrAgentName, agent)
	}
	return s
}

// ModelSpan starts a model call (a turn) under parent: kind model, name
// "chat {model}", gen_ai.operation.name "chat", gen_ai.request.model model.
func ModelSpan(parent Span, model string, start time.Time) Span {
	s := child(parent, KindModel, "chat "+model, start)
	s.SetAttr(AttrOperationName, "chat")
	s.SetAttr(AttrRequestModel, model)
	return s
}

// ToolSpan starts a tool call under parent: kind tool, name
// "execute_tool {tool}", gen_ai.operation.name "execute_tool",
// gen_ai.tool.name tool.
func ToolSpan(parent Span, tool string, start time.Time) Span {
	s := child(parent, KindTool, "execute_tool "+tool, start)
	s.SetAttr(AttrOperationName, "execute_tool")
	s.SetAttr(AttrToolName, tool)
	return s
}

// AttemptSpan starts one attempt of a step against a deployment: kind
// attempt, name "attempt {deployment}", belay.deployment and belay.attempt
// (1 for the first try).
func AttemptSpan(parent Span, deployment string, attempt int, start time.Time) Span {
	s := child(parent, KindAttempt, "attempt "+deployment, start)
	s.SetAttr(AttrDeployment, deployment)
	s.SetAttr(AttrAttempt, int64(attempt))
	return s
}

func child(parent Span, kind SpanKind, name string, start time.Time) Span {
	return Span{
		TraceID: parent.TraceID, SpanID: NewID(), ParentID: parent.SpanID, RunID: parent.RunID,
		Kind: kind, Name: name, Start: start,
	}
}

// SetAttr sets attribute key to v, allocating Attrs on first use.
func (s *Span) SetAttr(key string, v any) {
	if s.Attrs == nil {
		s.Attrs = make(map[string]any, 8)
	}
	s.Attrs[key] = v
}

// AddEvent appends an event at t.
func (s *Span) AddEvent(name string, t time.Time, attrs map[string]any) {
	s.Events = append(s.Events, Event{Name: name, Time: t, Attrs: attrs})
}

// Finish ends the span at end. A nil err sets StatusOK. A non-nil err sets
// StatusError, error.type (the failure reason, or "_OTHER" as the GenAI
// conventions prescribe for an unclassified error), belay.failure.kind and
// belay.failure.reason when err carries a *failure.Error.
func (s *Span) Finish(end time.Time, err error) {
	s.End = end
	if err == nil {
		s.Status = StatusOK
		return
	}
	s.Status = StatusError
	var fe *failure.Error
	if !errors.As(err, &fe) {
		s.SetAttr(AttrErrorType, "_OTHER")
		return
	}
	s.SetAttr(AttrErrorType, string(fe.Reason))
	s.SetAttr(AttrFailureKind, fe.Kind.String())
	s.SetAttr(AttrFailureReason, string(fe.Reason))
	if fe.RequestID != "" {
		s.SetAttr(AttrRequestID, fe.RequestID)
	}
}
