package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/run"
)

// responsesFront serves POST /v1/responses, OpenAI's Responses API. It
// routes on the OpenAI aliases (a model's openai deployments, in order),
// and sends to each deployment's base URL + /responses: a deployment that
// does not serve the Responses API answers 404, which falls back to the
// next. Errors are OpenAI's error objects; a stream ends with the
// Responses error event (openai.ResponsesErrorEvent).
//
// State the provider keeps is not belay's: a request with
// previous_response_id or a conversation names a response stored in the
// account of the deployment that made it, which a fallback deployment of
// another account does not have (it answers 404 or 400, relayed as sent).
// A background request (background: true) is refused: its result is
// fetched later with GET /v1/responses/{id}, which belay does not serve.
type responsesFront struct{}

func (responsesFront) dialect() failure.Dialect { return failure.DialectOpenAI }

func (responsesFront) parse(body []byte) (*request, error) {
	r, err := openai.ParseResponsesRequest(body)
	if err != nil {
		return nil, err
	}
	if r.Background != nil && *r.Background {
		return nil, dialect.Field("background", "is not served through belay: a background response is fetched later with "+
			"GET /v1/responses/{id}, which belay does not relay, and its cost would go unrecorded; send the request without it")
	}
	out := &request{model: r.Model, stream: r.Stream, promptTokens: openai.EstimateResponsesPromptTokens(r), body: body,
		limitField: "max_output_tokens", api: "responses", priority: openai.AskedPriority(r.ServiceTier)}
	if r.PreviousResponseID != nil {
		out.previous = *r.PreviousResponseID
	}
	if n, ok := r.MaxOutput(); ok {
		out.maxOutput = n
	}
	out.webSearches, out.fileSearches = r.BuiltinToolCalls()
	return out, nil
}

func (responsesFront) writeFailure(w http.ResponseWriter, e *failure.Error) {
	openai.WriteFailure(w, e)
}

// errorEvent is the error event of a stream whose follower is not at
// hand, numbered 0; responsesStream.errorEvent numbers it after the
// stream's last event.
func (responsesFront) errorEvent(e *failure.Error) []byte { return responsesErrorEvent(e, 0) }

func responsesErrorEvent(e *failure.Error, seq int64) []byte {
	s := openai.ErrorFor(e.Reason)
	return openai.ResponsesErrorEvent(s.Type, s.Code, message(e), seq)
}

func (responsesFront) newStream(r *request) streamFollower {
	return &responsesStream{prompt: r.promptTokens, acc: openai.ResponsesAccumulator{Keep: r.keepAnswer}}
}

// answerMember: a response object always has its "output" array.
func (responsesFront) answerMember() string { return "output" }

func (responsesFront) usage(body []byte) (dialect.Usage, bool) {
	return openai.ResponsesBodyUsageOfValid(body) // answerFault checked it
}

// toolCalls counts a response body's built-in tool calls, for the
// estimate of one without usage (see attemptOnce).
func (responsesFront) toolCalls(body []byte) (web, file int64) {
	return openai.ResponsesBodyToolCalls(body)
}

// outputChars is the size of a response's output, for an estimate when
// it reports no usage: the text, refusals, function names and arguments
// of its output items, or the output member's JSON size when it does not
// decode as items. Not the whole body: a response object repeats the
// request's instructions and tools, which are no output (an adversarial
// review found a 50 KB system prompt charged as output).
func (responsesFront) outputChars(body []byte) int64 {
	var out json.RawMessage
	if dialect.DecodeMember(body, "output", &out) != nil {
		return int64(len(body))
	}
	var items []struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
	}
	if json.Unmarshal(out, &items) != nil {
		return int64(len(out))
	}
	var n int64
	for _, it := range items {
		n += int64(len(it.Name) + len(it.Arguments))
		for _, c := range it.Content {
			n += int64(len(c.Text) + len(c.Refusal))
		}
	}
	return n
}

// upstreamURL follows the OpenAI SDKs: the base URL includes /v1.
func (responsesFront) upstreamURL(base string) string {
	return strings.TrimRight(base, "/") + "/responses"
}

func (responsesFront) setAuth(h http.Header, key string) { openAIFront{}.setAuth(h, key) }

// misdirecter is a front whose requests a deployment may refuse for
// where they were sent rather than for what they ask: see
// responsesFront.misdirected.
type misdirecter interface {
	misdirected(fe *failure.Error) *failure.Error
}

