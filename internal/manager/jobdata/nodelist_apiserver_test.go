package jobdata

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// TestNodesOnAPIServer: node lists of every form are accepted by a real API
// server and read back whole: plain, compressed (10,000 long names) and
// split (10,000 names with nothing to compress, each part under the
// object limit); DeleteNodes removes a list with its parts.
func TestNodesOnAPIServer(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := "jobdata-nodes"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		n     Nodes
		parts int
	}{
		"plain":      {n: listOf([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})},
		"compressed": {n: listOf(longNames(10000))},
		"split":      {n: listOf(randomNames(10000)), parts: 2},
	}
	for name, tc := range cases {
		job := builder.MakeImageJob("nodes-" + name).Obj()
		if err := env.Client.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		if err := CreateNodes(ctx, env.Client, ns, job, tc.n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := GetNodes(ctx, env.Client, ns, job)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(tc.n, got); diff != "" {
			t.Errorf("%s: read back (-want +got):\n%s", name, diff)
		}
		var list corev1.ConfigMapList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		parts := 0
		for _, cm := range list.Items {
			if cm.BinaryData[keyPart] != nil && metav1.IsControlledBy(&cm, job) {
				parts++
			}
		}
		if parts < tc.parts || (tc.parts == 0 && parts != 0) {
			t.Errorf("%s: %d parts, want %d", name, parts, tc.parts)
		}
		if err := DeleteNodes(ctx, env.Client, ns, job); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k := range parts + 1 {
			key := client.ObjectKey{Namespace: ns, Name: NodesName(job.Name)}
			if k > 0 {
				key.Name = NodesPartName(job.Name, k)
			}
			if err := env.Client.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: %s after DeleteNodes: %v", name, key.Name, err)
			}
		}
	}
}
