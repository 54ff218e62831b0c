package dialect

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

// stringCases are JSON values whose decoded length StringLen must give as
// encoding/json decodes them.
var stringCases = []string{
	`""`, `"abc"`, `"a\nb\tc\"d\\e\/f\bg\fh\ri"`, `"\u00e9\u4e2d\u0041"`, `"é中😀"`,
	`"\ud83d\ude00"`, `"\uD83D\uDE00x"`, `"\ud83d"`, `"\ude00\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`,
	`"\ud83d\ud83d\ude00"`, `"\\u0041"`, `"\\\u0041\\"`, `"x\u0000y"`,
}

func TestStringLenMatchesUnmarshal(t *testing.T) {
	for _, c := range stringCases {
		var s string
		if err := json.Unmarshal([]byte(c), &s); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if got := StringLen([]byte(c)); got != len(s) {
			t.Errorf("StringLen(%s) = %d, want %d", c, got, len(s))
		}
	}
	for _, c := range []string{`null`, `1`, `{"a":"b"}`, `["a"]`, ``} {
		if got := StringLen([]byte(c)); got != 0 {
			t.Errorf("StringLen(%s) = %d, want 0", c, got)
		}
	}
}

func FuzzStringLen(f *testing.F) {
	for _, c := range stringCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		var s string
		if json.Unmarshal([]byte(c), &s) != nil || c[0] != '"' || c[len(c)-1] != '"' || !utf8.ValidString(c) {
			return
		}
		if got := StringLen([]byte(c)); got != len(s) {
			t.Errorf("StringLen(%s) = %d, want %d", c, got, len(s))
		}
	})
}

func TestEachElementOfValidMatchesUnmarshal(t *testing.T) {
	for _, c := range []string{
		`[]`, ` [ ] `, `[1]`, `[ "a" , {"b":[1,"]"]} ,null,true, -1.5e3 ,[[]],"\"]"]`, "[\n\t{\"x\":\"y\"}\r\n]",
	} {
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(c), &want); err != nil {
			t.Fatal(err)
		}
		var got []json.RawMessage
		if err := EachElementOfValid([]byte(c), func(v []byte) { got = append(got, v) }); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: elements %q, want %q", c, got, want)
		}
	}
	for _, c := range []string{`null`, `{}`, `"[]"`, ``, ` `} {
		if err := EachElementOfValid([]byte(c), func([]byte) { t.Errorf("%s: fn called", c) }); !errors.Is(err, ErrNotArray) {
			t.Errorf("%s: err %v, want ErrNotArray", c, err)
		}
	}
}

func TestPromptSize(t *testing.T) {
	var s PromptSize
	s.AddText([]byte(`"abc\n"`))                    // 4
	s.AddJSON([]byte("{ \"a\" : [ 1, \"x y\" ] }")) // {"a":[1,"x y"]}: 15
	s.AddJSON([]byte(`"de"`))                       // 2
	s.AddJSON([]byte(`null`))                       // 0
	s.AddText([]byte(`null`))                       // 0
	s.AddMedia(OpenAIImageTokens)
	if got, want := s.Tokens(), EstimateTokens(21)+OpenAIImageTokens; got != want {
		t.Errorf("Tokens() = %d, want %d", got, want)
	}
}
