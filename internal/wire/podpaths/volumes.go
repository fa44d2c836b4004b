package podpaths

import (
	"path"
	"strings"
)

// The worker pod's own volume names. They live here, not in podspec, so that
// the configuration (which podspec imports) can refuse a scanner volume that
// takes one: a pod with two volumes of one name is invalid, and every pod of
// every scheduled run would be refused.
const (
	VolumeRuntime   = "runtime-sock-volume"
	VolumeShared    = "shared-data"
	VolumeImageList = "imagelist"
	VolumeConfig    = "eraser-config"
	// The scanner's writable places on its read-only root: the default
	// cacheDir (the vulnerability DB is downloaded there) and /tmp.
	VolumeScanCache = "scanner-cache"
	VolumeScanTmp   = "scanner-tmp"
	// VolumeScanToken is the scanner's token for the scan service.
	VolumeScanToken = "scan-token"
	VolumeState     = "eraser-state"
	VolumeImageFs   = "imagefs"
	// VolumeCRIORunRoot is CRI-O's run root, the remover's where it
	// reclaims CRI-O's leftovers.
	VolumeCRIORunRoot = "crio-run-root"
	// The node's files that say how CRI-O's store is set up and whether a
	// pull is under way, the remover's, read-only, under CRIOHostRoot,
	// where it reclaims CRI-O's leftovers (CRIOHostFiles).
	VolumeCRIOConfig       = "crio-config"
	VolumeContainersConfig = "containers-config"
	VolumeCRIOPullTmp      = "crio-pull-tmp"
	// The node's and the cluster's references (internal/wire/references).
	// VolumeRegistryCredentials is the registry check's credentials
	// Secret, the remover's alone.
	VolumeRegistryCredentials = "registry-credentials"
	VolumeNodeRefs            = "node-references"
	VolumeClusterRefs         = "cluster-references"
)

// ExclusionVolumePrefix begins the volume name of every exclusion list
// ("exclude-<configmap>"). The ConfigMaps are not known when the
// configuration is read, so the whole prefix is reserved.
const ExclusionVolumePrefix = "exclude-"

// CRIOHostRoot is where the remover sees the node's CRIOHostFiles.
const CRIOHostRoot = "/host"

// HostDir is a node's directory mounted read-only under CRIOHostRoot.
type HostDir struct {
	Volume, Path string
	// Created: the kubelet makes it where the node has none, which sets
	// nothing (a node without crio.conf.d); else it must be there.
	Created bool
}

// CRIOHostFiles are the node's directories the remover reads where it
// reclaims CRI-O's leftovers: CRI-O's and containers/storage's
// configuration, and where containers/image keeps a pull's blobs (CRI-O's
// default big_files_temporary_dir).
var CRIOHostFiles = []HostDir{
	{Volume: VolumeCRIOConfig, Path: "/etc/crio", Created: true},
	{Volume: VolumeContainersConfig, Path: "/etc/containers", Created: true},
	{Volume: VolumeCRIOPullTmp, Path: "/var/tmp"},
}

// ScannerTmp is where the scanner's writable /tmp is mounted.
const ScannerTmp = "/tmp"

// PodVolumes are every fixed volume name a worker pod may use.
func PodVolumes() []string {
	return []string{VolumeRuntime, VolumeShared, VolumeImageList, VolumeConfig, VolumeScanCache, VolumeScanTmp, VolumeState, VolumeImageFs, VolumeCRIORunRoot, VolumeCRIOConfig, VolumeContainersConfig, VolumeCRIOPullTmp, VolumeNodeRefs, VolumeClusterRefs, VolumeRegistryCredentials}
}

// ReservedVolume says why a scanner volume may not be called name, or ""
// when it may.
func ReservedVolume(name string) string {
	for _, v := range PodVolumes() {
		if name == v {
			return "the name of a volume used by the worker pod itself"
		}
	}
	if strings.HasPrefix(name, ExclusionVolumePrefix) {
		return "names beginning with " + ExclusionVolumePrefix + " are the exclusion lists' volumes, used by the worker pod itself"
	}
	return ""
}

// ReservedScannerMount says why a scanner hostPath volume may not be
// mounted at p (the scanner mounts one at its own path), or "" when it may.
// A container with two mounts at one path is invalid; one inside the
// exclusion directory would shadow or mix with an exclusion list. The
// scanner's cache directory is not here: a hostPath there replaces the
// pod's own (a pre-seeded DB).
func ReservedScannerMount(p string) string {
	p = path.Clean(p)
	for _, own := range []string{CRISocket, SharedData(Linux), ConfigDir(Linux), ScannerTmp} {
		if p == own {
			return "a path the worker pod itself mounts in the scanner"
		}
	}
	if dir := ExclusionDir(Linux); p == dir || strings.HasPrefix(p, dir+"/") {
		return "inside " + dir + ", where the worker pod itself mounts the exclusion lists"
	}
	return ""
}
