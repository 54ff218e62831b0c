package sim_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/belay-run/belay/sim"
)

// orderSchema is a strict structured-output schema with the shapes the
// simulator fills: an enum, a nested $ref, an array with minItems, a
// nullable type and a minimum.
const orderSchema = `{"type":"object","additionalProperties":false,"required":["status","order","tags","note","count"],
"properties":{"status":{"type":"string","enum":["refunded","denied"]},"order":{"$ref":"#/$defs/order"},
"tags":{"type":"array","minItems":2,"items":{"type":"string"}},"note":{"type":["null","string"]},"count":{"type":"integer","minimum":1}},
"$defs":{"order":{"type":"object","required":["id"],"properties":{"id":{"type":"string","minLength":3}}}}}`

// A request that asks for structured output gets JSON valid under its
// schema in both dialects, as a real provider's (the SDKs' parse helpers
// threw on the simulator's plain text; a finding of a test with the
// official SDKs); a json_object request gets a JSON object.
func TestStructuredOutputIsTheSchemasJSON(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 1})
	type order struct {
		Status string `json:"status"`
		Order  struct {
			ID string `json:"id"`
		} `json:"order"`
		Tags  []string `json:"tags"`
		Note  *string  `json:"note"`
		Count int      `json:"count"`
	}
	check := func(name, text string) {
		t.Helper()
		var o order
		if err := json.Unmarshal([]byte(text), &o); err != nil {
			t.Fatalf("%s: %q is not JSON: %v", name, text, err)
		}
		if o.Status != "refunded" || len(o.Order.ID) != 3 || len(o.Tags) != 2 || o.Count != 1 {
			t.Errorf("%s: %+v does not follow the schema", name, o)
		}
	}
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"Refund A-1"}],
"response_format":{"type":"json_schema","json_schema":{"name":"refund","strict":true,"schema":` + orderSchema + `}}}`
	check("openai", chatContent(t, ts.URL, body))

	body = `{"model":"claude-sonnet-5-5","max_tokens":256,"messages":[{"role":"user","content":"Refund A-1"}],
"output_config":{"format":{"type":"json_schema","schema":` + orderSchema + `}}}`
	_, b, err := post(t, ts.URL+messagesPath, body)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(b, &m); err != nil || len(m.Content) != 1 {
		t.Fatalf("anthropic: %v: %s", err, b)
	}
	check("anthropic", m.Content[0].Text)

	body = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`
	if got := chatContent(t, ts.URL, body); got != "{}" {
		t.Errorf("json_object: %q, want {}", got)
	}
	// Without a format, text as before.
	if got := chatContent(t, ts.URL, chatBody("hi", false)); json.Valid([]byte(got)) {
		t.Errorf("no format: %q, want text", got)
	}
}

// The minimums of a schema hold in the instance: minItems and minLength
// whatever their size (up to a bound), an integer's fractional minimum
// rounded up, an exclusive minimum passed (review finding: 10 items gave
// 8, a minimum of 1.5 gave 1.5 for an integer).
func TestStructuredOutputMinimums(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 1})
	schema := `{"type":"object","properties":{"tags":{"type":"array","minItems":10,"items":{"type":"string","minLength":100}},
"n":{"type":"integer","minimum":1.5},"x":{"type":"number","exclusiveMinimum":2},"m":{"type":"integer","minimum":1,"multipleOf":7},
"when":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"}}}`
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":` + schema + `}}}`
	content := chatContent(t, ts.URL, body)
	var got struct {
		Tags []string    `json:"tags"`
		N    json.Number `json:"n"`
		X    float64     `json:"x"`
		M    int         `json:"m"`
		When string      `json:"when"`
		ID   string      `json:"id"`
	}
	if err := json.Unmarshal([]byte(content), &got); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, got.When); err != nil || got.M != 7 || len(got.ID) != 36 {
		t.Errorf("format and multipleOf: when %q, id %q, m %d", got.When, got.ID, got.M)
	}
	if len(got.Tags) != 10 || len(got.Tags[0]) != 100 || got.N != "2" || got.X <= 2 {
		t.Errorf("instance %d tags of %d characters, n %s, x %v; want 10 of 100, 2, above 2", len(got.Tags), len(got.Tags[0]), got.N, got.X)
	}
}

// chatContent posts a chat completion request to the simulator at base and
// returns its one choice's content.
func chatContent(t *testing.T, base, body string) string {
	t.Helper()
	_, b, err := post(t, base+chatPath, body)
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &cc); err != nil || len(cc.Choices) != 1 {
		t.Fatalf("%v: %s", err, b)
	}
	return cc.Choices[0].Message.Content
}

// A count is answered under the deployment's fault profile, as a model
// call is: a deployment that is down cannot count.
func TestCountTokensUnderAFaultProfile(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 1})
	body := `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"hi"}]}`
	resp, b, err := post(t, ts.URL+"/d/down/v1/messages/count_tokens", body)
	if err != nil || resp.StatusCode != 503 || resp.Header.Get("Request-Id") == "" {
		t.Errorf("count on a down deployment: %v %d %s", err, resp.StatusCode, b)
	}
	resp, b, err = post(t, ts.URL+"/v1/messages/count_tokens", body)
	if err != nil || resp.StatusCode != 200 || !json.Valid(b) {
		t.Errorf("count on a healthy deployment: %v %d %s", err, resp.StatusCode, b)
	}
}

// multipleOf holds exactly: an integer's multiple is whole, a decimal one
// is written to its decimals (review findings: 1.5 for an integer of
// multipleOf 1.5; 0.30000000000000004 for multipleOf 0.1).
func TestStructuredOutputMultipleOf(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 1})
	schema := `{"type":"object","properties":{"i":{"type":"integer","minimum":1,"multipleOf":1.5},"d":{"type":"number","minimum":0.3,"multipleOf":0.1}}}`
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":` + schema + `}}}`
	got := chatContent(t, ts.URL, body)
	if got != `{"d":0.3,"i":3}` {
		t.Errorf("instance %s, want {\"d\":0.3,\"i\":3}", got)
	}
}
