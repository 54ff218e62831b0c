package store

import (
	"encoding/json"
	"testing"
	"time"
)

// Approval arguments read as the JSON they are, not base64 (newcomer
// finding: the admin API and `belay approvals list --json` showed
// "eyJhbW91bnRfdXNkIjo0Mi41..."), and read back the same.
func TestApprovalJSONArguments(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		args []byte
		want string
	}{
		{[]byte(`{"amount_usd":42.5,"order_id":"A-1001"}`), `{"amount_usd":42.5,"order_id":"A-1001"}`},
		{[]byte(`not json`), `"not json"`},
		{nil, `null`},
	} {
		a := Approval{ID: "ap-1", RunID: "r", Tenant: "t", Tool: "refund", Arguments: c.args, State: ApprovalPending, Requested: at}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if got := string(m["arguments"]); got != c.want {
			t.Errorf("arguments %q marshal as %s, want %s (in %s)", c.args, got, c.want, b)
		}
		if string(m["tool"]) != `"refund"` || string(m["state"]) != `"pending"` {
			t.Errorf("the other fields are lost: %s", b)
		}
		var back Approval
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if string(back.Arguments) != string(c.args) || back.ID != a.ID || !back.Requested.Equal(at) {
			t.Errorf("round trip of %q: %+v", c.args, back)
		}
	}
}
