// Package config reads EraserConfig, the YAML document in the
// eraser-manager-config ConfigMap, in every version upstream Eraser has
// shipped (eraser.sh/v1alpha1, v1alpha2, v1alpha3) into one Config.
//
// As upstream, a document is applied onto the version's defaults: missing keys
// keep their default, lists replace, maps merge. Unlike upstream, values are
// validated up front and every problem is reported with its field path, and
// a key that is not understood is an error instead of vanishing (a typo would
// otherwise keep a default, such as running on every node). The only keys
// outside the schema that are accepted are those upstream accepted without
// effect; each draws a warning.
package config

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

// Config is the manager's configuration, whichever version it was written in.
type Config struct {
	// APIVersion is the version the document was written in.
	APIVersion string
	Manager    Manager
	Components Components
}

// Manager configures the manager and the pods it creates.
type Manager struct {
	Runtime             Runtime
	OTLPEndpoint        string
	LogLevel            string
	Scheduling          Scheduling
	Profile             Profile
	ImageJob            ImageJob
	PullSecrets         []string
	PriorityClassName   string
	AdditionalPodLabels map[string]string
	NodeFilter          NodeFilter
	Retention           Retention
	Leftovers           Leftovers
}

// Retention is the workers' retention policy (docs/retention.md): which of
// the images no container uses they remove.
type Retention struct {
	// MinAge keeps every image pulled or re-tagged on the node less than
	// this ago; always set.
	MinAge time.Duration
	// UnusedFor, when set, removes the images no container used for this
	// long.
	UnusedFor time.Duration
	// HighThresholdPercent and LowThresholdPercent, both set or both zero,
	// remove images while the image filesystem is above high, until it is
	// below low.
	HighThresholdPercent int
	LowThresholdPercent  int
	// ImageFsPath is a host directory on the image filesystem, the
	// configured one or the runtime's default.
	ImageFsPath string
	// KeepVersions, when set, removes in scheduled runs the images with at
	// least this many newer versions of their repository on the node.
	KeepVersions int
	// CoolDown holds an image that came back after a removal from the
	// automatic policies this long after its first return, doubled at each
	// further one (at most 30 days); 0 turns it off. Default
	// workerdefaults.CoolDown.
	CoolDown time.Duration
	// The cluster-aware protections, negated so that the zero value
	// protects (docs/protection.md):
	// IgnoreReferenced (protectReferenced: false) stops keeping the images
	// the cluster's pods and workload templates reference.
	IgnoreReferenced bool
	// KeepVulnerableReferenced (removeVulnerableReferenced: false) keeps an
	// image a workload template references from the scanner's verdict too.
	KeepVulnerableReferenced bool
	// RemoveNotRepullable (protectNotRepullable: false) lets the automatic
	// policies remove images no registry can give back.
	RemoveNotRepullable bool
	// RegistryCheck asks the registry before an automatic policy removes
	// an image a workload may need again.
	RegistryCheck RegistryCheck
}

// MaxKeepVersions bounds keepVersions: a number beyond it is a typo, not a
// policy (a node holds a few versions of a repository, not thousands).
const MaxKeepVersions = 1000

// DiskPressure says whether the thresholds are set.
func (r Retention) DiskPressure() bool { return r.HighThresholdPercent > 0 }

// defaultImageFsPaths are where each runtime keeps its images by default.
var defaultImageFsPaths = map[RuntimeName]string{
	RuntimeContainerd: "/var/lib/containerd",
	RuntimeCrio:       "/var/lib/containers/storage",
	RuntimeDockershim: "/var/lib/docker",
}

// RuntimeName is the node's container runtime.
type RuntimeName string

// The runtimes upstream Eraser knows, with their default addresses.
const (
	RuntimeContainerd RuntimeName = "containerd"
	RuntimeDockershim RuntimeName = "dockershim"
	RuntimeCrio       RuntimeName = "crio"
)

