// The stored form of a report: gzip'd columnar shards, split and trimmed
// to fit their ConfigMaps.

package nodereport

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// shard is the stored form, columnar so that gzip finds the repeats: a
// table of images (name and ID) and of outcome and policy words, and per
// node one index per entry into each. Nodes of one pool list the same
// images in the same order, so their index columns repeat almost byte for
// byte and compress to little.
type shard struct {
	Version int      `json:"version"`
	Images  []string `json:"images"`
	IDs     []string `json:"ids"`
	Words   []string `json:"words"`
	Nodes   []stored `json:"nodes"`
}

type stored struct {
	Node
	// Image, Outcome and Policy index the shard's tables, one per entry
	// (Policy: word index + 1, 0 for none).
	Image   []int `json:"img,omitempty"`
	Outcome []int `json:"out,omitempty"`
	Policy  []int `json:"pol,omitempty"`
	// Bytes and Detail are sparse: by entry position.
	Bytes  map[int]uint64 `json:"bytes,omitempty"`
	Detail map[int]string `json:"detail,omitempty"`
	// Scan holds the scanner's verdicts, by entry position. A reader of
	// before it ignores them (JSON), so the version stays.
	Scan map[int]*workerresult.Scan `json:"scan,omitempty"`
}

const version = 1

// Encode stores nodes as one gzip'd shard.
func Encode(nodes []Node) ([]byte, error) {
	s := shard{Version: version, Images: []string{}, IDs: []string{}, Words: []string{}, Nodes: make([]stored, 0, len(nodes))}
	images, words := map[[2]string]int{}, map[string]int{}
	word := func(w string) int {
		i, ok := words[w]
		if !ok {
			i = len(s.Words)
			words[w] = i
			s.Words = append(s.Words, w)
		}
		return i
	}
	for _, n := range nodes {
		st := stored{Node: n}
		st.Node.Entries = nil
		for k, e := range n.Entries {
			key := [2]string{e.Image, e.ID}
			i, ok := images[key]
			if !ok {
				i = len(s.Images)
				images[key] = i
				s.Images = append(s.Images, e.Image)
				s.IDs = append(s.IDs, e.ID)
			}
			st.Image = append(st.Image, i)
			st.Outcome = append(st.Outcome, word(e.Outcome))
			p := 0
			if e.Policy != "" {
				p = word(e.Policy) + 1
			}
			st.Policy = append(st.Policy, p)
			if e.Bytes > 0 {
				if st.Bytes == nil {
					st.Bytes = map[int]uint64{}
				}
				st.Bytes[k] = e.Bytes
			}
			if e.Detail != "" {
				if st.Detail == nil {
					st.Detail = map[int]string{}
				}
				st.Detail[k] = e.Detail
			}
			if e.Scan != nil {
				if st.Scan == nil {
					st.Scan = map[int]*workerresult.Scan{}
				}
				st.Scan[k] = e.Scan
			}
		}
		s.Nodes = append(s.Nodes, st)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err := json.NewEncoder(zw).Encode(s); err != nil {
		return nil, fmt.Errorf("encoding the report: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing the report: %w", err)
	}
	return buf.Bytes(), nil
}

// maxDecoded bounds a shard's decompressed size, so that a damaged or
// hostile ConfigMap cannot exhaust the reader's memory.
const maxDecoded = 512 << 20

// Decode reads one shard.
func Decode(data []byte) ([]Node, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the report shard is not gzip: %w", err)
	}
	var s shard
	if err := json.NewDecoder(io.LimitReader(zr, maxDecoded)).Decode(&s); err != nil {
		return nil, fmt.Errorf("the report shard is not a report: %w", err)
	}
	if s.Version != version {
		return nil, fmt.Errorf("report shard version %d, this reader knows %d", s.Version, version)
	}
	if len(s.IDs) != len(s.Images) {
		return nil, errors.New("the report shard's image tables differ in length")
	}
	out := make([]Node, 0, len(s.Nodes))
	for _, st := range s.Nodes {
		n := st.Node
		if len(st.Outcome) != len(st.Image) || len(st.Policy) != len(st.Image) {
			return nil, fmt.Errorf("node %s: the entry columns differ in length", n.Name)
		}
		n.Entries = make([]Entry, 0, len(st.Image))
		for k, i := range st.Image {
			o, p := st.Outcome[k], st.Policy[k]
			if i < 0 || i >= len(s.Images) || o < 0 || o >= len(s.Words) || p < 0 || p > len(s.Words) {
				return nil, fmt.Errorf("node %s: an entry points outside the shard's tables", n.Name)
			}
			e := Entry{Image: s.Images[i], ID: s.IDs[i], Outcome: s.Words[o], Bytes: st.Bytes[k], Detail: st.Detail[k], Scan: st.Scan[k]}
			if p > 0 {
				e.Policy = s.Words[p-1]
			}
			n.Entries = append(n.Entries, e)
		}
		out = append(out, n)
	}
	return out, nil
}

// ShardBudget is the most bytes one shard's compressed data and node list
// take together: a ConfigMap may hold 1 MiB, and its keys, the job's name
// and its metadata need some of the rest.
const ShardBudget = 900 << 10

// Split encodes nodes into shards whose data and node list take at most
// budget bytes each, in order, halving a group that does not fit. The node
// list is counted because it is stored beside the data, plain: at 253
// characters a name, 10,000 nodes' names alone are 2.5 MB. A single node
// that does not fit is trimmed (Fit). It returns each shard with the names
// of its nodes.
func Split(nodes []Node, budget int) ([]Shard, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	data, err := Encode(nodes)
	if err != nil {
		return nil, err
	}
	named := names(nodes)
	listed := len(NodeList(named))
	if len(data)+listed <= budget {
		return []Shard{{Data: data, Nodes: named}}, nil
	}
	if len(nodes) == 1 {
		n, err := Fit(nodes[0], budget-listed)
		if err != nil {
			return nil, err
		}
		data, err := Encode([]Node{n})
		if err != nil {
			return nil, err
		}
		return []Shard{{Data: data, Nodes: named}}, nil
	}
	half := len(nodes) / 2
	a, err := Split(nodes[:half], budget)
	if err != nil {
		return nil, err
	}
	b, err := Split(nodes[half:], budget)
	if err != nil {
		return nil, err
	}
	return append(a, b...), nil
}

// Shard is one encoded shard and the nodes it holds.
type Shard struct {
	Data  []byte
	Nodes []string
}

func names(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// Fit trims one node's entries until it encodes within budget: kept
// entries go first, then the rest from the end. Counts stay exact.
func Fit(n Node, budget int) (Node, error) {
	entries := slices.Clone(n.Entries)
	// Actions first, so that trimming the tail drops kept entries first.
	sort.SliceStable(entries, func(i, j int) bool { return !kept(entries[i].Outcome) && kept(entries[j].Outcome) })
	total := len(entries) + n.Omitted
	for keep := len(entries); ; keep /= 2 {
		n.Entries = entries[:keep]
		n.Omitted = total - keep
		data, err := Encode([]Node{n})
		if err != nil {
			return n, err
		}
		if len(data) <= budget || keep == 0 {
			return n, nil
		}
	}
}

// NodeList is the plain-text list of a shard's nodes that its ConfigMap
// carries, so that `kubectl get configmap -o yaml` finds a node's shard.
func NodeList(nodes []string) string { return strings.Join(nodes, "\n") + "\n" }

// ParseNodeList reads NodeList's form.
func ParseNodeList(s string) []string { return strings.Fields(s) }
