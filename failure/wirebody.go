package failure

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// wireError is what a body says about a failure, read from any of the
// providers' shapes:
//
//	OpenAI     {"error": {"message", "type", "param", "code"}}          code: string, number or null
//	Anthropic  {"type": "error", "error": {"type", "message"}, "request_id"}
//	Gemini     {"error": {"code", "message", "status", "details": [...]}}  also wrapped in a JSON array
//	routers    {"error": {"message", "code": 502, "metadata"}}          inside an HTTP 200
//	vLLM       {"object": "error", "message", "type", "code": 400}
//	Responses  {"type": "error", "code", "message"}                     stream error event
//	others     {"error": "text"}
//
// All shapes are read in every dialect, because OpenAI-compatible routers
// front all three providers and pass their errors through.
type wireError struct {
	found     bool   // the body carries an error object
	Type      string // OpenAI/Anthropic error.type
	Code      string // error.code as text ("insufficient_quota", "502")
	CodeNum   int    // error.code when it is a number or a string of digits
	Status    string // Gemini google.rpc status name ("RESOURCE_EXHAUSTED")
	Message   string
	InnerCode string // Azure OpenAI error.innererror.code
	Param     string // OpenAI error.param
	Object    string // the error member's object as received, when it is one (OpenAI's and Anthropic's shapes)
	RequestID string // body request_id (Anthropic)

	InfoReasons []string // Gemini google.rpc.ErrorInfo reasons ("API_KEY_INVALID")
	// QuotaLong: a Gemini google.rpc.QuotaFailure names a daily or free-tier
	// quota, or a quota whose value is 0.
	QuotaLong     bool
	RetryDelay    time.Duration // Gemini google.rpc.RetryInfo.retryDelay
	HasRetryDelay bool
	BlockReason   string // Gemini promptFeedback.blockReason (prompt refused)
}

// parseWireError reads the head of a body. It tolerates a truncated body:
// top-level members are read in order until the JSON breaks, so an error
// object at the start of a body cut at MaxHeadBytes is still found.
func parseWireError(body []byte) wireError {
	var w wireError
	top := topLevelObject(body)
	if top == nil {
		return w
	}
	var typ, object string
	_ = json.Unmarshal(top["type"], &typ)
	_ = json.Unmarshal(top["object"], &object)
	_ = json.Unmarshal(top["request_id"], &w.RequestID)
	if raw := top["promptFeedback"]; raw != nil {
		var pf struct {
			BlockReason string `json:"blockReason"`
		}
		_ = json.Unmarshal(raw, &pf)
		w.BlockReason = pf.BlockReason
	}
	if raw, ok := top["error"]; ok && !isNull(raw) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			w.Message, w.found = s, s != ""
			return w
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil {
			w.readObject(inner)
			w.Object = string(raw)
		}
		return w
	}
	if typ == "error" || object == "error" {
		w.readObject(top)
		if w.Type == "error" { // the envelope's own "type", not an error type
			w.Type = ""
		}
	}
	return w
}

// readObject fills w from one error object's members.
func (w *wireError) readObject(o map[string]json.RawMessage) {
	_ = json.Unmarshal(o["type"], &w.Type)
	_ = json.Unmarshal(o["message"], &w.Message)
	_ = json.Unmarshal(o["status"], &w.Status)
	_ = json.Unmarshal(o["param"], &w.Param)
	w.Code, w.CodeNum = readCode(o["code"])
	if raw := o["innererror"]; raw != nil {
		var ie struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(raw, &ie)
		w.InnerCode = ie.Code
	}
	if w.RequestID == "" {
		_ = json.Unmarshal(o["request_id"], &w.RequestID)
	}
	if raw := o["details"]; raw != nil {
		w.readDetails(raw)
	}
	w.found = w.Type != "" || w.Code != "" || w.Status != "" || w.Message != ""
}

