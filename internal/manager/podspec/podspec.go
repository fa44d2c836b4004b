// Package podspec builds the worker pod for one node of one ImageJob. It is
// a pure function of the job, the node and the configuration the job was
// started with, so it is tested without a cluster and a running job's pods
// all look alike even if the configuration changes mid-run.
package podspec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/util/kname"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// Kind is what a job does on each node.
type Kind string

const (
	// KindManual removes an ImageList's images: one remover container.
	KindManual Kind = "manual"
	// KindCollector is a scheduled run: collector, scanner, remover.
	KindCollector Kind = "collector"
)

// Labels on worker pods.
const (
	// LabelType is upstream's: "manual" or "collector".
	LabelType = "eraser.sh/type"
	// LabelJob names the ImageJob a pod belongs to.
	LabelJob = "eraser.sh/job"
	// LabelBatch groups a job's pods by the order of their nodes, 500 to a
	// batch, so that cleanup deletes them a bounded page at a time.
	LabelBatch = "eraser.sh/job-batch"
	// ServiceAccount is the worker pods' account; it has no permissions.
	ServiceAccount = "eraser-imagejob-pods"
)

// Container names, as upstream names them.
const (
	CollectorContainer = "collector"
	ScannerContainer   = "trivy-scanner"
	RemoverContainer   = "remover"
)

// Volume names, from paths: the configuration refuses scanner volumes that
// take one of them.
const (
	volRuntime   = podpaths.VolumeRuntime
	volShared    = podpaths.VolumeShared
	volImageList = podpaths.VolumeImageList
	volConfig    = podpaths.VolumeConfig
	volScanCache = podpaths.VolumeScanCache
	volScanTmp   = podpaths.VolumeScanTmp
	volState     = podpaths.VolumeState
	volImageFs   = podpaths.VolumeImageFs
)

// ScannerCacheDir is the Trivy scanner's default cacheDir; an emptyDir is
// mounted there unless a configured hostPath volume is (a pre-seeded DB).
const ScannerCacheDir = "/var/lib/trivy"

// Params is everything a worker pod depends on.
type Params struct {
	Job       string
	JobUID    types.UID
	Kind      Kind
	Node      string
	OS        podpaths.OS
	Namespace string
	Config    *config.Config
	// ConfigMap holds the job's image list (manual) and configuration.
	ConfigMap string
	// ConfigKey is the key of the EraserConfig in ConfigMap (for the scanner).
	ConfigKey string
	// Exclusions are the names of the exclusion-list ConfigMaps.
	Exclusions []string
	LogLevel   string
	DryRun     bool
	// PullSecrets are the manager's ERASER_PULL_SECRET_NAMES.
	PullSecrets []string
	// Batch is the pod's cleanup batch (LabelBatch).
	Batch int
	// References name the ConfigMaps of the wave's cluster set, in part
	// order; NodeReferences is the node's set (references.EncodeNode).
	References     []string
	NodeReferences string
	// ScanService is the manager's scan service (http://ip:port), which
	// the scanner shares verdicts through; empty, each node scans alone.
	ScanService string
	// ScanDB is the run's DB archive, which the scanner downloads from the
	// service; ScanDBUnavailable says instead why the run has none (the
	// scanner then judges nothing). Both unset, the scanner fetches its DB
	// as configured.
	ScanDB            *scanshare.DB
	ScanDBUnavailable string
}

// PodName is deterministic, so that a restarted manager re-creating a pod
// gets AlreadyExists instead of a second pod on the node. It is at most 63
// characters: a pod's name is its hostname, and the API server warns about
// every longer one.
func PodName(job, node string) string {
	sum := sha256.Sum256([]byte(node))
	suffix := hex.EncodeToString(sum[:4])
	return kname.Shorten(job+"-"+node, kname.MaxLabelValue-len(suffix)-1) + "-" + suffix
}

