package remover

import "fmt"

// The values of --scanner. The manager sets it from the scanner's enabled
// setting; the remover does not guess from the shared directory, because a
// custom scanner may remove its completion endpoint at any time (upstream's
// protocol does not say when), and a guess of "no scanner" would widen the
// removals from the vulnerable images to every candidate.
const (
	ScannerEnabled  = "enabled"
	ScannerDisabled = "disabled"
)

// Sender is the peer that hands a scheduled run's remover its images, from
// --scanner alone: the scanner when one runs, else the collector. Any other
// value, or none, is an error, so that a pod spec that forgot to say runs
// nothing rather than the wider of the two.
func Sender(scanner string) (string, error) {
	switch scanner {
	case ScannerEnabled:
		return "scanner", nil
	case ScannerDisabled:
		return "collector", nil
	case "":
		return "", fmt.Errorf("--scanner is not set: a scheduled run's remover must be told whether a scanner runs (%s or %s); nothing removed", ScannerEnabled, ScannerDisabled)
	}
	return "", fmt.Errorf("--scanner=%q: want %s or %s; nothing removed", scanner, ScannerEnabled, ScannerDisabled)
}
