package cri

// The pause images: the one the runtime starts pods with, and the ones the
// node's pod sandboxes were started from.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxImage is the pause image the runtime starts every pod with, as its
// verbose status reports it ("" when it does not say). containerd 1.6 does
// not mark this image pinned, and removing it breaks every new pod.
func (c *Client) SandboxImage(ctx context.Context) (string, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	resp, err := c.runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return "", fmt.Errorf("reading runtime status: %w", err)
	}
	return sandboxImageFromInfo(resp.GetInfo()), nil
}

// PodSandboxImages are the images the node's pod sandboxes (in any state)
// were started from, as the runtime's verbose sandbox status reports them
// (containerd: "image" in the "info" JSON). CRI lists no container for a
// sandbox, so nothing else ties the pause image to the pods that need it.
// Sandboxes whose status does not name an image are left out; a sandbox
// removed while this runs is skipped.
func (c *Client) PodSandboxImages(ctx context.Context) ([]string, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	items, err := c.listSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, sb := range items {
		st, err := c.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.GetId(), Verbose: true})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading pod sandbox %s: %w", sb.GetId(), err)
		}
		if img := sandboxImageFromSandboxInfo(st.GetInfo()); img != "" && !seen[img] {
			seen[img] = true
			out = append(out, img)
		}
	}
	return out, nil
}

// sandboxImageFromSandboxInfo reads the image of containerd's verbose pod
// sandbox status ("" when it does not say).
func sandboxImageFromSandboxInfo(info map[string]string) string {
	raw, ok := info["info"]
	if !ok {
		return ""
	}
	var sb struct {
		Image string `json:"image"`
	}
	if json.Unmarshal([]byte(raw), &sb) != nil {
		return ""
	}
	return strings.TrimSpace(sb.Image)
}

// sandboxImageFromInfo reads containerd's verbose "config": 1.x has
// sandboxImage at the top, 2.x under pinnedImages.sandbox.
func sandboxImageFromInfo(info map[string]string) string {
	raw, ok := info["config"]
	if !ok {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
		PinnedImages struct {
			Sandbox string `json:"sandbox"`
		} `json:"pinnedImages"`
	}
	if json.Unmarshal([]byte(raw), &cfg) != nil {
		return ""
	}
	if cfg.SandboxImage != "" {
		return cfg.SandboxImage
	}
	return cfg.PinnedImages.Sandbox
}

// PodSandboxIDs are the IDs of the node's pod sandboxes, in any state: on
// CRI-O, each has storage of its own under that ID.
func (c *Client) PodSandboxIDs(ctx context.Context) ([]string, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	items, err := c.listSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, sb := range items {
		out = append(out, sb.GetId())
	}
	return out, nil
}

// listSandboxes lists every pod sandbox, in any state.
func (c *Client) listSandboxes(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
	resp, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	return resp.GetItems(), nil
}
