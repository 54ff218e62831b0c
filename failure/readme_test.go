package failure

import (
	"os"
	"strings"
	"testing"
)

// The README's table of failure reasons lists every reason in the row of
// its kind, and no reason the taxonomy lacks (a newcomer could not find
// retry_after_too_long anywhere).
func TestReadmeListsEveryReason(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "### Failure reasons")
	if i < 0 {
		t.Fatal("README has no ### Failure reasons section")
	}
	section := text[i:]
	if j := strings.Index(section[4:], "\n## "); j >= 0 {
		section = section[:j+4]
	}
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 4 {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = cells[3]
		}
	}
	listed := 0
	for r, k := range reasonKinds {
		row, ok := rows[k.String()]
		if !ok {
			t.Errorf("no row for kind %s", k)
			continue
		}
		if !strings.Contains(row, "`"+string(r)+"`") {
			t.Errorf("reason %s is not in the row of its kind %s", r, k)
		}
		listed++
	}
	for k, row := range rows {
		parts := strings.Split(row, "`")
		for i := 1; i < len(parts); i += 2 { // the code spans
			kind, ok := reasonKinds[Reason(parts[i])]
			if !ok || kind.String() != k {
				t.Errorf("row %s lists %q, which is not a reason of that kind", k, parts[i])
			}
		}
	}
	if listed < 25 {
		t.Errorf("%d reasons checked; want the whole taxonomy", listed)
	}
}
