package sim_test

import (
	"testing"

	"github.com/belay-run/belay/sim"
)

// Each answer names the profile that served it: a built-in profile under
// its own /d/ name, the configured default for any other name, so a
// misspelt /d/flakey is visibly healthy rather than silently so.
func TestAnswerNamesItsProfile(t *testing.T) {
	def, err := sim.ParseProfile("none")
	if err != nil {
		t.Fatal(err)
	}
	_, ts := startSim(t, sim.Config{Profile: def, Seed: 1})
	for _, tc := range []struct{ path, want string }{
		{chatPath, "none"},
		{"/d/flaky" + chatPath, "flaky"},
		{"/d/flakey" + chatPath, "none"},
		{"/d/down" + messagesPath, "down"},
		{"/d/primary" + chatPath, "none"}, // a deployment's own name: no note
	} {
		body := chatBody("ping", false)
		if tc.path == "/d/down"+messagesPath {
			body = messagesBody("ping", false)
		}
		resp, _, err := post(t, ts.URL+tc.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("X-Sim-Profile"); got != tc.want {
			t.Errorf("%s: X-Sim-Profile %q, want %q", tc.path, got, tc.want)
		}
		// A name near a built-in profile's is noted as a likely typo.
		note := ""
		if tc.path == "/d/flakey"+chatPath {
			note = `no profile named "flakey" (did you mean "flaky"?): served by the default profile, none`
		}
		if got := resp.Header.Get("X-Sim-Note"); got != note {
			t.Errorf("%s: X-Sim-Note %q, want %q", tc.path, got, note)
		}
	}
}
