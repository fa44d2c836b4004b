package docsync

import (
	"fmt"
	"strings"
)

// Between is the text of page between the lines begin and end.
func Between(page, begin, end string) (string, error) {
	i := strings.Index(page, begin+"\n")
	if i < 0 {
		return "", fmt.Errorf("no line %q", begin)
	}
	rest := page[i+len(begin)+1:]
	j := strings.Index(rest, end)
	if j < 0 {
		return "", fmt.Errorf("no line %q after %q", end, begin)
	}
	return rest[:j], nil
}

// Replace is page with the text between the lines begin and end replaced
// by body.
func Replace(page, begin, end, body string) (string, error) {
	old, err := Between(page, begin, end)
	if err != nil {
		return "", err
	}
	i := strings.Index(page, begin+"\n") + len(begin) + 1
	return page[:i] + body + page[i+len(old):], nil
}
