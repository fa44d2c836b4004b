// Package minage is the retention policy's default minimum age: the
// configuration fills an unset minAge with it, and the workers their
// --min-age, so that a pod without the flag judges as the manager would.
package minage

import "time"

// Default is five times the kubelet's imageMinimumGCAge (2m), because a
// pod's images are pulled one by one before its containers are created,
// and a slow pull of a large image can leave an earlier one waiting for
// minutes.
const Default = 10 * time.Minute
