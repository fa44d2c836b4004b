package remover

import (
	"flag"
	"fmt"
	"strings"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// The outcomes of the cluster-aware protections (docs/protection.md).
const (
	Referenced    Outcome = Outcome(protect.Referenced)
	NotRepullable Outcome = Outcome(protect.NotRepullable)
)

// Protection is what keeps images from the automatic policies ("*",
// unusedFor, disk pressure, the scanner's verdicts) beyond protect's rules:
// an ImageList that names an image removes it all the same.
type Protection struct {
	// Referenced: the snapshot was given the cluster's references
	// (ReadReferences) and the images they name are kept.
	Referenced bool
	// RemoveVulnerable lets the scanner's verdict remove an image that only
	// a workload template references: the pod pulls its tag again, fixed
	// once the tag is. Images of the node's own pods stay: they are about to
	// run, and removing them only makes the kubelet pull the same image.
	RemoveVulnerable bool
	// NodeIncomplete: the node's pods referenced more images than their
	// pod annotation could hold, so every image is kept as referenced.
	NodeIncomplete bool
	// ClusterIncomplete: the cluster's set was written without some of its
	// references (they did not fit its parts), so every image is kept as
	// referenced, as for NodeIncomplete.
	ClusterIncomplete bool
	// KeepNotRepullable keeps images no registry can give back.
	KeepNotRepullable bool
}

// referrer is the first reference that named a snapshot image.
type referrer struct {
	owner  string
	onNode bool
}

// Refer marks the images one reference names, with the same keys the
// in-use protection matches containers by. An image both sets name is the
// node's pod's, whichever is read first: the scanner's verdict never takes
// it.
func (s *Snapshot) Refer(r references.Ref, onNode bool) {
	for _, k := range protect.RefKeys(r.Image) {
		for _, i := range s.lookup(k) {
			if had, ok := s.referenced[int32(i)]; ok && (had.onNode || !onNode) {
				continue
			}
			if s.referenced == nil {
				s.referenced = map[int32]referrer{}
			}
			s.referenced[int32(i)] = referrer{owner: strings.Clone(r.Owner), onNode: onNode}
		}
	}
}

// ReadReferences marks the images the references directory names.
func ReadReferences(s *Snapshot, dir string) (references.Stats, error) {
	return references.ReadDir(dir, s.Refer)
}

// describe is the detail of a Referenced result.
func (r referrer) describe() string {
	if r.onNode {
		return strings.Replace(r.owner, "Pod ", "pod ", 1) + " on this node"
	}
	if strings.HasPrefix(r.owner, "Pod ") {
		return "referenced by " + r.owner + ", not yet scheduled"
	}
	return "referenced by " + r.owner
}

// notRepullableDetail says what the runtime shows of an image no registry
// can give back: on containerd no repository digest at all; on CRI-O, which
// makes one up for every name, one under localhost/ alone.
func notRepullableDetail(img cri.Image) string {
	const rest = ": imported or built on the node, not pulled; only an ImageList that names it removes it"
	if len(img.Digests) > 0 {
		return "repository digest on localhost/ only" + rest
	}
	return "no repository digest" + rest
}

// clusterIncomplete is the detail of an image kept because the cluster's
// set was written incomplete.
const clusterIncomplete = "the cluster's references could not be written whole for this run: every image is kept from the automatic policies"

// protects says why the cluster-aware protections keep image i from an
// automatic policy, if they do; vulnerable says the scanner chose it.
func (p Protection) protects(s *Snapshot, i int, vulnerable bool) (Outcome, string) {
	if p.KeepNotRepullable && protect.CannotPullBack(s.Images[i]) {
		return NotRepullable, notRepullableDetail(s.Images[i])
	}
	if !p.Referenced {
		return "", ""
	}
	if ref, ok := s.referenced[int32(i)]; ok {
		if vulnerable && p.RemoveVulnerable && !ref.onNode {
			return "", ""
		}
		return Referenced, ref.describe()
	}
	if p.NodeIncomplete {
		return Referenced, "the node's pods reference more images than their set can carry: every image is kept from the automatic policies"
	}
	if p.ClusterIncomplete {
		return Referenced, clusterIncomplete
	}
	return "", ""
}

// protection reads what the cluster-aware protections need: the cluster's
// references. A references directory that cannot be read in full stops the
// run: judging without it could remove what a workload needs.
func protection(s *Snapshot, p *Protection, opts Options, info *RunInfo) error {
	if opts.References != "" {
		st, err := ReadReferences(s, opts.References)
		if err != nil {
			return fmt.Errorf("the cluster's references (nothing removed): %w", err)
		}
		p.Referenced, p.NodeIncomplete, p.ClusterIncomplete = true, !st.NodeComplete, !st.ClusterComplete
		info.References = &st
		opts.Log.Info("the cluster's references read", "set", st.Set, "parts", st.Parts, "cluster", st.Cluster, "node", st.Node, "nodeComplete", st.NodeComplete, "clusterComplete", st.ClusterComplete, "imagesReferenced", len(s.referenced))
	}
	return nil
}

// ProtectionFlags are the cluster-aware protections' flags, shared by the
// remover and "eraser node prune".
type ProtectionFlags struct {
	References        string
	RemoveVulnerable  bool
	KeepNotRepullable bool
}

// Bind registers the flags. The defaults protect: a remover run without the
// manager's flags keeps what cannot be pulled back.
func (f *ProtectionFlags) Bind(fs *flag.FlagSet) {
	fs.StringVar(&f.References, "references-dir", "", "directory of the cluster's references (the worker pod's mount: node/references and cluster/part-*.gz); their images are kept from every policy but an ImageList naming them; empty: none")
	fs.BoolVar(&f.RemoveVulnerable, "remove-vulnerable-referenced", true, "let the scanner's verdict remove an image only a workload template references (never one of the node's own pods)")
	fs.BoolVar(&f.KeepNotRepullable, "keep-not-repullable", true, "keep images without a repository digest (imported, built or side-loaded) from every policy but an ImageList naming them")
}

// Apply sets the options.
func (f ProtectionFlags) Apply(o *Options) {
	o.References = f.References
	o.Protection = Protection{RemoveVulnerable: f.RemoveVulnerable, KeepNotRepullable: f.KeepNotRepullable}
}
