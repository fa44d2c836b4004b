package scan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Service is the cluster's scan service as a scanner sees it.
type Service interface {
	Claim(ctx context.Context, req scanshare.ClaimRequest) (scanshare.ClaimResponse, error)
	Share(ctx context.Context, req scanshare.ShareRequest) (scanshare.ShareResponse, error)
}

// Sharing is how a scanner shares its verdicts with the rest of the
// cluster.
type Sharing struct {
	Service Service
	// DB is the digest of the vulnerability DB this scanner judges with;
	// Platform the node's os/arch; Policy the policy's fingerprint
	// (PolicyKey).
	DB, Platform, Policy string
	// Patience is how long the scanner waits for the verdicts others are
	// making without any arriving, before it scans those images itself.
	Patience time.Duration
	// Wait is how long, in seconds, the service may hold a claim that
	// would only say wait (scanshare.ClaimRequest.Wait).
	Wait int
	Log  *slog.Logger
}

// PolicyKey fingerprints what, besides the image and the DB, decides a
// verdict: the engine (its name and version) and the policy.
func PolicyKey(engine string, p Policy) string {
	norm := p
	for _, l := range []*[]string{&norm.Severities, &norm.Types, &norm.IgnoredStatuses} {
		s := make([]string, 0, len(*l))
		for _, v := range *l {
			s = append(s, strings.ToUpper(v))
		}
		slices.Sort(s)
		*l = slices.Compact(s)
	}
	b, _ := json.Marshal(struct {
		Engine string
		Policy Policy
	}{engine, norm})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RunShared is Run for a scanner of a cluster that shares verdicts: the
// images whose verdicts another node made are judged by those, the images
// the service hands this scanner are scanned and their verdicts shared,
// and the images other nodes are scanning are waited for. Whatever the
// service cannot answer (it is down, it refuses, it is slow beyond
// Patience) is scanned here: sharing only ever saves scans.
func RunShared(ctx context.Context, e Engine, images []handoff.Image, p Policy, perImage, total time.Duration, sh Sharing) []Judgement {
	if total > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, total)
		defer cancel()
	}
	r := &sharedRun{ctx: ctx, engine: e, policy: p, perImage: perImage, sh: sh, byKey: map[scanshare.Key][]int{}, out: make([]Judgement, len(images)), done: make([]bool, len(images))}
	var local []int
	for i, img := range images {
		d, ok := scanshare.Digest(img.ImageID)
		if !ok {
			local = append(local, i)
			continue
		}
		k := scanshare.Key{Digest: d, Platform: sh.Platform, DB: sh.DB, Policy: sh.Policy}
		if len(r.byKey[k]) == 0 {
			r.pending = append(r.pending, k)
		}
		r.byKey[k] = append(r.byKey[k], i)
	}
	r.images = images
	r.share()
	for _, i := range local {
		r.scan(i)
	}
	// What the service left unanswered is scanned here.
	for i := range images {
		if !r.done[i] {
			r.scan(i)
		}
	}
	return r.out
}

type sharedRun struct {
	ctx      context.Context
	engine   Engine
	policy   Policy
	perImage time.Duration
	sh       Sharing
	images   []handoff.Image
	byKey    map[scanshare.Key][]int
	pending  []scanshare.Key
	out      []Judgement
	done     []bool
	// cannot: the engine cannot judge (ErrCannotJudge); the service is not
	// asked for more to scan.
	cannot bool
}

