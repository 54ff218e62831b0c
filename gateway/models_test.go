package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// jsonKeys returns the sorted member names of the JSON object raw.
func jsonKeys(t *testing.T, raw string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// GET /v1/models answers in the caller's dialect, with that dialect's
// fields only, listing the aliases served in it (newcomer finding: one
// list for both, with the fields of both and a belay_dialects member).
// Each official SDK reads it.
func TestModelsListInTheCallersDialect(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()

	op, err := h.openai().Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range op.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy != "belay" || !m.JSON.Created.Valid() {
			t.Errorf("openai model %+v", m)
		}
		if got := jsonKeys(t, m.RawJSON()); got != "created,id,object,owned_by" {
			t.Errorf("openai model %s has members %s", m.ID, got)
		}
	}
	if got := strings.Join(ids, ","); got != "gpt-4o-mini,mixed" {
		t.Errorf("openai models = %s, want gpt-4o-mini,mixed (the aliases with openai deployments)", got)
	}
	if got := jsonKeys(t, op.RawJSON()); got != "data,object" {
		t.Errorf("openai list has members %s, want data,object", got)
	}

	ap, err := h.anthropic().Models.List(ctx, anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	ids = nil
	for _, m := range ap.Data {
		ids = append(ids, m.ID)
		if m.Type != "model" || m.DisplayName != m.ID || !m.CreatedAt.Equal(time.Unix(0, 0)) {
			t.Errorf("anthropic model %+v", m)
		}
		if got := jsonKeys(t, m.RawJSON()); got != "created_at,display_name,id,type" {
			t.Errorf("anthropic model %s has members %s", m.ID, got)
		}
	}
	if got := strings.Join(ids, ","); got != "claude-sonnet-5-5,mixed" {
		t.Errorf("anthropic models = %s, want claude-sonnet-5-5,mixed", got)
	}
	if got := jsonKeys(t, ap.RawJSON()); got != "data,first_id,has_more,last_id" {
		t.Errorf("anthropic list has members %s", got)
	}
	if ap.HasMore || ap.FirstID != "claude-sonnet-5-5" || ap.LastID != "mixed" {
		t.Errorf("anthropic page: has_more %v first_id %q last_id %q", ap.HasMore, ap.FirstID, ap.LastID)
	}
}

// The Anthropic list pages by limit, after_id and before_id as Anthropic's
// does, so the SDK's auto-pager walks it; a bad parameter is a 400 in
// Anthropic's shape.
func TestModelsListPagesForAnthropic(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := h.anthropic()

	first, err := c.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Data) != 1 || first.Data[0].ID != "claude-sonnet-5-5" || !first.HasMore || first.LastID != "claude-sonnet-5-5" {
		t.Fatalf("first page of 1: %s", first.RawJSON())
	}
	var ids []string
	pager := c.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)})
	for pager.Next() {
		ids = append(ids, pager.Current().ID)
	}
	if err := pager.Err(); err != nil || strings.Join(ids, ",") != "claude-sonnet-5-5,mixed" {
		t.Errorf("auto-paged: %v, %v", ids, err)
	}
	before, err := c.Models.List(ctx, anthropic.ModelListParams{BeforeID: anthropic.String("mixed")})
	if err != nil || len(before.Data) != 1 || before.Data[0].ID != "claude-sonnet-5-5" || before.HasMore {
		t.Errorf("before mixed: %v %v", before, err)
	}

	for _, p := range []anthropic.ModelListParams{
		{Limit: anthropic.Int(0)},
		{Limit: anthropic.Int(1001)},
		{AfterID: anthropic.String("gpt-4o-mini")}, // listed for OpenAI clients only
		{AfterID: anthropic.String("mixed"), BeforeID: anthropic.String("mixed")},
	} {
		_, err := c.Models.List(ctx, p)
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != anthropic.ErrorTypeInvalidRequestError {
			t.Errorf("%+v: %v, want 400 invalid_request_error", p, err)
			continue
		}
		if ae.Response.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%+v: x-should-retry %q", p, ae.Response.Header.Get("X-Should-Retry"))
		}
	}
}

// GET /v1/models/{id} answers one alias in the caller's dialect, and a 404
// in that dialect for an alias it does not serve.
func TestModelsGetInTheCallersDialect(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()

	om, err := h.openai().Models.Get(ctx, "mixed")
	if err != nil || om.ID != "mixed" || om.Object != "model" || jsonKeys(t, om.RawJSON()) != "created,id,object,owned_by" {
		t.Errorf("openai get mixed: %v %v", om, err)
	}
	_, err = h.openai().Models.Get(ctx, "claude-sonnet-5-5")
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != "model_not_found" || !strings.Contains(oe.Message, "anthropic") {
		t.Errorf("openai get of an anthropic alias: %v", err)
	}

	am, err := h.anthropic().Models.Get(ctx, "claude-sonnet-5-5", anthropic.ModelGetParams{})
	if err != nil || am.ID != "claude-sonnet-5-5" || am.Type != "model" || jsonKeys(t, am.RawJSON()) != "created_at,display_name,id,type" {
		t.Errorf("anthropic get: %v %v", am, err)
	}
	_, err = h.anthropic().Models.Get(ctx, "gpt-4o-mini", anthropic.ModelGetParams{})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != anthropic.ErrorTypeNotFoundError {
		t.Errorf("anthropic get of an openai alias: %v", err)
	}

	// Without anthropic-version the caller is taken for an OpenAI client,
	// whatever key header it uses (belay reads virtual keys from both).
	req, _ := http.NewRequest(http.MethodGet, h.gw.URL+"/v1/models", nil)
	req.Header.Set("X-Api-Key", "sk-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Object string `json:"object"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || list.Object != "list" {
		t.Errorf("x-api-key without anthropic-version: %v %+v, want the OpenAI list", err, list)
	}
}
