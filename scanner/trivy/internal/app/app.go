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
	"strconv"
	"sync"
	"time"

	"github.com/aquasecurity/trivy/pkg/clock"
	ftypes "github.com/aquasecurity/trivy/pkg/fanal/types"
	tlog "github.com/aquasecurity/trivy/pkg/log"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/node/scanclient"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
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

	var eng judger
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
		if l, ok := eng.(*lazyEngine); ok && l.err != nil {
			err = l.err
		}
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
func (c *Command) scanConfig(log *slog.Logger) (scanconfig.Config, error) {
	if c.Config == "" {
		return scanconfig.DefaultConfig(), nil
	}
	data, err := os.ReadFile(c.Config)
	if err != nil {
		return scanconfig.Config{}, fmt.Errorf("reading the configuration: %w", err)
	}
	full, _, err := config.Parse(data)
	if err != nil {
		return scanconfig.Config{}, fmt.Errorf("configuration %s: %w", c.Config, err)
	}
	cfg, warnings, err := scanconfig.Parse(full.Components.Scanner.Config)
	if err != nil {
		return scanconfig.Config{}, fmt.Errorf("components.scanner.config: %w", err)
	}
	for _, w := range warnings {
		log.Warn("components.scanner.config: "+w, "key", "components.scanner.config")
	}
	return cfg, nil
}

// prepare opens the runtime's image store and the DB. A DB the scanner
// fetches itself is got at once; the run's DB, which the manager hands out,
// only when the scan service hands this node an image to scan: a node whose
// images other nodes judged never downloads it.
func (c *Command) prepare(ctx context.Context, log *slog.Logger, cfg scanconfig.Config) (judger, error) {
	tlog.InitLogger(false, true)
	for _, c := range cfg.Vulnerabilities.SecurityChecks {
		if c != "vuln" {
			// Removal is decided by vulnerabilities only; secret or
			// misconfiguration findings would not change a verdict.
			log.Warn("ignoring a security check this scanner does not run", "check", c, "key", "vulnerabilities.securityChecks")
		}
	}
	if why := os.Getenv(scanshare.EnvDBUnavailable); why != "" {
		return nil, fmt.Errorf("no vulnerability DB for this run: %s", why)
	}
	// The runtime first: a node the scanner cannot read fails before any
	// DB download.
	src, closeStore, err := c.openStore()
	if err != nil {
		return nil, err
	}
	c.closeStore = closeStore
	opts := vulndb.Options{CacheDir: cfg.CacheDir, Repo: cfg.DBRepo, SkipUpdate: cfg.SkipDBUpdate, DownloadTimeout: cfg.DBDownloadTimeout.Duration}
	if digest := runArchive(); digest != "" {
		c.db = runDBInfo(digest)
		return &lazyEngine{open: func() (*engine.Engine, error) { return c.openDB(ctx, log, cfg, opts, src, digest) }}, nil
	}
	eng, err := c.openDB(ctx, log, cfg, opts, src, "")
	if err != nil {
		closeStore()
		return nil, err
	}
	return eng, nil
}