// share asks the service until every key is answered, the service fails,
// or no verdict comes for longer than Patience.
func (r *sharedRun) share() {
	lastProgress := time.Now()
	for len(r.pending) > 0 && r.ctx.Err() == nil {
		ask := r.pending[:min(len(r.pending), scanshare.MaxKeys)]
		asked := time.Now()
		resp, err := r.sh.Service.Claim(r.ctx, scanshare.ClaimRequest{Keys: ask, Wait: r.sh.Wait})
		if err != nil {
			r.sh.Log.Warn("the scan service did not answer: this node scans the rest of its images itself", "images", len(r.pending), "error", err)
			return
		}
		answered := map[scanshare.Key]bool{}
		for _, v := range resp.Verdicts {
			if !slices.Contains(ask, v.Key) || !scanshare.Shareable(v.Scan.Verdict) {
				continue
			}
			answered[v.Key] = true
			// A verdict no scan makes (one that removes on no evidence) is
			// not asked for again, which would bring it back, nor taken:
			// the image is scanned here.
			if err := scanshare.ValidateScan(v.Scan); err != nil {
				r.sh.Log.Warn("the scan service handed over a verdict no scan makes: this node scans the image itself", "digest", v.Key.Digest, "error", err)
				continue
			}
			for _, i := range r.byKey[v.Key] {
				r.out[i], r.done[i] = sharedJudgement(r.images[i], v, r.policy), true
			}
		}
		var req scanshare.ShareRequest
		for _, k := range resp.Scan {
			if !slices.Contains(ask, k) || answered[k] {
				continue
			}
			answered[k] = true
			j := r.scan(r.byKey[k][0])
			for _, i := range r.byKey[k][1:] {
				r.out[i], r.done[i] = j, true
				r.out[i].Image = r.images[i]
			}
			// Only a verdict on the key's content is shared; scan made
			// every other one not scanned.
			if verdict, _ := j.Explain(); scanshare.Shareable(verdict.Verdict) && j.Content == k.Digest {
				req.Verdicts = append(req.Verdicts, scanshare.Shared{Key: k, Scan: verdict})
			} else {
				req.Released = append(req.Released, k)
			}
		}
		if len(req.Verdicts)+len(req.Released) > 0 {
			if _, err := r.sh.Service.Share(r.ctx, req); err != nil {
				// The verdicts hold here; others will scan these images.
				r.sh.Log.Warn("sharing verdicts failed", "verdicts", len(req.Verdicts), "error", err)
			}
		}
		if r.cannot {
			r.sh.Log.Warn("this node cannot scan: the rest of its images are kept unjudged", "images", len(r.pending)-len(answered))
			return
		}
		if len(answered) > 0 {
			lastProgress = time.Now()
		}
		rest := r.pending[:0]
		for _, k := range r.pending {
			if !answered[k] {
				rest = append(rest, k)
			}
		}
		r.pending = rest
		if len(r.pending) == 0 {
			return
		}
		if time.Since(lastProgress) > r.sh.Patience {
			r.sh.Log.Warn("no verdict came from the other nodes in time: this node scans the rest itself", "images", len(r.pending), "patience", r.sh.Patience)
			return
		}
		// After progress, or a claim the service held until its wait ran
		// out, ask again at once (a service that holds claims answers as
		// soon as it has something). One that answered at once with
		// nothing is asked again after RetryAfter.
		if wait := time.Duration(max(resp.RetryAfter, 1))*time.Second - time.Since(asked); len(answered) == 0 && wait > 0 {
			select {
			case <-r.ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// sharedJudgement judges img by a verdict another node made.
func sharedJudgement(img handoff.Image, v scanshare.Verdict, p Policy) Judgement {
	j := Judgement{Image: img, Verdict: Verdict(v.Scan.Verdict), EndOfLife: v.Scan.EndOfLife, More: v.Scan.MoreFindings,
		From: &workerresult.Origin{Node: v.Node, Pod: v.Pod, ConfirmedBy: v.ConfirmedBy}}
	for _, f := range v.Scan.Findings {
		j.Findings = append(j.Findings, Finding{ID: f.ID, Severity: f.Severity, Package: f.Package, FixedVersion: f.FixedVersion})
	}
	// Whether the verdict removes is this node's policy's call: the same
	// policy, since it is in the key, but decided here all the same. A
	// vulnerable verdict that names no finding removes nothing.
	switch j.Verdict {
	case Vulnerable:
		j.Remove = len(j.Findings) > 0
	case EndOfLife:
		j.Remove = p.DeleteEOL
	}
	return j
}

// scan scans image i here, within the run's and the image's deadlines.
func (r *sharedRun) scan(i int) Judgement {
	img := r.images[i]
	if r.ctx.Err() != nil {
		r.out[i], r.done[i] = Judgement{Image: img, Verdict: NotScanned}, true
		return r.out[i]
	}
	ictx, cancel := r.ctx, context.CancelFunc(func() {})
	if r.perImage > 0 {
		ictx, cancel = context.WithTimeout(r.ctx, r.perImage)
	}
	rep, err := r.engine.Scan(ictx, img)
	cancel()
	j := r.policy.Judge(img, rep, err)
	if d, ok := scanshare.Digest(img.ImageID); ok {
		j = ownContent(j, d)
	}
	if errors.Is(err, ErrCannotJudge) && !r.cannot {
		r.cannot = true
		r.sh.Log.Warn("this node cannot judge with the run's vulnerability DB: every image it does not have another node's verdict for is kept", "error", err)
	}
	if err != nil && r.ctx.Err() != nil {
		j = Judgement{Image: img, Verdict: NotScanned}
	}
	r.out[i], r.done[i] = j, true
	return j
}

// ownContent keeps a verdict on an image with a digest only if the engine
// said it judged that very content: a verdict on other content (the
// image's name moved) or on content it does not name would be shared
// under this image's key and judge this image by another's content.
func ownContent(j Judgement, digest string) Judgement {
	if !scanshare.Shareable(string(j.Verdict)) || j.Content == digest {
		return j
	}
	why := "the scanner did not say which content it judged"
	if j.Content != "" {
		why = "the scanner judged content " + j.Content + ", not the image's"
	}
	return Judgement{Image: j.Image, Verdict: NotScanned, Error: why, Content: j.Content}
}
