// Package kname derives Kubernetes names and label values from user input
// (ImageList and ConfigMap names) so that they are valid for any valid
// input: what does not fit is shortened and made unique by a hash of the
// whole, instead of being refused by the API server halfway through a job.
package kname

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxLabelValue is the longest label value the API server accepts; a
// DNS label (a volume name, a container name) has the same limit.
const MaxLabelValue = 63

// hashLen is the hex digits of the hash that replaces a shortened tail.
const hashLen = 8

// Shorten returns s when it is at most max bytes long; otherwise a prefix
// of s, a dash and a hash of s, max bytes at most. The prefix never ends in
// a character a name or label value may not end with.
func Shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	prefix := strings.TrimRight(s[:max-hashLen-1], "-._")
	if prefix == "" {
		return hex.EncodeToString(sum[:])[:hashLen]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// LabelValue is s as a label value: s itself when it fits, else shortened.
// Selecting by it may match another object whose name shortens alike, so
// whoever selects by it also checks ownership.
func LabelValue(s string) string { return Shorten(s, MaxLabelValue) }

// DNSLabel is s as a DNS label (a volume name): s itself when it is one;
// otherwise dots become dashes and a hash of s is appended, so that two
// inputs that differ only there still get two labels.
func DNSLabel(s string) string {
	if len(validation.IsDNS1123Label(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	clean := strings.TrimRight(strings.ReplaceAll(s, ".", "-"), "-")
	clean = strings.TrimRight(clean[:min(len(clean), MaxLabelValue-hashLen-1)], "-")
	if clean == "" {
		return hex.EncodeToString(sum[:])[:hashLen]
	}
	return clean + "-" + hex.EncodeToString(sum[:])[:hashLen]
}
