package registrycheck

import (
	"strings"
)

// Challenge is one WWW-Authenticate challenge: its scheme (lower case) and
// parameters (keys lower case).
type Challenge struct {
	Scheme string
	Params map[string]string
}

// ParseChallenge reads a WWW-Authenticate header's first challenge, as
// registries send it: Bearer realm="...",service="...",scope="..." (quoted
// values may hold commas and escaped quotes) or Basic realm="...".
func ParseChallenge(h string) (Challenge, bool) {
	h = strings.TrimSpace(h)
	scheme, rest, _ := strings.Cut(h, " ")
	if scheme == "" || strings.ContainsAny(scheme, "=,\"") {
		return Challenge{}, false
	}
	c := Challenge{Scheme: strings.ToLower(scheme), Params: map[string]string{}}
	for {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			return c, true
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			// A second challenge's scheme, or a token68: the first
			// challenge ends here.
			return c, true
		}
		key := strings.ToLower(strings.TrimSpace(rest[:eq]))
		if strings.ContainsAny(key, " \t,\"") {
			return c, true
		}
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			closed := false
			for ; i < len(rest); i++ {
				ch := rest[i]
				if ch == '\\' && i+1 < len(rest) {
					i++
					b.WriteByte(rest[i])
					continue
				}
				if ch == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(ch)
			}
			if !closed {
				return Challenge{}, false
			}
			val, rest = b.String(), rest[i:]
		} else {
			end := strings.IndexAny(rest, ", \t")
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		if _, dup := c.Params[key]; !dup {
			c.Params[key] = val
		}
	}
}
