package remover

import (
	"flag"
	"fmt"
	"strings"

	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// Protection is what the keep rules of the automatic policies ("*",
// unusedFor, disk pressure, the scanner's verdicts) are told of the cluster
// and its switches; the rules themselves are protect's. An ImageList that
// names an image removes it all the same.
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

// Refer marks the images one reference names, with the same keys the
// in-use protection matches containers by. An image both sets name is the
// node's pod's, whichever is read first: the scanner's verdict never takes
// it.
func (s *Snapshot) Refer(r references.Ref, onNode bool) {
	for _, k := range protect.RefKeys(r.Image) {
		for _, i := range s.lookup(k) {
			if had, ok := s.referenced[int32(i)]; ok && (had.OnNode || !onNode) {
				continue
			}
			if s.referenced == nil {
				s.referenced = map[int32]protect.Referrer{}
			}
			s.referenced[int32(i)] = protect.Referrer{Owner: strings.Clone(r.Owner), OnNode: onNode}
		}
	}
}

// ReadReferences marks the images the references directory names.
func ReadReferences(s *Snapshot, dir string) (references.Stats, error) {
	return references.ReadDir(dir, s.Refer)
}

// subject is what the keep rules of the automatic policies need to judge
// image i; vulnerable says the scanner chose it.
func (r Retention) subject(s *Snapshot, i int, vulnerable bool) *protect.Subject {
	p := r.Protection
	sub := &protect.Subject{
		Image:      s.Images[i],
		Vulnerable: vulnerable,
		Cluster: protect.Cluster{Read: p.Referenced, NodeIncomplete: p.NodeIncomplete, ClusterIncomplete: p.ClusterIncomplete,
			RemoveVulnerable: p.RemoveVulnerable, KeepNotRepullable: p.KeepNotRepullable},
		Now: r.Now, MinAge: r.Settings.MinAge,
	}
	if ref, ok := s.referenced[int32(i)]; ok {
		sub.Cluster.Referrer = &ref
	}
	if r.Ages != nil {
		sub.Arrived = r.Ages[i].Arrived
	}
	if r.AgeSource == AgeFirstSeen {
		sub.AgeNote = " (counted from when Eraser first saw it: the runtime keeps no pull times)"
	}
	return sub
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
