package plugin

// The commands that change what Eraser does: run, pause, resume.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/pause"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

func runFlags(*flag.FlagSet) func(context.Context, env, []string) int {
	return func(ctx context.Context, e env, operands []string) int {
		if len(operands) != 1 {
			fmt.Fprintln(e.errOut, "usage: kubectl eraser run imagelist/<name> | schedule")
			return ExitUsage
		}
		// The value is the request's time, for whoever reads the object;
		// the manager takes any value as a request.
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, eraserv1.AnnotationRunNow, time.Now().UTC().Format(time.RFC3339)))
		target := operands[0]
		var obj client.Object
		var what string
		if target == "schedule" {
			obj = &corev1.ConfigMap{}
			obj.SetNamespace(e.namespace)
			obj.SetName(schedtimes.StateName)
			what = "a scheduled run"
		} else {
			kind, name, ok := strings.Cut(target, "/")
			if !ok || name == "" || !isImageList(kind) {
				fmt.Fprintf(e.errOut, "%q: want imagelist/<name> or schedule\n", target)
				return ExitUsage
			}
			obj = &eraserv1.ImageList{}
			obj.SetName(name)
			what = "ImageList " + name
		}
		if err := e.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			if apierrors.IsNotFound(err) && target == "schedule" {
				fmt.Fprintf(e.errOut, "no schedule in namespace %s (ConfigMap %s): scheduled runs are off, or the manager has not started\n", e.namespace, schedtimes.StateName)
				return ExitFailed
			}
			fmt.Fprintf(e.errOut, "requesting %s: %v\n", what, err)
			return ExitFailed
		}
		fmt.Fprintf(e.out, "requested %s now (%s); kubectl eraser status shows it start, or why it waits\n", what, eraserv1.AnnotationRunNow)
		return ExitOK
	}
}

func isImageList(kind string) bool {
	switch strings.ToLower(kind) {
	case "imagelist", "imagelists", "il", "imagelist.eraser.sh", "imagelists.eraser.sh":
		return true
	}
	return false
}

func pauseFlags(fs *flag.FlagSet) func(context.Context, env, []string) int {
	reason := fs.String("reason", "", "why, for whoever finds Eraser paused")
	return func(ctx context.Context, e env, operands []string) int {
		if len(operands) != 0 {
			fmt.Fprintln(e.errOut, "usage: kubectl eraser pause [--reason TEXT]")
			return ExitUsage
		}
		err := e.c.Create(ctx, pause.New(e.namespace, *reason, e.who))
		if apierrors.IsAlreadyExists(err) {
			s, rerr := readPause(ctx, e.c, e.namespace)
			if rerr == nil {
				fmt.Fprintf(e.out, "already paused since %s%s\n", s.Since.UTC().Format(time.RFC3339), byWhom(s))
				return ExitOK
			}
			err = rerr
		}
		if err != nil {
			fmt.Fprintf(e.errOut, "pausing: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintf(e.out, "paused: no run or wave starts; running workers finish (ConfigMap %s/%s). kubectl eraser resume goes on.\n", e.namespace, pause.Name)
		return ExitOK
	}
}

func byWhom(s pause.State) string {
	out := ""
	if s.By != "" {
		out += " by " + s.By
	}
	if s.Reason != "" {
		out += " (" + s.Reason + ")"
	}
	return out
}

// readPause reads the pause switch in namespace (absent: not paused).
func readPause(ctx context.Context, c client.Reader, namespace string) (pause.State, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pause.Name}, cm)
	if apierrors.IsNotFound(err) {
		return pause.State{}, nil
	}
	if err != nil {
		return pause.State{}, fmt.Errorf("reading the pause switch, ConfigMap %s: %w", pause.Name, err)
	}
	return pause.Of(cm), nil
}

func resumeFlags(*flag.FlagSet) func(context.Context, env, []string) int {
	return func(ctx context.Context, e env, operands []string) int {
		if len(operands) != 0 {
			fmt.Fprintln(e.errOut, "usage: kubectl eraser resume")
			return ExitUsage
		}
		err := e.c.Delete(ctx, pause.New(e.namespace, "", ""))
		if apierrors.IsNotFound(err) {
			fmt.Fprintln(e.out, "not paused")
			return ExitOK
		}
		if err != nil {
			fmt.Fprintf(e.errOut, "resuming: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintln(e.out, "resumed: held runs start, running runs go on from where they stopped")
		return ExitOK
	}
}
