// Package diskusage reads a filesystem's size and free space, as the
// kubelet does for its image garbage collection, so that Eraser's disk
// pressure threshold means what the kubelet's does.
package diskusage

// Usage is a filesystem's size and free space in bytes.
type Usage struct {
	Capacity, Available uint64
}

// Used is Capacity - Available, as the kubelet counts it: space reserved
// for root counts as used, since pods cannot write there.
func (u Usage) Used() uint64 {
	if u.Available > u.Capacity {
		return 0
	}
	return u.Capacity - u.Available
}

// Percent is Used in percent of Capacity; 0 when Capacity is 0.
func (u Usage) Percent() float64 {
	if u.Capacity == 0 {
		return 0
	}
	return float64(u.Used()) * 100 / float64(u.Capacity)
}
