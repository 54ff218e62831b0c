package gateway

import (
	"net/url"
	"strings"
	"testing"

	"github.com/belay-run/belay/failure"
)

// modelPage follows Anthropic's cursor pagination: a page of at most
// limit ids after after_id or before before_id, and whether more lie
// beyond it in that direction.
func TestModelPage(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		query, page string
		more        bool
		err         string // a word of the refusal's message
	}{
		{"", "a,b,c,d,e", false, ""},
		{"limit=2", "a,b", true, ""},
		{"limit=2&after_id=b", "c,d", true, ""},
		{"limit=2&after_id=c", "d,e", false, ""},
		{"after_id=e", "", false, ""},
		{"limit=2&before_id=e", "c,d", true, ""},
		{"limit=2&before_id=c", "a,b", false, ""},
		{"before_id=a", "", false, ""},
		{"limit=1000", "a,b,c,d,e", false, ""},
		{"limit=0", "", false, "limit"},
		{"limit=1001", "", false, "limit"},
		{"limit=two", "", false, "limit"},
		{"after_id=z", "", false, "after_id"},
		{"before_id=z", "", false, "before_id"},
		{"after_id=a&before_id=c", "", false, "not both"},
	} {
		q, _ := url.ParseQuery(tc.query)
		page, more, fe := modelPage(ids, q)
		switch {
		case tc.err != "":
			if fe == nil || !strings.Contains(fe.Message, tc.err) {
				t.Errorf("%q: %v, want a refusal naming %s", tc.query, fe, tc.err)
			}
		case fe != nil || strings.Join(page, ",") != tc.page || more != tc.more:
			t.Errorf("%q: page %v more %v (%v), want %s more %v", tc.query, page, more, fe, tc.page, tc.more)
		}
	}
}

// A model belay does not serve is refused as a permanent failure, not the
// reason's usual degraded one (newcomer finding: the log said "degraded"
// for a typo in a model name).
func TestUnknownModelIsPermanent(t *testing.T) {
	s := &Server{}
	for _, fe := range []*failure.Error{s.unknownModel(failure.DialectOpenAI, "gpt-4o-mni"), s.unknownModel(failure.DialectAnthropic, "")} {
		if fe.Kind != failure.Permanent || fe.Reason != failure.ModelNotFound || !fe.NoRetry {
			t.Errorf("unknownModel = %+v; want permanent model_not_found, not retried", fe)
		}
		if got := fe.Error(); !strings.HasPrefix(got, "permanent: model_not_found") {
			t.Errorf("text = %q, want it to start permanent: model_not_found", got)
		}
	}
}
