package regret

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// The regret-aware policy's knobs.
//
// The thresholds are 75/70: between two hourly runs the disk must not reach
// the kubelet's 85%, since the kubelet's least-recently-used order knows
// nothing of references, registries or returns. At 80/75 the kubelet still
// removed 355 GiB on the CI runners and 10 GiB of CronJob images the
// registry had dropped (15 failed starts).
const (
	RegretHigh         = 75
	RegretLow          = 70
	RegretKeepVersions = 3
	RegretEvery        = time.Hour
)

// RegretAware is the regret-aware policy's settings: disk thresholds below
// the kubelet's, so that Eraser chooses what goes (in expected-cost order)
// before the kubelet's least-recently-used order does; a cool-down for
// images that came back; all but the newest few versions of each
// repository removed.
func RegretAware() retention.Settings {
	keep := RegretKeepVersions
	// BENCH_REGRET_KEEP_VERSIONS tries another keepVersions.
	if v, err := strconv.Atoi(os.Getenv("BENCH_REGRET_KEEP_VERSIONS")); err == nil && v >= 0 {
		keep = v
	}
	return retention.Settings{MinAge: workerdefaults.MinAge, HighThresholdPercent: RegretHigh, LowThresholdPercent: RegretLow,
		CoolDown: workerdefaults.CoolDown, KeepVersions: keep}
}

// RegretAwareDescription says what the regret-aware policy is made of on
// this tree: a part the remover does not act on yet is named as missing.
func RegretAwareDescription() string {
	parts := []string{fmt.Sprintf("kubelet + Eraser every %s with thresholds %d/%d (below the kubelet's, so it acts first)", RegretEvery, RegretHigh, RegretLow),
		"expected-cost order", fmt.Sprintf("cool-down %s doubling per return", workerdefaults.CoolDown), "workload-aware protection"}
	if KeepVersionsInEffect() {
		parts = append(parts, fmt.Sprintf("keepVersions %d", RegretAware().KeepVersions))
	} else {
		parts = append(parts, fmt.Sprintf("keepVersions %d set but not acted on by the remover on this tree", RegretKeepVersions))
	}
	parts = append(parts, fmt.Sprintf("registry check (lookback %s, unreachable: keep)", workerdefaults.RegistryLookback))
	return strings.Join(parts, ", ")
}

// KeepVersionsInEffect asks the remover's plan whether keepVersions
// removes an older version of a repository: the retention package decides
// it, but only once the remover tells it each image's standing.
func KeepVersionsInEffect() bool {
	now := Start
	imgs := []cri.Image{
		{ID: "sha256:" + strings.Repeat("1", 64), Tags: []string{"registry.example/probe/app:v1"}, Digests: []string{"registry.example/probe/app@sha256:" + strings.Repeat("1", 64)}, Size: 1},
		{ID: "sha256:" + strings.Repeat("2", 64), Tags: []string{"registry.example/probe/app:v2"}, Digests: []string{"registry.example/probe/app@sha256:" + strings.Repeat("2", 64)}, Size: 1},
	}
	s := remover.NewSnapshot(imgs, nil, protect.Policy{})
	ages := []remover.Age{{Arrived: now.Add(-48 * time.Hour)}, {Arrived: now.Add(-24 * time.Hour)}}
	rm, _, _ := remover.Plan(s, remover.Targets{Scheduled: true, Collected: []string{imgs[0].ID, imgs[1].ID}},
		remover.Retention{Settings: retention.Settings{KeepVersions: 1}, Now: now, Ages: ages})
	for _, r := range rm {
		if r.Policy == retention.Superseded && r.Image == 0 {
			return true
		}
	}
	return false
}
