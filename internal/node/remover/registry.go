package remover

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/registrycheck"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// RegistryCheck is the registry check's settings: before an automatic
// policy removes an image a workload references, or one a container used
// within Lookback, its registry is asked whether it still serves the
// image's content; an image that could not be pulled back is kept.
type RegistryCheck struct {
	Lookback time.Duration
	// RemoveUnreachable removes an image whose registry could not be
	// asked; false keeps it (registry unreachable).
	RemoveUnreachable bool
	// Config is how registries are asked; the cache file is set from the
	// run's state directory.
	Config registrycheck.Config
	// Note says what the checks go without (the credentials file could
	// not be read), for the report.
	Note string
}

// The values of --registry-when-unreachable.
const (
	UnreachableKeep   = "keep"
	UnreachableRemove = "remove"
)

// RegistryFlags are the registry check's flags.
type RegistryFlags struct {
	Enabled         bool
	Lookback        time.Duration
	MaxRequests     int
	Timeout         time.Duration
	WhenUnreachable string
	Credentials     string
	Mirrors         mirrorFlag
	PlainHTTP       listFlag
}

// Bind registers the flags.
func (f *RegistryFlags) Bind(fs *flag.FlagSet) {
	fs.BoolVar(&f.Enabled, "registry-check", false, "before an automatic policy removes an image a workload references or a container used within --registry-lookback, ask its registry whether it still serves the image, and keep it if not")
	fs.DurationVar(&f.Lookback, "registry-lookback", workerdefaults.RegistryLookback, "images a container used within this are checked at their registry before an automatic policy removes them")
	fs.IntVar(&f.MaxRequests, "registry-max-requests", registrycheck.DefaultMaxRequests, "the most requests a run makes to registries; beyond them the answer is unknown")
	fs.DurationVar(&f.Timeout, "registry-timeout", registrycheck.DefaultTimeout, "the bound on each request to a registry")
	fs.StringVar(&f.WhenUnreachable, "registry-when-unreachable", UnreachableKeep, "what becomes of an image whose registry could not be asked: keep or remove")
	fs.StringVar(&f.Credentials, "registry-credentials", "", "a docker config.json file (a dockerconfigjson Secret, mounted) with the registries' credentials; empty: anonymous")
	fs.Var(&f.Mirrors, "registry-mirror", "HOST=ENDPOINT[,ENDPOINT...]: endpoints asked before the registry HOST (repeatable)")
	fs.Var(&f.PlainHTTP, "registry-plain-http", "HOST[,HOST...]: registries asked in plain HTTP (loopback or test registries)")
}

// Settings are the flags' settings; nil when the check is off. A
// credentials file that cannot be read does not stop the run: the checks
// go anonymous, and the report says so.
func (f RegistryFlags) Settings() (*RegistryCheck, error) {
	if !f.Enabled {
		return nil, nil
	}
	switch f.WhenUnreachable {
	case UnreachableKeep, UnreachableRemove:
	default:
		return nil, fmt.Errorf("--registry-when-unreachable=%q: want %s or %s", f.WhenUnreachable, UnreachableKeep, UnreachableRemove)
	}
	if f.Lookback < 0 || f.MaxRequests < 0 || f.Timeout < 0 {
		return nil, errors.New("--registry-lookback, --registry-max-requests and --registry-timeout may not be negative")
	}
	rc := &RegistryCheck{Lookback: f.Lookback, RemoveUnreachable: f.WhenUnreachable == UnreachableRemove,
		Config: registrycheck.Config{Timeout: f.Timeout, MaxRequests: f.MaxRequests, Mirrors: f.Mirrors, PlainHTTP: f.PlainHTTP}}
	if f.Credentials != "" {
		creds, err := registrycheck.ReadDockerConfig(f.Credentials)
		if err != nil {
			rc.Note = "the registries' credentials could not be read, asked anonymously: " + err.Error()
		}
		rc.Config.Credentials = creds
	}
	return rc, nil
}

// mirrorFlag is --registry-mirror, repeated.
type mirrorFlag map[string][]string