// misdirected marks, on a copy, the failures of a Responses call that
// are its place's (failure.Error.Misdirected): a 404 (the deployment
// does not serve the Responses API, or not at that path), and a 4xx
// saying that provider-kept state is not in the deployment's account
// (OpenAI's 400 previous_response_not_found: any *_not_found code but
// model_not_found; see missingState). Such a failure falls back to the
// next deployment (Degraded: the state may be in another account) and is
// not counted by the deployment's breaker: an adversarial review found
// three Responses calls to a chat-only deployment open its breaker for
// chat calls too. A refusal of the state for another reason (a malformed
// conversation, a response stored with store=false) is the request's
// own, and stops the chain as any 400 does (a second review: a client's
// malformed conversation was sent to every deployment).
func (responsesFront) misdirected(fe *failure.Error) *failure.Error {
	if fe.Status != http.StatusNotFound && !(missingState(fe) && fe.Status >= 400 && fe.Status < 500) {
		return fe
	}
	cp := *fe
	cp.Misdirected = true
	if cp.Kind == failure.Permanent {
		cp.Kind = failure.Degraded
	}
	return &cp
}

// missingState reports whether fe says that state the provider keeps
// (a previous response, a conversation) is not there: a *_not_found code
// other than model_not_found.
func missingState(fe *failure.Error) bool {
	return strings.HasSuffix(fe.ProviderCode, "_not_found") && fe.ProviderCode != "model_not_found"
}

// preferTransient returns the failure a call reports when its chain
// ended on a misdirected refusal (err; only a Responses call's failures
// are misdirected, and any other err is returned as it is): the latest transient
// failure of another deployment, when there was one, since that
// deployment may hold the state the refusal says is missing, and a
// retry may reach it (an adversarial review: a 500 from the account
// that kept the previous response was reported as the fallback's
// "previous response not found", which the SDK does not retry; the
// refusal is named in its message); else, when err is a plain 404 (a
// deployment without the Responses API), the latest refusal saying the
// state is missing, which tells the client to resend it (a second
// review: "Unknown request URL" hid previous_response_not_found).
func preferTransient(err error, res *route.Result) error {
	fe := failure.As(err)
	if fe == nil || !fe.Misdirected {
		return err
	}
	atts := res.Attempts()
	for i := len(atts) - 1; i >= 0; i-- {
		f := atts[i].Failure
		if f != nil && f.Kind == failure.Transient && f.Deployment != fe.Deployment {
			cp := *f
			cp.Message = fmt.Sprintf("%s (then deployment %s refused the call: %s)", f.Message, fe.Deployment, fe.Message)
			return &cp
		}
	}
	if !missingState(fe) {
		for i := len(atts) - 1; i >= 0; i-- {
			if f := atts[i].Failure; f != nil && f.Misdirected && missingState(f) {
				return f
			}
		}
	}
	return err
}

// responsesStream follows a Responses stream. Usage always comes in its
// final response event: nothing is asked for, stripped or rewritten.
type responsesStream struct {
	acc    openai.ResponsesAccumulator
	prompt int64
}

// ends reports whether ev, a terminator to the failure.StreamWatcher,
// ends a Responses stream: its final response event does, [DONE] does
// not (the API sends none; an adversarial review found a stream cut with
// [DONE] before response.completed relayed as a clean end).
func (s *responsesStream) ends(ev failure.SSEEvent) bool {
	return !bytes.Equal(bytes.TrimSpace(ev.Data), []byte(openai.Done))
}

func (s *responsesStream) add(_ string, data []byte) { s.acc.Add(data) }
func (s *responsesStream) strip(string, []byte) bool { return false }
func (s *responsesStream) rewrite(raw []byte) []byte { return raw }
func (s *responsesStream) answer() []byte            { return s.acc.Answer() }
func (s *responsesStream) reported() bool            { _, ok := s.acc.Usage(); return ok }
func (s *responsesStream) errorEvent(e *failure.Error) []byte {
	return responsesErrorEvent(e, s.acc.NextSequence())
}

// raisable returns the provider's error event ev (an "error" event, or
// response.failed) with an "error" member added at its top level when it
// has none, built from its failure fe (OpenAI's error object: the
// provider's message and code): the SDKs end a stream with an error only
// on an event with that member (see openai.ResponsesErrorEvent), and
// hand the API's own error event to the caller as one more event, after
// which the stream looks finished (a newcomer's openai-go and npm openai
// loops ended without an error). Every member the provider sent is kept.
func (s *responsesStream) raisable(ev failure.SSEEvent, fe *failure.Error) []byte {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		// JSON but not an object ("upstream overloaded"): no member can
		// be added; belay's own error event says it.
		return s.errorEvent(fe)
	}
	var top struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &top) != nil || len(top.Error) > 0 && string(top.Error) != "null" {
		return ev.Raw
	}
	spec := openai.ErrorFor(fe.Reason)
	obj, err := json.Marshal(openai.NewError(spec.Type, cmp.Or(fe.ProviderCode, spec.Code), message(fe)))
	if err != nil {
		return ev.Raw
	}
	out, err := dialect.SetMemberValid(data, "error", obj)
	if err != nil {
		return ev.Raw
	}
	return sse.Format(ev.Event, out)
}

