package manager

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/scanservice"
	"github.com/eraser-oss/eraser/internal/process/logging"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Defaults shared with the manifests and the Helm chart.
const (
	DefaultNamespace = "eraser-system"
	// LeaderElectionID names the Lease the replicas compete for.
	LeaderElectionID = "eraser-manager.eraser.sh"
)

// Options are the manager's flags and environment.
type Options struct {
	// ConfigFile is the mounted EraserConfig (--config, required as upstream).
	ConfigFile string
	LogLevel   logging.Level
	// RemoverImage overrides components.remover.image (--remover-image).
	RemoverImage string

	MetricsAddr string
	ProbeAddr   string
	// PprofAddr serves net/http/pprof when set, to profile a manager in
	// place (--pprof-bind-address; off by default).
	PprofAddr   string
	LeaderElect bool
	// NoReferenceIndex runs no reference index: the manager reads no pod
	// or workload outside its namespace, and a run whose configuration
	// protects referenced images fails. The zero value runs it.
	NoReferenceIndex bool
	// Lease timings: how long a lease lasts, how long the leader keeps
	// trying to renew it before it gives up (and exits), and how often it
	// tries. A longer renew deadline rides out a longer API server outage;
	// a longer lease makes a dead leader's successor wait longer.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// KubeAPIQPS and KubeAPIBurst bound each of the manager's API clients
	// (--kube-api-qps, --kube-api-burst): without them controller-runtime
	// sets none, and a manager that floods the API server (with a bug, or
	// made to) would queue its own lease renewals behind its flood in the
	// API server's fair queuing, where they share its ServiceAccount's
	// flow. Leader election builds its own clients from the same settings,
	// so its renewals never wait on another client's bucket.
	KubeAPIQPS   float64
	KubeAPIBurst int

	// Namespace holds the manager's pods, PodTemplates and ConfigMaps
	// (POD_NAMESPACE, as upstream).
	Namespace string
	// ConfigMapName names the EraserConfig ConfigMap (ERASER_CONFIGMAP_NAME).
	ConfigMapName string
	// PullSecrets are image pull secrets every worker pod gets besides
	// manager.pullSecrets (ERASER_PULL_SECRET_NAMES, comma-separated).
	PullSecrets []string

	// ScanServiceAddr is where the leader serves its scan service
	// (--scan-service-bind-address; "0" turns it off).
	ScanServiceAddr string
	// ScanDBDir keeps the leader's copy of the vulnerability DB
	// (--scan-db-dir).
	ScanDBDir string
	// ScanDBProxy is the proxy the leader downloads the DB through
	// (--scan-db-proxy): that download alone, not the manager's calls to
	// the API server, which HTTPS_PROXY in its environment would also send
	// there. Empty: HTTPS_PROXY and NO_PROXY of the environment.
	ScanDBProxy string
	// PodIP is the manager pod's address (POD_IP, from the downward API),
	// which the worker pods it creates are given to reach the service:
	// without it each node scans alone.
	PodIP string
}

// ConfigSource is where the EraserConfig comes from.
func (o *Options) ConfigSource() eraserconfig.Source {
	return eraserconfig.Source{File: o.ConfigFile, ConfigMap: o.configMap(), Key: config.ConfigKey, RemoverImage: o.RemoverImage}
}

// configMap is the EraserConfig ConfigMap's key.
func (o *Options) configMap() client.ObjectKey {
	return client.ObjectKey{Namespace: o.Namespace, Name: o.ConfigMapName}
}

// scanService is where the leader serves the scan service and keeps its
// copy of the DB.
func (o *Options) scanService() (scanservice.Options, error) {
	proxy, err := o.ScanDBProxyURL()
	return scanservice.Options{Namespace: o.Namespace, Addr: o.ScanServiceAddr, URL: o.ScanServiceURL(), DBDir: o.ScanDBDir, DBProxy: proxy}, err
}

// ScanServiceURL is the scan service's address as the worker pods reach
// it, or "" when there is none.
func (o *Options) ScanServiceURL() string {
	if o.ScanServiceAddr == "" || o.ScanServiceAddr == "0" || o.PodIP == "" {
		return ""
	}
	_, port, err := net.SplitHostPort(o.ScanServiceAddr)
	if err != nil || port == "" || port == "0" {
		return ""
	}
	return "http://" + net.JoinHostPort(o.PodIP, port)
}

