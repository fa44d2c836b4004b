package imagejob

import (
	"testing"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/builder"
)

// A finished job waits for its owner to record it before cleanup, unless
// no owner is left to: an ImageList's job orphaned by --cascade=orphan.
func TestWaitsForRecording(t *testing.T) {
	listJob := func() *builder.ImageJobWrapper {
		return builder.MakeImageJob("j").Label(eraserv1.LabelJobOwner, eraserv1.JobOwnerImageList)
	}
	cases := map[string]struct {
		job  *eraserv1.ImageJob
		want bool
	}{
		"ImageList's, unrecorded":     {job: listJob().ControlledBy("l", "uid-1").Obj(), want: true},
		"ImageList's, recorded":       {job: listJob().ControlledBy("l", "uid-1").Annotation(eraserv1.AnnotationRecorded, "true").Obj()},
		"ImageList's, orphaned":       {job: listJob().Obj()},
		"scheduled, unrecorded":       {job: builder.MakeImageJob("s").Label(eraserv1.LabelJobOwner, eraserv1.JobOwnerCollector).Obj(), want: true},
		"scheduled, recorded":         {job: builder.MakeImageJob("s").Label(eraserv1.LabelJobOwner, eraserv1.JobOwnerCollector).Annotation(eraserv1.AnnotationRecorded, "true").Obj()},
		"created by hand, no manager": {job: builder.MakeImageJob("h").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := waitsForRecording(tc.job); got != tc.want {
				t.Errorf("waitsForRecording = %v, want %v", got, tc.want)
			}
		})
	}
}
