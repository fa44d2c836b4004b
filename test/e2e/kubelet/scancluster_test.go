//go:build linux

package kubelet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

// scheduledScanOneDBPerCluster: scheduled runs with the Trivy scanner on
// every node, whose vulnerability DB comes from a registry standing for
// ghcr.io. The manager downloads the DB's archive once for the cluster and
// hands it to each node's scanner; each clean image the nodes share is
// scanned on one node and judged by that verdict on the others, the
// vulnerable one on two (the second confirming), each node's own image on
// that node; the vulnerable image goes, the fixed ones stay. The next run
// downloads nothing, and scans again, once each, the images whose verdicts
// stood on one node's word. The next one outlives the manager's pod, replaced
// mid-run (leaderReplacedMidRun). Then the repository refuses the download
// for its rate limit: the run says why and removes nothing on the
// scanner's account.
// Each run is asked for (eraser.sh/run-now) rather than waited for.
func scheduledScanOneDBPerCluster(t *testing.T) {
	vulnerable, fixed := testImage("vulnerable"), testImage("fixed")
	seedAlpine(t, cluster.Nodes, map[string]string{vulnerable: "1.2.4-r2", fixed: "1.2.5-r0"})
	// And one image on each node alone, which only that node can judge.
	only := map[string]string{}
	for _, n := range cluster.Nodes {
		only[n.Name] = testImage("only-on-" + n.Name)
		seedAlpine(t, []Node{n}, map[string]string{only[n.Name]: "1.2.5-r0"})
	}
	t.Cleanup(func() {
		for _, n := range cluster.Nodes {
			removeImages(t, n, only[n.Name])
		}
	})
	seeded := time.Now()
	afterMinAge(seeded)
	db := serveDB(t)
	setConfig(t, onRequest(servedScannerConfig(db.repo)))
	t.Cleanup(func() { setConfig(t, baseConfig) })
	runScheduledNow(t)

	goneFromEveryNode(t, 4*time.Minute, "the scanned run to remove the vulnerable image from every node", vulnerable)
	for _, n := range cluster.Nodes {
		expectImages(t, n, []string{fixed, only[n.Name], eraserImage("eraser-trivy-scanner"), testcontainerd.SandboxImage}, nil)
	}
	// The manager records what each node's scanner handed over, and its
	// one download of the DB.
	eventually(t, time.Minute, "every node's vulnerable_images_run_total and the DB's download on the manager's metrics endpoint", func() (bool, string) {
		body, err := managerMetrics(testCtx(t))
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, n := range cluster.Nodes {
			if !strings.Contains(body, `vulnerable_images_run_total{node_name="`+n.Name+`"}`) {
				missing = append(missing, n.Name)
			}
		}
		if !strings.Contains(body, `eraser_scan_db_fetches_total{result="downloaded"} 1`) {
			missing = append(missing, "one download of the DB")
		}
		return len(missing) == 0, fmt.Sprintf("no series for %v", missing)
	})
	first := scanVerdictsInReport(t, cluster.Nodes, vulnerable, fixed, true)
	scannedWhereAlone(t, first, only)
	n := db.archives(t)
	if n != 1 {
		t.Errorf("the DB's archive was downloaded %d times, want once for the cluster", n)
	}
	t.Logf("run %s: every node judged, each clean image scanned on one node and the vulnerable one on two, the DB's archive downloaded %d time(s)", first.Name, n)

	nextRunForgetsUnconfirmed(t, first)
	if n := db.archives(t); n != 1 {
		t.Errorf("after the next run, the DB's archive was downloaded %d times, want once", n)
	}

	leaderReplacedMidRun(t, db)
	rateLimitedRunRemovesNothing(t, db)
	endScannedRuns(t, baseConfig)
	expectJobsCleanedUp(t)
}

// onRequest keeps the runs' jobs and their reports (for the scanner's
// verdicts), lets the images seeded a moment ago be removed, and leaves the
// scheduled runs to requests (runScheduledNow): none starts with the
// configuration (a run going would refuse the request), and the next one by
// the clock is an hour after the last.
func onRequest(config string) string {
	config = strings.Replace(config, "repeatInterval: 1m", "repeatInterval: 1h", 1)
	config = strings.Replace(config, "beginImmediately: true", "beginImmediately: false", 1)
	return strings.Replace(withRetention(config, removable), "keepReportFor: 0s", "keepReportFor: 1h", 1)
}

