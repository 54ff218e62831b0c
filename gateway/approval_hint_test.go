package gateway

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/belay-run/belay/config"
)

// The approval hint names the store so that belay approvals reaches it
// from any folder (newcomer finding: run beside the agent, the hint read
// ./belay.db while the config's store was another file).
func TestApprovalStoreArg(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  config.Config
		want string
	}{
		{config.Config{Store: "sqlite://belay.db"}, "--store sqlite://" + filepath.Join(wd, "belay.db")},
		{config.Config{Store: "sqlite:///tmp/lib/lib.db", Path: "belay.yaml"}, "--store sqlite:///tmp/lib/lib.db"},
		{config.Config{Store: "/tmp/my store.db"}, "--store 'sqlite:///tmp/my store.db'"},
		{config.Config{Store: "postgres://u:s3cret@h/db", Path: "/etc/belay/belay.yaml"}, "--config /etc/belay/belay.yaml"},
		{config.Config{Store: "postgres://u:s3cret@h/db?sslmode=disable"}, "--store 'postgres://u:xxxxx@h/db?sslmode=disable'"},
		{config.Config{Store: "memory://", Path: "belay.yaml"}, ""},
	} {
		if got := approvalStoreArg(&c.cfg); got != c.want {
			t.Errorf("store %q, config %q: %q, want %q", c.cfg.Store, c.cfg.Path, got, c.want)
		}
	}
	if got, want := decideHint("apr_1", "--store sqlite:///x.db"),
		"belay approvals approve|deny apr_1 --store sqlite:///x.db (or POST /admin/approvals/apr_1/approve|deny on the gateway)"; got != want {
		t.Errorf("decideHint = %q, want %q", got, want)
	}
}