// readCode returns a code sent as a string or a number; digit strings (Azure
// sends "429") also give the number.
func readCode(raw json.RawMessage) (string, int) {
	if isNull(raw) {
		return "", 0
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			n = 0
		}
		return s, n
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		i, err := n.Int64()
		if err != nil || i < 0 || i > 999 {
			return n.String(), 0
		}
		return n.String(), int(i)
	}
	return "", 0
}

// readDetails reads the google.rpc detail messages Gemini attaches
// (Google AIP-193 "Errors"; Gemini API troubleshooting guide): RetryInfo,
// QuotaFailure and ErrorInfo.
func (w *wireError) readDetails(raw json.RawMessage) {
	var details []struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
		Reason     string `json:"reason"`
		Violations []struct {
			QuotaMetric string `json:"quotaMetric"`
			QuotaID     string `json:"quotaId"`
			QuotaValue  string `json:"quotaValue"`
		} `json:"violations"`
	}
	if json.Unmarshal(raw, &details) != nil {
		return
	}
	for _, d := range details {
		switch {
		case strings.HasSuffix(d.Type, ".RetryInfo"):
			// A protobuf Duration in JSON has no dates, so now is irrelevant.
			if v, ok := parseUnitDuration(strings.TrimSpace(d.RetryDelay)); ok {
				w.RetryDelay, w.HasRetryDelay = v, true
			}
		case strings.HasSuffix(d.Type, ".ErrorInfo"):
			if d.Reason != "" {
				w.InfoReasons = append(w.InfoReasons, d.Reason)
			}
		case strings.HasSuffix(d.Type, ".QuotaFailure"):
			for _, v := range d.Violations {
				if longQuota(v.QuotaID) || longQuota(v.QuotaMetric) || v.QuotaValue == "0" {
					w.QuotaLong = true
				}
			}
		}
	}
}

// longQuota reports whether a Gemini quota id or metric names a daily or
// free-tier quota ("GenerateRequestsPerDayPerProjectPerModel-FreeTier",
// ".../generate_content_free_tier_requests"). Such a quota does not come back
// within a retry policy's wait, so it is exhausted, not rate limited.
func longQuota(s string) bool {
	s = strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	return strings.Contains(s, "perday") || strings.Contains(s, "daily") || strings.Contains(s, "freetier")
}

// topLevelObject decodes the members of the body's top-level JSON object (or
// of the first element of a top-level array) until the end or until the JSON
// breaks. It returns nil when the body is not JSON.
func topLevelObject(body []byte) map[string]json.RawMessage {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || (body[0] != '{' && body[0] != '[') {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if body[0] == '[' {
		if _, err := dec.Token(); err != nil {
			return nil
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		key, ok := t.(string)
		if !ok {
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		out[key] = v
	}
	return out
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// isHTML reports whether a body is an HTML page (a proxy's or CDN's error
// page) by its content type or its first bytes.
func isHTML(h http.Header, body []byte) bool {
	if hasPrefixFold(strings.TrimSpace(headerValue(h, "content-type")), "text/html") {
		return true
	}
	head := bytes.TrimLeft(body[:min(len(body), 512)], " \t\r\n\f\v")
	return hasPrefixFold(head, "<!doctype html") || hasPrefixFold(head, "<html")
}

// hasPrefixFold reports whether s begins with prefix, case folded.
func hasPrefixFold[S string | []byte](s S, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(string(s[:len(prefix)]), prefix)
}

// maxMessage caps a message taken from a body that is not an error object.
const maxMessage = 200

// plainMessage returns a short message for a body that is not an error
// object: an HTML page's <title>, else the start of the text, with runs of
// whitespace collapsed.
func plainMessage(body []byte, htmlPage bool) string {
	text := body[:min(len(body), 4096)]
	if htmlPage {
		lower := bytes.ToLower(text)
		if i := bytes.Index(lower, []byte("<title>")); i >= 0 {
			rest := text[i+len("<title>"):]
			if j := bytes.Index(bytes.ToLower(rest), []byte("</title>")); j >= 0 {
				text = []byte(html.UnescapeString(string(rest[:j])))
			}
		}
	}
	msg := strings.Join(strings.Fields(strings.ToValidUTF8(string(text), "")), " ")
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}
