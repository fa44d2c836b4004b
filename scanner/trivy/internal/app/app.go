// Package app is the Trivy scanner worker: it receives the collector's
// images, judges each with Trivy and the configured policy, hands the ones
// to remove to the remover, and leaves its verdicts in its log and its
// termination message.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/aquasecurity/trivy/pkg/clock"
	ftypes "github.com/aquasecurity/trivy/pkg/fanal/types"
	tlog "github.com/aquasecurity/trivy/pkg/log"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/node/scanclient"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
	"github.com/eraser-oss/eraser/pkg/scanner"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/ctrdimage"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/engine"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/storeimage"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/vulndb"
)

// Component names the scanner in logs and summaries.
const Component = "trivy-scanner"

// Command is the scanner's command line.
type Command struct {
	worker.Flags
	// Config is the mounted EraserConfig; its components.scanner.config is
	// the scanner's own configuration.
	Config      string
	SummaryFile string
	// Now pins the clock that end-of-life verdicts depend on (tests).
	Now string
	// ImageStore is CRI-O's image store, mounted read-only, where the
	// scanner reads images on runtime crio.
	ImageStore string

	closeStore func() error
	// db is the vulnerability DB the run judges with, for the summary.
	db *workerresult.ScanDB
}

// Bind registers the flags (upstream's --config, plus the workers' own).
func (c *Command) Bind(fs *flag.FlagSet) {
	c.Flags.Bind(fs)
	fs.StringVar(&c.Config, "config", "", "EraserConfig file whose components.scanner.config configures the scanner")
	fs.StringVar(&c.SummaryFile, "summary-file", "/dev/termination-log", "where to write the run's summary (the container's termination message)")
	fs.StringVar(&c.Now, "now", "", "RFC 3339 time to judge end of life at, instead of the clock (tests)")
	fs.StringVar(&c.ImageStore, "image-store", storeimage.DefaultRoot, "CRI-O's image store (containers/storage root), read on runtime crio")
}

// Run scans and returns the exit code: 1 when the run could not judge the
// images (no DB, no runtime, bad configuration). Even then it receives the
// collector's list and hands an empty one to the remover, so neither waits
// for ever and nothing is removed because of the failure.
func (c *Command) Run(ctx context.Context) int {
	log := c.Start(Component)
	summary := workerresult.Summary{Component: Component, Counts: map[string]int{}}
	cfg, err := c.scanConfig(log)
	var opts []scanner.Option
	opts = append(opts, scanner.WithContext(ctx), scanner.WithLogger(log), scanner.WithSharedDir(c.SharedDir))
	if err == nil {
		opts = append(opts, scanner.WithDeleteScanFailedImages(cfg.DeleteFailedImages), scanner.WithDeleteEOLImages(cfg.DeleteEOLImages))
	}
	p, perr := scanner.NewImageProvider(opts...)
	if perr != nil {
		return worker.Finish(log, c.SummaryFile, summary, perr)
	}
	defer p.Close()

	var eng *engine.Engine
	if err == nil {
		eng, err = c.prepare(ctx, log, cfg)
	}
	images, rerr := p.ReceiveImages()
	if rerr != nil {
		return worker.Finish(log, c.SummaryFile, summary, rerr)
	}
	var send []handoff.Image
	if err == nil {
		defer eng.Close()
		defer c.closeStore()
		send = c.judge(ctx, log, eng, cfg, images, &summary)
	} else {
		log.Error("not scanning: nothing will be removed by this run", "images", len(images), "error", err)
	}
	// The failed images are already in send when deleteFailedImages is on.
	if serr := p.SendImages(send, nil); serr != nil {
		return worker.Finish(log, c.SummaryFile, summary, errors.Join(err, serr))
	}
	if ferr := p.Finish(); ferr != nil {
		err = errors.Join(err, ferr)
	}
	return worker.Finish(log, c.SummaryFile, summary, err)
}

// scanConfig reads the scanner's configuration. Its warnings (keys that have
// no effect, which upstream's scanner dropped silently) are logged, never
// fatal: the manager has already warned about them where it loaded the
// document.
func (c *Command) scanConfig(log *slog.Logger) (scan.Config, error) {
	if c.Config == "" {
		return scan.DefaultConfig(), nil
	}
	data, err := os.ReadFile(c.Config)
	if err != nil {
		return scan.Config{}, fmt.Errorf("reading the configuration: %w", err)
	}
	full, _, err := config.Parse(data)
	if err != nil {
		return scan.Config{}, fmt.Errorf("configuration %s: %w", c.Config, err)
	}
	cfg, warnings, err := scan.Parse(full.Components.Scanner.Config)
	if err != nil {
		return scan.Config{}, fmt.Errorf("components.scanner.config: %w", err)
	}
	for _, w := range warnings {
		log.Warn("components.scanner.config: "+w, "key", "components.scanner.config")
	}
	return cfg, nil
}

