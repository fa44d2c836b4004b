package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestScannerVolumesAtLoad: a scanner volume that takes a name or a mount
// path of the worker pod's own is refused when the configuration is read,
// naming the field: the API server would refuse every scheduled pod.
func TestScannerVolumesAtLoad(t *testing.T) {
	const own = "the name of a volume used by the worker pod itself"
	const mounted = "a path the worker pod itself mounts in the scanner"
	vol := func(name, path string) string { return "{name: " + name + ", hostPath: {path: " + path + "}}" }
	cases := map[string]struct {
		volumes string
		want    []string
	}{
		"none":                    {volumes: "[]"},
		"a pre-seeded DB":         {volumes: "[" + vol("trivy-db", "/var/lib/trivy") + "]"},
		"two of their own":        {volumes: "[" + vol("a", "/a") + ", " + vol("b", "/b") + "]"},
		"exclude alone is a name": {volumes: "[" + vol("exclude", "/a") + "]"},
		"shared-data": {volumes: "[" + vol("shared-data", "/a") + "]",
			want: []string{`components.scanner.volumes[0].name: Invalid value: "shared-data": ` + own}},
		"eraser-state second": {volumes: "[" + vol("a", "/a") + ", " + vol("eraser-state", "/b") + "]",
			want: []string{`components.scanner.volumes[1].name: Invalid value: "eraser-state": ` + own}},
		"an exclusion list's name": {volumes: "[" + vol("exclude-mine", "/a") + "]",
			want: []string{`components.scanner.volumes[0].name: Invalid value: "exclude-mine": names beginning with exclude- are the exclusion lists' volumes, used by the worker pod itself`}},
		"a name twice": {volumes: "[" + vol("a", "/a") + ", " + vol("a", "/b") + "]",
			want: []string{`components.scanner.volumes[1].name: Duplicate value: "a"`}},
		"a path twice, spelt apart": {volumes: "[" + vol("a", "/data") + ", " + vol("b", "/data/") + "]",
			want: []string{`components.scanner.volumes[1].hostPath.path: Invalid value: "/data/": another scanner volume is mounted at this path, and a container mounts one volume at a path`}},
		"/tmp": {volumes: "[" + vol("a", "/tmp") + "]",
			want: []string{`components.scanner.volumes[0].hostPath.path: Invalid value: "/tmp": ` + mounted}},
		"the runtime socket": {volumes: "[" + vol("a", podpaths.CRISocket) + "]",
			want: []string{`components.scanner.volumes[0].hostPath.path: Invalid value: "/run/cri/cri.sock": ` + mounted}},
		"inside the exclusions": {volumes: "[" + vol("a", "/run/eraser.sh/exclusions/exclude-x") + "]",
			want: []string{`components.scanner.volumes[0].hostPath.path: Invalid value: "/run/eraser.sh/exclusions/exclude-x": inside /run/eraser.sh/exclusions, where the worker pod itself mounts the exclusion lists`}},
		// The names are reserved whether or not the volume is mounted.
		"not a hostPath": {volumes: "[{name: imagefs, emptyDir: {}}]",
			want: []string{`components.scanner.volumes[0].name: Invalid value: "imagefs": ` + own}},
	}
	for _, name := range podpaths.PodVolumes() {
		cases["every own name: "+name] = struct {
			volumes string
			want    []string
		}{volumes: "[" + vol(name, "/a") + "]", want: []string{`components.scanner.volumes[0].name: Invalid value: "` + name + `": ` + own}}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The scanner is off: a configuration is refused before the day
			// it is turned on, not on that day.
			doc := "apiVersion: eraser.sh/v1alpha3\ncomponents: {scanner: {enabled: false, volumes: " + tc.volumes + "}}\n"
			_, _, err := Parse([]byte(doc))
			var got []string
			if err != nil {
				var agg utilerrors.Aggregate
				if !errors.As(err, &agg) {
					t.Fatalf("error %v is not a list of field errors", err)
				}
				for _, e := range agg.Errors() {
					got = append(got, e.Error())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
