package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/robfig/cron/v3"
)

// LogLevels are the levels the workers log at: manager.logLevel takes them
// without a warning (and upstream's levels above error with one).
var LogLevels = []string{"debug", "info", "warn", "error"}

// convert validates a decoded document and turns it into a Config.
func convert(doc any) (*Config, []string, field.ErrorList) {
	c := &converter{cfg: &Config{}}
	var common managerCommon
	var comps components
	var head document
	mgr := field.NewPath("manager")
	switch d := doc.(type) {
	case *documentV1alpha1:
		head, common = d.document, d.Manager.managerCommon
		comps = components{Collector: d.Components.Collector, Scanner: d.Components.Scanner, Remover: d.Components.Eraser}
		c.runtimeName(mgr.Child("runtime"), d.Manager.Runtime)
	case *documentV1alpha2:
		head, common, comps = d.document, d.Manager.managerCommon, d.Components
		c.runtimeName(mgr.Child("runtime"), d.Manager.Runtime)
	case *documentV1alpha3:
		head, common, comps = d.document, d.Manager.managerCommon, d.Components
		c.runtime(mgr.Child("runtime"), d.Manager.Runtime)
		c.podLabels(mgr.Child("additionalPodLabels"), d.Manager.AdditionalPodLabels)
	default:
		panic(fmt.Sprintf("config: unexpected document %T", doc))
	}
	c.cfg.APIVersion = head.APIVersion
	if c.cfg.Manager.Runtime.WindowsAddress == "" {
		c.cfg.Manager.Runtime.WindowsAddress = DefaultWindowsAddress
	}
	if head.Kind != "" && head.Kind != Kind {
		c.errs = append(c.errs, field.NotSupported(field.NewPath("kind"), head.Kind, []string{Kind}))
	}
	c.manager(mgr, common)
	remover := field.NewPath("components", "remover")
	if head.APIVersion == VersionV1alpha1 {
		remover = field.NewPath("components", "eraser")
	}
	c.cfg.Components = Components{
		Collector: c.component(field.NewPath("components", "collector"), comps.Collector),
		Scanner:   c.component(field.NewPath("components", "scanner"), comps.Scanner),
		Remover:   c.component(remover, comps.Remover),
	}
	if !comps.Remover.Enabled {
		c.warn(remover.Child("enabled"), removerDisabledWarning)
	}
	c.cfg.Components.Remover.Enabled = true
	if c.cfg.Components.Scanner.Enabled && !c.cfg.Components.Collector.Enabled {
		c.warn(field.NewPath("components", "scanner", "enabled"), "the scanner runs only in scheduled runs, which need components.collector.enabled: true")
	}
	if err := scannerRuntime(c.cfg.Manager.Runtime.Name, c.cfg.Components); err != nil {
		c.errs = append(c.errs, err)
	}
	c.scannerConfig(field.NewPath("components", "scanner", "config"), &c.cfg.Components.Scanner, c.cfg.Components.Collector.Enabled)
	c.scannerVolumes(field.NewPath("components", "scanner", "volumes"), c.cfg.Components.Scanner.Volumes)
	c.runTimeout()
	return c.cfg, c.warnings, c.errs
}

type converter struct {
	cfg      *Config
	errs     field.ErrorList
	warnings []string
}

func (c *converter) warn(p *field.Path, msg string) {
	c.warnings = append(c.warnings, p.String()+": "+msg)
}