// runScheduledNow asks for a scheduled run now, with the eraser.sh/run-now
// annotation, and returns its job once it exists. No scheduled run may be
// running: the manager would refuse the request.
func runScheduledNow(t *testing.T) *eraserv1.ImageJob {
	t.Helper()
	ctx := testCtx(t)
	before, err := scheduledJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	had := map[string]bool{}
	for _, j := range before {
		had[j.Name] = true
	}
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: schedtimes.StateName}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+eraserv1.AnnotationRunNow+`":"true"}}}`))
	if err := kube.Patch(ctx, state, patch); err != nil {
		t.Fatal(err)
	}
	var job *eraserv1.ImageJob
	eventually(t, time.Minute, "the requested scheduled run's job", func() (bool, string) {
		jobs, err := scheduledJobs(ctx)
		if err != nil {
			return false, err.Error()
		}
		for i := range jobs {
			if !had[jobs[i].Name] {
				job = &jobs[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d scheduled jobs, none new", len(jobs))
	})
	return job
}

// nextRunForgetsUnconfirmed waits for the scheduled run after first and
// checks that the verdicts first made on one node's word (the clean
// images') were forgotten when it ended: each such image is scanned again,
// on exactly one node, and the other nodes take that verdict.
func nextRunForgetsUnconfirmed(t *testing.T, first *eraserv1.ImageJob) {
	t.Helper()
	ctx := testCtx(t)
	before, err := reportNodes(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	clean := map[string]bool{}
	for _, n := range before {
		for _, e := range n.Entries {
			if e.Scan != nil && e.Scan.Verdict == "clean" {
				clean[e.Image] = true
			}
		}
	}
	runScheduledNow(t)
	eventually(t, 4*time.Minute, "the next scheduled run's complete report, with each image first judged clean scanned again on one node", func() (bool, string) {
		jobs, err := scheduledJobs(ctx)
		if err != nil {
			return false, err.Error()
		}
		var why []string
		for i := range jobs {
			j := &jobs[i]
			if !j.CreationTimestamp.After(first.CreationTimestamp.Time) {
				continue
			}
			if rep := j.Status.Report; rep == nil || !rep.Complete {
				why = append(why, j.Name+": report not complete")
				continue
			}
			nodes, err := reportNodes(ctx, j)
			if err != nil {
				return false, err.Error()
			}
			scannedOn, judged := map[string]int{}, map[string]int{}
			for _, n := range nodes {
				for _, e := range n.Entries {
					if e.Scan == nil || !clean[e.Image] {
						continue
					}
					judged[e.Image]++
					if e.Scan.From == nil {
						scannedOn[e.Image]++
					}
				}
			}
			if len(judged) == 0 {
				why = append(why, j.Name+": no verdict on the first run's clean images")
				continue
			}
			for image := range judged {
				if scannedOn[image] != 1 {
					t.Errorf("run %s scanned %s on %d nodes, want 1: run %s's verdict, made on one node's word, should be forgotten and the image scanned once again", j.Name, image, scannedOn[image], first.Name)
				}
			}
			t.Logf("run %s: %d clean images of the first run scanned again once each", j.Name, len(judged))
			return true, ""
		}
		return false, fmt.Sprintf("%s; %v", "no later run yet", why)
	})
}

// rateLimitedRunRemovesNothing seeds a vulnerable image, points the scanner
// at a repository that answers 429 and asks for a run: it has no DB, its
// VulnerabilityDB condition and an Event say the repository refused the
// download for its rate limit, and the image stays on every node.
func rateLimitedRunRemovesNothing(t *testing.T, db *dbRegistry) {
	t.Helper()
	ctx := testCtx(t)
	vulnerable := testImage("vulnerable-unjudged")
	seedAlpine(t, cluster.Nodes, map[string]string{vulnerable: "1.2.4-r2"})
	t.Cleanup(func() {
		for _, n := range cluster.Nodes {
			removeImages(t, n, vulnerable)
		}
	})
	afterMinAge(time.Now())
	setConfig(t, onRequest(servedScannerConfig(db.refused)))
	requested := runScheduledNow(t)

	var job *eraserv1.ImageJob
	eventually(t, 4*time.Minute, "the rate-limited run "+requested.Name+" to end", func() (bool, string) {
		j := &eraserv1.ImageJob{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(requested), j); err != nil {
			return false, err.Error()
		}
		if j.Status.Phase != eraserv1.PhaseCompleted && j.Status.Phase != eraserv1.PhaseFailed {
			return false, fmt.Sprintf("phase %q", j.Status.Phase)
		}
		job = j
		return true, ""
	})
	c := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionVulnerabilityDB)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RateLimited" || !strings.Contains(c.Message, db.refused) {
		t.Errorf("run %s: VulnerabilityDB condition %+v; want False, RateLimited, naming %s", job.Name, c, db.refused)
	} else {
		t.Logf("run %s (%s): %s: %s", job.Name, job.Status.Phase, c.Reason, c.Message)
	}
	events, err := clientset.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": job.Name, "reason": eraserv1.ReasonVulnerabilityDBUnavailable}.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Errorf("no %s Event on run %s", eraserv1.ReasonVulnerabilityDBUnavailable, job.Name)
	}
	for _, n := range cluster.Nodes {
		expectImages(t, n, []string{vulnerable}, nil)
	}
}

// scheduledJobs lists the scheduled runs' jobs.
func scheduledJobs(ctx context.Context) ([]eraserv1.ImageJob, error) {
	var jobs eraserv1.ImageJobList
	err := kube.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector})
	return jobs.Items, err
}

// scannedWhereAlone checks, in a run's report, that each node's own image
// (only, by node) was scanned on that node and judged clean, and that no
// other node judged it.
func scannedWhereAlone(t *testing.T, job *eraserv1.ImageJob, only map[string]string) {
	t.Helper()
	nodes, err := reportNodes(testCtx(t), job)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for node, image := range only {
		owner[image] = node
	}
	for _, n := range nodes {
		for _, e := range n.Entries {
			node, ok := owner[e.Image]
			if !ok || e.Scan == nil {
				continue
			}
			switch {
			case node != n.Name:
				t.Errorf("node %s judged %s, which only %s holds", n.Name, e.Image, node)
			case e.Scan.From != nil || e.Scan.Verdict != "clean":
				t.Errorf("node %s: %s judged %q, shared from %+v; want scanned there, clean", n.Name, e.Image, e.Scan.Verdict, e.Scan.From)
			default:
				delete(owner, e.Image)
			}
		}
	}
	for image, node := range owner {
		t.Errorf("run %s: no verdict on %s, which only %s holds", job.Name, image, node)
	}
}
