// Package shellword quotes a value for a command line a person pastes.
package shellword

import "strings"

// Quote returns s as one word for a POSIX shell or zsh: as it is when it
// holds only characters no shell treats specially, else in single quotes
// (a store URL's "?sslmode=disable" is a glob in zsh, which fails the
// pasted command with "no matches found"). "" becomes ”.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
