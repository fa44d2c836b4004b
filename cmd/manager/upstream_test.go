package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestPullSecretNamesFromEnvironment: upstream's ERASER_PULL_SECRET_NAMES on
// the real manager reaches the worker pods it creates, after
// manager.pullSecrets.
func TestPullSecretNamesFromEnvironment(t *testing.T) {
	testenv.Require(t)
	const ns = "eraser-pullsecrets"
	ctx := context.Background()
	ensureNamespace(t, ns)
	node := builder.MakeNode("pullsecrets-a").Obj()
	list := builder.MakeImageList("pullsecrets").Images("docker.io/library/alpine:3.7.3").Obj()
	for _, o := range []client.Object{node, list} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, o) })
	}
	doc := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager: {pullSecrets: [regcred]}\n"
	m := managerIn(ns)
	m.Env = []string{"ERASER_PULL_SECRET_NAMES=mirror-cred, backup-cred"}
	m.Start(t, doc, "--leader-elect=false")

	var pods corev1.PodList
	testenv.WaitFor(t, 60*time.Second, "the worker pod", func() bool {
		return env.Client.List(ctx, &pods, client.InNamespace(ns)) == nil && len(pods.Items) == 1
	})
	var got []string
	for _, s := range pods.Items[0].Spec.ImagePullSecrets {
		got = append(got, s.Name)
	}
	if want := []string{"regcred", "mirror-cred", "backup-cred"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("image pull secrets %q, want %q", got, want)
	}
}

// TestScannerRuntimeRefusedOnEdit: turning on scanning on cri-dockerd, where
// the Trivy scanner cannot read images, is refused by hot reload with an
// InvalidConfig Event that says why and what to do; the running
// configuration stays.
func TestScannerRuntimeRefusedOnEdit(t *testing.T) {
	testenv.Require(t)
	const ns = "eraser-dockershim"
	ctx := context.Background()
	ensureNamespace(t, ns)
	good := "apiVersion: eraser.sh/v1alpha2\nkind: EraserConfig\nmanager: {runtime: dockershim}\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: good}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	probe := testenv.FreePort(t)
	managerIn(ns).Start(t, good, "--leader-elect=false", "--health-probe-bind-address="+probe)
	testenv.WaitFor(t, 60*time.Second, "readiness", func() bool {
		code, _, err := get("http://" + probe + "/readyz")
		return err == nil && code == 200
	})

	cm.Data[config.ConfigKey] = good + "components: {collector: {enabled: true}, scanner: {enabled: true}}\n"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	var msg string
	testenv.WaitFor(t, 30*time.Second, "an InvalidConfig Event", func() bool {
		var events corev1.EventList
		if env.Client.List(ctx, &events, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == cm.Name && e.Reason == "InvalidConfig" && e.Type == corev1.EventTypeWarning {
				msg = e.Message
				return true
			}
		}
		return false
	})
	for _, want := range []string{"components.scanner.enabled", "containerd and CRI-O only", "dockershim", "components.scanner.enabled: false"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the Event does not say %q: %s", want, msg)
		}
	}
}
