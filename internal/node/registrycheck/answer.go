// Package registrycheck asks an image's registry whether it still serves
// the image's content, before an automatic policy removes an image that a
// workload may need again: HEAD of the manifest by digest, with the
// registry's token flow, the operator's credentials and mirrors, a bound
// on the requests of a run and a node-local cache of the answers.
package registrycheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Answer is what the registry says of one image's content.
type Answer string

const (
	// Present: the registry (or a mirror of it) serves the manifest: a
	// removal can be pulled back.
	Present Answer = "present"
	// Gone: the registry answered that it does not have the manifest (404
	// or MANIFEST_UNKNOWN): a removal could not be pulled back.
	Gone Answer = "gone"
	// Unknown: no answer could be had (timeout, 5xx, refused credentials,
	// TLS, DNS, the run's bound); Detail says which.
	Unknown Answer = "unknown"
)

// Answers lists the answers in the order counts print them.
var Answers = []Answer{Present, Gone, Unknown}

// Result is the answer for one image's content and how it was had.
type Result struct {
	Answer Answer
	// Detail says what answered (endpoint, status) or why none could.
	Detail string
	// Cached: the node's cache answered; no request was made.
	Cached bool
}

// Judge is what a registry's HTTP answer to a manifest HEAD means. status
// is 0 when no response came, with err saying why; authed says credentials
// or a token were already sent with the request. challenge is set when the
// response is an authentication challenge still to answer.
func Judge(status int, errCode string, authed bool, err error) (a Answer, detail string, challenge bool) {
	if err != nil {
		return Unknown, TransportDetail(err), false
	}
	switch {
	case status >= 200 && status < 300:
		return Present, fmt.Sprintf("%d", status), false
	case status == http.StatusNotFound:
		return Gone, "404 " + orDefault(errCode, "not found"), false
	case errCode == "MANIFEST_UNKNOWN":
		// Some registries answer it with another status than 404.
		return Gone, fmt.Sprintf("%d MANIFEST_UNKNOWN", status), false
	case status == http.StatusUnauthorized && !authed:
		return Unknown, "401 unauthorized", true
	case status == http.StatusUnauthorized:
		return Unknown, "401 unauthorized after authenticating: the credentials were refused or lack pull access", false
	case status == http.StatusForbidden:
		return Unknown, "403 forbidden: the credentials lack pull access", false
	case status == http.StatusTooManyRequests:
		return Unknown, "429 too many requests: the registry's rate limit", false
	case status >= 500:
		return Unknown, fmt.Sprintf("%d: the registry failed", status), false
	}
	return Unknown, fmt.Sprintf("unexpected status %d", status), false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// TransportDetail names a request's failure by its kind, the words the
// report and the logs give: timeout, DNS, TLS, connection.
func TransportDetail(err error) string {
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	var certVerify *tls.CertificateVerificationError
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		return "timeout: " + cause(err)
	case errors.As(err, &dns):
		return "DNS: " + dns.Error()
	case errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &certInvalid) || errors.As(err, &recordHeader) || errors.As(err, &certVerify):
		return "TLS: " + cause(err)
	case errors.Is(err, context.Canceled):
		return "canceled: " + cause(err)
	case errors.As(err, &opErr):
		return "connection: " + cause(err)
	}
	return cause(err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// cause drops url.Error's method and URL, which the detail names already.
func cause(err error) string {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err.Error()
	}
	return err.Error()
}

// combine decides one image's answer from its mirrors' and the
// registry's: a mirror's present stands (it serves the content, and the
// runtime pulls from it first); a mirror's gone does not (a mirror may
// simply not have cached it yet), so the registry is asked; and the
// registry's answer is the answer.
func combine(mirrors []Result, registry func() Result) Result {
	for _, m := range mirrors {
		if m.Answer == Present {
			return m
		}
	}
	r := registry()
	if r.Answer == Unknown && len(mirrors) > 0 {
		var notes []string
		for _, m := range mirrors {
			notes = append(notes, m.Detail)
		}
		r.Detail += " (mirrors: " + strings.Join(notes, "; ") + ")"
	}
	return r
}