// defaultRuntimeAddresses are upstream's defaults for each runtime.
var defaultRuntimeAddresses = map[RuntimeName]string{
	RuntimeContainerd: "unix:///run/containerd/containerd.sock",
	RuntimeDockershim: "unix:///run/dockershim.sock",
	RuntimeCrio:       "unix:///run/crio/crio.sock",
}

// DefaultWindowsAddress is containerd's named pipe on Windows nodes.
const DefaultWindowsAddress = "npipe://./pipe/containerd-containerd"

// Runtime is the container runtime on the nodes and where it listens.
type Runtime struct {
	Name RuntimeName
	// Address is a validated unix:// (or npipe://) URL.
	Address string
	// WindowsAddress is the npipe:// URL of the runtime on Windows nodes,
	// which HostProcess worker pods dial directly.
	WindowsAddress string
}

// Scheduling configures scheduled (collector) runs.
type Scheduling struct {
	// RepeatInterval separates the end of one run from the start of the next.
	RepeatInterval   time.Duration
	BeginImmediately bool
	// Cron, when set, replaces RepeatInterval: runs start at its times, and
	// a time that comes while a run is still going is skipped.
	Cron string
	// DryRun makes every scheduled run a dry run: its plan and totals are
	// reported, nothing is removed. An ImageList has spec.dryRun for this;
	// scheduled runs have no object of their own to carry it.
	DryRun bool
	// CatchUpBatch is how long the first node due for a catch-up run waits
	// for others to join it: nodes that come back from one upgrade or
	// outage come back within minutes of each other.
	CatchUpBatch time.Duration
	// CatchUp gives the eligible nodes the last scheduled run missed a run
	// of their own before the next one. Off, a node that was down, failed
	// or joined waits for the next scheduled run: on clusters that scale
	// by the hour, every new node would otherwise get its own run.
	CatchUp bool
}

// Profile enables pprof in the manager and the workers.
type Profile struct {
	Enabled bool
	Port    int
}

// ImageJob configures how a job's outcome is judged and cleaned up.
type ImageJob struct {
	// SuccessRatio is the fraction of nodes meant to run that must succeed
	// for the job to be Completed, in [0, 1].
	SuccessRatio float64
	Cleanup      Cleanup
	// MaxConcurrentNodes bounds the worker pods running at once: a count,
	// or a percentage of the eligible nodes. Zero means all at once.
	MaxConcurrentNodes MaxConcurrent
	// MaxFailedNodes is the run's failure budget, a count or a percentage
	// of the eligible nodes (MaxConcurrent.Budget): once more nodes failed
	// than it allows, no more pods are created and the run ends Failed.
	// Nil is no budget, as upstream; a zero count stops at the first
	// failure.
	MaxFailedNodes *MaxConcurrent
	// MaxWorkerPods bounds the unfinished worker pods of all runs together,
	// cluster-wide: many runs arriving at once create pods only as others
	// finish, so the API server's load stays flat. Zero is no bound.
	MaxWorkerPods int
	// PodStartTimeout fails a node whose pod has not started running
	// (stuck Pending, pulling, ContainerCreating) in this time.
	PodStartTimeout time.Duration
	// PodRunTimeout fails a node whose pod has not finished in this time.
	PodRunTimeout time.Duration
	// NodeWaitTimeout gives up a node that waits for another run's worker
	// when that wait cannot end: the node is not Ready, or the worker it
	// waits for is stuck terminating. It counts from when the node stopped
	// being Ready or the worker's deletion was due.
	NodeWaitTimeout time.Duration
	// NodeSelector leaves out the nodes that lack any of these labels.
	NodeSelector map[string]string
	// Tolerations, when not nil, replace the worker pods' tolerate-all
	// toleration; nodes with a NoSchedule or NoExecute taint they do not
	// tolerate are left out. Nil tolerates every taint, as upstream.
	Tolerations []corev1.Toleration
}

// MaxConcurrent is a count of nodes or a percentage of them.
type MaxConcurrent struct {
	Count   int
	Percent int
}

