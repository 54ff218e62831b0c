package failure

import (
	"net/http"
	"testing"
)

// FromResponse refuses the kind "ok": a failure whose Kind is OK would be
// reported by KindOf as a success (a breaker's Ticket.Done counts it as
// one), and belay never writes "ok" on a failure.
func TestAdv22r_FromResponseRefusesKindOK(t *testing.T) {
	for _, reason := range []string{"rate_limited", "some_new_reason"} {
		h := http.Header{}
		h.Set(HeaderKind, "ok")
		h.Set(HeaderReason, reason)
		if fe := FromResponse(&http.Response{StatusCode: 500, Header: h}); fe != nil {
			t.Errorf("kind ok, reason %q: FromResponse = %+v (KindOf: %v); want nil, a failure is never ok", reason, fe, KindOf(fe))
		}
	}
}

// A chunk whose reasoning member has another shape than a string (Envoy
// AI Gateway's reasoning_content object) is still read for the rest: its
// reasoning counts as output, and so does its content. Before, the whole
// chunk failed to decode and was ignored.
func TestAdv22r_WatcherReadsChunkWithObjectReasoning(t *testing.T) {
	for _, data := range []string{
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":{"text":"hmm"}}}]}`,
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi","reasoning":{"text":""}}}]}`,
	} {
		w := NewStreamWatcher(DialectOpenAI)
		w.Observe("", []byte(data))
		if !w.OutputStarted() {
			t.Errorf("%s: no output seen", data)
		}
	}
	w := NewStreamWatcher(DialectOpenAI)
	w.Observe("", []byte(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":{},"refusal":null}}]}`))
	if w.OutputStarted() {
		t.Error("an empty reasoning object and a null refusal counted as output")
	}
}