// openDB installs the run's archive when there is one, or gets the DB as
// configured, and opens the engine on it.
func (c *Command) openDB(ctx context.Context, log *slog.Logger, cfg scanconfig.Config, opts vulndb.Options, src engine.Source, archive string) (*engine.Engine, error) {
	start := time.Now()
	if archive != "" {
		if err := c.runDB(ctx, log, opts, archive); err != nil {
			return nil, err
		}
		// The run's DB is on disk: Trivy only opens it.
		opts.SkipUpdate = true
	}
	dir, downloaded, err := vulndb.Prepare(ctx, opts)
	if err != nil {
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
	return engine.New(dir, src, cfg.Vulnerabilities.Types)
}

// judger is the engine the scanner judges with.
type judger interface {
	scan.Engine
	Close() error
}

// lazyEngine opens the engine on the first image it is asked to scan. If
// that fails, no image is judged here: the failure is ErrCannotJudge, so
// that each image is kept, not counted a failed scan.
type lazyEngine struct {
	open   func() (*engine.Engine, error)
	once   sync.Once
	eng    *engine.Engine
	err    error
	opened bool
}

func (l *lazyEngine) Scan(ctx context.Context, img handoff.Image) (scan.Report, error) {
	l.once.Do(func() {
		l.opened = true
		l.eng, l.err = l.open()
		if l.err != nil {
			l.err = fmt.Errorf("%w: %w", scan.ErrCannotJudge, l.err)
		}
	})
	if l.err != nil {
		return scan.Report{}, l.err
	}
	return l.eng.Scan(ctx, img)
}

func (l *lazyEngine) Close() error {
	if l.eng == nil {
		return nil
	}
	return l.eng.Close()
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

func (c *Command) judge(ctx context.Context, log *slog.Logger, eng scan.Engine, cfg scanconfig.Config, images []handoff.Image, s *workerresult.Summary) []handoff.Image {
	if c.Now != "" {
		if t, err := time.Parse(time.RFC3339, c.Now); err == nil {
			ctx = clock.With(ctx, t)
		} else {
			log.Warn("ignoring --now", "error", err)
		}
	}
	policy := scan.PolicyOf(cfg)
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
	if c.db == nil || (c.db.Archive == "" && c.db.UpdatedAt == nil) {
		log.Warn("not sharing verdicts: the vulnerability DB does not say when it was built, which keys a shared verdict")
		return scan.Sharing{}, false
	}
	return scan.Sharing{
		Service:  newClient(service, job, token),
		DB:       dbKey(c.db),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Policy:   scan.PolicyKey(engineName(), policy),
		Patience: sharePatience,
		Wait:     scanshare.MaxClaimWait,
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

// newClient is the scan service's client, following the service to a new
// address when the pod spec projects one.
func newClient(service, job, token string) *scanclient.Client {
	c := scanclient.New(service, job, token)
	c.ServiceFile = os.Getenv(scanshare.EnvServiceFile)
	return c
}

// runDBInfo is what the manager says of the run's DB: a scanner that never
// opens it still reports which DB its shared verdicts came from.
func runDBInfo(archive string) *workerresult.ScanDB {
	db := &workerresult.ScanDB{Archive: archive}
	if v, err := strconv.Atoi(os.Getenv(scanshare.EnvDBSchema)); err == nil && v > 0 {
		db.Version = v
	}
	if t, err := time.Parse(time.RFC3339, os.Getenv(scanshare.EnvDBBuilt)); err == nil {
		t = t.UTC()
		db.UpdatedAt = &t
	}
	return db
}

// runArchive is the digest of the DB archive the manager hands this run's
// scanners, or "" when this scanner fetches its DB as configured.
func runArchive() string {
	if os.Getenv(scanshare.EnvService) == "" {
		return ""
	}
	return os.Getenv(scanshare.EnvDB)
}

// runDB installs the run's DB: the archive downloaded from the scan service
// and checked against the digest the pod spec names.
func (c *Command) runDB(ctx context.Context, log *slog.Logger, opts vulndb.Options, digest string) error {
	service, job, token := os.Getenv(scanshare.EnvService), os.Getenv(scanshare.EnvJobUID), os.Getenv(scanshare.EnvToken)
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(opts.CacheDir, "db-archive-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	timeout := opts.DownloadTimeout
	if timeout <= 0 {
		timeout = scanconfig.DefaultDBDownloadTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	retrying := func(err error, wait time.Duration) {
		log.Warn("the scan service did not hand over the run's vulnerability DB; asking again", "archive", digest, "in", wait.String(), "error", err.Error())
	}
	client := newClient(service, job, token)
	// The archive's size bounds the download; without it, the client's cap.
	if size, err := strconv.ParseInt(os.Getenv(scanshare.EnvDBSize), 10, 64); err == nil && size > 0 {
		client.DBSize = size
	}
	n, err := client.FetchDB(dctx, digest, tmp, retrying)
	if err != nil {
		return fmt.Errorf("getting the run's vulnerability DB from the scan service: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := vulndb.Install(tmp, opts); err != nil {
		return err
	}
	log.Info("vulnerability DB from the scan service", "archive", digest, "bytes", n)
	return nil
}
