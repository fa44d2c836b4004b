package scanservice

import (
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// truth is what an honest scanner finds in image i: every third image is
// vulnerable.
func truth(i int) scanshare.Shared {
	if i%3 == 0 {
		return vulnerable(key(i), "CVE-1")
	}
	return clean(key(i))
}

// FuzzOneLiarRemovesNothingElsewhere drives the store with honest
// scanners on four nodes and one compromised scanner that claims, shares,
// releases and lies at will, in the order the input says. Whatever it
// does, no honest node is ever served a verdict that removes an image
// unless it is the truth; and the store stays within its bounds.
func FuzzOneLiarRemovesNothingElsewhere(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{4, 4, 4, 4, 0, 1, 2, 3, 0x44, 0x84, 0xc4, 1, 2, 3})
	f.Add([]byte{0x24, 0x64, 0xa4, 0xe4, 0x14, 0x54, 0, 1, 2, 3, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := &clock{t: time.Unix(1e9, 0)}
		s := NewVerdicts(VerdictOptions{Budget: 64 << 10, PerScanner: 8 << 10, Lease: time.Minute, Grant: 2, MaxClaims: 3, Now: c.now})
		honest := []Scanner{nodeA, nodeB, nodeC(), {Node: "node-d", Pod: "pod-d", PodUID: "uid-d"}}
		liar := Scanner{Node: "node-x", Pod: "pod-x", PodUID: "uid-x"}
		const images = 6
		for _, op := range ops {
			who, img := int(op&7), int(op>>3)%images
			switch {
			case who < len(honest):
				// An honest scanner asks for its images and scans what it
				// is handed, truthfully.
				h := honest[who]
				r := s.Claim(h, keys(img, (img+1)%images), time.Second)
				for _, v := range r.Verdicts {
					if removes(v.Scan.Verdict) && v.Node != h.Node {
						i := indexes([]scanshare.Key{v.Key})[0]
						if !agree(truth(i).Scan, v.Scan) {
							t.Fatalf("%s was served %s's %s verdict on image %d (confirmed by %q), which is not the truth", h.Node, v.Node, v.Scan.Verdict, i, v.ConfirmedBy)
						}
					}
				}
				var share scanshare.ShareRequest
				for _, i := range indexes(r.Scan) {
					share.Verdicts = append(share.Verdicts, truth(i))
				}
				s.Share(h, share)
			case who == 4 || who == 5:
				// The liar claims, then shares the opposite of the truth.
				s.Claim(liar, keys(img), time.Second)
				lie := vulnerable(key(img), "CVE-FORGED")
				if truth(img).Scan.Verdict == "vulnerable" {
					lie = clean(key(img))
				}
				s.Share(liar, scanshare.ShareRequest{Verdicts: []scanshare.Shared{lie}})
			case who == 6:
				// The liar shares without claiming, and releases others'.
				s.Share(liar, scanshare.ShareRequest{Verdicts: []scanshare.Shared{{Key: key(img), Scan: workerresult.Scan{Verdict: "end-of-life", EndOfLife: true}}},
					Released: keys(img)})
			default:
				c.t = c.t.Add(time.Duration(img) * 20 * time.Second)
				s.Expire()
			}
			if st := s.Stats(); st.Bytes > 64<<10 || st.Claims > 3*(len(honest)+1) {
				t.Fatalf("store out of bounds: %+v", st)
			}
		}
	})
}
