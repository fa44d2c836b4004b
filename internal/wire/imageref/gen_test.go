package imageref

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The generator draws from small pools, so that random images and patterns
// often meet: registries with and without ports (and the ones Docker Hub
// is known by), short names, nested paths, tags, digests, image IDs with
// and without their prefix, and names a runtime should not report.
var (
	genRegistries = []string{"", "", "docker.io/", "index.docker.io/", "quay.io/", "localhost/", "localhost:5000/",
		"registry.example.com:5000/", "registry.example.com/", "127.0.0.1:5000/", "[::1]:5000/"}
	genPaths = []string{"alpine", "library/alpine", "nginx", "team/app", "team/app/sub", "team", "a/b/c/d", "a/b",
		"library", "x", "library/alpine/x", "sha256"}
	genTags = []string{"", ":latest", ":3.19", ":v1", ":1"}
)

func genHex(rng *rand.Rand) string {
	return strings.Repeat(string("0123456789abcdef"[rng.IntN(4)]), 64)
}

func genRepo(rng *rand.Rand) string {
	return genRegistries[rng.IntN(len(genRegistries))] + genPaths[rng.IntN(len(genPaths))]
}

func pick(rng *rand.Rand, s []string) string { return s[rng.IntN(len(s))] }

// randomImage is an image as a runtime might report it.
func randomImage(rng *rand.Rand) Image {
	img := Image{}
	switch rng.IntN(5) {
	case 0:
		img.ID = genHex(rng)
	case 1:
		img.ID = "not-an-id"
	default:
		img.ID = "sha256:" + genHex(rng)
	}
	for range rng.IntN(4) {
		switch rng.IntN(8) {
		case 0:
			img.Tags = append(img.Tags, pick(rng, []string{"<none>:<none>", "", "UPPER:1", genRepo(rng), "sha256:" + genHex(rng)}))
		case 1:
			img.Tags = append(img.Tags, genRepo(rng)+pick(rng, genTags)+"@sha256:"+genHex(rng))
		default:
			img.Tags = append(img.Tags, genRepo(rng)+pick(rng, genTags[1:]))
		}
	}
	for range rng.IntN(3) {
		switch rng.IntN(6) {
		case 0:
			img.Digests = append(img.Digests, pick(rng, []string{"<none>@<none>", genRepo(rng) + ":1", genRepo(rng) + "@sha256:12"}))
		case 1:
			img.Digests = append(img.Digests, genRepo(rng)+":9@sha256:"+genHex(rng))
		default:
			img.Digests = append(img.Digests, genRepo(rng)+"@sha256:"+genHex(rng))
		}
	}
	return img
}

// randomPatterns is n valid patterns of every form; "*" is rare.
func randomPatterns(rng *rand.Rand, n int) []Pattern {
	var out []Pattern
	for len(out) < n {
		var s string
		switch rng.IntN(12) {
		case 0, 1:
			s = genRepo(rng) + pick(rng, genTags)
		case 2:
			s = genRepo(rng) + "@sha256:" + genHex(rng)
		case 3:
			s = genRepo(rng) + pick(rng, genTags[1:]) + "@sha256:" + genHex(rng)
		case 4:
			s = pick(rng, []string{"sha256:", ""}) + genHex(rng)
		case 5, 6:
			s = genRepo(rng) + ":*"
		case 7, 8:
			s = genRepo(rng) + "/*"
		case 9:
			s = strings.TrimSuffix(pick(rng, genRegistries[2:]), "/") + "/*"
		case 10:
			s = fmt.Sprintf("%s%s/*", pick(rng, genRegistries), pick(rng, []string{"team", "a", "a/b/c", "library"}))
		default:
			if rng.IntN(10) == 0 {
				s = "*"
			} else {
				s = genRepo(rng) + ":*"
			}
		}
		out = append(out, ParsePattern(s))
	}
	return out
}
