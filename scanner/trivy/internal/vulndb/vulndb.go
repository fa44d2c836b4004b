// Package vulndb makes sure the vulnerability DB is on the node before any
// image is judged: downloaded from the configured repository when it is
// missing or stale, or taken as it is from a pre-seeded directory when
// updates are off (air-gapped clusters). Any failure is returned, and the
// scanner then removes nothing.
package vulndb

import (
	"context"
	"fmt"
	"strings"

	trivydb "github.com/aquasecurity/trivy/pkg/db"
	ftypes "github.com/aquasecurity/trivy/pkg/fanal/types"
	"github.com/google/go-containerregistry/pkg/name"
)

// SchemaTag is the tag of the DB schema this Trivy reads.
const SchemaTag = "2"

// Options say where the DB lives and comes from.
type Options struct {
	// CacheDir holds the DB in CacheDir/db, as Trivy lays it out.
	CacheDir string
	// Repo is the OCI repository of the DB; without a tag, the schema's.
	Repo string
	// SkipUpdate never downloads.
	SkipUpdate bool
}

// Dir is where the DB files are.
func (o Options) Dir() string { return trivydb.Dir(o.CacheDir) }

// Repository is Repo with the schema tag when it has none.
func Repository(repo string) (name.Reference, error) {
	ref := repo
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.ContainsAny(last, ":@") {
		ref += ":" + SchemaTag
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("dbRepo %q is not an image repository: %w", repo, err)
	}
	return r, nil
}

// Prepare returns the directory of a usable DB, downloading it if needed.
// downloaded tells whether it did.
func Prepare(ctx context.Context, o Options) (dir string, downloaded bool, err error) {
	dir = o.Dir()
	var opts []trivydb.Option
	if !o.SkipUpdate {
		ref, err := Repository(o.Repo)
		if err != nil {
			return "", false, err
		}
		opts = append(opts, trivydb.WithDBRepository([]name.Reference{ref}))
	}
	client := trivydb.NewClient(dir, true, opts...)
	need, err := client.NeedsUpdate(ctx, "", o.SkipUpdate)
	if err != nil {
		if o.SkipUpdate {
			return "", false, fmt.Errorf("no usable vulnerability DB in %s and skipDBUpdate is on (pre-seed trivy.db and metadata.json there): %w", dir, err)
		}
		return "", false, fmt.Errorf("checking the vulnerability DB in %s: %w", dir, err)
	}
	if !need {
		return dir, false, nil
	}
	if err := client.Download(ctx, dir, ftypes.RegistryOptions{}); err != nil {
		return "", false, fmt.Errorf("downloading the vulnerability DB from %s into %s: %w", o.Repo, dir, err)
	}
	return dir, true, nil
}
