package openai

import (
	"strings"
	"testing"
)

// A file part's data: URL header counts by its decoded length: escaping
// its characters (\u0061 for a) does not lower the estimate of the data
// after it (review finding: each escape took 5 bytes off the data).
func TestDataURLLenEscapedHeader(t *testing.T) {
	data := strings.Repeat("QUJD", 50_000) // 200,000 base64 characters
	plain := dataURLLen([]byte(`"data:application/pdf;base64,` + data + `"`))
	escaped := dataURLLen([]byte(`"data:\u0061\u0070plication/pdf;base64,` + data + `"`))
	if plain != int64(len(data)) || escaped != plain {
		t.Errorf("data length %d plain, %d escaped; want %d both", plain, escaped, len(data))
	}
}
