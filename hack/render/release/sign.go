// Signatures and attestations as cosign stores them: beside the signed
// manifest, in the same repository, under the tags sha256-<hex>.sig and
// sha256-<hex>.att, so that the cosign CLI (cosign verify --key,
// cosign verify-attestation --key --type ...) verifies them as its own.

package release

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types and annotations of cosign's signature and attestation
// manifests.
const (
	simpleSigningType      = "application/vnd.dev.cosign.simplesigning.v1+json"
	dsseEnvelopeType       = "application/vnd.dsse.envelope.v1+json"
	annotationSignature    = "dev.cosignproject.cosign/signature"
	annotationPredicate    = "predicateType"
	inTotoPayloadType      = "application/vnd.in-toto+json"
	inTotoStatementType    = "https://in-toto.io/Statement/v0.1"
	simpleSigningSignature = "cosign container image signature"
)

// simpleSigning is the payload of a signature: the signed manifest's
// repository and digest (Red Hat's "simple signing" format, as cosign
// writes it).
type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]string `json:"optional"`
}

// signaturePayload is what a signature of repo@dig signs.
func signaturePayload(repo name.Repository, dig v1.Hash) ([]byte, error) {
	var p simpleSigning
	p.Critical.Identity.DockerReference = repo.Name()
	p.Critical.Image.DockerManifestDigest = dig.String()
	p.Critical.Type = simpleSigningSignature
	return json.Marshal(p)
}

// statement is an in-toto statement about the subjects.
type statement struct {
	Type          string    `json:"_type"`
	PredicateType string    `json:"predicateType"`
	Subject       []subject `json:"subject"`
	Predicate     any       `json:"predicate"`
}

type subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// envelope is a DSSE envelope, the form of an attestation.
type envelope struct {
	PayloadType string              `json:"payloadType"`
	Payload     string              `json:"payload"`
	Signatures  []envelopeSignature `json:"signatures"`
}

type envelopeSignature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// pae is DSSE's pre-authentication encoding: what an envelope's
// signature signs.
func pae(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 " + strconv.Itoa(len(payloadType)) + " " + payloadType + " " + strconv.Itoa(len(payload)) + " ")
	b.Write(payload)
	return b.Bytes()
}

// sigLayer is one layer of a signature or attestation manifest.
type sigLayer struct {
	mediaType   types.MediaType
	blob        []byte
	annotations map[string]string
}

// signatureLayer signs repo@dig.
func (s *Signer) signatureLayer(repo name.Repository, dig v1.Hash) (sigLayer, error) {
	payload, err := signaturePayload(repo, dig)
	if err != nil {
		return sigLayer{}, err
	}
	sig, err := s.Sign(payload)
	if err != nil {
		return sigLayer{}, err
	}
	return sigLayer{simpleSigningType, payload, map[string]string{annotationSignature: base64.StdEncoding.EncodeToString(sig)}}, nil
}

// attestationLayer signs st as a DSSE envelope.
func (s *Signer) attestationLayer(st statement) (sigLayer, error) {
	st.Type = inTotoStatementType
	payload, err := json.Marshal(st)
	if err != nil {
		return sigLayer{}, err
	}
	sig, err := s.Sign(pae(inTotoPayloadType, payload))
	if err != nil {
		return sigLayer{}, err
	}
	env, err := json.Marshal(envelope{
		PayloadType: inTotoPayloadType,
		Payload:     base64.StdEncoding.EncodeToString(payload),
		Signatures:  []envelopeSignature{{Sig: base64.StdEncoding.EncodeToString(sig)}},
	})
	if err != nil {
		return sigLayer{}, err
	}
	return sigLayer{dsseEnvelopeType, env, map[string]string{annotationSignature: "", annotationPredicate: st.PredicateType}}, nil
}

// signedContent is what a layer says and whether this key signed it: the
// payload of a signature, or the statement of an envelope.
func (s *Signer) signedContent(mediaType types.MediaType, blob []byte, ann map[string]string) ([]byte, bool) {
	switch mediaType {
	case simpleSigningType:
		sig, err := base64.StdEncoding.DecodeString(ann[annotationSignature])
		return blob, err == nil && s.Verify(blob, sig)
	case dsseEnvelopeType:
		var env envelope
		if json.Unmarshal(blob, &env) != nil {
			return nil, false
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			return nil, false
		}
		for _, es := range env.Signatures {
			if sig, err := base64.StdEncoding.DecodeString(es.Sig); err == nil && s.Verify(pae(env.PayloadType, payload), sig) {
				return payload, true
			}
		}
	}
	return nil, false
}

// sigTag is the tag cosign keeps a manifest's signatures (suffix "sig")
// or attestations ("att") under.
func sigTag(repo name.Repository, dig v1.Hash, suffix string) name.Tag {
	return repo.Tag(dig.Algorithm + "-" + dig.Hex + "." + suffix)
}

