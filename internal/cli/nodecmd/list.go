package nodecmd

// "eraser node list": every image on the node and what would keep it.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
)

func list(ctx context.Context, client *cri.Client, policy protect.Policy, asJSON bool, out io.Writer) error {
	snap, err := remover.ReadNode(ctx, client, policy)
	if err != nil {
		return err
	}
	order := make([]int, len(snap.Images))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return firstName(snap.Images[order[a]]) < firstName(snap.Images[order[b]]) })
	if asJSON {
		listed := make([]ListedImage, 0, len(order))
		for _, i := range order {
			img, v := snap.Images[i], snap.Verdict(i)
			verdict := "removable"
			if v.Reason != protect.Removable {
				verdict = string(v.Reason)
			}
			listed = append(listed, ListedImage{ID: img.ID, Names: nonNil(img.Tags), Digests: nonNil(img.Digests), Size: img.Size, Verdict: verdict, Detail: v.Detail})
		}
		return writeJSON(out, listed)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE ID\tNAMES\tSIZE\tVERDICT\tWHY")
	for _, i := range order {
		img := snap.Images[i]
		v := snap.Verdict(i)
		verdict, why := "removable", "-"
		if v.Reason != protect.Removable {
			verdict, why = "keep: "+string(v.Reason), v.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", shortID(img.ID), names(img), bytesize.Format(img.Size), verdict, why)
	}
	return tw.Flush()
}

// ListedImage is one image in "list -o json".
type ListedImage struct {
	ID      string   `json:"id"`
	Names   []string `json:"names"`
	Digests []string `json:"digests"`
	Size    uint64   `json:"size"`
	// Verdict is "removable" or why the image is kept: "in use", "pinned",
	// "excluded".
	Verdict string `json:"verdict"`
	Detail  string `json:"detail,omitempty"`
}

func firstName(img cri.Image) string {
	if len(img.Tags) > 0 {
		return img.Tags[0]
	}
	return "~" + img.ID
}

func names(img cri.Image) string {
	if len(img.Tags) == 0 {
		return "<none>"
	}
	return strings.Join(img.Tags, ",")
}
