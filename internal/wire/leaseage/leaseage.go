// Package leaseage is the age past which a containerd lease of a pull or
// an import is taken for one its client forgot: the configuration checks
// leftovers.leaseAge against it, and the remover its --lease-age, so that
// a remover run by hand or by a pod spec edited past the manager cannot
// go below what the configuration refuses.
package leaseage

import "time"

// Default: containerd's own pull and import clients hold a lease for
// minutes; one a day old holds what nothing finished.
const Default = 24 * time.Hour

// Min bounds the lease age from below wherever leases are deleted: a slow
// pull of a large image on a slow link holds its lease for many minutes.
const Min = time.Hour
