package v1

// Labels and annotations the manager puts on ImageJobs.
const (
	// LabelJobOwner says which controller made a job, with upstream's values.
	LabelJobOwner = "eraser.sh/job-owner"
	// JobOwnerImageList marks jobs run for an ImageList.
	JobOwnerImageList = "imagelist-controller"
	// JobOwnerCollector marks scheduled (collector) jobs.
	JobOwnerCollector = "imagecollector"

	// LabelImageList names the ImageList a job runs for (shortened, with a hash
	// of the whole name, beyond the 63 characters a label value may have).
	LabelImageList = "eraser.sh/imagelist"
	// AnnotationGeneration is the ImageList generation a job applies.
	AnnotationGeneration = "eraser.sh/imagelist-generation"
	// AnnotationDryRun marks a job whose removers remove nothing.
	AnnotationDryRun = "eraser.sh/dry-run"
	// AnnotationRecorded is set once the ImageList has recorded the job's
	// results; only then may the finished job be deleted.
	AnnotationRecorded = "eraser.sh/results-recorded"
	// AnnotationCatchUp marks a scheduled job that runs only on the nodes
	// the last scheduled run missed; it does not move the schedule's rhythm.
	AnnotationCatchUp = "eraser.sh/catch-up"

	// LabelReport marks a ConfigMap shard of a job's per-node report with
	// the job's name (shortened like any label value).
	LabelReport = "eraser.sh/report"
	// LabelReferences marks the ConfigMaps of a job's cluster set of
	// referenced images (up to 900 KiB each): written and mounted, never
	// held in the manager's cache.
	LabelReferences = "eraser.sh/references"
)

// AnnotationRunNow asks the manager for a run now: on an ImageList, a new
// job for its current spec; on the ConfigMap eraser-schedule-state, a
// scheduled run. The manager removes it once it has started the run or
// refused it, so each time it is set counts once; its value is free.
const AnnotationRunNow = "eraser.sh/run-now"
