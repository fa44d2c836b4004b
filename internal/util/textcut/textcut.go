// Package textcut shortens text to a number of bytes for the fields that
// bound it (a status message, a termination message, an error quoted from
// a file), marking the cut with "...". The cut never splits a UTF-8
// character: the API server refuses a string that is not valid UTF-8, and
// a message may quote an image name or a file in any script.
package textcut

import "unicode/utf8"

// ellipsis marks where the text was cut.
const ellipsis = "..."

// Cut returns s when it is at most max bytes long, else its longest
// prefix that ends on a character boundary and leaves room for "...",
// followed by "...": never more than max bytes.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max < len(ellipsis) {
		return ellipsis[:max]
	}
	i := max - len(ellipsis)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ellipsis
}
