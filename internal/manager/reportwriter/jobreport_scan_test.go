package reportwriter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/process/logging"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestReportHasScannerVerdicts: a scheduled run's
// scanner judged three images; the report keeps each verdict with what
// decided it (the findings that matched, bounded; end of life; the error)
// and the DB the node judged with, and kubectl eraser report shows them.
func TestReportHasScannerVerdicts(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	job := builder.MakeImageJob("scanned").Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	// The scanner's log: its result lines as the wire format carries them,
	// with the words the scanner explains each verdict in (the scanner's own
	// tests check that it writes these lines).
	var scannerLog bytes.Buffer
	log := logging.NewWorker(&scannerLog, "info", podspec.ScannerContainer)
	var findings []workerresult.Finding
	for _, id := range []string{"CVE-2099-0001", "CVE-2099-0002", "CVE-2099-0003", "CVE-2099-0004", "CVE-2099-0005"} {
		findings = append(findings, workerresult.Finding{ID: id, Package: "musl", Severity: "CRITICAL", FixedVersion: "1.2.5-r0"})
	}
	result := func(name, id string, why string, s workerresult.Scan) {
		nodereport.Line{Outcome: workerresult.ScanOutcome(s.Verdict), Target: id, Image: id, Names: []string{name}, Detail: why, Scan: &s}.
			Log(ctx, log, slog.LevelInfo)
	}
	result("docker.io/library/alpine:3.15", "sha256:aa",
		"CVE-2099-0001 CRITICAL musl (fixed in 1.2.5-r0), CVE-2099-0002 CRITICAL musl (fixed in 1.2.5-r0), CVE-2099-0003 CRITICAL musl (fixed in 1.2.5-r0) (+4 more)",
		workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: findings, MoreFindings: 2})
	result("docker.io/library/debian:9", "sha256:bb", "its OS is end of life; kept (deleteEOLImages is off)",
		workerresult.Scan{Verdict: "end-of-life", EndOfLife: true})
	result("docker.io/library/nginx:1.27", "sha256:cc", "no finding matched the policy", workerresult.Scan{Verdict: "clean"})
	result("docker.io/library/broken:1", "sha256:dd", "reading the image config: EOF; kept", workerresult.Scan{Verdict: "failed"})
	built := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	pod := jobPod(job, "n1")
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: podspec.ScannerContainer, Image: "scanner"})
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	scanner := workerresult.Summary{Component: podspec.ScannerContainer, Counts: map[string]int{"vulnerable": 1, "end-of-life": 1, "clean": 1, "failed": 1, workerresult.CountToRemove: 1},
		ScanDB: &workerresult.ScanDB{Version: 2, UpdatedAt: &built}}
	remover := workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 1}}
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: podspec.ScannerContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(scanner.Encode())}}},
		{Name: podspec.RemoverContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(remover.Encode())}}},
	}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	job.Status.Phase, job.Status.Desired = eraserv1.PhaseCompleted, 1
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	src := logs{
		pod.Name + "/" + podspec.ScannerContainer: scannerLog.String(),
		pod.Name + "/remover":                     line("removed", "docker.io/library/alpine:3.15", "sha256:aa", "Vulnerable", 100, ""),
	}
	got := collect(t, ctx, NewReconciler(env.Client, env.Client, src, clk, Options{Namespace: ns}), clk, job, 10)["n1"]

	if db := got.ScanDB; db == nil || db.Version != 2 || db.UpdatedAt == nil || !db.UpdatedAt.Equal(built) {
		t.Errorf("node's DB %+v, want schema 2 built %s", db, built)
	}
	if got.Counts["vulnerable"] != 1 || got.Counts["scan failed"] != 1 || got.Counts["removed"] != 1 || got.Counts[workerresult.CountToRemove] != 0 {
		t.Errorf("counts %v: want the scanner's verdicts beside the remover's outcomes", got.Counts)
	}
	verdicts := map[string]*workerresult.Scan{}
	for _, e := range got.Entries {
		if e.Scan != nil {
			verdicts[e.Image] = e.Scan
		}
	}
	if v := verdicts["docker.io/library/alpine:3.15"]; v == nil || v.Verdict != "vulnerable" || len(v.Findings) != workerresult.MaxFindings || v.MoreFindings != 2 ||
		v.Findings[0] != (workerresult.Finding{ID: "CVE-2099-0001", Severity: "CRITICAL", Package: "musl", FixedVersion: "1.2.5-r0"}) {
		t.Errorf("vulnerable verdict %+v", v)
	}
	if v := verdicts["docker.io/library/debian:9"]; v == nil || v.Verdict != "end-of-life" || !v.EndOfLife || v.Remove {
		t.Errorf("end-of-life verdict %+v", v)
	}
	if v := verdicts["docker.io/library/nginx:1.27"]; v == nil || v.Verdict != "clean" {
		t.Errorf("clean verdict %+v", v)
	}
	if v := verdicts["docker.io/library/broken:1"]; v == nil || v.Verdict != "failed" {
		t.Errorf("failed verdict %+v", v)
	}

	out, err := pluginRunner(t)("report", "imagejob/"+job.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vulnerability DB: schema 2, built 2026-11-30T06:00:00Z (1 nodes)",
		"vulnerable", "CVE-2099-0001 CRITICAL musl (fixed in 1.2.5-r0)", "(+4 more)", "end-of-life", "deleteEOLImages is off",
		"clean", "scan failed", "reading the image config: EOF; kept"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl eraser report lacks %q:\n%s", want, out)
		}
	}
}
