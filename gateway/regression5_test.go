package gateway

import (
	"encoding/json"
	"strings"
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

// A member named with another case than the field it matches under case
// folding ("Stream_Options", "Model", "Max_Tokens", "N") is refused with
// 400, naming the member and the field meant. encoding/json read it into
// the field, while a provider that matches names exactly reads another
// member or none: belay's routing, reservation or stream handling then
// differed from the provider's (review 3b had belay rename "Model" and
// "Stream_Options" in the upstream body; the adversary of session 7 found
// "Max_Tokens" and "N", which it did not rename, so the reservation and
// the provider disagreed).
func TestReview3bMemberCasingRefused(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"gpt-4o-mini","stream":true,"Stream_Options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`: `Stream_Options: is not a member of the request (names are case-sensitive): did you mean "stream_options"?`,
		`{"Model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`:                                                        `Model: is not a member of the request (names are case-sensitive): did you mean "model"?`,
		`{"model":"m","max_tokens":100000,"Max_Tokens":5,"messages":[{"role":"user","content":"hi"}]}`:                               `Max_Tokens: is not a member of the request (names are case-sensitive): did you mean "max_tokens"?`,
		`{"model":"m","n":128,"N":1,"messages":[{"role":"user","content":"hi"}]}`:                                                    `N: is not a member of the request (names are case-sensitive): did you mean "n"?`,
	} {
		if _, err := (openAIFront{}).parse([]byte(body)); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", body, err, want)
		}
	}
	if _, err := (anthropicFront{}).parse([]byte(`{"model":"m","Max_Tokens":5,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`)); err == nil ||
		!strings.Contains(err.Error(), `did you mean "max_tokens"?`) {
		t.Errorf("anthropic: error %v, want the member named", err)
	}
	// Members belay does not decode are the provider's to judge, whatever their case.
	if _, err := (openAIFront{}).parse([]byte(`{"model":"m","Logit_Bias":{"50256":-100},"messages":[{"role":"user","content":"hi"}]}`)); err != nil {
		t.Errorf("an unknown member: %v", err)
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
