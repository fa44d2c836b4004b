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
				r.Server.Verdicts.EndRuns()
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
			return float64(f(v.Stats().Counters))
		})
	}
	return []prometheus.Collector{
		count("eraser_scan_verdicts_served_total", "Verdicts the scan service handed to a scanner instead of a scan on its node: scans saved.",
			func(c Counters) int { return c.Served }),
		count("eraser_scan_verdicts_stored_total", "Verdicts the scanners shared with the scan service: the scans made for the cluster.",
			func(c Counters) int { return c.Stored }),
		count("eraser_scan_verdicts_refused_total", "Verdicts the scan service refused: invalid, for a key the scanner was not handed, beyond the scanner's share of the store, or disputing another node's.",
			func(c Counters) int { return c.Refused }),
		count("eraser_scan_verdicts_confirmed_total", "Verdicts that remove an image which a second node's own scan confirmed: only these reach a third node.",
			func(c Counters) int { return c.Confirmed }),
		count("eraser_scan_verdicts_contradicted_total", "Verdicts that remove an image which a second node's own scan contradicted: a third node's scan then decides.",
			func(c Counters) int { return c.Contradicted }),
		count("eraser_scan_verdicts_overruled_total", "Verdicts two other nodes' scans overturned: a sign of a compromised or broken scanner, which the service's log names.",
			func(c Counters) int { return c.Overruled }),
		count("eraser_scan_verdicts_disputed_total", "Images on which three nodes' scans reached three verdicts: each node then scans the image itself.",
			func(c Counters) int { return c.Disputed }),
		count("eraser_scan_verdicts_forgotten_total", "Verdicts dropped when their run ended unconfirmed, or when the vulnerability DB moved on.",
			func(c Counters) int { return c.Forgotten }),
		count("eraser_scan_verdicts_evicted_total", "Confirmed verdicts of ended runs the scan service dropped, least recently used first, to stay within its memory budget.",
			func(c Counters) int { return c.Evicted }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eraser_scan_verdicts", Help: "Verdicts the scan service holds."}, func() float64 {
			return float64(v.Stats().Verdicts)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eraser_scan_verdicts_bytes", Help: "The estimated memory of the verdicts the scan service holds."}, func() float64 {
			return float64(v.Stats().Bytes)
		}),
	}
}
