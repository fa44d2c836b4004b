// Package promrules holds the promtool unit tests of the chart's alert
// rules (testdata/*.yaml, the format of `promtool test rules`) and the Go
// tests that run them against the chart's PrometheusRule as rendered, with
// promtool built from the module proxy (hack/build-promtool.sh, run by
// make test-promrules).
package promrules
