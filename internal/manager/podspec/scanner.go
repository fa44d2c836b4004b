package podspec

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
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
	c := container(p, ScannerContainer, cfg.Components.Scanner, args, mounts)
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "ERASER_RUNTIME_NAME", Value: string(cfg.Manager.Runtime.Name)},
		corev1.EnvVar{Name: "CONTAINERD_NAMESPACE", Value: "k8s.io"},
	)
	return c
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
