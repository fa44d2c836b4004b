package eraserconfig

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

const dataKey = "controller_manager_config.yaml"

// TestRecordFollowsARecreatedConfigMap: the EraserConfig ConfigMap is
// deleted and created again (kubectl replace --force, a GitOps sync), with
// the same document and then with one hot reload refuses. The last good
// record's owner reference names the live ConfigMap every time, so that the
// garbage collector, which deletes what names an owner that is gone, leaves
// the record alone. (The test control plane runs no garbage collector: the
// owner reference is what it would act on.)
func TestRecordFollowsARecreatedConfigMap(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := fmt.Sprintf("cm-%d", time.Now().UnixNano()%100000)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	good := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager: {imageJob: {successRatio: 0.5}}\n"
	bad := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager: {imageJob: {successRatio: 7}}\n"
	cfg, _, err := config.Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "eraser-manager-config"}
	r := NewReloader(env.Client, record.NewFakeRecorder(100), NewStore(cfg, []byte(good)), key, dataKey, "")

	owner := func() types.UID {
		t.Helper()
		rec := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, RecordKey(key), rec); err != nil {
			t.Fatalf("reading the record: %v", err)
		}
		if len(rec.OwnerReferences) != 1 {
			t.Fatalf("record owners %+v, want one", rec.OwnerReferences)
		}
		if got := rec.Data[dataKey]; got != good {
			t.Fatalf("recorded document %q, want the good one", got)
		}
		return rec.OwnerReferences[0].UID
	}
	recreate := func(doc string) types.UID {
		t.Helper()
		cm := builder.MakeConfigMap(ns, key.Name).Data(dataKey, doc).Obj()
		if err := env.Client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		return cm.UID
	}

	first := recreate(good)
	if diff := cmp.Diff(first, owner()); diff != "" {
		t.Fatalf("first record's owner (-live +recorded):\n%s", diff)
	}
	second := recreate(good)
	if diff := cmp.Diff(second, owner()); diff != "" {
		t.Errorf("after re-creating it with the same document (-live +recorded):\n%s", diff)
	}
	third := recreate(bad)
	if diff := cmp.Diff(third, owner()); diff != "" {
		t.Errorf("after re-creating it with a refused document (-live +recorded):\n%s", diff)
	}
}