// attach writes layers to repo's sigTag(dig, suffix) manifest, keeping what
// it already holds, unless it already holds the same content signed by
// this key: re-signing an unchanged release changes nothing. An
// attestation replaces the earlier ones of its predicate type, as
// cosign attest --replace does. It says whether it changed anything.
func (s *Signer) attach(repo name.Repository, dig v1.Hash, suffix string, layers []sigLayer, ropts []remote.Option) (bool, error) {
	tag := sigTag(repo, dig, suffix)
	type kept struct {
		layer v1.Layer
		desc  v1.Descriptor
	}
	var existing []kept
	signed := map[string]bool{}
	old, err := remote.Image(tag, ropts...)
	switch {
	case err == nil:
		m, err := old.Manifest()
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", tag, err)
		}
		for _, d := range m.Layers {
			l, err := old.LayerByDigest(d.Digest)
			if err != nil {
				return false, fmt.Errorf("reading %s: %w", tag, err)
			}
			existing = append(existing, kept{l, d})
			rc, err := l.Compressed()
			if err != nil {
				return false, fmt.Errorf("reading %s: %w", tag, err)
			}
			blob, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				return false, fmt.Errorf("reading %s: %w", tag, err)
			}
			if content, ok := s.signedContent(d.MediaType, blob, d.Annotations); ok {
				signed[string(d.MediaType)+"\x00"+string(content)] = true
			}
		}
	case !isNotFound(err):
		return false, fmt.Errorf("looking up %s: %w", tag, err)
	}
	missing := false
	var replaced []string
	for _, l := range layers {
		content, _ := s.signedContent(l.mediaType, l.blob, l.annotations)
		if !signed[string(l.mediaType)+"\x00"+string(content)] {
			missing = true
		}
		if pt := l.annotations[annotationPredicate]; pt != "" {
			replaced = append(replaced, pt)
		}
	}
	if !missing {
		return false, nil
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	var adds []mutate.Addendum
	for _, k := range existing {
		if pt := k.desc.Annotations[annotationPredicate]; pt != "" && slices.Contains(replaced, pt) {
			continue
		}
		adds = append(adds, mutate.Addendum{Layer: k.layer, Annotations: k.desc.Annotations, MediaType: k.desc.MediaType})
	}
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: static.NewLayer(l.blob, l.mediaType), Annotations: l.annotations, MediaType: l.mediaType})
	}
	if img, err = mutate.Append(img, adds...); err != nil {
		return false, err
	}
	if err := remote.Write(tag, img, ropts...); err != nil {
		return false, fmt.Errorf("pushing %s: %w", tag, err)
	}
	return true, nil
}

// subjects names repo's manifests by digest, for a statement.
func subjects(repo name.Repository, digs ...v1.Hash) []subject {
	var out []subject
	for _, d := range digs {
		out = append(out, subject{Name: repo.Name(), Digest: map[string]string{d.Algorithm: d.Hex}})
	}
	return out
}

// DefaultBuilderID names the builder of a release made with make release
// from this repository, in the images' provenance.
const DefaultBuilderID = "https://github.com/eraser-oss/eraser/blob/main/Makefile#release"

// signManifest signs repo@digest.
func signManifest(s *Signer, repo name.Repository, digest string, ropts []remote.Option) (bool, error) {
	dig, err := v1.NewHash(digest)
	if err != nil {
		return false, err
	}
	l, err := s.signatureLayer(repo, dig)
	if err != nil {
		return false, err
	}
	return s.attach(repo, dig, "sig", []sigLayer{l}, ropts)
}

// signImage signs the index at tag and each of its platform images, and
// attests, about all of them, the SBOM and the build provenance read from
// the images: one statement each, stored with the index and with every
// platform image, so that whichever digest a user holds verifies.
func signImage(o Options, tag name.Tag, idx v1.ImageIndex, ropts []remote.Option) (bool, error) {
	repo := tag.Context()
	dig, err := idx.Digest()
	if err != nil {
		return false, err
	}
	content, err := readContent(idx)
	if err != nil {
		return false, fmt.Errorf("reading the images: %w", err)
	}
	digs := []v1.Hash{dig}
	var plats []string
	for _, pc := range content {
		digs = append(digs, pc.Digest)
		plats = append(plats, pc.Platform)
	}
	builder := o.BuilderID
	if builder == "" {
		builder = DefaultBuilderID
	}
	params := map[string]string{"registry": o.Registry, "version": o.Version, "platforms": strings.Join(plats, " ")}
	var atts []sigLayer
	for _, st := range []statement{
		{PredicateType: PredicateSPDX, Subject: subjects(repo, digs...), Predicate: sbom(repo, dig, content, o.Epoch)},
		{PredicateType: PredicateProvenance, Subject: subjects(repo, digs...), Predicate: slsaProvenance(builder, content, params, o.Epoch)},
	} {
		l, err := o.Signer.attestationLayer(st)
		if err != nil {
			return false, err
		}
		atts = append(atts, l)
	}
	changed := false
	for _, d := range digs {
		sl, err := o.Signer.signatureLayer(repo, d)
		if err != nil {
			return false, err
		}
		c1, err := o.Signer.attach(repo, d, "sig", []sigLayer{sl}, ropts)
		if err != nil {
			return false, err
		}
		c2, err := o.Signer.attach(repo, d, "att", atts, ropts)
		if err != nil {
			return false, err
		}
		changed = changed || c1 || c2
	}
	return changed, nil
}
