package plugin

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/migration"
)

// Exit codes of migrate: ExitOK when nothing differs, these otherwise.
const (
	ExitDifferences = 3
	ExitBlocking    = 4
)

const migrateUsage = "migrate check | migrate rollback [--apply] [--save-dir DIR] [--export-reports DIR]"

func migrateFlags(fs *flag.FlagSet) func(context.Context, env, []string) int {
	apply := fs.Bool("apply", false, "rollback: save and delete what upstream would turn into a real removal")
	saveDir := fs.String("save-dir", ".", "rollback --apply: where to save the manifests of the ImageLists it deletes")
	exportReports := fs.String("export-reports", "", "rollback: save every run's report ConfigMap in this directory")
	return func(ctx context.Context, e env, operands []string) int {
		if len(operands) != 1 || (operands[0] != "check" && operands[0] != "rollback") {
			fmt.Fprintln(e.errOut, "usage: kubectl eraser "+migrateUsage)
			return ExitUsage
		}
		rollback := operands[0] == "rollback"
		cluster, err := migration.Load(ctx, e.c, e.namespace, rollback)
		if err != nil {
			fmt.Fprintln(e.errOut, "reading the cluster:", err)
			return ExitFailed
		}
		if !rollback {
			findings := migration.Check(cluster)
			if err := migration.Write(e.out, findings); err != nil {
				return ExitFailed
			}
			return exitFor(findings)
		}
		findings, todo := migration.Rollback(cluster)
		fmt.Fprintln(e.out, "What upstream Eraser's manager will do once it replaces this one:")
		if err := migration.Write(e.out, findings); err != nil {
			return ExitFailed
		}
		if *exportReports != "" {
			n, err := saveReports(ctx, e.c, e.namespace, *exportReports)
			if err != nil {
				fmt.Fprintln(e.errOut, "exporting the reports:", err)
				return ExitFailed
			}
			fmt.Fprintf(e.out, "saved %d report ConfigMaps in %s\n", n, *exportReports)
		}
		if len(todo) == 0 {
			return exitFor(findings)
		}
		if !*apply {
			fmt.Fprintf(e.out, "\n%d ImageList(s) would become a real removal under upstream; kubectl eraser migrate rollback --apply saves each in --save-dir and deletes it.\n", len(todo))
			return exitFor(findings)
		}
		for _, n := range todo {
			path, err := neutralise(ctx, e.c, n.ImageList, *saveDir)
			if err != nil {
				fmt.Fprintf(e.errOut, "imagelist/%s: %v\n", n.ImageList, err)
				return ExitFailed
			}
			fmt.Fprintf(e.out, "imagelist/%s saved in %s and deleted: %s\n", n.ImageList, path, n.Why)
		}
		// What blocked is done; the rest are differences to know of.
		if len(findings) > len(todo) {
			return ExitDifferences
		}
		return ExitOK
	}
}

func exitFor(findings []migration.Finding) int {
	switch migration.Worst(findings) {
	case migration.Blocking:
		return ExitBlocking
	case migration.Difference:
		return ExitDifferences
	}
	return ExitOK
}

// neutralise saves the ImageList's manifest and deletes it, so that
// upstream's manager never reads it.
func neutralise(ctx context.Context, c client.Client, name, dir string) (string, error) {
	l := &eraserv1.ImageList{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, l); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "imagelist-"+name+".yaml")
	if err := writeManifest(path, l, eraserv1.GroupVersion.WithKind("ImageList")); err != nil {
		return "", err
	}
	// Only this version of the list: an edit since it was read is the
	// user's, and is not deleted unsaved.
	if err := c.Delete(ctx, l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}); err != nil {
		return path, fmt.Errorf("deleting: %w", err)
	}
	return path, nil
}

// saveReports writes each report ConfigMap in dir, one file each.
func saveReports(ctx context.Context, c client.Reader, namespace, dir string) (int, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.HasLabels{eraserv1.LabelReport}); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	for i := range list.Items {
		cm := &list.Items[i]
		if err := writeManifest(filepath.Join(dir, "report-"+cm.Name+".yaml"), cm, corev1.SchemeGroupVersion.WithKind("ConfigMap")); err != nil {
			return i, err
		}
	}
	return len(list.Items), nil
}

// writeManifest writes a copy of the object as a manifest to apply again:
// with its kind, without the fields the API server sets.
func writeManifest(path string, orig client.Object, gvk schema.GroupVersionKind) error {
	obj, ok := orig.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not an object", orig)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetGeneration(0)
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetManagedFields(nil)
	obj.SetOwnerReferences(nil)
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
