// Package eraserconfig is the EraserConfig's life in the manager: it is
// read at start from --config (or, when that document is invalid, from the
// last good one on record), held in a Store as the configuration in force,
// which every job snapshots when it starts, and replaced when the ConfigMap
// changes and its new document is valid; an invalid one is refused with an
// Event and a log line naming the fields, and the last good configuration
// stays in force.
package eraserconfig
