// Package podpaths is the one source of truth for where things are inside a
// worker pod, per node OS. The manager (on Linux) builds pod specs from it
// and the workers (on Linux or Windows) take their defaults from it, so the
// two can never disagree.
package podpaths

import "strings"

// OS is a node's operating system, as its kubernetes.io/os label says.
type OS string

// The operating systems worker pods run on.
const (
	Linux   OS = "linux"
	Windows OS = "windows"
)

// CRISocket is where Linux worker pods mount the runtime's socket.
const CRISocket = "/run/cri/cri.sock"

// CRIEndpoint is the endpoint Linux workers dial.
const CRIEndpoint = "unix://" + CRISocket

// ImageListKey is the key of the image list in a job's ConfigMap, and the
// file name it is mounted as.
const ImageListKey = "images"

func base(os OS) string {
	if os == Windows {
		return `C:\run\eraser.sh`
	}
	return "/run/eraser.sh"
}

func join(os OS, parts ...string) string {
	sep := "/"
	if os == Windows {
		sep = `\`
	}
	return strings.Join(append([]string{base(os)}, parts...), sep)
}

// SharedData is the directory the worker containers hand off through.
func SharedData(os OS) string { return join(os, "shared-data") }

// ImageListDir is where the job's image list is mounted.
func ImageListDir(os OS) string { return join(os, "imagelist") }

// ImageListFile is the image list the remover reads.
func ImageListFile(os OS) string { return join(os, "imagelist", ImageListKey) }

// ExclusionDir holds one exclude-<configmap> directory per exclusion list.
func ExclusionDir(os OS) string { return join(os, "exclusions") }

// ReferencesDir is where the remover reads the cluster's references
// (internal/wire/references: node/ and cluster/ below it).
func ReferencesDir(os OS) string { return join(os, "references") }

// RegistryCredentialsDir is where the remover finds the registry check's
// credentials (a dockerconfigjson Secret), as RegistryCredentialsFile.
func RegistryCredentialsDir(os OS) string { return join(os, "registry-credentials") }

// RegistryCredentialsFile is the file the Secret's .dockerconfigjson key
// is mounted as.
const RegistryCredentialsFile = "config.json"

// ConfigDir is where the scanner finds the EraserConfig.
func ConfigDir(os OS) string { return join(os, "config") }

// StateDir is the node's own directory of worker state (images.json: when
// each image was first seen and last used), on the host: it outlives the
// pods, which is its point. Linux pods mount it at the same path; Windows
// HostProcess pods see the host's filesystem.
func StateDir(os OS) string {
	if os == Windows {
		return `C:\ProgramData\eraser`
	}
	return "/var/lib/eraser"
}

// Join joins path elements with the OS's separator.
func Join(os OS, elem ...string) string {
	sep := "/"
	if os == Windows {
		sep = `\`
	}
	return strings.Join(elem, sep)
}
