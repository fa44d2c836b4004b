package registrycheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// ManifestTypes are the media types a manifest HEAD accepts: an image
// pulled by either format's index or manifest is asked about in its own.
var ManifestTypes = []string{
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}

// Defaults.
const (
	DefaultTimeout     = workerdefaults.RegistryTimeout
	DefaultMaxRequests = workerdefaults.RegistryMaxRequests
)

// Config is how a run asks.
type Config struct {
	// Timeout bounds each request; 0: DefaultTimeout.
	Timeout time.Duration
	// MaxRequests bounds the requests of a run (token requests included);
	// beyond it the answer is Unknown. 0: DefaultMaxRequests.
	MaxRequests int
	// Credentials are the operator's, by host.
	Credentials Credentials
	// Mirrors are endpoints tried before a registry host, by host as
	// images name it: host[:port] (https, or http when listed in
	// PlainHTTP) or a URL with its scheme.
	Mirrors map[string][]string
	// PlainHTTP are the hosts asked in plain HTTP (loopback registries).
	PlainHTTP []string
	// CachePath is the cache file; "": no cache across runs.
	CachePath string
	// PresentTTL and GoneTTL are how long answers stand in the cache; 0:
	// the defaults.
	PresentTTL, GoneTTL time.Duration
	// Transport makes the requests; nil: a clone of the default one.
	Transport http.RoundTripper
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Checker asks registries; safe for concurrent use within a run.
type Checker struct {
	cfg    Config
	client *http.Client
	cache  *cache
	// CacheErr is why the cache file could not be read (asked again).
	CacheErr error

	mu       sync.Mutex
	requests int
	tokens   map[string]string // by realm, service and scope
	down     map[string]string // endpoint -> why it did not answer this run
	answers  map[string]Result // this run's answers, by content
}

// New prepares a run's checks and reads the cache.
func New(cfg Config) *Checker {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = DefaultMaxRequests
	}
	if cfg.PresentTTL <= 0 {
		cfg.PresentTTL = DefaultPresentTTL
	}
	if cfg.GoneTTL <= 0 {
		cfg.GoneTTL = DefaultGoneTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	rt := cfg.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = http.ProxyFromEnvironment
		rt = t
	}
	c := &Checker{cfg: cfg, client: &http.Client{Transport: rt, Timeout: cfg.Timeout},
		tokens: map[string]string{}, down: map[string]string{}, answers: map[string]Result{}}
	c.cache, c.CacheErr = loadCache(cfg.CachePath, cfg.Now())
	return c
}

// Requests is the count of requests made so far.
func (c *Checker) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Save writes the cache file with this run's answers.
func (c *Checker) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache.save(c.cfg.CachePath, c.cfg.Now())
}

