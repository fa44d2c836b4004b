//go:build linux

package kubelet

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// crioImageVolume: a pod on the CRI-O node mounts an image as a volume
// (volumes[].image); an ImageList naming that image keeps it, and the run's
// report says it is in use because the pod's container mounts it.
func crioImageVolume(t *testing.T) {
	app, data := crioImage("crio-volume-app"), crioImage("crio-volume-data")
	pullToCRIO(t, crioNodes, seedImages(t, app, data)...)
	node := crioNodes[0]
	pod := podOn(node.Name, "crio-mounts-image", app)
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		Image: &corev1.ImageVolumeSource{Reference: data, PullPolicy: corev1.PullNever}}}}
	startPod(t, pod)
	logImageMounts(t, node, "main")

	var dataID string
	imgs, err := criClient(t, node).ListImages(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if slices.Contains(img.Tags, data) {
			dataID = img.ID
		}
	}
	if dataID == "" {
		t.Fatalf("%s: no image %s", node.Name, data)
	}

	setConfig(t, forCRIO(keepReportConfig(baseConfig)))
	t.Cleanup(func() { setConfig(t, forCRIO(baseConfig)) })
	il := runImageList(t, "crio-image-volume", data)
	if r := il.Status.Results; r == nil || r.InUse != 1 || r.Removed != 0 || il.Status.Failed != 0 {
		t.Errorf("status %+v: want %s kept in use on %s, nothing removed, no node failed", il.Status, data, node.Name)
	}
	job := jobWithReport(t, il.Status.Job)
	found := false
	for _, n := range jobNodes(t, job) {
		if n.Name != node.Name {
			continue
		}
		for _, e := range n.Entries {
			if e.ID != dataID {
				continue
			}
			found = true
			if want := "container main mounts it as an image volume"; e.Outcome != "in use" || e.Detail != want {
				t.Errorf("%s: the report says %q (%s) of %s; want %q (%s)", node.Name, e.Outcome, e.Detail, data, "in use", want)
			}
		}
	}
	if !found {
		t.Errorf("job %s: no report entry of %s (%s) on %s", job.Name, data, dataID, node.Name)
	}
	expectImages(t, node, []string{app, data}, nil)
	deleteJobs(t)
}

// logImageMounts logs what the node's runtime shows of the image mounts of
// its containers named name: which CRI fields it fills, as the kubelet
// passed them.
func logImageMounts(t *testing.T, n Node, name string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+n.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx := context.Background()
	list, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.GetContainers() {
		if c.GetMetadata().GetName() != name {
			continue
		}
		st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		var shown []string
		for _, m := range st.GetStatus().GetMounts() {
			if m.GetImage() != nil {
				shown = append(shown, m.String())
			}
		}
		t.Logf("%s: container %s's image mounts as its status shows them: %s", n.Name, c.GetId(), strings.Join(shown, "; "))
	}
}
