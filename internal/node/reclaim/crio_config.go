//go:build linux

package reclaim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Where CRI-O and containers/storage read their configuration on a node,
// and where the remover sees it (its pod mounts these read-only at the
// same paths).
const (
	DefaultStorageConf = "/etc/containers/storage.conf"
	// sharedStorageConf is read by containers/storage when
	// DefaultStorageConf is absent.
	sharedStorageConf = "/usr/share/containers/storage.conf"
	DefaultCRIOConf   = "/etc/crio/crio.conf"
	// defaultPullTemp is where containers/image keeps a pull's blobs
	// until it commits them, unless crio.conf's big_files_temporary_dir
	// moves it.
	defaultPullTemp = "/var/tmp"
)

// nodeStorage is CRI-O's store as the node's configuration sets it up:
// storage.conf, then crio.conf and its drop-ins, whose settings CRI-O
// puts over storage.conf's.
type nodeStorage struct {
	Driver, GraphRoot, RunRoot, ImageStore string
	TransientStore                         bool
	AdditionalImageStores                  []string
	AdditionalLayerStores                  []string
	// DriverOptions are the driver's options as containers/storage takes
	// them ("overlay.mountopt=nodev").
	DriverOptions []string
	// PullTemp is where a pull in progress keeps its blobs.
	PullTemp string
	// Unknown are the settings of storage.conf this build does not know
	// the effect of, by their TOML keys.
	Unknown []string
	// Sources are the files read, for the report.
	Sources []string
}

// storageConfDoc is storage.conf as far as reclaiming needs it; every
// other key is in the decoder's undecoded keys and refused unless
// harmlessKeys names it.
type storageConfDoc struct {
	Storage struct {
		Driver         string `toml:"driver"`
		RunRoot        string `toml:"runroot"`
		GraphRoot      string `toml:"graphroot"`
		ImageStore     string `toml:"imagestore"`
		TransientStore bool   `toml:"transient_store"`
		Options        struct {
			AdditionalImageStores []string          `toml:"additionalimagestores"`
			AdditionalLayerStores []string          `toml:"additionallayerstores"`
			ImageStore            string            `toml:"imagestore"`
			MountProgram          string            `toml:"mount_program"`
			UseComposefs          string            `toml:"use_composefs"`
			Overlay               map[string]any    `toml:"overlay"`
			Vfs                   map[string]any    `toml:"vfs"`
			PullOptions           map[string]string `toml:"pull_options"`
		} `toml:"options"`
	} `toml:"storage"`
}

// harmlessKeys are storage.conf's settings that change nothing in how a
// layer or a container's storage is deleted: rootless and user-namespace
// settings, what a pull does, the drivers' tuning of what they mount.
var harmlessKeys = []string{
	"storage.driver_priority", "storage.rootless_storage_path",
	"storage.options.size", "storage.options.remap-uids", "storage.options.remap-gids",
	"storage.options.remap-user", "storage.options.remap-group", "storage.options.root-auto-userns-user",
	"storage.options.auto-userns-min-size", "storage.options.auto-userns-max-size",
	"storage.options.ignore_chown_errors", "storage.options.skip_mount_home", "storage.options.mountopt",
	"storage.options.force_mask", "storage.options.disable-volatile",
}

// overlayOptions are the overlay driver's settings passed on to it as the
// node sets them; mount_program and use_composefs change what a layer is
// on disk and are refused.
var overlayOptions = []string{"mountopt", "size", "inodes", "skip_mount_home", "force_mask", "ignore_chown_errors", "sync"}

// crioConfDoc is crio.conf as far as the store goes.
type crioConfDoc struct {
	Crio struct {
		Root          *string  `toml:"root"`
		RunRoot       *string  `toml:"runroot"`
		StorageDriver *string  `toml:"storage_driver"`
		StorageOption []string `toml:"storage_option"`
		Image         struct {
			BigFilesTemporaryDir *string `toml:"big_files_temporary_dir"`
		} `toml:"image"`
	} `toml:"crio"`
}

// readNodeStorage reads CRI-O's storage configuration from the files at
// storageConf (empty: containers/storage's own choice of file) and
// crioConf (empty: DefaultCRIOConf) with crioConf's drop-in directory
// (crio.conf.d beside it), each under hostRoot. A missing file sets
// nothing, as for CRI-O. PullTemp is under hostRoot too.
func readNodeStorage(hostRoot, storageConf, crioConf string) (nodeStorage, error) {
	var sources []string
	var storageData []byte
	candidates := []string{storageConf}
	if storageConf == "" {
		candidates = []string{DefaultStorageConf, sharedStorageConf}
	}
	for _, f := range candidates {
		f = filepath.Join("/", hostRoot, f)
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nodeStorage{}, fmt.Errorf("reading the node's storage configuration: %w", err)
		}
		storageData, sources = data, append(sources, f)
		break
	}
	if crioConf == "" {
		crioConf = DefaultCRIOConf
	}
	crioConf = filepath.Join("/", hostRoot, crioConf)
	dropIns, err := filepath.Glob(filepath.Join(filepath.Dir(crioConf), "crio.conf.d", "*.conf"))
	if err != nil {
		return nodeStorage{}, err
	}
	sort.Strings(dropIns)
	var crioData [][]byte
	for _, f := range append([]string{crioConf}, dropIns...) {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nodeStorage{}, fmt.Errorf("reading CRI-O's configuration: %w", err)
		}
		crioData, sources = append(crioData, data), append(sources, f)
	}
	n, err := parseNodeStorage(storageData, crioData)
	if err != nil {
		return nodeStorage{}, fmt.Errorf("%s: %w", strings.Join(sources, ", "), err)
	}
	n.Sources = sources
	n.PullTemp = filepath.Join("/", hostRoot, n.PullTemp)
	return n, nil
}

