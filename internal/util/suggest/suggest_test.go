package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"selectors", "type", "skipDBUpdate", "dbRepo"}
	cases := map[string]string{
		"selector":      "selectors",
		"SELECTORS":     "selectors",
		"skipDbUpdates": "skipDBUpdate",
		"typ":           "type",
		"dbrepository":  "",
		"":              "",
	}
	for key, want := range cases {
		t.Run(key, func(t *testing.T) {
			if got := Closest(key, known); got != want {
				t.Errorf("Closest(%q) = %q, want %q", key, got, want)
			}
		})
	}
}
