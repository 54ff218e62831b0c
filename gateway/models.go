package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belay-run/belay/failure"
)

// Model listing: GET /v1/models and GET /v1/models/{id} list the model
// aliases served in the caller's dialect, in that dialect's shape only.
//
// OpenAI (https://platform.openai.com/docs/api-reference/models):
//
//	{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":0,"owned_by":"belay"}]}
//
// Anthropic (https://docs.anthropic.com/en/api/models-list), paginated by
// the query parameters limit (default 20, 1-1000), after_id and before_id:
//
//	{"data":[{"type":"model","id":"claude-sonnet-5-5","display_name":"claude-sonnet-5-5",
//	  "created_at":"1970-01-01T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-5-5","last_id":"claude-sonnet-5-5"}
//
// An alias has no release date: created is 0 and created_at the epoch,
// which is how Anthropic's API marks an unknown date.

// Anthropic's page sizes for GET /v1/models.
const (
	defaultModelPage = 20
	maxModelPage     = 1000
)

// modelsFront returns the dialect a GET /v1/models request is answered
// in: Anthropic's when the request carries anthropic-version (every
// Anthropic SDK sends it, and Anthropic's API requires it), OpenAI's
// otherwise. x-api-key is no sign of a dialect: belay takes virtual keys
// in it from clients of both.
func modelsFront(r *http.Request) front {
	if r.Header.Get("Anthropic-Version") != "" {
		return anthropicFront{}
	}
	return openAIFront{}
}

// servedIn returns the model aliases served in dialect d, in config order.
func (s *Server) servedIn(d failure.Dialect) []string {
	var out []string
	for _, m := range s.models {
		if slices.Contains(m.dialects, string(d)) {
			out = append(out, m.alias)
		}
	}
	return out
}

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func openAIModelOf(alias string) openAIModel {
	return openAIModel{ID: alias, Object: "model", OwnedBy: "belay"}
}

func anthropicModelOf(alias string) anthropicModel {
	return anthropicModel{Type: "model", ID: alias, DisplayName: alias, CreatedAt: time.Unix(0, 0).UTC().Format(time.RFC3339)}
}

// listModels answers GET /v1/models with the aliases served in the
// caller's dialect. A missing or unknown virtual key is refused as the
// model endpoints refuse it (see identified); a bad Anthropic page
// parameter is a 400 invalid_request_error.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	f := modelsFront(r)
	if !s.identified(w, r, f) {
		return
	}
	ids := s.servedIn(f.dialect())
	if f.dialect() != failure.DialectAnthropic {
		out := struct {
			Object string        `json:"object"`
			Data   []openAIModel `json:"data"`
		}{Object: "list", Data: make([]openAIModel, 0, len(ids))}
		for _, id := range ids {
			out.Data = append(out.Data, openAIModelOf(id))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	page, more, fe := modelPage(ids, r.URL.Query())
	if fe != nil {
		refuseModels(w, f, fe)
		return
	}
	out := struct {
		Data    []anthropicModel `json:"data"`
		HasMore bool             `json:"has_more"`
		FirstID *string          `json:"first_id"`
		LastID  *string          `json:"last_id"`
	}{Data: make([]anthropicModel, 0, len(page)), HasMore: more}
	for _, id := range page {
		out.Data = append(out.Data, anthropicModelOf(id))
	}
	if n := len(page); n > 0 {
		out.FirstID, out.LastID = &page[0], &page[n-1]
	}
	writeJSON(w, http.StatusOK, out)
}

// getModel answers GET /v1/models/{id}: the alias in the caller's
// dialect's model shape, or 404 (OpenAI model_not_found, Anthropic
// not_found_error) when the alias is not served in that dialect. A
// missing or unknown virtual key is refused first (see identified).
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	f := modelsFront(r)
	if !s.identified(w, r, f) {
		return
	}
	id := r.PathValue("id")
	if !slices.Contains(s.servedIn(f.dialect()), id) {
		refuseModels(w, f, s.unknownModel(f.dialect(), id))
		return
	}
	if f.dialect() == failure.DialectAnthropic {
		writeJSON(w, http.StatusOK, anthropicModelOf(id))
		return
	}
	writeJSON(w, http.StatusOK, openAIModelOf(id))
}

// identified reports whether r carries a virtual key of a configured
// tenant (Authorization: Bearer KEY or x-api-key: KEY), as the model
// endpoints require; with no tenants configured (open mode) every request
// does. Otherwise it writes the model endpoints' refusal in f's dialect
// (401; OpenAI code invalid_api_key, Anthropic authentication_error) and
// returns false.
func (s *Server) identified(w http.ResponseWriter, r *http.Request, f front) bool {
	if _, fe := s.tenants.identify(r); fe != nil {
		refuseModels(w, f, fe)
		return false
	}
	return true
}

// refuseModels writes fe in f's dialect with x-should-retry: false.
func refuseModels(w http.ResponseWriter, f front, fe *failure.Error) {
	w.Header().Set(HeaderShouldRetry, "false")
	setRequestID(w.Header(), f.dialect())
	writeFailure(w, f, fe)
}

// modelPage returns the page of ids an Anthropic list request asks for
// (cursor pagination, https://docs.anthropic.com/en/api/models-list): at
// most limit ids (default 20, 1-1000) immediately after after_id, or
// immediately before before_id, or from the start; and whether more ids
// lie beyond the page in that direction. A limit out of range, an unknown
// cursor, or both cursors is an InvalidRequest failure.
func modelPage(ids []string, q url.Values) ([]string, bool, *failure.Error) {
	limit := defaultModelPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > maxModelPage {
			return nil, false, refusal(failure.InvalidRequest, fmt.Sprintf("limit: %q is not an integer from 1 to %d", v, maxModelPage))
		}
		limit = n
	}
	after, before := q.Get("after_id"), q.Get("before_id")
	if after != "" && before != "" {
		return nil, false, refusal(failure.InvalidRequest, "after_id and before_id: send one cursor, not both")
	}
	cursor := func(name, id string) (int, *failure.Error) {
		i := slices.Index(ids, id)
		if i < 0 {
			return 0, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a model listed here", name, id))
		}
		return i, nil
	}
	if before != "" {
		i, fe := cursor("before_id", before)
		if fe != nil {
			return nil, false, fe
		}
		rest := ids[:i]
		return rest[max(0, len(rest)-limit):], len(rest) > limit, nil
	}
	rest := ids
	if after != "" {
		i, fe := cursor("after_id", after)
		if fe != nil {
			return nil, false, fe
		}
		rest = ids[i+1:]
	}
	return rest[:min(limit, len(rest))], len(rest) > limit, nil
}