func (m *mirrorFlag) String() string {
	if m == nil || *m == nil {
		return ""
	}
	hosts := make([]string, 0, len(*m))
	for h := range *m {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var parts []string
	for _, h := range hosts {
		parts = append(parts, h+"="+strings.Join((*m)[h], ","))
	}
	return strings.Join(parts, " ")
}

func (m *mirrorFlag) Set(v string) error {
	host, eps, ok := strings.Cut(v, "=")
	if !ok || host == "" || eps == "" {
		return fmt.Errorf("want HOST=ENDPOINT[,ENDPOINT...]")
	}
	if *m == nil {
		*m = map[string][]string{}
	}
	for _, e := range strings.Split(eps, ",") {
		if e = strings.TrimSpace(e); e != "" {
			(*m)[host] = append((*m)[host], e)
		}
	}
	return nil
}

// listFlag is a comma-separated list, repeatable.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// needsCheck tells whether a removal is asked about at its registry: an
// automatic policy's (an ImageList's names are the user's ask) of an image
// a workload references or a container used within the lookback.
func needsCheck(p retention.Policy, referenced bool, lastUsed, now time.Time, lookback time.Duration) (bool, string) {
	if p == retention.Listed || p == "" {
		return false, ""
	}
	if referenced {
		return true, "a workload references it"
	}
	if !lastUsed.IsZero() && now.Sub(lastUsed) < lookback {
		return true, fmt.Sprintf("a container used it %s ago", now.Sub(lastUsed).Round(time.Minute))
	}
	return false, ""
}

// registryOutcome is what an answer does to a removal: present removes;
// gone keeps; unknown keeps unless the configuration removes anyway.
func registryOutcome(a registrycheck.Answer, removeUnreachable bool) (workerresult.Outcome, bool) {
	switch a {
	case registrycheck.Present:
		return workerresult.Removed, true
	case registrycheck.Gone:
		return workerresult.GoneFromRegistry, false
	}
	if removeUnreachable {
		return workerresult.Removed, true
	}
	return workerresult.RegistryUnreachable, false
}

// registryWorkers is how many images are asked about at once.
const registryWorkers = 4

// checkRegistry asks the registries about the planned removals that need
// it, and takes out of the plan those it keeps, returned as results. spare
// are the candidates a real run under disk pressure may drain after the
// plan's removals: those that need it are asked too, and one the answer
// keeps is taken out of them, its plan's result (not needed) standing.
func checkRegistry(ctx context.Context, s *Snapshot, r Retention, remove []Removal, spare []retention.Candidate, opts Options, info *RunInfo) ([]Removal, []Result, []retention.Candidate) {
	rc := opts.Registry
	if rc == nil {
		return remove, nil, spare
	}
	planned := len(remove)
	if len(spare) > 0 {
		remove = slices.Clone(remove)
		for _, c := range spare {
			remove = append(remove, Removal{Image: c.Index, Target: s.Images[c.Index].ID, Policy: retention.DiskPressure, Detail: "a candidate the disk policy may drain"})
		}
	}
	type ask struct {
		n       int
		why     string
		content registrycheck.Content
		ok      bool
		answer  registrycheck.Result
	}
	var asks []ask
	for n, rm := range remove {
		var used time.Time
		if r.Ages != nil {
			used = r.Ages[rm.Image].LastUsed
		}
		_, referenced := s.referenced[int32(rm.Image)]
		if need, why := needsCheck(rm.Policy, referenced, used, r.Now, rc.Lookback); need {
			img := s.Images[rm.Image]
			ct, ok := registrycheck.Pick(img.Tags, img.Digests)
			asks = append(asks, ask{n: n, why: why, content: ct, ok: ok})
		}
	}
	if len(asks) == 0 {
		return remove[:planned], nil, spare
	}
	cfg := rc.Config
	if opts.StateDir != "" {
		cfg.CachePath = filepath.Join(opts.StateDir, registrycheck.CacheFile)
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return r.Now }
	}
	checker := registrycheck.New(cfg)
	parallel.For(registryWorkers, len(asks), func(k int) {
		a := &asks[k]
		if !a.ok {
			a.answer = registrycheck.Result{Answer: registrycheck.Unknown, Detail: "the runtime records no repository digest to ask a registry about"}
			return
		}
		a.answer = checker.Check(ctx, a.content)
	})
	summary := &workerresult.RegistryChecks{}
	var notes []string
	if rc.Note != "" {
		notes = append(notes, rc.Note)
	}
	if checker.CacheErr != nil {
		notes = append(notes, "earlier answers not read, asked again: "+checker.CacheErr.Error())
	}
	if err := checker.Save(); err != nil {
		notes = append(notes, "answers not cached: "+err.Error())
	}
	summary.Error = strings.Join(notes, "; ")
	if summary.Error != "" {
		opts.Log.Warn("registry check", "note", summary.Error)
	}
	drop := make([]bool, len(remove))
	var kept []Result
	for _, a := range asks {
		rm := &remove[a.n]
		img := s.Images[rm.Image]
		content := a.content.String()
		if !a.ok {
			content = ""
		}
		summary.Add(img.ID, string(a.answer.Answer), a.answer.Detail, a.answer.Cached)
		opts.Log.Info("registry check", "image", img.ID, "names", img.Tags, "content", content, "policy", string(rm.Policy),
			"because", a.why, "answer", string(a.answer.Answer), "detail", a.answer.Detail, "cached", a.answer.Cached)
		outcome, ok := registryOutcome(a.answer.Answer, rc.RemoveUnreachable)
		detail := fmt.Sprintf("registry %s (%s); %s", a.answer.Answer, a.answer.Detail, a.why)
		if ok {
			rm.Detail = strings.TrimPrefix(rm.Detail+"; "+detail, "; ")
			if a.answer.Answer == registrycheck.Unknown {
				rm.Detail += "; removed anyway: whenUnreachable is remove"
			}
			continue
		}
		drop[a.n] = true
		if a.n >= planned {
			continue
		}
		kept = append(kept, Result{Target: rm.Target, ImageID: img.ID, Names: img.Tags, Outcome: outcome, Bytes: img.Size, Policy: rm.Policy,
			Detail: fmt.Sprintf("%s would remove it (%s), but %s", rm.Policy, rm.Detail, detail)})
	}
	summary.Requests = checker.Requests()
	info.RegistryChecks = summary
	var out []Removal
	for n, rm := range remove[:planned] {
		if !drop[n] {
			out = append(out, rm)
		}
	}
	var left []retention.Candidate
	for k, c := range spare {
		if !drop[planned+k] {
			left = append(left, c)
		}
	}
	return out, kept, left
}
