package strictkeys

import (
	"strings"
	"unicode"
)

// foldKey returns the form under which encoding/json finds a struct field
// for a key it has no exact match for: two keys with the same foldKey land
// in the same field. encoding/json compares keys with Unicode simple case
// folding, not lower-casing: "ſ" (long s) and "K" (Kelvin sign) match "s"
// and "k", though strings.ToLower keeps "ſ" apart from "s", and it maps
// "İ" to "i", which encoding/json keeps apart.
//
// Each rune is replaced by the least rune of its simple folding orbit (the
// runes unicode.SimpleFold cycles through), a choice that is the same for
// every member of the orbit. Ranging over the string turns each invalid
// byte into U+FFFD, as encoding/json does when it unquotes a key.
func foldKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		least := r
		for next := unicode.SimpleFold(r); next != r; next = unicode.SimpleFold(next) {
			least = min(least, next)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// SameField reports whether encoding/json would decode a key into the
// struct field whose JSON name is field.
func SameField(key, field string) bool { return key == field || foldKey(key) == foldKey(field) }
