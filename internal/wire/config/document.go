package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/images"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// The EraserConfig versions upstream Eraser has shipped.
const (
	VersionV1alpha1 = "eraser.sh/v1alpha1"
	VersionV1alpha2 = "eraser.sh/v1alpha2"
	VersionV1alpha3 = "eraser.sh/v1alpha3"
	// LatestVersion is what new documents should use.
	LatestVersion = VersionV1alpha3
	// Kind is the document's kind.
	Kind = "EraserConfig"
)

// The documents below mirror each version's YAML shape. They are decoded onto
// a copy pre-filled with the defaults, which is what gives upstream's
// semantics: missing keys keep defaults, lists replace, maps merge.

// document holds what every version shares.
type document struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	// Keys upstream's Helm chart writes and its code never reads
	// (ignoredKeys).
	Health         json.RawMessage `json:"health,omitempty"`
	Metrics        json.RawMessage `json:"metrics,omitempty"`
	Webhook        json.RawMessage `json:"webhook,omitempty"`
	LeaderElection json.RawMessage `json:"leaderElection,omitempty"`
}

type documentV1alpha1 struct {
	document
	Manager    managerV1alpha1    `json:"manager"`
	Components componentsV1alpha1 `json:"components"`
}

type documentV1alpha2 struct {
	document
	Manager    managerV1alpha1 `json:"manager"`
	Components components      `json:"components"`
}

type documentV1alpha3 struct {
	document
	Manager    managerV1alpha3 `json:"manager"`
	Components components      `json:"components"`
}

type managerCommon struct {
	OTLPEndpoint      string        `json:"otlpEndpoint"`
	LogLevel          string        `json:"logLevel"`
	Scheduling        schedulingDoc `json:"scheduling"`
	Profile           profileDoc    `json:"profile"`
	ImageJob          imageJobDoc   `json:"imageJob"`
	PullSecrets       []string      `json:"pullSecrets"`
	PriorityClassName string        `json:"priorityClassName"`
	NodeFilter        nodeFilterDoc `json:"nodeFilter"`
	// Retention is our addition, in every version.
	Retention retentionDoc `json:"retention"`
	// Leftovers is our addition, in every version.
	Leftovers leftoversDoc `json:"leftovers"`

	// Keys upstream's docs listed and its code never read (ignoredKeys).
	ExtraScannerVolumes      json.RawMessage `json:"extraScannerVolumes,omitempty"`
	ExtraScannerVolumeMounts json.RawMessage `json:"extraScannerVolumeMounts,omitempty"`
}

// managerV1alpha1 is the manager section of v1alpha1 and v1alpha2, where the
// runtime is a bare name.
type managerV1alpha1 struct {
	managerCommon
	Runtime string `json:"runtime"`
}

type managerV1alpha3 struct {
	managerCommon
	// Runtime is a pointer so that what the document wrote can be told apart
	// from the defaults: an address without a name is an error.
	Runtime             *runtimeDoc       `json:"runtime"`
	AdditionalPodLabels map[string]string `json:"additionalPodLabels"`
}

type runtimeDoc struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	// WindowsAddress is our addition: where Windows nodes' runtime listens.
	WindowsAddress string `json:"windowsAddress"`
}

type schedulingDoc struct {
	RepeatInterval   scalar `json:"repeatInterval"`
	BeginImmediately bool   `json:"beginImmediately"`
	// Cron is our addition: a standard 5-field cron expression.
	Cron string `json:"cron"`
	// DryRun is our addition: scheduled runs report and remove nothing.
	DryRun bool `json:"dryRun"`
	// CatchUpBatch is our addition: how long a catch-up waits for others.
	CatchUpBatch scalar `json:"catchUpBatch"`
	// CatchUp is our addition: whether nodes a scheduled run missed get
	// catch-up runs.
	CatchUp bool `json:"catchUp"`
}

type profileDoc struct {
	Enabled bool `json:"enabled"`
	Port    int  `json:"port"`
}

type imageJobDoc struct {
	SuccessRatio float64    `json:"successRatio"`
	Cleanup      cleanupDoc `json:"cleanup"`
	// Our additions: waves, the failure budget, pod timeouts, and which
	// nodes get a worker.
	MaxConcurrentNodes scalar            `json:"maxConcurrentNodes"`
	MaxFailedNodes     scalar            `json:"maxFailedNodes"`
	MaxWorkerPods      *int              `json:"maxWorkerPods"`
	PodStartTimeout    scalar            `json:"podStartTimeout"`
	PodRunTimeout      scalar            `json:"podRunTimeout"`
	NodeWaitTimeout    scalar            `json:"nodeWaitTimeout"`
	NodeSelector       map[string]string `json:"nodeSelector"`
	// Tolerations stays nil when the key is missing or null (tolerate
	// everything); an empty list tolerates nothing.
	Tolerations []corev1.Toleration `json:"tolerations"`
}

type cleanupDoc struct {
	DelayOnSuccess scalar `json:"delayOnSuccess"`
	DelayOnFailure scalar `json:"delayOnFailure"`
	// KeepReportFor is ours: how long a finished job and its per-node
	// report stay after it ends (at least as long as its pods).
	KeepReportFor scalar `json:"keepReportFor"`
	// MaxReportSize is ours: the most bytes the kept reports of all jobs
	// together take in the API server.
	MaxReportSize scalar `json:"maxReportSize"`
}

