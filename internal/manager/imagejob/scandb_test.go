package imagejob

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/scandb"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// mirror is the leader's DB copy as a test sets it: state for the
// repository's current DB, archives by digest.
type mirror struct {
	mu       sync.Mutex
	state    scandb.State
	asked    []string
	archives map[string]scandb.State
	// askedArchives are the Archive calls, "repository@digest".
	askedArchives []string
}

func (m *mirror) Archive(repo, digest string) scandb.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.askedArchives = append(m.askedArchives, scanshare.DBAnnotation(repo, digest))
	return m.archives[digest]
}

func (m *mirror) Get(repo string) scandb.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, repo)
	return m.state
}

func (m *mirror) set(s scandb.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = s
}

const scanningConfig = `apiVersion: eraser.sh/v1alpha3
manager: {retention: {protectReferenced: false}}
components:
  collector: {enabled: true}
  scanner:
    enabled: true
    config: |
      dbRepo: registry.example/trivy-db
      dbDownloadTimeout: 5m
`

func scannerEnv(pod corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range pod.Spec.Containers {
		if c.Name != podspec.ScannerContainer {
			continue
		}
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "ERASER_SCAN_DB") {
				out[e.Name] = e.Value
			}
		}
	}
	return out
}

// TestRunDB: a scanning run's first wave waits for the leader's first DB
// fetch (bounded by dbDownloadTimeout), and every pod of the run names the
// same archive; a run whose fetch failed creates its pods all the same,
// each told why it has no DB, with an Event.
func TestRunDB(t *testing.T) {
	db := &scanshare.DB{Digest: "sha256:" + strings.Repeat("a", 64), Size: 40 << 20, Repo: "registry.example/trivy-db:2"}
	cases := map[string]struct {
		// states are the mirror's answers, one per pass.
		states []scandb.State
		// wait moves the clock before the last pass.
		wait      time.Duration
		wantEnv   map[string]string
		wantEvent bool
		// wantDB is the job's VulnerabilityDB condition: status/reason.
		wantDB string
	}{
		"the copy is there": {
			states:  []scandb.State{{DB: db}},
			wantEnv: map[string]string{scanshare.EnvDB: db.Digest, scanshare.EnvDBSize: strconv.FormatInt(db.Size, 10)},
			wantDB:  "True/Fetched",
		},
		"the first fetch is waited for": {
			states:  []scandb.State{{Fetching: true}, {DB: db}},
			wantEnv: map[string]string{scanshare.EnvDB: db.Digest, scanshare.EnvDBSize: strconv.FormatInt(db.Size, 10)},
			wantDB:  "True/Fetched",
		},
		"rate limited": {
			states:    []scandb.State{{RateLimited: true, Err: errors.New("429 Too Many Requests")}},
			wantEnv:   map[string]string{scanshare.EnvDBUnavailable: "the vulnerability DB's repository registry.example/trivy-db refused the download for its rate limit (retried with backoff for the next runs): 429 Too Many Requests"},
			wantEvent: true,
			wantDB:    "False/RateLimited",
		},
		"a fetch that outlasts dbDownloadTimeout": {
			states:    []scandb.State{{Fetching: true}, {Fetching: true}},
			wait:      6 * time.Minute,
			wantEnv:   map[string]string{scanshare.EnvDBUnavailable: "no vulnerability DB from registry.example/trivy-db within dbDownloadTimeout 5m0s"},
			wantEvent: true,
			wantDB:    "False/FetchTimedOut",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := &mirror{}
			f.r = f.newReconciler(func(o *Options) { o.ScanService, o.ScanDBs = "http://10.0.0.5:8890", m })
			f.manyNodes(2, "db")
			f.job("scan", podspec.KindCollector, scanningConfig)
			// The first pass starts the run; the waves follow.
			m.set(tc.states[0])
			f.settle()
			_, err := f.r.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "scan"}})
			if err != nil && !errors.Is(err, errWaitingForDB) {
				t.Fatalf("first pass: %v", err)
			}
			for i, s := range tc.states {
				m.set(s)
				if i == len(tc.states)-1 {
					f.clock.Step(tc.wait)
				}
				f.clock.Step(passInterval)
				f.settle()
				_, err := f.r.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "scan"}})
				if s.Fetching && i < len(tc.states)-1 {
					if !errors.Is(err, errWaitingForDB) || len(f.pods("scan")) != 0 {
						t.Fatalf("pass %d while the fetch runs: %v, %d pods; want a wait and no pod", i, err, len(f.pods("scan")))
					}
					continue
				}
				if err != nil {
					t.Fatalf("pass %d: %v", i, err)
				}
			}
			pods := f.pods("scan")
			if len(pods) != 2 {
				t.Fatalf("%d pods, want 2; job status %+v", len(pods), f.get("scan").Status)
			}
			for _, p := range pods {
				if got := scannerEnv(p); !cmp.Equal(got, tc.wantEnv) {
					t.Errorf("pod %s: scanner's DB env %v, want %v", p.Name, got, tc.wantEnv)
				}
			}
			if tc.wantEvent {
				f.expectEvent(eraserv1.ReasonVulnerabilityDBUnavailable)
			}
			got := "none"
			if c := meta.FindStatusCondition(f.get("scan").Status.Conditions, eraserv1.ConditionVulnerabilityDB); c != nil {
				got = string(c.Status) + "/" + c.Reason
			}
			if got != tc.wantDB {
				t.Errorf("VulnerabilityDB condition %s, want %s", got, tc.wantDB)
			}
			for _, repo := range m.asked {
				if repo != "registry.example/trivy-db" {
					t.Errorf("asked the mirror for %q", repo)
				}
			}
		})
	}
}

