// Package strictkeys refuses JSON and YAML that a decoder would read as less
// than it says. Go's decoder keeps the last of two equal keys in an object,
// and matches keys to fields without regard to case, so
// {"excluded":["a:1"],"excluded":["b:1"]} and {"excluded":["a:1"],"Excluded":[]}
// both decode to one list, silently dropping the first: an exclusion a
// user wrote would protect nothing. Case here is Unicode's simple folding,
// as the decoder's: "excludeſ" (long s) is "excludes" to it. Decoders of
// outside input (exclusion lists, hand-off payloads, configuration) check
// with JSON or YAML first.
package strictkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// JSON returns an error naming the first object, at its JSON path, that
// repeats a key, or has two keys that differ only in case, or has a key
// that differs only in case from one of known (the keys the caller's
// struct declares, which Go would match to it). It checks only keys:
// syntax and types are the decoder's.
func JSON(data []byte, known ...string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var found *keyError
	if err := walk(dec, "$", known, 0); errors.As(err, &found) {
		return found
	}
	// Anything else (a syntax error, data cut short) is the decoder's that
	// follows to report, with its own context.
	return nil
}

// keyError is what Check finds; every other error is the decoder's.
type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }

func keyErrorf(format string, args ...any) error {
	return &keyError{msg: fmt.Sprintf(format, args...)}
}

// maxDepth bounds the nesting walked, as encoding/json bounds its own: the
// inputs checked here are a few levels deep.
const maxDepth = 1000

// walk reads one value, checking every object in it.
func walk(dec *json.Decoder, path string, known []string, depth int) error {
	if depth > maxDepth {
		return keyErrorf("%s: nested deeper than %d", path, maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return object(dec, path, known, depth)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walk(dec, fmt.Sprintf("%s[%d]", path, i), known, depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ]
		return err
	}
	return nil
}

func object(dec *json.Decoder, path string, known []string, depth int) error {
	seen := map[string]string{} // folded key -> the key as written
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		fold := foldKey(key)
		if prev, dup := seen[fold]; dup {
			if prev == key {
				return keyErrorf("%s: key %q appears twice; only the last would be read", path, key)
			}
			return keyErrorf("%s: keys %q and %q differ only in case; only the last would be read", path, prev, key)
		}
		seen[fold] = key
		for _, k := range known {
			if key != k && fold == foldKey(k) {
				return keyErrorf("%s: key %q: the key is %q (keys are case-sensitive here)", path, key, k)
			}
		}
		if err := walk(dec, path+"."+key, known, depth+1); err != nil {
			return err
		}
	}
	_, err := dec.Token() // }
	return err
}
