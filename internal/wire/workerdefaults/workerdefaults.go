// Package workerdefaults holds the defaults and bounds the configuration
// and the workers both apply: the configuration fills an unset key with
// them and refuses a value past a bound, the workers use them as their
// flags' defaults and floors. A worker run by hand, or by a pod spec
// edited past the manager, so judges as one the manager started.
package workerdefaults

import "time"

// MinAge is the retention policy's minimum age (minAge, the workers'
// --min-age): five times the kubelet's imageMinimumGCAge (2m), because a
// pod's images are pulled one by one before its containers are created,
// and a slow pull of a large image can leave an earlier one waiting for
// minutes.
const MinAge = 10 * time.Minute

// CoolDown is the hold of an image that came back after a removal, after
// its first return (coolDown, the workers' --cool-down): a day, so that a
// node that removed what its workloads still needed does not remove it
// again at the next run, nor keep it for good.
const CoolDown = 24 * time.Hour

// HandoffTimeout bounds each wait of a worker for a peer in its pod (the
// workers' --handoff-timeout) when the pod does not scan: the collector
// lists the node in seconds, so a peer that has not answered in this time
// is dead, and the worker ends with an error naming it. A scanning pod's
// waits are the scan's deadline plus some slack (config.Waits).
const HandoffTimeout = time.Hour

// LeaseAge is the age past which a lease of containerd's own pull and
// import clients is taken for one its client forgot (leftovers.leaseAge,
// the remover's --lease-age): theirs are held for minutes; one a day old
// holds what nothing finished.
const LeaseAge = 24 * time.Hour

// MinLeaseAge bounds the lease age from below wherever leases are
// deleted: a slow pull of a large image on a slow link holds its lease for
// many minutes.
const MinLeaseAge = time.Hour

// RecordAge is the age under which CRI-O's records are not judged
// (leftovers.recordAge): a pull on CRI-O writes each layer's record as the
// layer lands, and the image's record, which holds them, only at its end.
const RecordAge = time.Hour

// MinRecordAge bounds the record age from below: under it, the layers of
// a pull of a large image still under way would be judged as held by
// nothing. It is MinAge, the age from which an image is taken for settled.
const MinRecordAge = MinAge

// CRIORunRoot is CRI-O's run root unless crio.conf's runroot moves it
// (leftovers.crioRunRoot, the remover's --crio-run-root).
const CRIORunRoot = "/run/containers/storage"

// The registry check's defaults (manager.retention.registryCheck, the
// remover's --registry-*): a week of lookback, as long as most images a
// node runs stay in use; fifty requests a run, so that a node asks its
// registries no more than a pull of a few images would; five seconds a
// request, so that a stopped registry delays a run by seconds, not minutes
// (the remover does not ask one again in the run after it failed once).
const (
	RegistryLookback    = 168 * time.Hour
	RegistryMaxRequests = 50
	RegistryTimeout     = 5 * time.Second
)
