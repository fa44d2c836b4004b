// A run's place in the node queue (nodequeue), from its job.

package wave

import (
	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// RankOf is the job's place among the runs waiting for a node: a scheduled
// run (the collector's) after the ImageLists', then by creation.
func RankOf(job *eraserv1.ImageJob, kind podspec.Kind) nodequeue.Rank {
	return nodequeue.Rank{Scheduled: kind == podspec.KindCollector, Created: job.CreationTimestamp.Time, Name: job.Name}
}
