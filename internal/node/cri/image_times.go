package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// ErrNoImageTimes means the runtime does not serve containerd's images API
// on this endpoint (CRI-O, or a containerd that refuses it): callers fall
// back to another source of an image's age.
var ErrNoImageTimes = errors.New("the runtime does not serve containerd's images API (containerd.services.images.v1.Images)")

// containerd picks the namespace of a native API call from this header;
// the CRI plugin keeps its images in k8s.io.
const (
	namespaceHeader  = "containerd-namespace"
	criNamespace     = "k8s.io"
	listImagesMethod = "/containerd.services.images.v1.Images/List"
)

// ImageTimes returns, for every image record name in the runtime's k8s.io
// namespace (tags, repo digests "repo@sha256:...", and the image ID
// "sha256:..." that containerd's CRI records), the newest of its created
// and updated times. Records with neither time are left out.
//
// The call is containerd's native API, not CRI, on the same connection: CRI
// reports no time at all for an image. The messages are encoded by hand
// rather than through containerd's API module, whose generated code pulls in
// ttrpc and its logging stack for the four fields read here.
func (c *Client) ImageTimes(ctx context.Context) (map[string]time.Time, error) {
	ctx, cancel := c.listCtx(ctx)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, namespaceHeader, criNamespace)
	// An empty ListImagesRequest: no filters, every record.
	req := []byte{}
	var resp []byte
	// Per call, so that the CRI calls on the connection keep the proto codec.
	err := c.conn.Invoke(ctx, listImagesMethod, &req, &resp, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		if isUnimplemented(err) {
			return nil, ErrNoImageTimes
		}
		return nil, fmt.Errorf("listing containerd's image records (namespace %s): %w", criNamespace, err)
	}
	times, err := decodeListImagesResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("reading containerd's image records: %w", err)
	}
	return times, nil
}

func isUnimplemented(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	// The code is what gRPC servers send for a missing service; the text
	// also catches a relay that passes the message on under another code.
	return st.Code() == codes.Unimplemented || strings.Contains(st.Message(), "unknown service")
}

// rawCodec passes the wire bytes through. It keeps the name "proto" so that
// the content type is the one containerd's server expects.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	// grpc may recycle the buffer once Unmarshal returns.
	*b = append((*b)[:0], data...)
	return nil
}

// Field numbers of containerd.services.images.v1 and google.protobuf.Timestamp.
const (
	listImagesResponseImages = 1
	imageName                = 1
	imageCreatedAt           = 7
	imageUpdatedAt           = 8
	timestampSeconds         = 1
	timestampNanos           = 2
)

// decodeListImagesResponse reads the name and the newest time of each
// image. Fields it does not need are skipped, so a newer containerd that adds
// some still decodes.
func decodeListImagesResponse(b []byte) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != listImagesResponseImages {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("images: wire type %d, want bytes", typ)
		}
		name, t, err := decodeImage(v)
		if err != nil {
			return err
		}
		if name == "" || t.IsZero() {
			return nil
		}
		if prev, ok := out[name]; !ok || t.After(prev) {
			out[name] = t
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeImage returns an Image's name and the newer of its two times (zero
// when neither is set).
func decodeImage(b []byte) (string, time.Time, error) {
	var name string
	var created, updated timestamp
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case imageName:
			if typ != protowire.BytesType {
				return fmt.Errorf("image name: wire type %d, want bytes", typ)
			}
			name = string(v)
		case imageCreatedAt, imageUpdatedAt:
			if typ != protowire.BytesType {
				return fmt.Errorf("image time (field %d): wire type %d, want bytes", num, typ)
			}
			ts := &created
			if num == imageUpdatedAt {
				ts = &updated
			}
			// A message field repeated on the wire merges into one.
			return ts.merge(v)
		}
		return nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	t := created.time()
	if u := updated.time(); u.After(t) {
		t = u
	}
	return name, t, nil
}

type timestamp struct {
	set     bool
	seconds int64
	nanos   int32
}

func (ts *timestamp) merge(b []byte) error {
	ts.set = true
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != timestampSeconds && num != timestampNanos {
			return nil
		}
		if typ != protowire.VarintType {
			return fmt.Errorf("timestamp field %d: wire type %d, want varint", num, typ)
		}
		n, _ := protowire.ConsumeVarint(v)
		if num == timestampSeconds {
			ts.seconds = int64(n)
		} else {
			ts.nanos = int32(n)
		}
		return nil
	})
}

// time is the zero time when the field was absent; containerd sets both
// times on every record it writes.
func (ts timestamp) time() time.Time {
	if !ts.set {
		return time.Time{}
	}
	if ts.nanos < 0 || ts.nanos > 999_999_999 {
		// Out of protobuf's range: keep the second rather than let the
		// nanoseconds carry into it.
		return time.Unix(ts.seconds, 0).UTC()
	}
	return time.Unix(ts.seconds, int64(ts.nanos)).UTC()
}

// eachField calls fn with every field of a message: v is the payload of a
// length-delimited field and the raw varint of a varint field. Groups and
// fixed-width fields are skipped.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("malformed message: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			payload, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(m))
			}
			v, n = payload, m
		case protowire.VarintType:
			_, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(m))
			}
			v, n = b[:m], m
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(m))
			}
			n = m
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
