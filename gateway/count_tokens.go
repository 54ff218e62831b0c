package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
)

// CountTokensPath is Anthropic's token counting endpoint
// (https://docs.claude.com/en/api/messages-count-tokens). Claude Code
// calls it on each turn to size its context, and falls back to a rougher
// local count when it fails.
const CountTokensPath = anthropic.Path + "/count_tokens"

// countTokens serves POST /v1/messages/count_tokens: the request goes to
// the first deployment of its model alias (Anthropic dialect) that no kill
// flag disables, its model rewritten to the deployment's and with the
// deployment's key, and the provider's answer (its status, body and
// request-id) comes back as it is, a refusal as a refused model call's
// (refuseUpstream: a 4xx refusal of the request as sent; a refusal of the
// gateway's key, a rate limit or a 5xx in belay's words, never as if the
// client's key were bad). Counting is free at Anthropic and is
// not a model call: it counts in no run (no turn, no money, no record or
// span) and opens no breaker; a deployment whose breaker is open is still
// asked. The virtual key, the body's size and its model are checked as on
// /v1/messages (401, 413, 400, 404), each answered in Anthropic's shape
// with x-should-retry: false; a deployment that cannot be reached is 502
// api_error, retryable. The wait for the answer is bounded by
// timeouts.first_byte.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	c := &call{s: s, f: anthropicFront{}, r: r}
	c.aw.ResponseWriter = w
	c.w = &c.aw
	tenant, fe := s.tenants.identify(r)
	if fe != nil {
		c.refuse(fe)
		return
	}
	c.tenant = tenant
	if s.tenantDisabled != nil {
		// Counting is in no run, but a kill of everything or of the
		// tenant stops its provider traffic too.
		if k, off := s.tenantDisabled(tenant.Name); off {
			c.refuse(refusal(failure.Killed, "killed by the kill switch ("+killFlag(k)+"; undo with belay unkill)"))
			return
		}
	}
	body, fe := c.readBody()
	if fe != nil {
		c.refuse(fe)
		return
	}
	var req struct {
		Model json.RawMessage `json:"model"`
	}
	if err := dialect.DecodeObject(body, &req); err != nil {
		c.refuse(invalid(err))
		return
	}
	var model string
	if json.Unmarshal(req.Model, &model) != nil || model == "" {
		c.refuse(refusal(failure.InvalidRequest, "model: a string naming a model alias is required"))
		return
	}
	c.alias = model
	routeAlias, ok := s.aliases[aliasKey{failure.DialectAnthropic, model}]
	if !ok {
		c.refuse(s.unknownModel(failure.DialectAnthropic, model))
		return
	}
	c.chain = s.router.Deployments(routeAlias)
	if flags, killed := s.allDisabled(model, c.chain); killed {
		c.refuse(c.killedFailure(flags))
		return
	}
	d := c.chain[0]
	for _, cand := range c.chain {
		if s.disabled == nil {
			break
		}
		if _, off := s.disabled(cand); !off {
			d = cand
			break
		}
	}
	out, err := dialect.RewriteModelValid(body, d.Model)
	if err != nil {
		c.refuse(invalid(err))
		return
	}
	ctx := r.Context()
	if t := s.timeoutsOf(d.Name).FirstByte.D(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(d.BaseURL, "/")+CountTokensPath, bytes.NewReader(out))
	if err != nil {
		c.refuse(failure.Wrap(failure.InvalidRequest, err))
		return
	}
	for _, k := range forwardHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			hr.Header[k] = v
		}
	}
	hr.Header["Content-Type"] = hdrJSON
	hr.Header["Accept"] = hdrJSON
	hr.Header["User-Agent"] = hdrUserAgent
	c.f.setAuth(hr.Header, d.APIKey)
	resp, err := s.upstream.RoundTrip(hr)
	var answer []byte
	if err == nil {
		answer, err = io.ReadAll(io.LimitReader(resp.Body, s.upstreamLimit()+1))
		resp.Body.Close()
		if err == nil && int64(len(answer)) > s.upstreamLimit() {
			err = fmt.Errorf("answer larger than max_upstream_body_bytes (%d bytes)", s.upstreamLimit())
		}
	}
	if err != nil {
		fe := publicFailure(failure.ClassifyError(err), d.Name)
		fe.Deployment = d.Name
		if !strings.HasPrefix(fe.Message, "upstream deployment ") {
			fe.Message = fmt.Sprintf("upstream deployment %s: %s", d.Name, fe.Message)
		}
		c.setRequestID()
		anthropic.WriteError(w, http.StatusBadGateway, "api_error", "counting tokens failed: "+fe.Message)
		return
	}
	if fe := failure.ClassifyResponse(failure.DialectAnthropic, resp.StatusCode, resp.Header, answer); fe != nil {
		// The provider refused: answered as a refused model call is (see
		// refuseUpstream): a 4xx refusal of the request as sent, a refusal
		// of the gateway's key, a rate limit (with its Retry-After) or a
		// 5xx in belay's words, never as if the client's key were bad.
		fe.Deployment = d.Name
		c.refuseUpstream(fe, false)
		return
	}
	h := w.Header()
	for _, k := range upstreamHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// allDisabled reports whether a kill flag disables model alias alias or
// every deployment of chain, with the flags (see unservable).
func (s *Server) allDisabled(alias string, chain []route.Deployment) ([]string, bool) {
	if s.aliasDisabled != nil {
		if k, off := s.aliasDisabled(alias); off {
			return []string{killFlag(k)}, true
		}
	}
	var flags []string
	for _, d := range chain {
		if s.disabled == nil {
			return nil, false
		}
		k, off := s.disabled(d)
		if !off {
			return nil, false
		}
		if f := killFlag(k); !slices.Contains(flags, f) {
			flags = append(flags, f)
		}
	}
	return flags, len(chain) > 0
}