// prepare opens the runtime's image store and gets the DB.
func (c *Command) prepare(ctx context.Context, log *slog.Logger, cfg scan.Config) (*engine.Engine, error) {
	tlog.InitLogger(false, true)
	for _, c := range cfg.Vulnerabilities.SecurityChecks {
		if c != "vuln" {
			// Removal is decided by vulnerabilities only; secret or
			// misconfiguration findings would not change a verdict.
			log.Warn("ignoring a security check this scanner does not run", "check", c, "key", "vulnerabilities.securityChecks")
		}
	}
	// The runtime first: a node the scanner cannot read fails before any
	// DB download.
	src, closeStore, err := c.openStore()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	opts := vulndb.Options{CacheDir: cfg.CacheDir, Repo: cfg.DBRepo, SkipUpdate: cfg.SkipDBUpdate, DownloadTimeout: cfg.DBDownloadTimeout.Duration}
	archive, err := c.runDB(ctx, log, opts)
	if err != nil {
		closeStore()
		return nil, err
	}
	if archive != "" {
		// The run's DB is on disk: Trivy only opens it.
		opts.SkipUpdate = true
	}
	dir, downloaded, err := vulndb.Prepare(ctx, opts)
	if err != nil {
		closeStore()
		return nil, err
	}
	// Which DB judged is part of every verdict's why; a DB Trivy accepted
	// has its metadata, so a failure to read it only loses that.
	db, err := vulndb.Info(dir)
	if err != nil {
		log.Warn("the report will not say which vulnerability DB judged", "error", err)
	} else {
		db.Archive = archive
		c.db = db
	}
	log.Info("vulnerability DB ready", "dir", dir, "downloaded", downloaded, "seconds", time.Since(start).Seconds(), "db", db)
	eng, err := engine.New(dir, src, cfg.Vulnerabilities.Types)
	if err != nil {
		closeStore()
		return nil, err
	}
	c.closeStore = closeStore
	return eng, nil
}

// openStore opens where the node's runtime keeps its images: containerd's
// content store through its socket, or CRI-O's image store on disk (CRI-O
// has no API that returns an image's content).
func (c *Command) openStore() (engine.Source, func() error, error) {
	switch name := os.Getenv("ERASER_RUNTIME_NAME"); name {
	case "", string(config.RuntimeContainerd):
		addr, err := socketPath(c.RuntimeEndpoint)
		if err != nil {
			return nil, nil, err
		}
		ns := os.Getenv("CONTAINERD_NAMESPACE")
		if ns == "" {
			ns = ctrdimage.Namespace
		}
		store, err := ctrdimage.Dial(addr, ns)
		if err != nil {
			return nil, nil, err
		}
		return source[*ctrdimage.Image]{store.Open}, store.Close, nil
	case string(config.RuntimeCrio):
		store, err := storeimage.Open(c.ImageStore)
		if err != nil {
			return nil, nil, err
		}
		return source[*ctrdimage.Image]{store.Open}, store.Close, nil
	default:
		return nil, nil, fmt.Errorf("runtime %q: this scanner reads images from containerd and CRI-O only", name)
	}
}

func socketPath(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" {
		return "", fmt.Errorf("runtime endpoint %q: the scanner needs a unix:// socket", endpoint)
	}
	return u.Path, nil
}

func (c *Command) judge(ctx context.Context, log *slog.Logger, eng *engine.Engine, cfg scan.Config, images []handoff.Image, s *workerresult.Summary) []handoff.Image {
	if c.Now != "" {
		if t, err := time.Parse(time.RFC3339, c.Now); err == nil {
			ctx = clock.With(ctx, t)
		} else {
			log.Warn("ignoring --now", "error", err)
		}
	}
	policy := cfg.Policy()
	start := time.Now()
	var js []scan.Judgement
	if sh, ok := c.sharing(log, policy); ok {
		js = scan.RunShared(ctx, eng, images, policy, cfg.Timeout.PerImage.Duration, cfg.Timeout.Total.Duration, sh)
	} else {
		js = scan.Run(ctx, eng, images, policy, cfg.Timeout.PerImage.Duration, cfg.Timeout.Total.Duration)
	}
	log.Info("scan finished", "images", len(images), "seconds", time.Since(start).Seconds())
	var send []handoff.Image
	s.ScanDB = c.db
	for _, j := range js {
		if j.From != nil {
			s.VerdictsShared++
		} else if j.Verdict != scan.NotScanned {
			s.ScansMade++
		}
		name := j.Image.ImageID
		if len(j.Image.Names) > 0 {
			name = j.Image.Names[0]
		}
		// One result line per image: the node's report keeps the verdict
		// and what decided it.
		why := scan.LogResult(log, j)
		s.Counts[string(j.Verdict)]++
		// The termination message has 4 KiB: only the verdicts that
		// findings or an error decided carry their reason there.
		if j.Verdict != scan.Vulnerable && j.Verdict != scan.Failed {
			why = ""
		}
		s.Verdicts = append(s.Verdicts, workerresult.Verdict{Image: name, Verdict: string(j.Verdict), Remove: j.Remove, Reason: why})
		if j.Verdict == scan.Failed {
			s.AddFailure(name, j.Error)
		}
		if j.Remove {
			send = append(send, j.Image)
		}
	}
	s.Counts[workerresult.CountToRemove] = len(send)
	return send
}

