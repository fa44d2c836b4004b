package podspec

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// scannerSocket is the runtime socket the scanner gets, of socket (the
// pod's, nil on Windows): the scanner reads images through containerd's
// API, served on containerd's socket, and a custom scanner on cri-dockerd
// has no other way to them. On CRI-O, which has no call that returns an
// image's content, it reads the image store from disk and gets none: the
// socket would let a compromised scanner start any container on the node.
func scannerSocket(p Params, socket []corev1.VolumeMount) []corev1.VolumeMount {
	if p.Config.Manager.Runtime.Name == config.RuntimeCrio {
		return nil
	}
	return socket
}

// The scanner's emptyDirs are bounded, so that what it writes there cannot
// fill the node's disk: past its limit the kubelet evicts the pod. The
// cache holds the vulnerability DB (about 1 GiB unpacked) and, while it is
// unpacked, its archive; /tmp holds what Trivy copies out of one layer at
// a time to analyse it.
var (
	scanCacheLimit = resource.MustParse("4Gi")
	scanTmpLimit   = resource.MustParse("8Gi")
)

func scanner(p Params, mounts []corev1.VolumeMount, pprof []string) corev1.Container {
	cfg := p.Config
	mounts = append(append([]corev1.VolumeMount{}, mounts...), corev1.VolumeMount{Name: volConfig, MountPath: podpaths.ConfigDir(p.OS), ReadOnly: true})
	for _, v := range cfg.Components.Scanner.Volumes {
		if v.HostPath != nil {
			mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: v.HostPath.Path, ReadOnly: true})
		}
	}
	if p.OS == podpaths.Linux {
		if !hostPathAt(cfg, ScannerCacheDir) {
			mounts = append(mounts, corev1.VolumeMount{Name: volScanCache, MountPath: ScannerCacheDir})
		}
		mounts = append(mounts, corev1.VolumeMount{Name: volScanTmp, MountPath: "/tmp"})
	}
	args := append([]string{"--config=" + podpaths.Join(p.OS, podpaths.ConfigDir(p.OS), p.ConfigKey), "--log-level=" + p.LogLevel}, pprof...)
	// CRI-O has no call that returns an image's content: the scanner reads
	// its image store, the volume retention() mounts for runtime crio, and
	// only that, read-only (not the node's state the other workers write).
	if p.OS == podpaths.Linux && cfg.Manager.Runtime.Name == config.RuntimeCrio {
		mounts = append(mounts, corev1.VolumeMount{Name: volImageFs, MountPath: cfg.Manager.Retention.ImageFsPath, ReadOnly: true})
		args = append(args, "--image-store="+cfg.Manager.Retention.ImageFsPath)
	}
	share := p.OS == podpaths.Linux && p.ScanService != ""
	if share {
		mounts = append(mounts, corev1.VolumeMount{Name: podpaths.VolumeScanToken, MountPath: ScanTokenDir, ReadOnly: true})
	}
	c := container(p, ScannerContainer, cfg.Components.Scanner, args, mounts)
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "ERASER_RUNTIME_NAME", Value: string(cfg.Manager.Runtime.Name)},
		corev1.EnvVar{Name: "CONTAINERD_NAMESPACE", Value: "k8s.io"},
	)
	if share {
		c.Env = append(c.Env,
			corev1.EnvVar{Name: scanshare.EnvService, Value: p.ScanService},
			corev1.EnvVar{Name: scanshare.EnvJobUID, Value: string(p.JobUID)},
			corev1.EnvVar{Name: scanshare.EnvToken, Value: ScanTokenDir + "/" + scanTokenFile},
			corev1.EnvVar{Name: scanshare.EnvServiceFile, Value: ScanTokenDir + "/" + scanServiceFile},
		)
		switch {
		case p.ScanDB != nil:
			c.Env = append(c.Env, corev1.EnvVar{Name: scanshare.EnvDB, Value: p.ScanDB.Digest})
			if p.ScanDB.Size > 0 {
				c.Env = append(c.Env, corev1.EnvVar{Name: scanshare.EnvDBSize, Value: strconv.FormatInt(p.ScanDB.Size, 10)})
			}
			if p.ScanDB.Schema > 0 {
				c.Env = append(c.Env, corev1.EnvVar{Name: scanshare.EnvDBSchema, Value: strconv.Itoa(p.ScanDB.Schema)})
			}
			if !p.ScanDB.Built.IsZero() {
				c.Env = append(c.Env, corev1.EnvVar{Name: scanshare.EnvDBBuilt, Value: p.ScanDB.Built.UTC().Format(time.RFC3339)})
			}
		case p.ScanDBUnavailable != "":
			c.Env = append(c.Env, corev1.EnvVar{Name: scanshare.EnvDBUnavailable, Value: p.ScanDBUnavailable})
		}
	}
	return c
}

// ScanTokenDir holds the scanner's token for the scan service.
const ScanTokenDir = "/run/eraser.sh/scan-token"

const (
	scanTokenFile   = "token"
	scanServiceFile = "service"
)

// scanToken is the token the kubelet projects for the scanner alone: the
// run's audience, bound to the pod, so that it proves to the scan service
// which run's scanner, on which node, is asking. The worker pods' account
// has no role, so the token grants nothing at the API server, which does
// not accept its audience anyway. Beside it, the service's address from the
// pod's annotation: the kubelet rewrites the file when a new leader, in a
// new pod, announces itself there, and the scanner reads it on each
// request.
func scanToken(job types.UID) corev1.Volume {
	return corev1.Volume{Name: podpaths.VolumeScanToken, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: scanshare.AudienceOf(string(job)), ExpirationSeconds: ptr.To[int64](scanshare.TokenTTL), Path: scanTokenFile,
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: scanServiceFile, FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + scanshare.AnnotationService + "']"},
			}}}},
		},
	}}}
}

func hostPathAt(cfg *config.Config, path string) bool {
	for _, v := range cfg.Components.Scanner.Volumes {
		if v.HostPath != nil && v.HostPath.Path == path {
			return true
		}
	}
	return false
}

// scannerFlag is the remover's --scanner (remover.Sender): the values are
// spelled here too, as podspec is the manager's and does not import the
// remover.
func scannerFlag(enabled bool) string {
	if enabled {
		return "--scanner=enabled"
	}
	return "--scanner=disabled"
}
