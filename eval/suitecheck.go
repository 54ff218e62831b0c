package eval

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkVersion reads only the version of a suite document, so a file of
// another version is refused for its version, not for fields this belay
// does not know.
func checkVersion(root *yaml.Node) error {
	var head struct {
		Version int `yaml:"version"`
	}
	if err := root.Decode(&head); err != nil {
		return bad("must be a whole number", "version")
	}
	if head.Version == 0 {
		return bad(fmt.Sprintf("version is required (this belay reads version %d)", SuiteVersion), "version")
	}
	if head.Version != SuiteVersion {
		return bad(fmt.Sprintf("version %d is not understood (this belay reads version %d)", head.Version, SuiteVersion), "version")
	}
	return nil
}

// checkFields walks a YAML node against the Go type it decodes into and
// returns a *fieldError for the first key the type does not have, or the
// first value that does not decode into its field (a duration, a number),
// so the message can name the field's path and line.
func checkFields(n *yaml.Node, t reflect.Type, path []string) error {
	for n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && t != reflect.TypeFor[Duration]() && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := append(append([]string(nil), path...), key)
			f, ok := fields[key]
			if !ok {
				return bad(fmt.Sprintf("unknown field (known here: %s)", strings.Join(sortedNames(fields), ", ")), p...)
			}
			if err := checkFields(n.Content[i+1], f.Type, p); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode && isStructish(t.Elem()):
		for i, item := range n.Content {
			p := append(append([]string(nil), path...), fmt.Sprint(i))
			if err := checkFields(item, t.Elem(), p); err != nil {
				return err
			}
		}
		return nil
	}
	if len(path) == 0 {
		return nil
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return bad(decodeMessage(err), path...)
	}
	return nil
}

func isStructish(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != reflect.TypeFor[Duration]()
}

// yamlFields maps a struct's YAML keys to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f
	}
	return m
}

func sortedNames(m map[string]reflect.StructField) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var yamlErrPrefix = regexp.MustCompile(`^(yaml: )?(unmarshal errors:\s*)?(line \d+: )?`)

// decodeMessage drops the location prefixes of a YAML decode error: the
// caller names the file, line and field itself.
func decodeMessage(err error) string {
	return yamlErrPrefix.ReplaceAllString(err.Error(), "")
}