// Check asks whether the content's registry still serves it: the cache,
// then the mirrors of its host, then the registry itself.
func (c *Checker) Check(ctx context.Context, ct Content) Result {
	key := ct.String()
	now := c.cfg.Now()
	c.mu.Lock()
	if r, ok := c.answers[key]; ok {
		c.mu.Unlock()
		return r
	}
	if a, ok := c.cache.get(key, now); ok {
		c.mu.Unlock()
		return Result{Answer: a, Detail: "cached answer", Cached: true}
	}
	c.mu.Unlock()

	var mirrors []Result
	for _, m := range c.cfg.Mirrors[ct.Host] {
		base, err := c.endpoint(m)
		if err != nil {
			mirrors = append(mirrors, Result{Answer: Unknown, Detail: fmt.Sprintf("mirror %s: %v", m, err)})
			continue
		}
		r := c.ask(ctx, base, ct, ct.Host)
		r.Detail = "mirror " + base.Host + ": " + r.Detail
		mirrors = append(mirrors, r)
		if r.Answer == Present {
			break
		}
	}
	r := combine(mirrors, func() Result {
		base, _ := c.endpoint(apiHost(ct.Host))
		r := c.ask(ctx, base, ct, "")
		r.Detail = base.Host + ": " + r.Detail
		return r
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers[key] = r
	switch r.Answer {
	case Present:
		c.cache.put(key, r.Answer, c.cfg.PresentTTL, now)
	case Gone:
		c.cache.put(key, r.Answer, c.cfg.GoneTTL, now)
	}
	return r
}

// endpoint is the base URL of a host or a mirror endpoint.
func (c *Checker) endpoint(e string) (*url.URL, error) {
	if strings.Contains(e, "://") {
		u, err := url.Parse(e)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("not an http(s) endpoint")
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		return u, nil
	}
	scheme := "https"
	if c.plain(e) {
		scheme = "http"
	}
	return &url.URL{Scheme: scheme, Host: e}, nil
}

func (c *Checker) plain(host string) bool {
	return slices.Contains(c.cfg.PlainHTTP, host) || (host == dockerHubAPI && slices.Contains(c.cfg.PlainHTTP, dockerHub))
}

// ask HEADs the manifest at one endpoint, answering its challenge once.
// ns names the registry a mirror is asked for (containerd's ns parameter).
func (c *Checker) ask(ctx context.Context, base *url.URL, ct Content, ns string) Result {
	u := *base
	u.Path = base.Path + "/v2/" + ct.Name + "/manifests/" + ct.Digest
	if ns != "" {
		u.RawQuery = url.Values{"ns": {ns}}.Encode()
	}
	auth := ""
	authed := false
	method := http.MethodHead
	for attempt := 0; ; attempt++ {
		status, code, hdr, err := c.do(ctx, method, u.String(), base.Host, auth)
		if err != nil && status < 0 {
			return Result{Answer: Unknown, Detail: err.Error()}
		}
		if method == http.MethodHead && (status == http.StatusMethodNotAllowed || status == http.StatusBadRequest) {
			// A HEAD's answer has no body: a registry that refuses HEAD,
			// or answers it with an error its body would name, is asked
			// by GET once.
			method = http.MethodGet
			attempt--
			continue
		}
		a, detail, challenged := Judge(status, code, authed, err)
		if !challenged || attempt > 0 {
			return Result{Answer: a, Detail: detail}
		}
		ch, ok := ParseChallenge(hdr.Get("WWW-Authenticate"))
		if !ok {
			return Result{Answer: Unknown, Detail: "401 without a challenge this client answers"}
		}
		auth, err = c.authorize(ctx, ch, base, ct)
		if err != nil {
			return Result{Answer: Unknown, Detail: "401, and authenticating failed: " + err.Error()}
		}
		authed = true
	}
}

// authorize answers a challenge: Basic with the host's credentials, or
// Bearer with a token from the realm (asked with the credentials, when
// the operator gave some).
func (c *Checker) authorize(ctx context.Context, ch Challenge, base *url.URL, ct Content) (string, error) {
	cred, haveCred := c.cfg.Credentials.For(credHost(base.Host))
	switch ch.Scheme {
	case "basic":
		if !haveCred {
			return "", fmt.Errorf("the registry asks for credentials and none are configured for %s", base.Host)
		}
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(cred.Username, cred.Password)
		return req.Header.Get("Authorization"), nil
	case "bearer":
	default:
		return "", fmt.Errorf("unsupported challenge %q", ch.Scheme)
	}
	realm, err := url.Parse(ch.Params["realm"])
	if err != nil || (realm.Scheme != "https" && realm.Scheme != "http") || realm.Host == "" {
		return "", fmt.Errorf("the challenge's realm %q is not an http(s) URL", ch.Params["realm"])
	}
	scope := ch.Params["scope"]
	if scope == "" {
		scope = "repository:" + ct.Name + ":pull"
	}
	q := realm.Query()
	if s := ch.Params["service"]; s != "" {
		q.Set("service", s)
	}
	q.Set("scope", scope)
	realm.RawQuery = q.Encode()
	key := realm.String()
	c.mu.Lock()
	tok, ok := c.tokens[key]
	c.mu.Unlock()
	if ok {
		return "Bearer " + tok, nil
	}
	auth := ""
	// Credentials go to a realm over TLS only, or to one the operator
	// listed as plain HTTP.
	if haveCred && (realm.Scheme == "https" || c.plain(realm.Host)) {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(cred.Username, cred.Password)
		auth = req.Header.Get("Authorization")
	}
	tok, err = c.token(ctx, realm.String(), auth)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.tokens[key] = tok
	c.mu.Unlock()
	return "Bearer " + tok, nil
}

// credHost is the host whose credentials an endpoint takes: Docker Hub's
// API host takes docker.io's.
func credHost(h string) string {
	if h == dockerHubAPI {
		return dockerHub
	}
	return h
}

// token GETs a bearer token from a realm.
func (c *Checker) token(ctx context.Context, realm, auth string) (string, error) {
	req, err := c.request(ctx, http.MethodGet, realm, auth)
	if err != nil {
		return "", err
	}
	host := req.URL.Host
	resp, err := c.send(req, host)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("token: %s", TransportDetail(err))
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token: %d from %s", resp.StatusCode, host)
	}
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return "", fmt.Errorf("token: not JSON: %w", err)
	}
	if t.Token == "" {
		t.Token = t.AccessToken
	}
	if t.Token == "" {
		return "", fmt.Errorf("token: none in %s's answer", host)
	}
	return t.Token, nil
}

func (c *Checker) request(ctx context.Context, method, u, auth string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("User-Agent", "eraser-registrycheck")
	return req, nil
}

// errBound and errDown are requests not made: status -1.
type notAsked struct{ why string }

func (e notAsked) Error() string { return e.why }

// send makes one request within the run's bound, unless the endpoint
// failed to answer earlier in the run (a stopped registry is not waited
// for once per image).
func (c *Checker) send(req *http.Request, endpoint string) (*http.Response, error) {
	c.mu.Lock()
	if why, ok := c.down[endpoint]; ok {
		c.mu.Unlock()
		return nil, notAsked{"not asked: " + endpoint + " did not answer earlier in this run (" + why + ")"}
	}
	if c.requests >= c.cfg.MaxRequests {
		c.mu.Unlock()
		return nil, notAsked{fmt.Sprintf("not asked: the run's bound of %d requests was reached", c.cfg.MaxRequests)}
	}
	c.requests++
	c.mu.Unlock()
	resp, err := c.client.Do(req)
	if err != nil && req.Context().Err() == nil {
		c.mu.Lock()
		c.down[endpoint] = TransportDetail(err)
		c.mu.Unlock()
	}
	return resp, err
}

// do makes a request and reads the error code of its body, if any. A
// request not made returns status -1 and the reason.
func (c *Checker) do(ctx context.Context, method, u, endpoint, auth string) (int, string, http.Header, error) {
	req, err := c.request(ctx, method, u, auth)
	if err != nil {
		return -1, "", nil, err
	}
	req.Header.Set("Accept", strings.Join(ManifestTypes, ", "))
	resp, err := c.send(req, endpoint)
	if err != nil {
		if na, ok := err.(notAsked); ok {
			return -1, "", nil, na
		}
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, errorCode(body), resp.Header, nil
}

// errorCode is the first error code of a distribution API error body.
func errorCode(body []byte) string {
	var e struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Errors) == 0 {
		return ""
	}
	return e.Errors[0].Code
}
