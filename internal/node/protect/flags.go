package protect

import "flag"

// Flags are the switches of the automatic policies' cluster-aware rules,
// shared by the remover and "eraser node prune".
type Flags struct {
	// References is the directory of the cluster's references (the worker
	// pod's mount); "": none are read and none keep an image.
	References        string
	RemoveVulnerable  bool
	KeepNotRepullable bool
}

// Bind registers the flags. The defaults protect: a remover run without the
// manager's flags keeps what cannot be pulled back.
func (f *Flags) Bind(fs *flag.FlagSet) {
	fs.StringVar(&f.References, "references-dir", "", "directory of the cluster's references (the worker pod's mount: node/references and cluster/part-*.gz); their images are kept from every policy but an ImageList naming them; empty: none")
	fs.BoolVar(&f.RemoveVulnerable, "remove-vulnerable-referenced", true, "let the scanner's verdict remove an image only a workload template references (never one of the node's own pods)")
	fs.BoolVar(&f.KeepNotRepullable, "keep-not-repullable", true, "keep images without a repository digest (imported, built or side-loaded) from every policy but an ImageList naming them")
}

// Cluster is the rules' switches as the flags set them; what the
// references say (Read and whether they are complete) is added by whoever
// reads them.
func (f Flags) Cluster() Cluster {
	return Cluster{RemoveVulnerable: f.RemoveVulnerable, KeepNotRepullable: f.KeepNotRepullable}
}
