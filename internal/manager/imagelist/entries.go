package imagelist

import (
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// boundEntries leaves out the entries longer than any reference can be
// (imageref.MaxLength). The shipped CRD refuses them already; a CRD the
// release does not own (upstream's) may not, and each such entry would be
// copied into the job's data and into every node's report as an Invalid
// result. The rest run as written.
func boundEntries(entries []string) (kept []string, dropped, longest int) {
	kept = entries
	for i, e := range entries {
		if len(e) <= imageref.MaxLength {
			if dropped > 0 {
				kept = append(kept, e)
			}
			continue
		}
		if dropped == 0 {
			kept = append(make([]string, 0, len(entries)-1), entries[:i]...)
		}
		dropped++
		longest = max(longest, len(e))
	}
	return kept, dropped, longest
}