// retentionDoc keeps every value as written, so that unset can be told from
// zero: a zero threshold is an error, not "off".
type retentionDoc struct {
	MinAge               scalar `json:"minAge"`
	UnusedFor            scalar `json:"unusedFor"`
	HighThresholdPercent scalar `json:"highThresholdPercent"`
	LowThresholdPercent  scalar `json:"lowThresholdPercent"`
	ImageFsPath          string `json:"imageFsPath"`
	KeepVersions         scalar `json:"keepVersions"`
	CoolDown             scalar `json:"coolDown"`
	// The cluster-aware protections (docs/protection.md), on by default.
	ProtectReferenced          bool `json:"protectReferenced"`
	RemoveVulnerableReferenced bool `json:"removeVulnerableReferenced"`
	ProtectNotRepullable       bool `json:"protectNotRepullable"`
	// RegistryCheck asks an image's registry before an automatic policy
	// removes one a workload may need again (registrycheck.go).
	RegistryCheck registryCheckDoc `json:"registryCheck"`
}

type nodeFilterDoc struct {
	Type      string   `json:"type"`
	Selectors []string `json:"selectors"`
}

// componentsV1alpha1 names the remover "eraser", its name before v1alpha2.
type componentsV1alpha1 struct {
	Collector componentDoc `json:"collector"`
	Scanner   componentDoc `json:"scanner"`
	Eraser    componentDoc `json:"eraser"`
}

type components struct {
	Collector componentDoc `json:"collector"`
	Scanner   componentDoc `json:"scanner"`
	Remover   componentDoc `json:"remover"`
}

type componentDoc struct {
	Enabled bool            `json:"enabled"`
	Image   imageDoc        `json:"image"`
	Request resourcesDoc    `json:"request"`
	Limit   resourcesDoc    `json:"limit"`
	Config  string          `json:"config"`
	Volumes []corev1.Volume `json:"volumes"`
	// Windows is our addition: the component's image and command on
	// Windows nodes.
	Windows *windowsDoc `json:"windows"`
}

type windowsDoc struct {
	Image   *imageDoc `json:"image"`
	Command []string  `json:"command"`
}

type imageDoc struct {
	Repo string `json:"repo"`
	Tag  scalar `json:"tag"` // "tag: 1.5" is a YAML number
}

type resourcesDoc struct {
	Mem scalar `json:"mem"`
	CPU scalar `json:"cpu"`
}

// scalar keeps a duration or quantity as written, string or number (YAML's
// "cpu: 0"), so it can be validated later with its field path.
type scalar string

func (s *scalar) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		*s = scalar(str)
		return nil
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*s = scalar(b)
		return nil
	default:
		return fmt.Errorf("want a string or a number, got %s", b)
	}
}

func defaultManagerCommon() managerCommon {
	return managerCommon{
		LogLevel:   "info",
		Scheduling: schedulingDoc{RepeatInterval: "24h", BeginImmediately: true, CatchUpBatch: "1m", CatchUp: true},
		Profile:    profileDoc{Port: 6060},
		ImageJob: imageJobDoc{
			SuccessRatio:    1.0,
			Cleanup:         cleanupDoc{DelayOnSuccess: "0s", DelayOnFailure: "24h", KeepReportFor: "24h", MaxReportSize: scalar(DefaultMaxReportSize)},
			PodStartTimeout: "10m",
			PodRunTimeout:   "24h",
			NodeWaitTimeout: "10m",
		},
		NodeFilter: nodeFilterDoc{Type: string(FilterExclude), Selectors: []string{CleanupFilterLabel}},
		Retention: retentionDoc{MinAge: scalar(workerdefaults.MinAge.String()),
			ProtectReferenced: true, RemoveVulnerableReferenced: true, ProtectNotRepullable: true,
			RegistryCheck: defaultRegistryCheckDoc()},
	}
}

// defaultComponents are upstream's code defaults, with our images, except
// two sizes measured on this project's workers: the scanner requests 100m
// and 256Mi (its peak is about 141 MiB) rather than a whole CPU, since its
// pods are bound by nodeName and the kubelet refuses one that does not fit
// a packed node; the remover's limit is 64Mi, twice what a 20,000-image
// node takes, where 30Mi was at the edge. The collector and scanner are off
// unless the document turns them on.
func defaultComponents() components {
	image := func(im images.Image) imageDoc {
		return imageDoc{Repo: version.DefaultRepo + "/" + im.Repo, Tag: scalar(version.Version)}
	}
	return components{
		Collector: componentDoc{
			Image:   image(images.Collector),
			Request: resourcesDoc{Mem: "25Mi", CPU: "7m"},
			Limit:   resourcesDoc{Mem: "500Mi"},
		},
		Scanner: componentDoc{
			Image:   image(images.Scanner),
			Request: resourcesDoc{Mem: "256Mi", CPU: "100m"},
			Limit:   resourcesDoc{Mem: "2Gi"},
		},
		Remover: componentDoc{
			// On by default so that a document turning it off can be told
			// apart and refused.
			Enabled: true,
			Image:   image(images.Remover),
			Request: resourcesDoc{Mem: "25Mi", CPU: "7m"},
			Limit:   resourcesDoc{Mem: "64Mi"},
		},
	}
}

func defaultDocument(apiVersion string) (any, bool) {
	c := defaultComponents()
	switch apiVersion {
	case VersionV1alpha1:
		return &documentV1alpha1{
			Manager:    managerV1alpha1{managerCommon: defaultManagerCommon(), Runtime: string(RuntimeContainerd)},
			Components: componentsV1alpha1{Collector: c.Collector, Scanner: c.Scanner, Eraser: c.Remover},
		}, true
	case VersionV1alpha2:
		return &documentV1alpha2{
			Manager:    managerV1alpha1{managerCommon: defaultManagerCommon(), Runtime: string(RuntimeContainerd)},
			Components: c,
		}, true
	case VersionV1alpha3:
		return &documentV1alpha3{
			Manager: managerV1alpha3{
				managerCommon: defaultManagerCommon(),
			},
			Components: c,
		}, true
	}
	return nil, false
}
