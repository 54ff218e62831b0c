// Package suggest finds the likely intended name for a misspelt one, for
// "did you mean" hints in error messages.
package suggest

import "strings"

// MaxLen is the longest input Closest compares (bytes): a longer one is
// not a slip of a name (and a request's value can be megabytes long).
const MaxLen = 128

// Closest returns the name in names nearest to s by edit distance, ignoring
// case, when it is within a third of s's length (at least 1, for s of 3
// bytes or more); else "". Of names equally near, the first wins. s longer
// than MaxLen, and names whose length alone is too far from it, are not
// compared. Its work is O(len(s)) memory and O(len(s)·len(name)) time per
// name compared.
func Closest(s string, names []string) string {
	if len(s) < 3 || len(s) > MaxLen {
		return ""
	}
	best, bestD := "", max(1, len(s)/3)+1
	ls := strings.ToLower(s)
	for _, n := range names {
		if diff := len(n) - len(s); diff >= bestD || -diff >= bestD {
			continue
		}
		if d := distance(ls, strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b, in
// bytes: Levenshtein's insertions, deletions and substitutions, and a swap
// of two adjacent bytes as one edit ("modle" is one from "model"). It
// keeps three rows of len(b)+1 counts.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1) // row i-2
	prev := make([]int, len(b)+1)  // row i-1
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
