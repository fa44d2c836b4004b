package remover

import (
	"time"

	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// standings ranks every image of the node, the protected ones too, among
// the versions of its repositories (retention.Standings), for keepVersions:
// a version kept because a workload references it still counts among the
// newest. Each tag and each repository digest is a version's name; an
// image's arrival is its newest record (NodeAges).
func standings(s *Snapshot, ages []Age) []retention.Standing {
	var vs []retention.Version
	for i, img := range s.Images {
		var arrived time.Time
		if ages != nil {
			arrived = ages[i].Arrived
		}
		for _, names := range [][]string{img.Tags, img.Digests} {
			for _, name := range names {
				ref, err := imageref.Parse(name)
				if err != nil || ref.Repo == "" {
					continue
				}
				vs = append(vs, retention.Version{Image: i, ID: img.ID, Repository: ref.Repo, Tag: ref.Tag, Arrived: arrived})
			}
		}
	}
	return retention.Standings(len(s.Images), vs)
}