// Bind registers the manager's flags, upstream's first.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", "", "path to the EraserConfig file (the mounted eraser-manager-config ConfigMap)")
	o.LogLevel.Bind(fs)
	fs.StringVar(&o.RemoverImage, "remover-image", "", "remover image reference; overrides components.remover.image")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8889", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "address of net/http/pprof (e.g. 127.0.0.1:6060); empty disables it")
	fs.StringVar(&o.ScanServiceAddr, "scan-service-bind-address", ":8890", "address of the scan service, through which the scanners of a run share one verdict per image; 0 disables it")
	fs.StringVar(&o.ScanDBDir, "scan-db-dir", "/var/cache/eraser/scan-db", "directory of the leader's copy of the vulnerability DB, which it hands to the scanners (a writable volume)")
	fs.StringVar(&o.ScanDBProxy, "scan-db-proxy", "", "URL of the HTTP(S) proxy through which the leader downloads the vulnerability DB (that download only); empty: HTTPS_PROXY and NO_PROXY of the environment")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", 200, "requests a second each of the manager's API clients (one per kind of object) may send on average (the 10,000-node benchmark creates pods at up to 80 a second); 0 bounds none")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 400, "requests each of the manager's API clients may send at once")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader so that only one replica runs jobs")
	fs.BoolFunc("reference-index", "watch every pod and workload of the cluster for the images they reference (manager.retention.protectReferenced); false for a ClusterRole without those read rules, where the configuration must not protect referenced images (default true)", func(s string) error {
		on, err := strconv.ParseBool(s)
		o.NoReferenceIndex = !on
		return err
	})
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a replica waits for a silent leader's lease to expire before taking over")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew its lease (e.g. through an API server outage) before it exits")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often leader election tries to acquire or renew the lease")
}

// Validate checks what flag parsing cannot: client-go refuses lease
// timings out of order, and so would the manager, later and less clearly.
func (o *Options) Validate() error {
	if o.LeaderElect && (o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod || o.LeaseDuration <= o.RenewDeadline) {
		return fmt.Errorf("leader election needs 0 < --leader-elect-retry-period (%v) < --leader-elect-renew-deadline (%v) < --leader-elect-lease-duration (%v)",
			o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)
	}
	if _, err := o.ScanDBProxyURL(); err != nil {
		return err
	}
	if o.KubeAPIQPS < 0 || o.KubeAPIBurst < 0 || (o.KubeAPIQPS > 0 && o.KubeAPIBurst == 0) {
		return fmt.Errorf("--kube-api-qps (%v) and --kube-api-burst (%d): want a rate and a burst of at least 1, or a rate of 0 for no bound", o.KubeAPIQPS, o.KubeAPIBurst)
	}
	return nil
}

// BoundClients sets the client-side bound of the API clients made from
// cfg, which controller-runtime's GetConfig leaves unbounded (QPS -1).
func (o *Options) BoundClients(cfg *rest.Config) {
	if o.KubeAPIQPS > 0 {
		cfg.QPS, cfg.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst
	}
}

// ScanDBProxyURL is --scan-db-proxy parsed: nil when unset.
func (o *Options) ScanDBProxyURL() (*url.URL, error) {
	if o.ScanDBProxy == "" {
		return nil, nil
	}
	u, err := url.Parse(o.ScanDBProxy)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") {
		return nil, fmt.Errorf("--scan-db-proxy %q: want a proxy URL such as http://proxy.example:3128 (schemes http, https, socks5)", o.ScanDBProxy)
	}
	return u, nil
}

// FromEnv fills what upstream Eraser reads from the environment.
func (o *Options) FromEnv() {
	o.Namespace = envOr("POD_NAMESPACE", DefaultNamespace)
	o.ConfigMapName = envOr("ERASER_CONFIGMAP_NAME", config.ConfigMapName)
	o.PullSecrets = pullSecretNames(os.Getenv("ERASER_PULL_SECRET_NAMES"))
	o.PodIP = os.Getenv("POD_IP")
}

// pullSecretNames splits ERASER_PULL_SECRET_NAMES as upstream did, on
// commas, and also drops the spaces around names and empty entries: a
// Secret's name has neither, so upstream's pods named Secrets that could
// not exist.
func pullSecretNames(env string) []string {
	var out []string
	for _, s := range strings.Split(env, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
