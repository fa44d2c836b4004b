// The skew to the API server's clock, measured on the pods this process
// creates; wave.FirstSeen says how the timeouts use it.

package imagejob

import (
	"sync"
	"time"

	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
)

// skewMeter keeps the latest skew sample. The latest, not the smallest: a
// clock stepped forward since an older sample would make the smallest too
// small, and pods would time out early.
type skewMeter struct {
	mu sync.Mutex
	sk wave.Skew
}

// observe records one sample: the manager's time once the API server's
// answer arrived, and the server's timestamp in it.
func (m *skewMeter) observe(now, server time.Time) {
	if server.IsZero() {
		return
	}
	m.mu.Lock()
	m.sk = wave.Skew{D: now.Sub(server), OK: true}
	m.mu.Unlock()
}

func (m *skewMeter) get() wave.Skew {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sk
}