// TestRunKeepsItsDB: a new leader, whose repository has a newer DB since
// the run began, gives the run's later waves the archive its first wave
// named (read from that wave's pods), fetched by digest, so that the whole
// run judges with one DB.
func TestRunKeepsItsDB(t *testing.T) {
	first := &scanshare.DB{Digest: "sha256:" + strings.Repeat("a", 64), Size: 40 << 20, Repo: "registry.example/trivy-db:2",
		Schema: 2, Built: time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)}
	newer := &scanshare.DB{Digest: "sha256:" + strings.Repeat("b", 64), Size: 40 << 20, Repo: "registry.example/trivy-db:2"}
	f := newFixture(t)
	leader := func(m *mirror) *Reconciler {
		return f.newReconciler(func(o *Options) { o.ScanService, o.ScanDBs = "http://10.0.0.5:8890", m })
	}
	f.r = leader(&mirror{state: scandb.State{DB: first}})
	f.manyNodes(2, "keep")
	f.job("scan", podspec.KindCollector, strings.Replace(scanningConfig, "manager: {", "manager: {imageJob: {maxConcurrentNodes: 1}, ", 1))
	f.reconcile("scan")
	f.reconcile("scan")
	pods := f.pods("scan")
	if len(pods) != 1 {
		t.Fatalf("%d pods in the first wave, want 1", len(pods))
	}
	if got := pods[0].Annotations[scanshare.AnnotationDB]; got != scanshare.DBAnnotation(first.Repo, first.Digest) {
		t.Fatalf("the first wave's pod names DB %q", got)
	}
	f.finishPod(&pods[0], corev1.PodSucceeded, removed(0, 0))

	// The next leader: its repository's DB is newer, the run's archive
	// comes by digest.
	m := &mirror{state: scandb.State{DB: newer}, archives: map[string]scandb.State{first.Digest: {DB: first}}}
	f.r = leader(m)
	f.reconcile("scan")
	f.reconcile("scan")
	pods = f.pods("scan")
	if len(pods) != 2 {
		t.Fatalf("%d pods after the second wave, want 2", len(pods))
	}
	for _, p := range pods {
		if got := scannerEnv(p); got[scanshare.EnvDB] != first.Digest {
			t.Errorf("pod %s: the scanner's DB %v, want the run's %s", p.Name, got, first.Digest)
		}
	}
	if diff := cmp.Diff([]string{scanshare.DBAnnotation(first.Repo, first.Digest)}, slices.Compact(m.askedArchives)); diff != "" {
		t.Errorf("archives asked of the new leader's copy (-want +got):\n%s", diff)
	}
}
