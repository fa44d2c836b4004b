//go:build linux

package reclaim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNodeStorage: the node's storage.conf and crio.conf make the store's
// configuration as CRI-O makes it (crio.conf over storage.conf, drop-ins
// last), and what this build cannot honour keeps the store closed, with
// the reason.
func TestNodeStorage(t *testing.T) {
	store := CRIOStore{GraphRoot: "/var/lib/containers/storage", RunRoot: "/run/containers/storage", Driver: "overlay"}
	cases := map[string]struct {
		storageConf string
		crioConfs   []string
		want        nodeStorage
		// refused: the words the refusal has; "" none.
		refused string
	}{
		"no files: the defaults": {
			want: nodeStorage{PullTemp: "/var/tmp"},
		},
		"a plain node": {
			storageConf: `[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
[storage.options]
pull_options = {enable_partial_images = "false"}
[storage.options.overlay]
mountopt = "nodev,metacopy=on"
`,
			want: nodeStorage{Driver: "overlay", RunRoot: "/run/containers/storage", GraphRoot: "/var/lib/containers/storage",
				DriverOptions: []string{"overlay.mountopt=nodev,metacopy=on"}, PullTemp: "/var/tmp"},
		},
		"crio.conf over storage.conf, drop-ins last": {
			storageConf: "[storage]\ndriver = \"overlay\"\ngraphroot = \"/elsewhere\"\n[storage.options.overlay]\nmountopt = \"nodev\"\n",
			crioConfs: []string{
				"[crio]\nroot = \"/var/lib/containers/storage\"\nstorage_option = [\"overlay.mountopt=nosuid\"]\n[crio.image]\nbig_files_temporary_dir = \"/var/lib/crio-tmp\"\n",
				"[crio]\nrunroot = \"/run/containers/storage\"\n",
			},
			want: nodeStorage{Driver: "overlay", GraphRoot: "/var/lib/containers/storage", RunRoot: "/run/containers/storage",
				DriverOptions: []string{"overlay.mountopt=nosuid"}, PullTemp: "/var/lib/crio-tmp"},
		},
		"transient store": {
			storageConf: "[storage]\ntransient_store = true\n",
			want:        nodeStorage{TransientStore: true, PullTemp: "/var/tmp"},
			refused:     "transient_store",
		},
		"split image store": {
			storageConf: "[storage]\nimagestore = \"/images\"\n",
			want:        nodeStorage{ImageStore: "/images", PullTemp: "/var/tmp"},
			refused:     "imagestore",
		},
		"additional image stores": {
			storageConf: "[storage.options]\nadditionalimagestores = [\"/ro\"]\n",
			want:        nodeStorage{AdditionalImageStores: []string{"/ro"}, PullTemp: "/var/tmp"},
			refused:     "additional",
		},
		"another driver": {
			crioConfs: []string{"[crio]\nstorage_driver = \"btrfs\"\n"},
			want:      nodeStorage{Driver: "btrfs", PullTemp: "/var/tmp"},
			refused:   "btrfs",
		},
		"a setting this build does not know": {
			storageConf: "[storage]\nnew_feature = true\n[storage.options.overlay]\nmount_program = \"/usr/bin/fuse-overlayfs\"\n",
			want:        nodeStorage{Unknown: []string{"storage.new_feature", "storage.options.overlay.mount_program"}, PullTemp: "/var/tmp"},
			refused:     "storage.new_feature, storage.options.overlay.mount_program",
		},
		"a driver option this build does not know, from crio.conf": {
			crioConfs: []string{"[crio]\nstorage_option = [\"overlay.use_composefs=true\"]\n"},
			want:      nodeStorage{Unknown: []string{"crio.storage_option overlay.use_composefs=true"}, PullTemp: "/var/tmp"},
			refused:   "use_composefs",
		},
		"harmless settings": {
			storageConf: "[storage]\nrootless_storage_path = \"$HOME/x\"\n[storage.options]\nremap-uids = \"0:1:2\"\n",
			want:        nodeStorage{PullTemp: "/var/tmp"},
		},
		"the store configured elsewhere": {
			crioConfs: []string{"[crio]\nroot = \"/data/containers\"\n"},
			want:      nodeStorage{GraphRoot: "/data/containers", PullTemp: "/var/tmp"},
			refused:   "graph root is /data/containers",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var crio [][]byte
			for _, c := range tc.crioConfs {
				crio = append(crio, []byte(c))
			}
			got, err := parseNodeStorage([]byte(tc.storageConf), crio)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			why := refusal(got, store)
			if (why != "") != (tc.refused != "") || !strings.Contains(why, tc.refused) {
				t.Errorf("refusal %q, want one naming %q", why, tc.refused)
			}
		})
	}
}

// TestReadNodeStorage: the files as a node has them, crio.conf's drop-ins
// read in their names' order; a missing file sets nothing; a file that is
// not TOML is an error naming the files.
func TestReadNodeStorage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	storageConf := write("containers/storage.conf", "[storage]\ndriver = \"overlay\"\n")
	crioConf := filepath.Join(dir, "crio", "crio.conf")
	write("crio/crio.conf.d/20-b.conf", "[crio]\nrunroot = \"/run/b\"\n")
	write("crio/crio.conf.d/10-a.conf", "[crio]\nrunroot = \"/run/a\"\nroot = \"/var/lib/a\"\n")
	got, err := readNodeStorage("", storageConf, crioConf)
	if err != nil {
		t.Fatal(err)
	}
	want := nodeStorage{Driver: "overlay", GraphRoot: "/var/lib/a", RunRoot: "/run/b", PullTemp: "/var/tmp",
		Sources: []string{storageConf, filepath.Join(dir, "crio/crio.conf.d/10-a.conf"), filepath.Join(dir, "crio/crio.conf.d/20-b.conf")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The same files under a host root, at the node's own paths.
	host := t.TempDir()
	for name, content := range map[string]string{
		"etc/containers/storage.conf":      "[storage]\ndriver = \"overlay\"\n",
		"etc/crio/crio.conf.d/10-tmp.conf": "[crio.image]\nbig_files_temporary_dir = \"/var/lib/crio/tmp\"\n",
	} {
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err = readNodeStorage(host, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want = nodeStorage{Driver: "overlay", PullTemp: filepath.Join(host, "var/lib/crio/tmp"),
		Sources: []string{filepath.Join(host, "etc/containers/storage.conf"), filepath.Join(host, "etc/crio/crio.conf.d/10-tmp.conf")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("under a host root (-want +got):\n%s", diff)
	}

	write("crio/crio.conf", "[crio\n")
	if _, err := readNodeStorage("", storageConf, crioConf); err == nil || !strings.Contains(err.Error(), crioConf) {
		t.Errorf("a broken crio.conf: %v, want an error naming it", err)
	}
}
