package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestRedactorString(t *testing.T) {
	aiza := "AIza" + strings.Repeat("A1b2C3d4e5", 3) + "F6g7h" // 4 + 35
	ghp := "ghp_" + strings.Repeat("a1B2c3", 6)                // 4 + 36
	r, err := NewRedactor(BuiltinRedactions, Pattern{Name: "ticket", Regexp: `TICKET-\d+`})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, want string
	}{
		{"email", "write to jane.doe+x@mail.example.co.uk today", "write to [REDACTED:email] today"},
		{"not an email", "user@localhost and @handle", "user@localhost and @handle"},
		{"visa plain", "card 4111111111111111 exp 12/30", "card [REDACTED:card_number] exp 12/30"},
		{"visa spaced", "card 4111 1111 1111 1111.", "card [REDACTED:card_number]."},
		{"mastercard dashed", "5555-5555-5555-4444", "[REDACTED:card_number]"},
		{"amex 15 digits", "amex 378282246310005", "amex [REDACTED:card_number]"},
		{"luhn invalid kept", "order 4111111111111112 shipped", "order 4111111111111112 shipped"},
		{"luhn invalid kept 2", "ref 1234 5678 1234 5678", "ref 1234 5678 1234 5678"},
		{"too long kept", "id 12345678901234567890", "id 12345678901234567890"},
		{"too short kept", "phone 555 1234", "phone 555 1234"},
		{"card after other digits", "qty 12 4111 1111 1111 1111", "qty 12 [REDACTED:card_number]"},
		{"two cards", "4111111111111111 4242424242424242", "[REDACTED:card_number] [REDACTED:card_number]"},
		{"openai key", "key sk-proj-abcdefghijklmnopqrstuvwxyz012345 ok", "key [REDACTED:api_key] ok"},
		{"anthropic key", "sk-ant-api03-abcdefghijklmnopqrstuv", "[REDACTED:api_key]"},
		{"short sk kept", "sk-short", "sk-short"},
		{"google key", "k=" + aiza, "k=[REDACTED:api_key]"},
		{"github token", "token " + ghp, "token [REDACTED:api_key]"},
		{"slack token", "xoxb-1234567890-abcdefghij", "[REDACTED:api_key]"},
		{"aws key id", "AKIAIOSFODNN7EXAMPLE", "[REDACTED:api_key]"},
		{"generic query", "GET /v1?api_key=abc123def456&q=1", "GET /v1?api_key=[REDACTED:api_key]&q=1"},
		{"generic json", `{"apiKey": "abc123def456", "n": 1}`, `{"apiKey": "[REDACTED:api_key]", "n": 1}`},
		{"generic header", "x-api-key: zzzz9999yyyy", "x-api-key: [REDACTED:api_key]"},
		{"bearer", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "Authorization: Bearer [REDACTED:bearer]"},
		{"bearer lower", "bearer abcdefgh12345678", "bearer [REDACTED:bearer]"},
		{"custom", "see TICKET-4521 for details", "see [REDACTED:ticket] for details"},
		{"nothing", "the refund was 10 USD in 2024", "the refund was 10 USD in 2024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactorOnlyNamedBuiltins(t *testing.T) {
	r, err := NewRedactor([]string{RedactEmail})
	if err != nil {
		t.Fatal(err)
	}
	in := "a@b.io 4111111111111111 sk-proj-abcdefghijklmnopqrstuvwxyz"
	want := "[REDACTED:email] 4111111111111111 sk-proj-abcdefghijklmnopqrstuvwxyz"
	if got := r.String(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRedactorValueNested(t *testing.T) {
	r := DefaultRedactor()
	in := map[string]any{
		"messages": []any{
			map[string]any{"role": "user", "content": "I am bob@example.com, card 4111 1111 1111 1111"},
			map[string]any{"role": "assistant", "content": "ok", "n": 3.0},
		},
		"headers": []string{"Authorization: Bearer abcdefghijkl"},
		"raw":     json.RawMessage(`{"email":"amy@example.org"}`),
		"ok":      true,
	}
	orig := fmt.Sprint(in)
	got := r.Value(in)
	want := map[string]any{
		"messages": []any{
			map[string]any{"role": "user", "content": "I am [REDACTED:email], card [REDACTED:card_number]"},
			map[string]any{"role": "assistant", "content": "ok", "n": 3.0},
		},
		"headers": []string{"Authorization: Bearer [REDACTED:bearer]"},
		"raw":     json.RawMessage(`{"email":"[REDACTED:email]"}`),
		"ok":      true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Value:\n got %#v\nwant %#v", got, want)
	}
	if fmt.Sprint(in) != orig {
		t.Errorf("Value modified its input: %v", in)
	}
}

func TestNewRedactorErrors(t *testing.T) {
	_, err := NewRedactor([]string{"email", "phone"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("unknown name: err = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{`"phone"`, "email", "card_number", "api_key", "bearer"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if _, err := NewRedactor(nil, Pattern{Regexp: "(unclosed"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad pattern: err = %v, want ErrInvalidConfig", err)
	}
}

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	if got := r.String("a@b.io"); got != "a@b.io" {
		t.Errorf("nil Redactor changed the string: %q", got)
	}
}

func ExampleRedactor() {
	r, err := NewRedactor([]string{"email", "card_number", "api_key", "bearer"},
		Pattern{Name: "order", Regexp: `ORD-\d{6}`})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.String("mail ana@example.com, card 4111 1111 1111 1111, not 4111 1111 1111 1112"))
	fmt.Println(r.String("curl -H 'Authorization: Bearer abc.def.ghi123' ?api_key=s3cr3tvalue ORD-123456"))
	// Output:
	// mail [REDACTED:email], card [REDACTED:card_number], not 4111 1111 1111 1112
	// curl -H 'Authorization: Bearer [REDACTED:bearer]' ?api_key=[REDACTED:api_key] [REDACTED:order]
}

func BenchmarkRedactorString(b *testing.B) {
	r := DefaultRedactor()
	s := strings.Repeat("The customer asked about order 1234 and the refund policy. ", 8)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.String(s)
	}
}