// Build returns the worker pod for one node.
func Build(p Params) (*corev1.Pod, error) {
	if p.OS != podpaths.Linux && p.OS != podpaths.Windows {
		return nil, fmt.Errorf("no worker pod for %s nodes", p.OS)
	}
	cfg := p.Config
	labels := map[string]string{}
	for k, v := range cfg.Manager.AdditionalPodLabels {
		labels[k] = v
	}
	labels[LabelType] = string(p.Kind)
	labels[LabelJob] = p.Job
	labels[LabelBatch] = strconv.Itoa(p.Batch)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(p.Job, p.Node),
			Namespace: p.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob", Name: p.Job, UID: p.JobUID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:      p.Node,
			OS:            &corev1.PodOS{Name: corev1.OSName(p.OS)},
			RestartPolicy: corev1.RestartPolicyNever,
			// Workers never talk to the API server.
			ServiceAccountName:           ServiceAccount,
			AutomountServiceAccountToken: ptr.To(false),
			PriorityClassName:            cfg.Manager.PriorityClassName,
			Tolerations:                  tolerations(cfg),
		},
	}
	pod.Spec.ImagePullSecrets = pullSecrets(cfg.Manager.PullSecrets, p.PullSecrets)

	// Each container gets only the mounts it uses: a scanner parses
	// tenants' images, so what it holds is what a compromised one holds.
	// socket is the runtime's CRI socket, which is root on the node;
	// exclusions are read by the collector and the remover, which judge
	// images by name (the scanner sees only what the collector let through).
	var socket, exclusions []corev1.VolumeMount
	if p.OS == podpaths.Linux {
		addr, err := endpoint.Parse(cfg.Manager.Runtime.Address)
		if err != nil || addr.Scheme != endpoint.Unix {
			return nil, fmt.Errorf("runtime address %q is not a unix socket a Linux pod can mount", cfg.Manager.Runtime.Address)
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volRuntime, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: addr.Path, Type: ptr.To(corev1.HostPathSocket)},
		}})
		socket = []corev1.VolumeMount{{Name: volRuntime, MountPath: podpaths.CRISocket}}
	} else {
		windowsPod(pod)
	}
	for _, cm := range p.Exclusions {
		vol := podpaths.ExclusionVolumePrefix + cm
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volumeName(vol), VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}},
		}})
		exclusions = append(exclusions, corev1.VolumeMount{Name: volumeName(vol), MountPath: podpaths.Join(p.OS, podpaths.ExclusionDir(p.OS), vol), ReadOnly: true})
	}
	// What the collector and the remover both mount, whatever the run.
	nodeMounts := concat(socket, exclusions)

	pprof := []string{"--enable-pprof=" + strconv.FormatBool(cfg.Manager.Profile.Enabled), "--pprof-port=" + strconv.Itoa(cfg.Manager.Profile.Port)}
	base := []string{"--log-level=" + p.LogLevel, "--exclusion-dir=" + podpaths.ExclusionDir(p.OS)}

	switch p.Kind {
	case KindManual:
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volImageList, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: p.ConfigMap},
				Items:                []corev1.KeyToPath{{Key: podpaths.ImageListKey, Path: podpaths.ImageListKey}},
			},
		}})
		ret := retention(p)
		pod.Spec.Volumes = append(pod.Spec.Volumes, ret.volumes...)
		prot, protMounts, err := protection(p, pod)
		if err != nil {
			return nil, err
		}
		reg, regMounts := registryCheck(p, pod)
		args := append(append(append(append(append([]string{"--imagelist=" + podpaths.ImageListFile(p.OS)}, base...), pprof...), ret.args...), prot...), reg...)
		if p.DryRun {
			args = append(args, "--dry-run")
		}
		args = append(args, runFlag(p))
		mounts := concat(nodeMounts, []corev1.VolumeMount{{Name: volImageList, MountPath: podpaths.ImageListDir(p.OS), ReadOnly: true}}, ret.mounts, ret.removerMounts, protMounts, regMounts)
		pod.Spec.Containers = []corev1.Container{container(p, RemoverContainer, cfg.Components.Remover, args, mounts)}
		grantCRIOReclaim(p, pod, &pod.Spec.Containers[0])
	case KindCollector:
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volShared, VolumeSource: corev1.VolumeSource{EmptyDir: sharedData(p.OS)}})
		shared := []corev1.VolumeMount{{Name: volShared, MountPath: podpaths.SharedData(p.OS)}}
		scan := cfg.Components.Scanner.Enabled
		ret := retention(p)
		pod.Spec.Volumes = append(pod.Spec.Volumes, ret.volumes...)
		// The scanner judges images by their content alone: the node's
		// history and filesystem are the collector's and remover's.
		workerMounts := concat(nodeMounts, shared, ret.mounts)
		// Each wait for a peer follows the scan's deadline (config.Waits):
		// the remover waits for the scanner's list through the whole scan.
		handoff := "--handoff-timeout=" + cfg.Waits(true).Handoff.String()
		collectorArgs := append(append(append([]string{"--scan-disabled=" + strconv.FormatBool(!scan), handoff}, base...), pprof...), ret.args...)
		// The remover is told whether a scanner runs, never left to infer it
		// from the shared directory, which a custom scanner may tidy early.
		prot, protMounts, err := protection(p, pod)
		if err != nil {
			return nil, err
		}
		reg, regMounts := registryCheck(p, pod)
		removerArgs := append(append(append(append(append([]string{scannerFlag(scan), handoff}, base...), pprof...), ret.args...), prot...), reg...)
		if p.DryRun {
			removerArgs = append(removerArgs, "--dry-run")
		}
		removerArgs = append(removerArgs, runFlag(p))
		pod.Spec.Containers = []corev1.Container{
			container(p, CollectorContainer, cfg.Components.Collector, collectorArgs, workerMounts),
			container(p, RemoverContainer, cfg.Components.Remover, removerArgs, concat(workerMounts, ret.removerMounts, protMounts, regMounts)),
		}
		grantCRIOReclaim(p, pod, &pod.Spec.Containers[1])
		if scan {
			pod.Spec.Containers = append(pod.Spec.Containers, scanner(p, concat(scannerSocket(p, socket), shared), pprof))
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volConfig, VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: p.ConfigMap},
					Items:                []corev1.KeyToPath{{Key: p.ConfigKey, Path: p.ConfigKey}},
				},
			}})
			for _, v := range cfg.Components.Scanner.Volumes {
				if v.HostPath != nil {
					pod.Spec.Volumes = append(pod.Spec.Volumes, v)
				}
			}
			if p.OS == podpaths.Linux {
				if !hostPathAt(cfg, ScannerCacheDir) {
					pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volScanCache, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(scanCacheLimit.DeepCopy())}}})
				}
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volScanTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(scanTmpLimit.DeepCopy())}}})
				if p.ScanService != "" {
					pod.Spec.Volumes = append(pod.Spec.Volumes, scanToken(p.JobUID))
					if pod.Annotations == nil {
						pod.Annotations = map[string]string{}
					}
					pod.Annotations[scanshare.AnnotationService] = p.ScanService
					if p.ScanDB != nil {
						pod.Annotations[scanshare.AnnotationDB] = scanshare.DBAnnotation(p.ScanDB.Repo, p.ScanDB.Digest)
					}
				}
			}
		}
	default:
		return nil, fmt.Errorf("unknown job kind %q", p.Kind)
	}
	return pod, nil
}