func (c *converter) manager(p *field.Path, m managerCommon) {
	out := &c.cfg.Manager
	if m.OTLPEndpoint != "" {
		if _, port, err := net.SplitHostPort(m.OTLPEndpoint); err != nil || port == "" {
			c.errs = append(c.errs, field.Invalid(p.Child("otlpEndpoint"), m.OTLPEndpoint, "must be host:port, without a scheme"))
		}
	}
	out.OTLPEndpoint = m.OTLPEndpoint

	level, warning, lerr := logLevel(p.Child("logLevel"), m.LogLevel)
	switch {
	case lerr != nil:
		c.errs = append(c.errs, lerr)
	case warning != "":
		c.warn(p.Child("logLevel"), warning)
	}
	out.LogLevel = level

	sched := p.Child("scheduling")
	out.Scheduling.RepeatInterval = c.duration(sched.Child("repeatInterval"), m.Scheduling.RepeatInterval, true)
	out.Scheduling.BeginImmediately = m.Scheduling.BeginImmediately
	if m.Scheduling.Cron != "" {
		if _, err := cron.ParseStandard(m.Scheduling.Cron); err != nil {
			c.errs = append(c.errs, field.Invalid(sched.Child("cron"), m.Scheduling.Cron, "must be a cron expression such as \"0 3 * * *\": "+err.Error()))
		}
	}
	out.Scheduling.Cron = m.Scheduling.Cron
	out.Scheduling.DryRun = m.Scheduling.DryRun
	out.Scheduling.CatchUpBatch = c.duration(sched.Child("catchUpBatch"), m.Scheduling.CatchUpBatch, false)
	out.Scheduling.CatchUp = m.Scheduling.CatchUp

	out.Profile = Profile{Enabled: m.Profile.Enabled, Port: m.Profile.Port}
	if port := m.Profile.Port; port < 0 || port > 65535 || (m.Profile.Enabled && port == 0) {
		c.errs = append(c.errs, field.Invalid(p.Child("profile", "port"), port, "must be a TCP port, 1-65535"))
	}

	job := p.Child("imageJob")
	ratio := m.ImageJob.SuccessRatio
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		c.errs = append(c.errs, field.Invalid(job.Child("successRatio"), ratio, "must be between 0 and 1"))
	}
	out.ImageJob.SuccessRatio = ratio
	out.ImageJob.Cleanup.DelayOnSuccess = c.duration(job.Child("cleanup", "delayOnSuccess"), m.ImageJob.Cleanup.DelayOnSuccess, false)
	out.ImageJob.Cleanup.DelayOnFailure = c.duration(job.Child("cleanup", "delayOnFailure"), m.ImageJob.Cleanup.DelayOnFailure, false)
	out.ImageJob.Cleanup.KeepReportFor = c.duration(job.Child("cleanup", "keepReportFor"), m.ImageJob.Cleanup.KeepReportFor, false)
	if q := c.quantity(job.Child("cleanup", "maxReportSize"), m.ImageJob.Cleanup.MaxReportSize); q != nil {
		out.ImageJob.Cleanup.MaxReportSize = q.Value()
	}
	out.ImageJob.PodStartTimeout = c.duration(job.Child("podStartTimeout"), m.ImageJob.PodStartTimeout, true)
	out.ImageJob.PodRunTimeout = c.duration(job.Child("podRunTimeout"), m.ImageJob.PodRunTimeout, true)
	out.ImageJob.NodeWaitTimeout = c.duration(job.Child("nodeWaitTimeout"), m.ImageJob.NodeWaitTimeout, true)
	out.ImageJob.MaxConcurrentNodes = c.maxConcurrent(job.Child("maxConcurrentNodes"), m.ImageJob.MaxConcurrentNodes)
	out.ImageJob.MaxFailedNodes = c.maxFailed(job.Child("maxFailedNodes"), m.ImageJob.MaxFailedNodes)
	out.ImageJob.MaxWorkerPods = DefaultMaxWorkerPods
	if n := m.ImageJob.MaxWorkerPods; n != nil {
		if *n < 0 {
			c.errs = append(c.errs, field.Invalid(job.Child("maxWorkerPods"), *n, "must be a number of pods, 0 for no bound"))
		}
		out.ImageJob.MaxWorkerPods = *n
	}
	c.nodeSelector(job.Child("nodeSelector"), m.ImageJob.NodeSelector)
	out.ImageJob.NodeSelector = m.ImageJob.NodeSelector
	c.tolerations(job.Child("tolerations"), m.ImageJob.Tolerations)
	out.ImageJob.Tolerations = m.ImageJob.Tolerations

	for i, s := range m.PullSecrets {
		for _, msg := range validation.IsDNS1123Subdomain(s) {
			c.errs = append(c.errs, field.Invalid(p.Child("pullSecrets").Index(i), s, msg))
		}
	}
	out.PullSecrets = m.PullSecrets

	if m.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(m.PriorityClassName) {
			c.errs = append(c.errs, field.Invalid(p.Child("priorityClassName"), m.PriorityClassName, msg))
		}
	}
	out.PriorityClassName = m.PriorityClassName

	filter := p.Child("nodeFilter")
	out.NodeFilter.Type = NodeFilterType(m.NodeFilter.Type)
	if t := out.NodeFilter.Type; t != FilterExclude && t != FilterInclude {
		c.errs = append(c.errs, field.NotSupported(filter.Child("type"), m.NodeFilter.Type, []string{string(FilterExclude), string(FilterInclude)}))
	}
	for i, s := range m.NodeFilter.Selectors {
		if _, err := labels.Parse(s); err != nil || s == "" {
			msg := "must be a label selector, e.g. kubernetes.io/os=windows"
			if err != nil {
				msg = err.Error()
			}
			c.errs = append(c.errs, field.Invalid(filter.Child("selectors").Index(i), s, msg))
		}
	}
	out.NodeFilter.Selectors = m.NodeFilter.Selectors

	out.Retention = c.retention(p.Child("retention"), m.Retention)
	out.Leftovers = c.leftovers(p.Child("leftovers"), m.Leftovers)
}

