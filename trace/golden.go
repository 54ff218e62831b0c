package trace

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckGoldenName returns an error for a name a golden trace cannot have:
// empty, over 200 bytes, not UTF-8, or holding a space, a control
// character or an invisible format character (U+200B, U+202E: Unicode's
// category Cf); a name is given on command lines and in suite files, where
// such characters are lost or misread. `belay trace golden save` and a
// suite's expect.golden both check it.
func CheckGoldenName(name string) error {
	if name == "" || len(name) > 200 || !utf8.ValidString(name) ||
		strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 {
		return fmt.Errorf("golden name %q: want 1 to 200 bytes of UTF-8 without spaces, control or invisible characters (e.g. refund-path)", name)
	}
	return nil
}
