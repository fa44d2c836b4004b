package remover

import (
	"fmt"
	"strings"

	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

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
	sub := &protect.Subject{
		Image:      s.Images[i],
		Vulnerable: vulnerable,
		Cluster:    r.Cluster,
		Now:        r.Now, MinAge: r.Settings.MinAge,
	}
	if ref, ok := s.referenced[int32(i)]; ok {
		sub.Referrer = &ref
	}
	if r.Ages != nil {
		sub.Arrived = r.Ages[i].Arrived
	}
	if r.AgeSource == AgeFirstSeen {
		sub.AgeNote = " (counted from when Eraser first saw it: the runtime keeps no pull times)"
	}
	return sub
}

// readCluster reads what the cluster-aware rules need: the cluster's
// references. A references directory that cannot be read in full stops the
// run: judging without it could remove what a workload needs.
func readCluster(s *Snapshot, c *protect.Cluster, opts Options, info *RunInfo) error {
	if dir := opts.Protection.References; dir != "" {
		st, err := ReadReferences(s, dir)
		if err != nil {
			return fmt.Errorf("the cluster's references (nothing removed): %w", err)
		}
		c.Read, c.NodeIncomplete, c.ClusterIncomplete = true, !st.NodeComplete, !st.ClusterComplete
		info.References = &st
		opts.Log.Info("the cluster's references read", "set", st.Set, "parts", st.Parts, "cluster", st.Cluster, "node", st.Node, "nodeComplete", st.NodeComplete, "clusterComplete", st.ClusterComplete, "imagesReferenced", len(s.referenced))
	}
	return nil
}
