package shellword

import "testing"

// The store URL in eval's hint line is one shell word (newcomer finding:
// pasted into zsh, "?sslmode=disable" was a glob that matched nothing).
func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite://belay.db": "sqlite://belay.db",
		"postgres://root@127.0.0.1:5432/test?sslmode=disable": "'postgres://root@127.0.0.1:5432/test?sslmode=disable'",
		"/tmp/my store.db": "'/tmp/my store.db'",
		"it's":             `'it'\''s'`,
		"":                 "''",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
