package yamlnode

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestRead(t *testing.T) {
	if root, err := Read([]byte("  \n# only a comment\n")); root != nil || err != nil {
		t.Errorf("empty document: %v, %v; want nil, nil", root, err)
	}
	root, err := Read([]byte("a: &x {b: 1}\nc: *x\n"))
	if err != nil {
		t.Fatal(err)
	}
	top := Resolve(root)
	if top.Kind != yaml.MappingNode || len(top.Content) != 4 {
		t.Fatalf("top node kind %v with %d children; want a mapping of 2 keys", top.Kind, len(top.Content))
	}
	if alias := Resolve(top.Content[3]); alias != Resolve(top.Content[1]) {
		t.Errorf("Resolve of the alias c gives line %d; want a's mapping", alias.Line)
	}

	var se *SyntaxError
	if _, err := Read([]byte("a: 1\nb: [1, 2\nc: 3\n")); !errors.As(err, &se) || se.Line == 0 || se.Msg == "" {
		t.Errorf("unclosed list: %v; want a *SyntaxError with a line", err)
	} else if se.Msg[:5] == "yaml:" || se.Msg[:5] == "line " {
		t.Errorf("message %q keeps the parser's prefix", se.Msg)
	}
	var md *MoreDocumentsError
	if _, err := Read([]byte("a: 1\n---\nb: 2\n")); !errors.As(err, &md) || md.Line != 2 {
		t.Errorf("two documents: %v; want a *MoreDocumentsError at line 2 (the ---)", err)
	}
}

func TestKeys(t *testing.T) {
	type s struct {
		Name     string `yaml:"name"`
		Timeout  int    `yaml:"timeout,omitempty"`
		Plain    bool
		Skipped  string `yaml:"-"`
		internal int
	}
	keys, fields := Keys(reflect.TypeFor[s]())
	if want := []string{"name", "timeout", "plain"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v; want %v", keys, want)
	}
	if f, ok := fields["timeout"]; !ok || f.Name != "Timeout" {
		t.Errorf("field of timeout: %+v", f)
	}
	if _, ok := fields["-"]; ok {
		t.Error("a field tagged - has a key")
	}
}

func TestEntries(t *testing.T) {
	root, err := Read([]byte("base: &b {x: 1}\nmore: &m {y: 2}\nuse:\n  <<: [*b, *m]\n  z: 3\nbroken:\n  <<: [*b, 7]\n"))
	if err != nil {
		t.Fatal(err)
	}
	top := Resolve(root)
	use, broken := Resolve(top.Content[5]), Resolve(top.Content[7])
	entries, merged, bad := Entries(use)
	if len(entries) != 1 || entries[0].Key.Value != "z" || bad != nil {
		t.Fatalf("use: entries %v, bad %v; want only z", entries, bad)
	}
	if len(merged) != 2 || merged[0].Content[0].Value != "x" || merged[1].Content[0].Value != "y" {
		t.Errorf("use: %d merged mappings; want x's then y's", len(merged))
	}
	_, merged, bad = Entries(broken)
	if bad == nil || bad.Value != "7" || len(merged) != 1 {
		t.Errorf("broken: bad %v after %d merged; want 7 after one", bad, len(merged))
	}
}

func TestPlainError(t *testing.T) {
	type rule struct {
		When  map[string]string `yaml:"when"`
		Times int               `yaml:"times"`
		Text  string            `yaml:"text"`
	}
	var v struct {
		Rules []rule `yaml:"rules"`
	}
	dec := yaml.NewDecoder(strings.NewReader("rules:\n  - whenn: {tool: x}\n  - times: many\n    text: [1, 2]\n"))
	dec.KnownFields(true)
	err := dec.Decode(&v)
	if err == nil {
		t.Fatal("no error")
	}
	want := `line 2: unknown field "whenn"; line 3: cannot unmarshal !!str ` + "`many`" + ` as a whole number; line 4: cannot unmarshal !!seq as text`
	if got := PlainError(err); got != want {
		t.Errorf("PlainError:\n got %s\nwant %s", got, want)
	}
}
