package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/eraser-oss/eraser/internal/process/version"
)

// versionPackage is where the -X stamps go.
const versionPackage = "github.com/eraser-oss/eraser/internal/process/version"

// result is one image built for one platform, and where it was written.
type result struct {
	Component component
	Platform  platform
	Ref       string
	Image     v1.Image
	Tarball   string
	Layout    string
}

// build compiles the components for the platforms each of them supports
// among plats, composes their images and writes them under o.Out.
func build(ctx context.Context, o options, comps []component, plats []platform) ([]result, error) {
	type job struct {
		c     component
		plats []platform
	}
	var jobs []job
	for _, c := range comps {
		if c.Optional && !hasGoFiles(filepath.Join(o.Root, c.Module, c.Package)) {
			o.Log("skipping %s: %s has no Go files yet", c.Name, path.Join(c.Module, c.Package))
			continue
		}
		var ps []platform
		for _, p := range plats {
			if slices.Contains(c.Platforms, p) {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			o.Log("skipping %s: it is built for %v, none of them asked for", c.Name, c.Platforms)
			continue
		}
		jobs = append(jobs, job{c, ps})
	}
	if len(jobs) == 0 {
		return nil, errors.New("nothing to build")
	}

	// Before minutes of compiling: a host without a bundle fails at once.
	caCerts, err := readCABundle(o.CACerts)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "ocibuild")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	// One go build per module, environment and platform, so that the go
	// command schedules the packages together.
	type group struct {
		module, env string
		p           platform
	}
	pkgs := map[group][]string{}
	var order []group
	for _, j := range jobs {
		for _, p := range j.plats {
			g := group{j.c.Module, strings.Join(j.c.BuildEnv, " "), p}
			if _, ok := pkgs[g]; !ok {
				order = append(order, g)
			}
			pkgs[g] = append(pkgs[g], j.c.Package)
		}
	}
	binDir := func(module string, p platform) string {
		return filepath.Join(work, strings.ReplaceAll(module, "/", "_"), p.OS+"_"+p.Arch)
	}
	for _, g := range order {
		o.Log("compiling %s for %s (module %s)", strings.Join(pkgs[g], " "), g.p, g.module)
		if err := compile(ctx, o, g.module, pkgs[g], strings.Fields(g.env), g.p, binDir(g.module, g.p)); err != nil {
			return nil, err
		}
	}

	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	var results []result
	for _, j := range jobs {
		ref := o.Registry + "/" + j.c.Repo + ":" + o.Version
		tag, err := name.NewTag(ref, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("image reference %q: %w", ref, err)
		}
		var adds []mutate.IndexAddendum
		for _, p := range j.plats {
			bin, err := os.ReadFile(filepath.Join(binDir(j.c.Module, p), binaryName(j.c, p)))
			if err != nil {
				return nil, err
			}
			img, err := composeImage(o, j.c, p, bin, caCerts)
			if err != nil {
				return nil, fmt.Errorf("%s for %s: %w", j.c.Name, p, err)
			}
			tb := filepath.Join(o.Out, fmt.Sprintf("%s_%s_%s.tar", j.c.Name, p.OS, p.Arch))
			if err := writeTarball(tb, tag, img); err != nil {
				return nil, fmt.Errorf("writing %s: %w", tb, err)
			}
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
			results = append(results, result{Component: j.c, Platform: p, Ref: ref, Image: img, Tarball: tb})
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
		dir := filepath.Join(o.Out, j.c.Name)
		if err := writeLayout(dir, tag, idx); err != nil {
			return nil, fmt.Errorf("writing %s: %w", dir, err)
		}
		for i := range results {
			if results[i].Component.Name == j.c.Name {
				results[i].Layout = dir
			}
		}
	}
	return results, nil
}

// compile builds static binaries of the main packages of one module for
// one platform into dir, named after the packages.
func compile(ctx context.Context, o options, module string, pkgs, env []string, p platform, dir string) error {
	ldflags := buildLDFlags(o)
	// -buildvcs=false: the revision is stamped explicitly, so that the
	// binaries do not change with the state of the work tree.
	args := []string{"-C", filepath.Join(o.Root, module), "build", "-trimpath", "-buildvcs=false", "-o", dir + string(filepath.Separator)}
	if o.Tags != "" {
		args = append(args, "-tags="+o.Tags)
	}
	args = append(args, "-ldflags="+ldflags)
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w", strings.Join(pkgs, " "), p, err)
	}
	return nil
}

// buildLDFlags are o.LDFlags and the version stamps. Images for another
// registry than the default (make release) also stamp it, so that the
// manager defaults its workers to that registry; the default registry's
// binaries stay as they were.
func buildLDFlags(o options) string {
	ldflags := strings.TrimSpace(fmt.Sprintf("%s -X %s.Version=%s -X %s.Commit=%s",
		o.LDFlags, versionPackage, o.Version, versionPackage, o.Revision))
	if o.Registry != version.DefaultRepo {
		ldflags += fmt.Sprintf(" -X %s.DefaultRepo=%s", versionPackage, o.Registry)
	}
	return ldflags
}

func binaryName(c component, p platform) string {
	n := path.Base(c.Package)
	if p.OS == "windows" {
		n += ".exe"
	}
	return n
}

func hasGoFiles(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

// writeTarball writes a docker-archive ("docker save" format) naming the
// image by its full reference.
func writeTarball(file string, tag name.Tag, img v1.Image) error {
	tmp := file + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// writeLayout replaces dir with an OCI image layout whose index.json points
// at the multi-platform index, annotated with the tag (for skopeo and
// crane, "oci:dir:tag") and the full reference (for ctr import of the
// layout as a tar).
func writeLayout(dir string, tag name.Tag, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.String(),
	}))
}

func printSummary(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tPLATFORM\tID\tLAYER\tTARBALL")
	for _, r := range results {
		id, _ := r.Image.ConfigName()
		var size int64
		if layers, err := r.Image.Layers(); err == nil {
			for _, l := range layers {
				s, _ := l.Size()
				size += s
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f MiB\t%s\n", r.Ref, r.Platform, id.Hex[:12], float64(size)/(1<<20), r.Tarball)
	}
	_ = tw.Flush()
}
