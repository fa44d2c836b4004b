package fault_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/eraser-oss/eraser/internal/testing/managertest"
)

// A manager whose clock is off. The manager binary reads the clock of the
// machine it runs on, and Go reads it without libc (vDSO), so libfaketime
// cannot shift it. Instead the manager talks to the API server through
// skewProxy, which shifts every timestamp crossing it: what the API server
// and the kubelet (the test) stamp reaches the manager offset earlier, and
// what the manager stamps reaches the API server offset later. To the
// manager and in etcd, that is exactly a manager whose clock runs offset
// ahead of theirs (behind for a negative offset); the manager's binary and
// configuration are production's.

// skewProxy serves the API server's API over plain HTTP on loopback.
type skewProxy struct {
	t      *testing.T
	offset time.Duration // the manager's clock minus the API server's
	target *url.URL
	rt     http.RoundTripper
	srv    *httptest.Server
	// kubeconfig points the manager at the proxy.
	kubeconfig string

	mu sync.Mutex
	// shifted counts the timestamps moved, raw the JSON-less bodies passed
	// as they were, by content type; refused the bodies that could not be.
	shifted int
	raw     map[string]int
	refused []string
}

func newSkewProxy(t *testing.T, offset time.Duration) *skewProxy {
	t.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &skewProxy{t: t, offset: offset, target: target, rt: rt, raw: map[string]int{}}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: skew, cluster: {server: %q}}]\n"+
		"users: [{name: skew, user: {}}]\ncontexts: [{name: skew, context: {cluster: skew, user: skew}}]\ncurrent-context: skew\n", p.srv.URL)
	if err := os.WriteFile(p.kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rfc3339 matches the timestamps Kubernetes writes: metav1.Time (seconds)
// and metav1.MicroTime (microseconds), and RFC 3339 strings in ConfigMaps.
var rfc3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)

// shiftTime moves one timestamp by d, keeping its precision; other strings
// are left alone.
func shiftTime(s string, d time.Duration) (string, bool) {
	m := rfc3339.FindStringSubmatch(s)
	if m == nil {
		return s, false
	}
	layout := "2006-01-02T15:04:05"
	if m[1] != "" {
		layout += "." + strings.Repeat("0", len(m[1])-1)
	}
	layout += "Z07:00"
	ts, err := time.Parse(layout, s)
	if err != nil {
		return s, false
	}
	return ts.Add(d).In(ts.Location()).Format(layout), true
}

// shift moves every timestamp in a decoded JSON value by d.
func (p *skewProxy) shift(v any, d time.Duration) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = p.shift(e, d)
		}
	case []any:
		for i, e := range x {
			x[i] = p.shift(e, d)
		}
	case string:
		if s, ok := shiftTime(x, d); ok {
			p.mu.Lock()
			p.shifted++
			p.mu.Unlock()
			return s
		}
	}
	return v
}

// shiftBody shifts a whole JSON document, or returns it unchanged with
// false if it is not one.
func (p *skewProxy) shiftBody(b []byte, d time.Duration) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return b, false
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p.shift(v, d)); err != nil {
		return b, false
	}
	return out.Bytes(), true
}

// protobufToJSON re-encodes a built-in object written in protobuf as JSON.
func protobufToJSON(b []byte) ([]byte, error) {
	obj, gvk, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	return json.Marshal(obj)
}

// jsonOnly drops the binary encodings from an Accept header, so that every
// answer is JSON the proxy can read.
func jsonOnly(accept string) string {
	var keep []string
	for _, part := range strings.Split(accept, ",") {
		if !strings.Contains(part, "protobuf") && !strings.Contains(part, "cbor") && strings.TrimSpace(part) != "" {
			keep = append(keep, strings.TrimSpace(part))
		}
	}
	if len(keep) == 0 {
		return "application/json"
	}
	return strings.Join(keep, ", ")
}

func (p *skewProxy) note(kind string, refused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if refused {
		p.refused = append(p.refused, kind)
	} else {
		p.raw[kind]++
	}
}

func (p *skewProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	header := r.Header.Clone()
	if len(body) > 0 && strings.Contains(header.Get("Content-Type"), "protobuf") {
		// client-go's typed clients (leader election's among them) write
		// protobuf: sent on as JSON, which the API server reads as well.
		if body, err = protobufToJSON(body); err != nil {
			p.note(fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err), true)
			http.Error(w, "skew proxy: "+err.Error(), http.StatusUnsupportedMediaType)
			return
		}
		header.Set("Content-Type", "application/json")
	}
	if len(body) > 0 {
		var ok bool
		// The manager's stamps reach the API server offset later.
		if body, ok = p.shiftBody(body, p.offset); !ok {
			// A body whose times cannot be shifted would be another clock.
			p.note(fmt.Sprintf("%s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type")), true)
			http.Error(w, "skew proxy: request body is not JSON", http.StatusUnsupportedMediaType)
			return
		}
	}
	out := r.Clone(r.Context())
	out.Header = header
	out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = p.target.Scheme, p.target.Host, p.target.Host, ""
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	out.Header.Del("Accept-Encoding") // the transport's own gzip is undone for us
	out.Header.Set("Accept", jsonOnly(r.Header.Get("Accept")))
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k == "Content-Length" || k == "Connection" || k == "Keep-Alive" {
			continue
		}
		for _, v := range vs {
			if k == "Date" {
				if ts, err := http.ParseTime(v); err == nil {
					v = ts.Add(p.offset).UTC().Format(http.TimeFormat)
				}
			}
			w.Header().Add(k, v)
		}
	}
	ct := resp.Header.Get("Content-Type")
	isJSON := strings.Contains(ct, "json")
	if q := r.URL.Query().Get("watch"); isJSON && (q == "true" || q == "1") {
		w.WriteHeader(resp.StatusCode)
		p.stream(w, resp.Body)
		return
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if isJSON {
		var ok bool
		// What the API server stamped reaches the manager offset earlier.
		if b, ok = p.shiftBody(b, -p.offset); !ok {
			p.note("unreadable JSON: "+r.URL.Path, true)
		}
	} else if len(b) > 0 {
		p.note(ct, false)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(b)
}

// stream shifts a watch: one JSON event after another, each sent on at once.
func (p *skewProxy) stream(w http.ResponseWriter, body io.Reader) {
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	dec := json.NewDecoder(body)
	dec.UseNumber()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for {
		var ev any
		if err := dec.Decode(&ev); err != nil {
			return
		}
		if enc.Encode(p.shift(ev, -p.offset)) != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// check fails the test if the proxy could not shift something, and logs
// what it did.
func (p *skewProxy) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Logf("skew proxy (%+v): %d timestamps shifted; passed unshifted (not JSON): %v", p.offset, p.shifted, p.raw)
	if len(p.refused) > 0 {
		p.t.Errorf("skew proxy: bodies it could not shift: %v", p.refused)
	}
	if p.shifted == 0 {
		p.t.Errorf("skew proxy: no timestamp shifted: the manager did not go through it")
	}
}

// startSkewedManager runs the manager binary as startManager does, but
// against the API server through the proxy.
func (s *scenario) startSkewedManager(p *skewProxy, doc string) *managertest.Process {
	s.t.Helper()
	return managertest.Manager{Kubeconfig: p.kubeconfig, Namespace: s.ns}.Start(s.t, doc)
}