// runFlag tells the remover its job, which the node's removal ledger
// records with each removal, so that a return names the run that regrets it.
func runFlag(p Params) string { return "--run=" + p.Job }

// tolerations are the configured ones or, unset, tolerate-all: pinned with
// nodeName, the pod bypasses the scheduler and must tolerate whatever taints
// its node has. Configured ones are honoured by the choice of nodes
// (nodefilter), which leaves out the nodes whose taints they do not tolerate.
func tolerations(cfg *config.Config) []corev1.Toleration {
	set := cfg.Manager.ImageJob.Tolerations
	if set == nil {
		return []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	out := make([]corev1.Toleration, 0, len(set))
	for i := range set {
		out = append(out, *set[i].DeepCopy())
	}
	return out
}

func container(p Params, name string, comp config.Component, args []string, mounts []corev1.VolumeMount) corev1.Container {
	cfg := p.Config
	c := corev1.Container{
		Name:            name,
		Image:           comp.Image.Ref(),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		VolumeMounts:    mounts,
		Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
		}}},
		Resources: resources(comp),
		// The summary the manager reads; File is the default policy, spelled
		// out because the manager depends on it.
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		// Root is needed for the runtime socket and the runtime's image
		// store, which are root's, nothing else: no privilege, no
		// capabilities, nothing written outside the volumes.
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Privileged:               ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if cfg.Manager.OTLPEndpoint != "" {
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: cfg.Manager.OTLPEndpoint},
			corev1.EnvVar{Name: "OTEL_SERVICE_NAME", Value: name},
		)
	}
	if p.OS == podpaths.Windows {
		windowsContainer(&c, comp, cfg)
	}
	return c
}

func resources(comp config.Component) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{}
	set := func(list *corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) {
		if q == nil {
			return
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q.DeepCopy()
	}
	set(&r.Requests, corev1.ResourceMemory, comp.Request.Mem)
	set(&r.Requests, corev1.ResourceCPU, comp.Request.CPU)
	// Memory only: a CPU limit would throttle removals for no gain.
	set(&r.Limits, corev1.ResourceMemory, comp.Limit.Mem)
	return r
}

// concat joins mount lists into a new one, so that no two containers share
// a backing array.
func concat(lists ...[]corev1.VolumeMount) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// volumeName makes a DNS label (no dots, 63 characters at most) of an
// exclusion volume, whatever the ConfigMap is called.
func volumeName(s string) string { return kname.DNSLabel(s) }

// Finished reports a worker pod that ended, whichever way: its outcome and
// its log are final.
func Finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// JobRequest maps a worker pod to its job's reconcile request, by the job
// label: cheaper per event than resolving the owner reference's kind.
func JobRequest(_ context.Context, o client.Object) []reconcile.Request {
	if job := o.GetLabels()[LabelJob]; job != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: job}}}
	}
	return nil
}
