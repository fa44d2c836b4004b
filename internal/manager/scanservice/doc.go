// Package scanservice is the manager's scan service: one vulnerability DB
// and one verdict per image for the whole cluster. The run's scanners claim
// their images' verdicts from it, scan only what it hands them and share
// what they find; it answers only the scanner pods of a running job, as
// their ServiceAccount tokens prove them.
package scanservice