func (s *responsesStream) usage() (dialect.Usage, bool) {
	if u, ok := s.acc.Usage(); ok {
		return u, false
	}
	return s.acc.Estimate(s.prompt), true
}

// contextCacheMax bounds the responses a contextCache remembers: the
// latest 20,000, about 2.5 MB (20,000 entries of tenant "default" and a
// 53-character response id held 2,491,736 bytes of heap in a one-off
// measurement); a continuation usually follows its response within
// minutes.
const contextCacheMax = 20_000

// contextCache remembers, per tenant, the context size of each response
// the gateway relayed: its prompt and output tokens, which a
// continuation (previous_response_id) is billed again as input while it
// sends only its new input. A continuation's reservation adds it, so the
// run's and the tenant's money limits hold for it (an adversarial review:
// eight concurrent continuations of a 1,000,000-token context were each
// reserved for "and then?" and charged $2.50 against a $0.05 budget). A
// response the gateway did not relay (made before a restart, by another
// replica, or directly) is not known, and its continuation is reserved
// for what it sends. The oldest entry goes first past contextCacheMax.
// The zero value is ready to use; safe for concurrent use.
type contextCache struct {
	mu    sync.Mutex
	sizes map[string]int64
	order []string // keys, oldest at next once full
	next  int
}

func contextKey(tenant, id string) string { return tenant + "\x00" + id }

// put remembers that response id of tenant holds tokens of context.
func (c *contextCache) put(tenant, id string, tokens int64) {
	if id == "" || tokens <= 0 {
		return
	}
	k := contextKey(tenant, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sizes == nil {
		c.sizes = map[string]int64{}
	}
	if _, ok := c.sizes[k]; !ok {
		if len(c.order) < contextCacheMax {
			c.order = append(c.order, k)
		} else {
			delete(c.sizes, c.order[c.next])
			c.order[c.next] = k
			c.next = (c.next + 1) % contextCacheMax
		}
	}
	c.sizes[k] = tokens
}

// get returns the context size of response id of tenant.
func (c *contextCache) get(tenant, id string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.sizes[contextKey(tenant, id)]
	return n, ok
}

// rememberContext records the context of the response call c answered:
// its id (the answer body's, or the stream's response events') and the
// prompt and output tokens of the attempt that served it, as charged
// when the provider reported them. It runs before the answer is written,
// so that a continuation the client sends at once is reserved with it.
func (s *Server) rememberContext(c *call) {
	c.mu.Lock()
	var served Charge
	n := len(c.charges)
	if n > 0 {
		served = c.charges[n-1] // the last attempt's: the one that answered
	}
	c.mu.Unlock()
	if n == 0 || served.Estimated {
		return
	}
	var id string
	switch {
	case c.answer != nil:
		_ = dialect.DecodeMember(c.answer.body, "id", &id)
	case c.streamed != nil:
		if rs, ok := c.streamed.(*responsesStream); ok {
			id = rs.acc.ResponseID()
		}
	}
	s.contexts.put(c.tenant.Name, id, run.AddTokens(served.Usage.Prompt(), served.Usage.Output))
}

// answerFacts reads a response's id, model and how it ended
// (openai.FinishOf its status).
func (responsesFront) answerFacts(body []byte) (id, model string, finish []string) {
	var b struct {
		ID                string             `json:"id"`
		Model             string             `json:"model"`
		Status            string             `json:"status"`
		IncompleteDetails *openai.Incomplete `json:"incomplete_details"`
	}
	if json.Unmarshal(body, &b) != nil {
		return "", "", nil
	}
	if f := openai.FinishOf(b.Status, b.IncompleteDetails); f != "" {
		finish = []string{f}
	}
	return b.ID, b.Model, finish
}

// facts returns the streamed response's id, model and how it ended.
func (s *responsesStream) facts() (string, string, []string) {
	var finish []string
	if f := s.acc.Finish(); f != "" {
		finish = []string{f}
	}
	return s.acc.ResponseID(), s.acc.Model(), finish
}