// Of resolves the limit for a number of nodes; zero means no limit.
func (m MaxConcurrent) Of(nodes int) int {
	switch {
	case m.Percent > 0:
		return max(1, nodes*m.Percent/100)
	case m.Count > 0:
		return m.Count
	}
	return 0
}

// Cleanup is how long finished jobs and their pods are kept.
type Cleanup struct {
	// DelayOnSuccess and DelayOnFailure keep the pods (and, when longer
	// than KeepReportFor, the job).
	DelayOnSuccess time.Duration
	DelayOnFailure time.Duration
	// KeepReportFor keeps the finished job and its per-node report after
	// the pods are gone; 0 deletes them with the pods, as upstream does.
	KeepReportFor time.Duration
	// MaxReportSize bounds the bytes that the kept reports of all jobs
	// together take in etcd: past it, the oldest finished jobs go with
	// their reports before keepReportFor, so that frequent runs on a large
	// cluster cannot keep gigabytes. 0 is no bound.
	MaxReportSize int64
}

// DefaultMaxReportSize keeps every report of a day of hourly runs on a
// 1,000-node cluster (about 4.5 MiB each), or the last five runs' on 5,000
// nodes (22.5 MiB each): 6% of etcd's default 2 GiB quota.
const DefaultMaxReportSize = "128Mi"

// NodeFilterType says whether node selectors include or exclude nodes.
type NodeFilterType string

const (
	// FilterExclude runs on every node except those matching a selector.
	FilterExclude NodeFilterType = "exclude"
	// FilterInclude runs only on nodes matching a selector.
	FilterInclude NodeFilterType = "include"
)

// CleanupFilterLabel is a selector every node filter has, listed or not: it
// leaves a node out of an exclude filter's runs and takes it into an include
// filter's, as upstream does.
const CleanupFilterLabel = "eraser.sh/cleanup.filter"

// NodeFilter selects the nodes a job runs on. Selectors are label-selector
// strings, ORed.
type NodeFilter struct {
	Type      NodeFilterType
	Selectors []string
}

// Components configures the three node workers.
type Components struct {
	Collector Component
	Scanner   Component
	Remover   Component
}

// Component configures one node worker container.
type Component struct {
	Enabled bool
	Image   Image
	Request Resources
	Limit   Resources
	// Config is passed to the scanner verbatim; its schema is the scanner's.
	Config string
	// Trivy is the scanner's Config as the Trivy scanner reads it, parsed
	// at load: nil for the other components, a custom scanner, or a
	// document the scanner would refuse.
	Trivy *scanconfig.Config
	// Volumes are extra volumes for the scanner; only hostPath volumes are
	// mounted, read-only, at their host path.
	Volumes []corev1.Volume
	// Windows is how the component runs on Windows nodes.
	Windows WindowsComponent
}

// WindowsComponent is a component's explicit executable contract on Windows
// nodes: never derived from the container's name.
type WindowsComponent struct {
	// Image is the Windows image; unset, the component's image is used (a
	// multi-platform index carries both).
	Image Image
	// Command replaces the image's entrypoint; unset, the image's own
	// entrypoint runs, resolved under %CONTAINER_SANDBOX_MOUNT_POINT%.
	Command []string
}

// WindowsImage is the image the component runs on Windows nodes.
func (c Component) WindowsImage() Image {
	if c.Windows.Image.Repo != "" {
		return c.Windows.Image
	}
	return c.Image
}

// Image is a container image as repository and tag.
type Image struct {
	Repo string
	Tag  string
}

// Ref is the image reference a pod spec uses.
func (i Image) Ref() string {
	if i.Tag == "" {
		return i.Repo
	}
	return i.Repo + ":" + i.Tag
}

// Resources are a container's memory and CPU; nil means unset.
type Resources struct {
	Mem *resource.Quantity
	CPU *resource.Quantity
}

// Default is the configuration of an EraserConfig that sets nothing.
func Default() *Config {
	cfg, _, err := Parse([]byte("apiVersion: " + LatestVersion))
	if err != nil {
		panic("config: built-in defaults are invalid: " + err.Error())
	}
	return cfg
}
