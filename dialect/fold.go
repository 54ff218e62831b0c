package dialect

import (
	"bytes"
	"reflect"
	"strings"
)

// Fields is the set of JSON member names a request struct decodes (its
// fields' json tags), for CaseMismatch. Build it once with FieldsOf; it
// is safe for concurrent use after.
type Fields struct {
	exact map[string]bool
	names []string
}

// FieldsOf returns the json names of struct type t's fields ("-" and
// unexported fields left out; a field without a tag by its Go name).
func FieldsOf(t reflect.Type) Fields {
	f := Fields{exact: map[string]bool{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.exact[name] = true
		f.names = append(f.names, name)
	}
	return f
}

// CaseMismatch checks the top-level member names of body, a JSON object
// already known to be valid, against f: a name that equals one of f's only
// under case folding ("Max_Tokens", "N", "STREAM") is a *FieldError naming
// it and the field meant. encoding/json decodes such a member into the
// field, while a provider that matches names exactly reads the other one
// or none, so belay's reservation (max_tokens, n) or its reading of stream
// could differ from what the provider does. Other unknown names are
// accepted (the provider decides on them).
func CaseMismatch(body []byte, f Fields) error {
	var err error
	_ = EachMemberOfValid(body, func(name, _ []byte) {
		if err != nil || f.exact[string(name)] {
			return
		}
		for _, want := range f.names {
			if bytes.EqualFold(name, []byte(want)) {
				err = Field(string(name), "is not a member of the request (names are case-sensitive): did you mean %q?", want)
				return
			}
		}
	})
	return err
}
