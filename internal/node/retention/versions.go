package retention

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Version is one image's presence in one repository of the node: a tag of
// it there, or a repository digest (an image whose tag moved on to a newer
// pull keeps only its digest, and is still an older version of that
// repository). The caller lists every image of the node, the protected ones
// too: a version kept because a workload references it is still one of the
// newest when keepVersions counts.
type Version struct {
	// Image is the caller's index of the image.
	Image int
	// ID is the image ID: the last tie-break, so that the order never
	// depends on the caller's.
	ID string
	// Repository is the normalised repository ("docker.io/library/nginx").
	Repository string
	// Tag is the tag in that repository; "" for a digest only.
	Tag string
	// Arrived is when the image was pulled or last re-tagged on the node.
	Arrived time.Time
}

// Standing is where an image stands among the versions of its repository.
type Standing struct {
	// Repository is the image's repository; for an image in several, the
	// one where it is newest (ties: the first by name).
	Repository string
	// Newer counts the versions of that repository on the node newer than
	// this one: 0 for the newest.
	Newer int
}

// Standings ranks the node's versions: per image (n of them, indexed as
// Version.Image), its repository and how many versions of it are newer.
//
// A version is an image in a repository: several tags of one image in one
// repository are one version. Versions are ordered by arrival (the pull or
// re-tag that brought the image to the node; an image's newest record),
// then by their highest tag compared as versions (CompareTags: 1.10 after
// 1.9), then by image ID. An image in several repositories is as new as
// it is in the repository where it is newest: it is superseded only when
// it is superseded in every one of them. Images in no repository stand
// nowhere (Newer 0): nothing supersedes them.
func Standings(n int, versions []Version) []Standing {
	out := make([]Standing, n)
	// One entry per image and repository, its latest arrival and highest tag.
	type entry struct {
		image   int
		id      string
		tag     string
		arrived time.Time
	}
	type key struct {
		repo  string
		image int
	}
	byRepo := map[string][]entry{}
	at := map[key]int{}
	for _, v := range versions {
		if v.Image < 0 || v.Image >= n || v.Repository == "" {
			continue
		}
		k := key{v.Repository, v.Image}
		j, ok := at[k]
		if !ok {
			at[k] = len(byRepo[v.Repository])
			byRepo[v.Repository] = append(byRepo[v.Repository], entry{image: v.Image, id: v.ID, tag: v.Tag, arrived: v.Arrived})
			continue
		}
		e := &byRepo[v.Repository][j]
		if v.Arrived.After(e.arrived) {
			e.arrived = v.Arrived
		}
		if CompareTags(v.Tag, e.tag) > 0 {
			e.tag = v.Tag
		}
	}
	repos := make([]string, 0, len(byRepo))
	for r := range byRepo {
		repos = append(repos, r)
	}
	slices.Sort(repos)
	ranked := make([]bool, n)
	for _, repo := range repos {
		es := byRepo[repo]
		// Newest first.
		slices.SortFunc(es, func(a, b entry) int {
			return cmp.Or(b.arrived.Compare(a.arrived), CompareTags(b.tag, a.tag), cmp.Compare(b.id, a.id), cmp.Compare(b.image, a.image))
		})
		for rank, e := range es {
			if !ranked[e.image] || rank < out[e.image].Newer {
				out[e.image] = Standing{Repository: repo, Newer: rank}
				ranked[e.image] = true
			}
		}
	}
	return out
}

// CompareTags orders two tags as versions: runs of digits compare as
// numbers (1.10 after 1.9, v2 after v1), other runs as text; a missing tag
// ("") comes before any. It is the tie-break for versions that arrived at
// the same time, not a claim that tags follow any scheme.
func CompareTags(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return -1
	case b == "":
		return 1
	}
	for a != "" && b != "" {
		ra, restA := run(a)
		rb, restB := run(b)
		da, db := isDigit(ra[0]), isDigit(rb[0])
		var c int
		switch {
		case da && db:
			na, nb := strings.TrimLeft(ra, "0"), strings.TrimLeft(rb, "0")
			// Equal numbers: fewer leading zeros first, so that only equal
			// tags compare equal.
			c = cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb), cmp.Compare(len(ra), len(rb)))
		case da != db:
			// A number after text: "1.0" after "1.0-rc1" would need a
			// scheme; digits simply sort after letters.
			if da {
				c = 1
			} else {
				c = -1
			}
		default:
			c = strings.Compare(ra, rb)
		}
		if c != 0 {
			return c
		}
		a, b = restA, restB
	}
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

// run splits s after its leading run of digits or of non-digits.
func run(s string) (string, string) {
	d := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == d {
		i++
	}
	return s[:i], s[i:]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
