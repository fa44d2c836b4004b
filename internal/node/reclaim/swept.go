package reclaim

import (
	"cmp"
	"context"
	"fmt"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// SweptStores names the result of the sweep of containerd's stores. The
// blobs and snapshot directories no record names (what a collection cut
// short left) are in no listing, so what deleting them freed is seen only
// on the image filesystem.
const SweptStores = "containerd's stores"

// used is one reading of the image filesystem's used bytes: ok false where
// the worker does not see it (or read fails, err).
type used struct {
	bytes uint64
	ok    bool
	err   error
}

func measureUsed(ctx context.Context, read func(context.Context) (uint64, error)) used {
	if read == nil {
		return used{}
	}
	n, err := read(ctx)
	return used{bytes: n, ok: err == nil, err: err}
}

// sweptStores is the sweep's result, from the image filesystem's used
// bytes before and after it, less the bytes of the unreferenced leftovers
// the same collection deleted (results: counted in their own). Where the
// filesystem is not seen it says so, Bytes unknown rather than 0; ok is
// false when, measured, the sweep freed nothing more.
func sweptStores(before, after used, results []Result) (Result, bool) {
	r := Result{Leftover: leftover.Leftover{Kind: leftoverkind.Unreferenced, Namespace: CRINamespace, Name: SweptStores,
		Why: "files no record names, swept by containerd's garbage collector"}, Outcome: Reclaimed}
	if err := cmp.Or(before.err, after.err); err != nil {
		r.BytesUnknown, r.Detail = true, fmt.Sprintf("what the sweep freed is not known: the image filesystem could not be read (%v)", err)
		return r, true
	}
	if !before.ok || !after.ok {
		r.BytesUnknown, r.Detail = true, "what the sweep freed is not known: the image filesystem is not seen from here"
		return r, true
	}
	var counted uint64
	for _, o := range results {
		if o.Kind == leftoverkind.Unreferenced && o.Outcome == Reclaimed && o.Name != SweptStores {
			counted += o.Bytes
		}
	}
	// Other writes during the sweep may outweigh what it freed: then it
	// freed nothing that can be told apart from them.
	freed := before.bytes - min(before.bytes, after.bytes)
	r.Bytes = freed - min(freed, counted)
	r.Detail = fmt.Sprintf("the image filesystem's use fell by %s over the collection, %s of it the unreferenced leftovers listed", bytesize.Format(freed), bytesize.Format(min(freed, counted)))
	return r, r.Bytes > 0
}
