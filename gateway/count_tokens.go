package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
// the deployments of its model alias (Anthropic dialect) that no kill flag
// disables, in order (those whose breaker is open last), its model
// rewritten to each one's and with each one's key, until one answers: a
// deployment that cannot be reached, answers 5xx or 429, or refuses its
// model or key passes the count to the next, as a model call falls back.
// The answer (status, body, request-id) comes back as the provider gave
// it, with x-belay-deployment; a refusal as a refused model call's
// (refuseUpstream: a 4xx refusal of the request as sent; a refusal of the
// gateway's key, a rate limit or a 5xx in belay's words, never as if the
// client's key were bad); no answer from any deployment is 502 api_error,
// retryable. Counting is free at Anthropic and is not a model call: it
// counts in no run (no turn, no money, no record or span), makes no retry
// on one deployment and moves no breaker. The virtual key, the body's
// size and its model are checked as on /v1/messages (401, 413, 400, 404),
// each answered in Anthropic's shape with x-should-retry: false; a kill of
// everything or of the tenant refuses it (403). Each deployment's wait is
// bounded by its timeouts.first_byte.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	c := s.newCall(anthropicFront{}, w, r)
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
	if flags, killed, _ := s.unservable(model, c.chain); killed {
		c.refuse(c.killedFailure(flags))
		return
	}
	var last *failure.Error
	for _, d := range s.countCandidates(c.chain) {
		resp, answer, fe := s.countOn(c, d, body)
		if fe != nil && (fe.Kind != failure.Permanent && fe.Kind != failure.Fatal || fe.Status == 0 && fe.Reason != failure.Canceled) {
			// Unreachable, no whole answer, a 5xx, a rate limit, a refused
			// key or model: the next deployment may count.
			last = fe
			continue
		}
		if fe != nil {
			c.refuseUpstream(fe, false)
			return
		}
		h := w.Header()
		copyUpstream(h, resp.Header)
		h.Set(HeaderDeployment, d.Name)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
		return
	}
	if last == nil { // every deployment disabled since unservable looked
		flags, _, _ := s.unservable(model, c.chain)
		c.refuse(c.killedFailure(flags))
		return
	}
	if last.Status == 0 { // no answer at all
		c.setRequestID()
		failure.SetHeader(w.Header(), last)
		anthropic.WriteError(w, http.StatusBadGateway, "api_error", "counting tokens failed: "+last.Message)
		return
	}
	c.refuseUpstream(last, false)
}

// countCandidates returns the deployments of chain a count may go to, in
// order: those no kill flag disables, the ones whose breaker lets calls
// through first (a count does not move a breaker, but an open one says
// the deployment is failing now).
func (s *Server) countCandidates(chain []route.Deployment) []route.Deployment {
	var open, rest []route.Deployment
	for _, d := range chain {
		if s.disabled != nil {
			if _, off := s.disabled(d); off {
				continue
			}
		}
		if b := s.router.Breaker(d.Name); b != nil && b.Refusing() {
			open = append(open, d)
			continue
		}
		rest = append(rest, d)
	}
	return append(rest, open...)
}

// countOn sends the count to deployment d and returns its 2xx answer, or
// the failure: the provider's refusal classified (Anthropic's dialect), or
// one without an answer (Status 0), named after d.
func (s *Server) countOn(c *call, d route.Deployment, body []byte) (*http.Response, []byte, *failure.Error) {
	out, err := dialect.RewriteModelValid(body, d.Model)
	if err != nil {
		return nil, nil, invalid(err)
	}
	ctx := c.r.Context()
	if t := s.timeoutsOf(d.Name).FirstByte.D(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	hr, err := c.upstreamRequest(ctx, strings.TrimRight(d.BaseURL, "/")+CountTokensPath, out, hdrJSON, &d)
	if err != nil {
		return nil, nil, failure.As(err)
	}
	resp, err := s.roundTrip(hr)
	var answer []byte
	if err == nil {
		answer, err = io.ReadAll(io.LimitReader(resp.Body, s.upstreamLimit()+1))
		resp.Body.Close()
		if err == nil && int64(len(answer)) > s.upstreamLimit() {
			fe := tooLarge(d.Name, 0, s.upstreamLimit()) // as a model call's: the next deployment may count
			return nil, nil, fe
		}
	}
	if err != nil {
		fe := publicFailure(failure.ClassifyError(err), d.Name)
		fe.Deployment, fe.Status = d.Name, 0
		if !strings.HasPrefix(fe.Message, "upstream deployment ") {
			fe.Message = fmt.Sprintf("upstream deployment %s: %s", d.Name, fe.Message)
		}
		return nil, nil, fe
	}
	if fe := failure.ClassifyResponse(failure.DialectAnthropic, resp.StatusCode, resp.Header, answer); fe != nil {
		fe.Deployment = d.Name
		return nil, nil, fe
	}
	return resp, answer, nil
}
