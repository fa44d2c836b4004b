package eraserconfig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestRecordSurvivesTheGarbageCollector runs the real garbage collector
// (kube-controller-manager, built beside the API server when the kubelet
// tier is) against the test control plane: a ConfigMap deleted for good
// takes its record with it, one deleted and re-created keeps it.
func TestRecordSurvivesTheGarbageCollector(t *testing.T) {
	testenv.Require(t)
	kcm := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	if _, err := os.Stat(kcm); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no kube-controller-manager in KUBEBUILDER_ASSETS (make test builds it with EXTRA=1): %v", err)
		}
		t.Skipf("no kube-controller-manager in KUBEBUILDER_ASSETS (KUBELET=1 EXTRA=1 hack/build-control-plane.sh builds it): %v", err)
	}
	ctx := context.Background()
	// startGC runs the garbage collector until the returned stop.
	startGC := func() (stop func()) {
		t.Helper()
		gcCtx, cancel := context.WithCancel(ctx)
		var log testenv.Buffer
		cmd := exec.CommandContext(gcCtx, kcm, "--kubeconfig="+env.KubeconfigPath, "--leader-elect=false", "--secure-port=0",
			"--use-service-account-credentials=false", "--controllers=garbagecollector")
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stop = func() {
			cancel()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("kube-controller-manager:\n%s", log.String())
			}
		}
		t.Cleanup(stop)
		return stop
	}

	ns := fmt.Sprintf("cmgc-%d", time.Now().UnixNano()%100000)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	good := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager: {imageJob: {successRatio: 0.5}}\n"
	cfg, _, err := config.Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "eraser-manager-config"}
	r := NewReloader(env.Client, record.NewFakeRecorder(100), NewStore(cfg, []byte(good)), key, dataKey, "")
	create := func() *corev1.ConfigMap {
		t.Helper()
		cm := builder.MakeConfigMap(ns, key.Name).Data(dataKey, good).Obj()
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		// A record the collector deleted meanwhile is a conflict: retried,
		// as the work queue would.
		testenv.WaitFor(t, 30*time.Second, "a successful reconcile", func() bool {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			return err == nil
		})
		return cm
	}
	recordOwner := func() (string, bool) {
		rec := &corev1.ConfigMap{}
		err := env.Client.Get(ctx, RecordKey(key), rec)
		if apierrors.IsNotFound(err) || err != nil || len(rec.OwnerReferences) != 1 {
			return "", false
		}
		return string(rec.OwnerReferences[0].UID), true
	}

	// collected waits until the collector has deleted an object owned by
	// an owner that is gone: it runs and has seen everything before.
	collected := func() {
		t.Helper()
		orphan := builder.MakeConfigMap(ns, fmt.Sprintf("orphan-%d", time.Now().UnixNano())).
			ControlledBy(builder.MakeConfigMap(ns, "gone").UID("0b0b0b0b-0000-0000-0000-000000000000").Obj()).Obj()
		if err := env.Client.Create(ctx, orphan); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 2*time.Minute, "the garbage collector to delete an orphan", func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.ConfigMap{}))
		})
	}

	// Deleted for good: the collector takes the record with it.
	stop := startGC()
	cm := create()
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Minute, "the garbage collector to delete the record of a deleted ConfigMap", func() bool {
		_, ok := recordOwner()
		return !ok
	})

	// Deleted and re-created with the same document while the collector
	// is down, so that it sees the record only once the manager has seen
	// the new ConfigMap (the order a busy collector gives too): the record
	// stays.
	stop()
	first := create()
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := create()
	startGC()
	collected()
	if uid, ok := recordOwner(); !ok || uid != string(second.UID) {
		t.Errorf("record owner %q (present %v), want the live ConfigMap %s", uid, ok, second.UID)
	}
}