// parseNodeStorage makes the store's configuration of storage.conf's
// contents and crio.conf's, in the order CRI-O reads them.
func parseNodeStorage(storageConf []byte, crioConfs [][]byte) (nodeStorage, error) {
	var doc storageConfDoc
	md, err := toml.Decode(string(storageConf), &doc)
	if err != nil {
		return nodeStorage{}, fmt.Errorf("storage.conf: %w", err)
	}
	s, o := doc.Storage, doc.Storage.Options
	n := nodeStorage{
		Driver: s.Driver, GraphRoot: s.GraphRoot, RunRoot: s.RunRoot, ImageStore: cmpOr(s.ImageStore, o.ImageStore),
		TransientStore:        s.TransientStore,
		AdditionalImageStores: o.AdditionalImageStores, AdditionalLayerStores: o.AdditionalLayerStores,
		PullTemp: defaultPullTemp,
	}
	for _, k := range md.Undecoded() {
		if key := k.String(); !slices.Contains(harmlessKeys, key) {
			n.Unknown = append(n.Unknown, key)
		}
	}
	if o.MountProgram != "" {
		n.Unknown = append(n.Unknown, "storage.options.mount_program")
	}
	if o.UseComposefs != "" && o.UseComposefs != "false" {
		n.Unknown = append(n.Unknown, "storage.options.use_composefs")
	}
	keys := make([]string, 0, len(o.Overlay))
	for k := range o.Overlay {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := o.Overlay[k]
		switch {
		case (k == "use_composefs" || k == "sync") && fmt.Sprint(v) == "false":
		case slices.Contains(overlayOptions, k):
			n.DriverOptions = append(n.DriverOptions, fmt.Sprintf("overlay.%s=%v", k, v))
		default:
			n.Unknown = append(n.Unknown, "storage.options.overlay."+k)
		}
	}
	for _, data := range crioConfs {
		var c crioConfDoc
		if _, err := toml.Decode(string(data), &c); err != nil {
			return nodeStorage{}, fmt.Errorf("crio.conf: %w", err)
		}
		set := func(dst *string, v *string) {
			if v != nil && *v != "" {
				*dst = *v
			}
		}
		set(&n.GraphRoot, c.Crio.Root)
		set(&n.RunRoot, c.Crio.RunRoot)
		set(&n.Driver, c.Crio.StorageDriver)
		set(&n.PullTemp, c.Crio.Image.BigFilesTemporaryDir)
		if c.Crio.StorageOption != nil {
			// CRI-O's storage_option replaces storage.conf's driver options.
			n.DriverOptions = nil
			for _, opt := range c.Crio.StorageOption {
				name, _, _ := strings.Cut(opt, "=")
				if d, key, ok := strings.Cut(name, "."); ok && d == "overlay" && slices.Contains(overlayOptions, key) {
					n.DriverOptions = append(n.DriverOptions, opt)
					continue
				}
				n.Unknown = append(n.Unknown, "crio.storage_option "+opt)
			}
		}
	}
	return n, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// refusal is why the store s, configured on the node as n, is not written
// by this build, or "": a feature it does not honour would have it
// write somewhere CRI-O does not read, or miss what CRI-O keeps elsewhere.
func refusal(n nodeStorage, s CRIOStore) string {
	var why []string
	if n.TransientStore {
		why = append(why, "transient_store is set: CRI-O keeps containers and their layers' records under its run root, which this build does not read")
	}
	if n.ImageStore != "" {
		why = append(why, "imagestore "+n.ImageStore+" splits the store: its images and layers are not in the graph root")
	}
	if len(n.AdditionalImageStores) > 0 || len(n.AdditionalLayerStores) > 0 {
		why = append(why, "additional image or layer stores are configured: layers there are held by images this build does not read")
	}
	if n.Driver != "" && n.Driver != "overlay" {
		why = append(why, "the storage driver is "+n.Driver+": reclaiming is done with overlay")
	}
	if len(n.Unknown) > 0 {
		why = append(why, "settings whose effect this build does not know: "+strings.Join(n.Unknown, ", "))
	}
	if n.GraphRoot != "" && filepath.Clean(n.GraphRoot) != filepath.Clean(s.GraphRoot) {
		why = append(why, "the configuration's graph root is "+n.GraphRoot+", not "+s.GraphRoot)
	}
	if n.RunRoot != "" && filepath.Clean(n.RunRoot) != filepath.Clean(s.RunRoot) {
		why = append(why, "the configuration's run root is "+n.RunRoot+", not "+s.RunRoot)
	}
	if len(why) == 0 {
		return ""
	}
	return "CRI-O's store is not written: " + strings.Join(why, "; ")
}
