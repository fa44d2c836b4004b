// Package parallel runs the calls of a loop on a bounded number of
// goroutines.
package parallel

import "sync"

// For calls f(i) for every i in [0, n) from at most workers goroutines and
// returns when every call has. The index is the only thing f is given, so
// that each call writes its result to a slot of its own.
func For(workers, n int, f func(i int)) {
	if n <= 0 {
		return
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range work {
				f(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}