// nodeSelector checks each pair as a label a node could carry, naming the
// key in the path (metav1 validation would name only the map).
func (c *converter) nodeSelector(p *field.Path, sel map[string]string) {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(k) {
			c.errs = append(c.errs, field.Invalid(p.Key(k), k, "must be a label key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(sel[k]) {
			c.errs = append(c.errs, field.Invalid(p.Key(k), sel[k], "must be a label value: "+msg))
		}
	}
}

// tolerations refuses what the API server would refuse in the worker pods
// (where it would fail every node instead of the configuration), and the
// Lt/Gt operators, which the choice of nodes does not evaluate.
func (c *converter) tolerations(p *field.Path, list []corev1.Toleration) {
	operators := []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	for i, t := range list {
		tp := p.Index(i)
		if t.Key != "" {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				c.errs = append(c.errs, field.Invalid(tp.Child("key"), t.Key, msg))
			}
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			if t.Value != "" {
				c.errs = append(c.errs, field.Invalid(tp.Child("value"), t.Value, "must be empty when operator is Exists"))
			}
		case "", corev1.TolerationOpEqual:
			if t.Key == "" {
				c.errs = append(c.errs, field.Invalid(tp.Child("operator"), t.Operator, "must be Exists when key is empty (which tolerates every taint)"))
			}
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				c.errs = append(c.errs, field.Invalid(tp.Child("value"), t.Value, msg))
			}
		default:
			c.errs = append(c.errs, field.NotSupported(tp.Child("operator"), t.Operator, operators))
		}
		if t.Effect != "" && !slices.Contains(effects, t.Effect) {
			c.errs = append(c.errs, field.NotSupported(tp.Child("effect"), t.Effect, effects))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			c.errs = append(c.errs, field.Invalid(tp.Child("tolerationSeconds"), *t.TolerationSeconds, "only a NoExecute toleration can have tolerationSeconds"))
		}
	}
}

func (c *converter) podLabels(p *field.Path, l map[string]string) {
	c.errs = append(c.errs, metav1validation.ValidateLabels(l, p)...)
	c.cfg.Manager.AdditionalPodLabels = l
}

// duration parses a Go duration ("24h", "90m", "0s"); a bare 0 is accepted as
// zero. Negative durations are refused, and so is zero where it would make the
// manager spin.
func (c *converter) duration(p *field.Path, s scalar, positive bool) time.Duration {
	str := string(s)
	if str == "0" {
		str = "0s"
	}
	d, err := time.ParseDuration(str)
	switch {
	case err != nil:
		c.errs = append(c.errs, field.Invalid(p, string(s), `must be a duration such as "24h", "90m" or "0s"`))
	case d < 0:
		c.errs = append(c.errs, field.Invalid(p, string(s), "must not be negative"))
	case positive && d == 0:
		c.errs = append(c.errs, field.Invalid(p, string(s), "must be greater than zero"))
	}
	return d
}

func (c *converter) quantity(p *field.Path, s scalar) *resource.Quantity {
	if s == "" {
		return nil
	}
	q, err := resource.ParseQuantity(string(s))
	if err != nil {
		c.errs = append(c.errs, field.Invalid(p, string(s), `must be a quantity such as "25Mi", "500m" or "1"`))
		return nil
	}
	if q.Sign() < 0 {
		c.errs = append(c.errs, field.Invalid(p, string(s), "must not be negative"))
		return nil
	}
	if q.IsZero() {
		// Upstream's shipped configs write "cpu: 0" to mean "no value".
		return nil
	}
	return &q
}

func (c *converter) component(p *field.Path, d componentDoc) Component {
	out := Component{Enabled: d.Enabled, Image: Image{Repo: d.Image.Repo, Tag: string(d.Image.Tag)}, Config: d.Config, Volumes: d.Volumes}
	if d.Image.Repo == "" {
		c.errs = append(c.errs, field.Required(p.Child("image", "repo"), "the worker image's repository"))
	}
	out.Request = Resources{Mem: c.quantity(p.Child("request", "mem"), d.Request.Mem), CPU: c.quantity(p.Child("request", "cpu"), d.Request.CPU)}
	out.Limit = Resources{Mem: c.quantity(p.Child("limit", "mem"), d.Limit.Mem), CPU: c.quantity(p.Child("limit", "cpu"), d.Limit.CPU)}
	if out.Limit.CPU != nil {
		// As upstream: a CPU limit throttles removals and scans for no gain.
		c.warn(p.Child("limit", "cpu"), "ignored: worker containers get no CPU limit")
		out.Limit.CPU = nil
	}
	if req, lim := out.Request.Mem, out.Limit.Mem; req != nil && lim != nil && req.Cmp(*lim) > 0 {
		c.errs = append(c.errs, field.Invalid(p.Child("request", "mem"), req.String(), "must not exceed limit.mem "+lim.String()))
	}
	if w := d.Windows; w != nil {
		wp := p.Child("windows")
		if w.Image != nil {
			if w.Image.Repo == "" {
				c.errs = append(c.errs, field.Required(wp.Child("image", "repo"), "the Windows image's repository"))
			}
			out.Windows.Image = Image{Repo: w.Image.Repo, Tag: string(w.Image.Tag)}
		}
		for i, arg := range w.Command {
			if arg == "" {
				c.errs = append(c.errs, field.Invalid(wp.Child("command").Index(i), arg, "must not be empty"))
			}
		}
		out.Windows.Command = w.Command
	}
	c.volumes(p.Child("volumes"), d.Volumes)
	return out
}
