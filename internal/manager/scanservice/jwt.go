package scanservice

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// tokenClaims are what the scan service reads of a bearer token before it
// spends a TokenReview on it. Nothing here is verified: they only decide
// whether the token could possibly be a scanner's of the run, so that junk
// is refused without costing the API server anything. The TokenReview
// still decides every token that passes.
type tokenClaims struct {
	Audiences []string
	Subject   string
	// Expiry is the token's exp, zero when it has none.
	Expiry time.Time
	// PodName and PodUID are the pod the API server bound the token to
	// (the kubernetes.io claim of a pod-bound ServiceAccount token).
	PodName, PodUID string
}

// maxTokenBytes bounds what is decoded: a projected ServiceAccount token is
// about a kilobyte.
const maxTokenBytes = 16 << 10

var errNotJWT = errors.New("not a signed JSON Web Token")

// peekClaims reads the claims of a JWS compact serialization without
// checking its signature.
func peekClaims(token string) (tokenClaims, error) {
	if len(token) > maxTokenBytes {
		return tokenClaims{}, fmt.Errorf("%w: %d bytes, more than any ServiceAccount token", errNotJWT, len(token))
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return tokenClaims{}, errNotJWT
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return tokenClaims{}, fmt.Errorf("%w: header: %w", errNotJWT, err)
	}
	// The API server signs every token it issues; an unsigned one is
	// nobody's.
	if header.Alg == "" || strings.EqualFold(header.Alg, "none") {
		return tokenClaims{}, fmt.Errorf("%w: unsigned (alg %q)", errNotJWT, header.Alg)
	}
	var payload struct {
		Aud json.RawMessage `json:"aud"`
		Sub string          `json:"sub"`
		Exp *float64        `json:"exp"`
		K8s struct {
			Pod struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	if err := decodeSegment(parts[1], &payload); err != nil {
		return tokenClaims{}, fmt.Errorf("%w: claims: %w", errNotJWT, err)
	}
	aud, err := audiences(payload.Aud)
	if err != nil {
		return tokenClaims{}, fmt.Errorf("%w: aud: %w", errNotJWT, err)
	}
	c := tokenClaims{Audiences: aud, Subject: payload.Sub, PodName: payload.K8s.Pod.Name, PodUID: payload.K8s.Pod.UID}
	if e := payload.Exp; e != nil && *e > 0 && *e < math.MaxInt32*4 {
		c.Expiry = time.Unix(int64(*e), 0)
	}
	return c, nil
}

func decodeSegment(seg string, into any) error {
	// RFC 7515 omits the padding; some encoders keep it.
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// audiences reads aud, which RFC 7519 allows as one string or an array.
func audiences(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("neither a string nor an array of strings")
	}
	return many, nil
}
