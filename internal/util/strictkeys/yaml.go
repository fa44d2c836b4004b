package strictkeys

import (
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// YAML returns an error naming the first mapping, by its line, that repeats
// a key or has two keys that differ only in case. Configuration documents
// go through sigs.k8s.io/yaml, which keeps the last of two equal keys
// without a word, and then through encoding/json, which matches keys in
// any case: either way one of the two values would be dropped. Syntax
// errors are the decoder's to report.
func YAML(data []byte) error {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// A syntax error: the decoder that follows reports it.
			return nil
		}
		if err := mapping(&doc, 0); err != nil {
			return err
		}
	}
}

func mapping(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested deeper than %d", n.Line, maxDepth)
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				continue
			}
			fold := foldKey(k.Value)
			if prev, dup := seen[fold]; dup {
				if prev.Value == k.Value {
					return fmt.Errorf("line %d: key %q appears again (first on line %d); only the last would be read", k.Line, k.Value, prev.Line)
				}
				return fmt.Errorf("line %d: key %q differs only in case from %q on line %d; only the last would be read", k.Line, k.Value, prev.Value, prev.Line)
			}
			seen[fold] = k
		}
	}
	for _, c := range n.Content {
		if err := mapping(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}
