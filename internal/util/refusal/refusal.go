// Package refusal tells a write the API server refuses for what it is from
// one a retry may get past.
package refusal

import apierrors "k8s.io/apimachinery/pkg/api/errors"

// ForGood is whether the API server refused a write for what the object
// is (too large, invalid, a malformed request): writing the same object
// again is refused again, so a writer that retried it would never finish.
// Conflicts, timeouts, throttling and an unavailable server are not: a
// retry may pass.
func ForGood(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}
