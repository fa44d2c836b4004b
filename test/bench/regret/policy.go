package regret

import (
	"time"

	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// RegretAwareDescription says what the regret-aware policy is made of, as
// far as the packages on this tree have it.
const RegretAwareDescription = "kubelet + Eraser hourly with thresholds 80/75 (below the kubelet's, so it acts first), workload-aware protection"

// RegretAware is the regret-aware policy's settings: disk thresholds below
// the kubelet's, so that Eraser chooses what goes before the kubelet's
// least-recently-used order does.
func RegretAware() retention.Settings {
	return retention.Settings{MinAge: workerdefaults.MinAge, HighThresholdPercent: 80, LowThresholdPercent: 75}
}

var _ = time.Hour