// source adapts a store's Open to engine.Source, whose images are Trivy's
// interface type.
type source[I ftypes.Image] struct {
	open func(context.Context, handoff.Image) (I, error)
}

func (s source[I]) Open(ctx context.Context, img handoff.Image) (ftypes.Image, error) {
	i, err := s.open(ctx, img)
	if err != nil {
		return nil, err
	}
	return i, nil
}

// sharing is how this scanner shares verdicts with the other nodes of the
// run, when the manager's pod spec named a scan service and this scanner
// knows which DB it judges with (a verdict is keyed by it).
func (c *Command) sharing(log *slog.Logger, policy scan.Policy) (scan.Sharing, bool) {
	service, job, token := os.Getenv(scanshare.EnvService), os.Getenv(scanshare.EnvJobUID), os.Getenv(scanshare.EnvToken)
	if service == "" || job == "" || token == "" {
		return scan.Sharing{}, false
	}
	if c.db == nil || c.db.UpdatedAt == nil {
		log.Warn("not sharing verdicts: the vulnerability DB does not say when it was built, which keys a shared verdict")
		return scan.Sharing{}, false
	}
	return scan.Sharing{
		Service:  scanclient.New(service, job, token),
		DB:       dbKey(c.db),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Policy:   scan.PolicyKey(engineName(), policy),
		Patience: sharePatience,
		Log:      log,
	}, true
}

// sharePatience is how long a scanner waits for verdicts other nodes are
// making, with none arriving, before it scans those images itself: longer
// than one image's scan, so that a node never scans what another is about
// to share, and short beside a run.
const sharePatience = 5 * time.Minute

// dbKey names a DB build: the archive the manager handed out, or else its
// schema and the time it was built, which Trivy's DB publisher sets once
// per build.
func dbKey(db *workerresult.ScanDB) string {
	if db.Archive != "" {
		return db.Archive
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("trivy-db schema %d built %s", db.Version, db.UpdatedAt.UTC().Format(time.RFC3339Nano))))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// engineName is Trivy's module version, from the binary's build record: a
// verdict of one Trivy release is not reused by another.
func engineName() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/aquasecurity/trivy" {
				return "trivy " + d.Version
			}
		}
	}
	return "trivy (unknown version)"
}

// runDB installs the run's DB when the manager hands one out: the archive
// its pod spec names, downloaded from the scan service and checked against
// that digest. It returns the digest, or "" when this scanner fetches its
// DB as configured. A run the manager has no DB for judges nothing: the
// reason is the error.
func (c *Command) runDB(ctx context.Context, log *slog.Logger, opts vulndb.Options) (string, error) {
	if why := os.Getenv(scanshare.EnvDBUnavailable); why != "" {
		return "", fmt.Errorf("no vulnerability DB for this run: %s", why)
	}
	digest := os.Getenv(scanshare.EnvDB)
	service, job, token := os.Getenv(scanshare.EnvService), os.Getenv(scanshare.EnvJobUID), os.Getenv(scanshare.EnvToken)
	if digest == "" || service == "" {
		return "", nil
	}
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(opts.CacheDir, "db-archive-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	timeout := opts.DownloadTimeout
	if timeout <= 0 {
		timeout = scan.DefaultDBDownloadTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	retrying := func(err error, wait time.Duration) {
		log.Warn("the scan service did not hand over the run's vulnerability DB; asking again", "archive", digest, "in", wait.String(), "error", err.Error())
	}
	n, err := scanclient.New(service, job, token).FetchDB(dctx, digest, tmp, retrying)
	if err != nil {
		return "", fmt.Errorf("getting the run's vulnerability DB from the scan service: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := vulndb.Install(tmp, opts); err != nil {
		return "", err
	}
	log.Info("vulnerability DB from the scan service", "archive", digest, "bytes", n)
	return digest, nil
}
