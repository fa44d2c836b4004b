package bytesize

import "testing"

func TestFormat(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 1536: "1.5KiB", 70464307: "67.2MiB", 1 << 40: "1.0TiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatSigned(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1536: "1.5KiB", -1536: "-1.5KiB"} {
		if got := FormatSigned(n); got != want {
			t.Errorf("FormatSigned(%d) = %q, want %q", n, got, want)
		}
	}
}
