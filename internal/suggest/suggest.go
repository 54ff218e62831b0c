// Package suggest finds the likely intended name for a misspelt one, for
// "did you mean" hints in error messages.
package suggest

import "strings"

// Closest returns the name in names nearest to s by edit distance, ignoring
// case, when it is within a third of s's length (at least 1); else "". Of
// names equally near, the first wins.
func Closest(s string, names []string) string {
	best, bestD := "", max(1, len(s)/3)+1
	ls := strings.ToLower(s)
	for _, n := range names {
		if d := distance(ls, strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b, in
// bytes: Levenshtein's insertions, deletions and substitutions, and a swap
// of two adjacent bytes as one edit ("modle" is one from "model").
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
