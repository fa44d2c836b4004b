package scanservice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Runnable serves the scan service on the leader alone: the verdicts and
// claims are the leader's memory, and the worker pods it creates name its
// address. A replica that becomes leader starts empty; its runs' scanners
// scan what no verdict answers, as they would alone.
type Runnable struct {
	Addr   string
	Server *Server
}

// NeedLeaderElection implements controller-runtime's LeaderElectionRunnable.
func (r *Runnable) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (r *Runnable) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", r.Addr)
	if err != nil {
		return fmt.Errorf("scan service: %w", err)
	}
	srv := &http.Server{Handler: r.Server.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
				return
			case <-t.C:
				r.Server.Verdicts.Expire()
			}
		}
	}()
	r.Server.Log.Info("scan service listening", "address", l.Addr().String())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("scan service: %w", err)
	}
	return nil
}

// Collectors are the service's metrics, read from the store when scraped.
func Collectors(v *Verdicts) []prometheus.Collector {
	count := func(name, help string, f func(Counters) int) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			c, _, _, _ := v.Stats()
			return float64(f(c))
		})
	}
	return []prometheus.Collector{
		count("eraser_scan_verdicts_served_total", "Verdicts the scan service handed to a scanner instead of a scan on its node: scans saved.",
			func(c Counters) int { return c.Served }),
		count("eraser_scan_verdicts_stored_total", "Verdicts the scanners shared with the scan service: the scans made for the cluster.",
			func(c Counters) int { return c.Stored }),
		count("eraser_scan_verdicts_refused_total", "Verdicts the scan service refused (invalid, or for a key another scanner holds).",
			func(c Counters) int { return c.Refused }),
		count("eraser_scan_verdicts_evicted_total", "Verdicts the scan service dropped, least recently used first, to stay within its memory budget.",
			func(c Counters) int { return c.Evicted }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eraser_scan_verdicts", Help: "Verdicts the scan service holds."}, func() float64 {
			_, n, _, _ := v.Stats()
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eraser_scan_verdicts_bytes", Help: "The estimated memory of the verdicts the scan service holds."}, func() float64 {
			_, _, b, _ := v.Stats()
			return float64(b)
		}),
	}
}
