package main

import (
	"strings"
	"testing"
)

// What is wrong with the command line or the config exits 2 before
// anything starts, whether it came from a flag or from the file
// (newcomer findings: --listen localhost and a missing sim.script exited 1
// at bind and at build, like a failure of the machine).
func TestStartupInputErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	missing := writeText(t, dir, "missing.yaml", "store: memory://\nlisten: 127.0.0.1:0\nsim: {script: nope.yaml}\n")
	malformed := writeText(t, dir, "malformed.yaml", "store: memory://\nlisten: 127.0.0.1:0\nsim: {script: bad.yaml}\n")
	writeText(t, dir, "bad.yaml", "rules: [{when: {}, reply: 3}]\n")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"serve", "--listen", "localhost", "--store", "memory://"}, `--listen "localhost" is not host:port`},
		{[]string{"sim", "--listen", "4010"}, `--listen "4010" is not host:port`},
		{[]string{"serve", "--config", missing}, "sim.script: open " + dir + "/nope.yaml: no such file or directory"},
		{[]string{"serve", "--config", malformed}, "sim.script " + dir + "/bad.yaml: "},
	} {
		_, _, err := belayArgs(t, tc.args...)
		t.Run(tc.args[0], func(t *testing.T) { wantCode(t, err, 2, tc.msg) })
	}
}

// A store file that does not exist says what to check for where the URL
// came from (newcomer finding: a misspelt --store was told to pass
// --store).
func TestMissingStoreHint(t *testing.T) {
	dir := t.TempDir()
	_, _, err := belayArgs(t, "runs", "--store", "sqlite://"+dir+"/typo.db")
	wantCode(t, err, 1, "(check the path given to --store: belay serve creates the file when it starts)")
	cfg := writeText(t, dir, "belay.yaml", "store: sqlite://"+dir+"/other.db\n")
	_, _, err = belayArgs(t, "runs", "--config", cfg)
	wantCode(t, err, 1, "(the store of --config: belay serve --config creates it when it starts)")
	// A relative path is taken from the working directory, as belay serve
	// takes it (newcomer finding: the hint said serve would create it,
	// while it had, in its own folder).
	rel := writeText(t, dir, "rel.yaml", "store: sqlite://rel.db\n")
	_, _, err = belayArgs(t, "runs", "--config", rel)
	wantCode(t, err, 1, "(the store of --config, a relative path, is taken from this working directory as belay serve takes it from its own")
	t.Chdir(dir)
	_, _, err = belayArgs(t, "runs")
	wantCode(t, err, 1, "(pass --store with the store belay serve uses, or start belay serve first)")
}

// A gateway config with tools.irreversible gets a note at start: the
// gateway relays tool calls, it does not hold them (newcomer finding).
func TestServeNotesToolsAreNotGatewayGuards(t *testing.T) {
	cfg := writeText(t, t.TempDir(), "tools.yaml", "listen: 127.0.0.1:0\ntools: {irreversible: [issue_refund, \"delete_*\"], read_only: [\"get_*\"]}\n")
	_, stderr, err := belayArgs(t, "serve", "--config", cfg, "--store", "foo://x") // fails after the notes, before serving
	wantCode(t, err, 2, `unsupported store URL scheme "foo://"`)
	for _, want := range []string{"note: tools.irreversible (issue_refund, delete_*) holds tools run through belay",
		"note: tools.read_only (get_*) applies to tools run through belay"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr = %q, want %q", stderr, want)
		}
	}
}
