package gateway

import (
	"encoding/json"
	"testing"

	"github.com/belay-run/belay/dialect"
)

// adv2Upstream decodes body as a case-sensitive upstream would (exact
// member names, last duplicate wins, like Python's json).
func adv2Upstream(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	m := map[string]json.RawMessage{}
	if err := dialect.EachMember(body, func(name, value []byte) { m[string(name)] = append(json.RawMessage(nil), value...) }); err != nil {
		t.Fatalf("upstream body %s: %v", body, err)
	}
	return m
}

// toUpstream parses body as the OpenAI front does and returns the request
// with the body belay sends to a deployment of model.
func toUpstream(t *testing.T, body []byte, model string) (*request, []byte) {
	t.Helper()
	req, err := openAIFront{}.parse(body)
	if err != nil {
		t.Fatal(err)
	}
	up, err := dialect.RewriteModelValid(req.body, model)
	if err != nil {
		t.Fatal(err)
	}
	return req, up
}

// A streaming request whose stream_options member is spelled with another
// case: belay's parser (encoding/json, case-insensitive) reads it as
// stream_options with include_usage false, so belay asks for the usage
// chunk; setMember matched "stream_options" case-sensitively and added a
// second member instead of replacing the client's.
func TestReview3bStreamOptionsCasing(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"Stream_Options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`)
	req, up := toUpstream(t, body, "dep-model")
	// What a Go upstream (encoding/json into a struct) reads: the last
	// case-insensitive match wins.
	var goUp struct {
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(up, &goUp); err != nil {
		t.Fatal(err)
	}
	if req.addedUsage && (goUp.StreamOptions == nil || !goUp.StreamOptions.IncludeUsage) {
		t.Errorf("belay strips a usage chunk it asked for, but upstream body %s asks for none (include_usage=%v)", up, goUp.StreamOptions)
	}
	// A case-sensitive upstream reads the one stream_options belay set.
	m := adv2Upstream(t, up)
	if _, dup := m["Stream_Options"]; dup || len(m) != 4 || string(m["stream_options"]) != `{"include_usage":true}` {
		t.Errorf("upstream body %s: want the client's members, with stream_options (named so) asking for usage", up)
	}
}

// The model named with another case ("Model"): routing uses it, but the
// rewrite for the deployment inserts a lowercase "model" and keeps the
// client's "Model", so the upstream gets two models.
func TestReview3bModelCasing(t *testing.T) {
	body := []byte(`{"Model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	req, up := toUpstream(t, body, "dep-model")
	var goUp struct {
		Model string `json:"model"`
	}
	json.Unmarshal(up, &goUp)
	if goUp.Model != "dep-model" {
		t.Errorf("routed model %q; upstream (Go decoder) reads model %q from %s; want dep-model", req.model, goUp.Model, up)
	}
	if _, dup := adv2Upstream(t, up)["Model"]; dup {
		t.Errorf("upstream body keeps the client's \"Model\" next to belay's \"model\": %s", up)
	}
}

// Odd but valid bodies: the rewrite must give the model to every decoder.
func TestReview3bRewriteOddBodies(t *testing.T) {
	for _, body := range []string{
		"\n\t{ \"model\" :\t\"a\" , \"messages\":[{\"role\":\"user\",\"content\":\"}\\\"{\"}] } \n",
		`{"mod\u0065l":"a","messages":[{"role":"user","content":"x"}]}`,
		`{"model":"a","model":"b","messages":[{"role":"user","content":"x","model":"n"}]}`,
		`{"messages":[{"role":"user","content":"\\"}],"model":"a"}`,
		`{"x":{"model":"n","y":[1,{"model":2}]},"model":"a","messages":[{"role":"user","content":"é😀\u2028"}]}`,
		`{"model":"a","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":false,"x":12345678901234567890}}`,
	} {
		_, up := toUpstream(t, []byte(body), "dep<&>")
		if !json.Valid(up) {
			t.Errorf("invalid upstream body %s", up)
			continue
		}
		var m map[string]json.RawMessage
		json.Unmarshal(up, &m)
		var model string
		json.Unmarshal(m["model"], &model)
		if model != "dep<&>" {
			t.Errorf("%s -> %s: model %q", body, up, model)
		}
		if so, ok := m["stream_options"]; ok {
			var o map[string]json.RawMessage
			json.Unmarshal(so, &o)
			if string(o["x"]) != "12345678901234567890" || string(o["include_usage"]) != "true" {
				t.Errorf("stream_options sent upstream: %s (client sent %s)", so, body)
			}
		}
	}
}
