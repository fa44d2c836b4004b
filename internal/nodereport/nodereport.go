// Package nodereport is a job's per-node report: what each node removed,
// kept (and why) and failed to remove. The manager reads each node's result
// lines from its workers' logs before their pods are deleted, and stores
// them in ConfigMaps (shards) that outlive the pods; `kubectl eraser report`
// reads them back.
//
// A report is bounded whatever the cluster's size: each shard is gzip'd
// JSON of at most ShardBudget bytes, holding whole nodes and its own table
// of the image names they mention (nodes of one pool share most images, so
// a name is stored once per shard, not once per node). A node whose entries
// alone would not fit keeps its counts, removals and failures, and drops
// kept entries first (Omitted counts them). A job has at most
// eraserv1.MaxReportConfigMaps shards; nodes beyond them keep only the
// counts the job's status totals.
package nodereport

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/eraser-oss/eraser/internal/logging"
)

// Entry is one image's outcome on one node.
type Entry struct {
	// Image is the image's first name, or the ImageList entry as written,
	// or the image ID when it has no name.
	Image string `json:"image"`
	// ID is the runtime's image ID, when an image matched.
	ID      string `json:"id,omitempty"`
	Outcome string `json:"outcome"`
	// Policy chose a removed (or failed) image: Listed, Unused, ...
	Policy string `json:"policy,omitempty"`
	// Bytes is the image's size: freed when removed.
	Bytes  uint64 `json:"bytes,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Node is one node's part of the report.
type Node struct {
	Name string `json:"node"`
	// Failed says the node's worker failed; Reason and Message say why, as
	// the job's status does.
	Failed  bool   `json:"failed,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	DryRun  bool   `json:"dryRun,omitempty"`
	// Counts are the worker's own totals per outcome (its termination
	// message): exact even when entries are omitted or unavailable.
	Counts     map[string]int `json:"counts,omitempty"`
	BytesFreed uint64         `json:"bytesFreed,omitempty"`
	Entries    []Entry        `json:"entries,omitempty"`
	// Omitted counts entries left out to keep the report bounded.
	Omitted int `json:"omitted,omitempty"`
	// Unavailable says why the entries could not be read (the log was gone
	// or unreachable); the counts still hold.
	Unavailable string `json:"unavailable,omitempty"`
}

// maxLine bounds one log line; a longer line is not a result line.
const maxLine = 64 << 10

// maxDetail bounds an entry's detail, as the job's status bounds messages.
const maxDetail = 300

// resultLine is the subset of a worker's JSON log line that a result line
// carries (see logging.ResultMessage and the remover's logResult).
type resultLine struct {
	Msg     string   `json:"msg"`
	Outcome string   `json:"outcome"`
	Target  string   `json:"target"`
	Image   string   `json:"image"`
	Names   []string `json:"names"`
	Policy  string   `json:"policy"`
	Bytes   uint64   `json:"bytes"`
	Detail  string   `json:"detail"`
}

// ParseLog reads a worker container's log and returns its result lines in
// order; other lines (and lines that are not JSON) are skipped. It stops
// after limit entries and says how many more there were.
func ParseLog(r io.Reader, limit int) (entries []Entry, more int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 && bytes.Contains(line, []byte(`"msg":"`+logging.ResultMessage+`"`)) {
			var l resultLine
			if json.Unmarshal(line, &l) == nil && l.Msg == logging.ResultMessage && l.Outcome != "" {
				if len(entries) >= limit {
					more++
				} else {
					entries = append(entries, entryOf(l))
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return entries, more, nil
		}
		if err != nil {
			return entries, more, fmt.Errorf("reading the log: %w", err)
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// maxLine is returned empty (skipped) after being read to its end.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(frag) > maxLine {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, err
		}
		return bytes.TrimRight(buf, "\r\n"), err
	}
}

func entryOf(l resultLine) Entry {
	e := Entry{Image: l.Target, ID: l.Image, Outcome: l.Outcome, Policy: l.Policy, Bytes: l.Bytes, Detail: clip(l.Detail)}
	if len(l.Names) > 0 {
		e.Image = l.Names[0]
	}
	if e.Image == e.ID {
		// "*" targets are image IDs: say it once.
		e.ID = ""
		if e.Image == "" {
			e.Image = l.Image
		}
	}
	return e
}

func clip(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	return s[:maxDetail-3] + "..."
}

// kept reports an outcome that is not an action: dropped first when a
// node's entries do not fit.
func kept(outcome string) bool {
	switch outcome {
	case "removed", "refused", "failed", "invalid":
		return false
	}
	return true
}

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
			e := Entry{Image: s.Images[i], ID: s.IDs[i], Outcome: s.Words[o], Bytes: st.Bytes[k], Detail: st.Detail[k]}
			if p > 0 {
				e.Policy = s.Words[p-1]
			}
			n.Entries = append(n.Entries, e)
		}
		out = append(out, n)
	}
	return out, nil
}

// ShardBudget is the most compressed bytes in one shard: a ConfigMap may
// hold 1 MiB, and its metadata and node list need some of it.
const ShardBudget = 900 << 10

// Split encodes nodes into shards of at most budget bytes each, in order,
// halving a group that does not fit. A single node that does not fit is
// trimmed (Fit). It returns each shard with the names of its nodes.
func Split(nodes []Node, budget int) ([]Shard, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	data, err := Encode(nodes)
	if err != nil {
		return nil, err
	}
	if len(data) <= budget {
		return []Shard{{Data: data, Nodes: names(nodes)}}, nil
	}
	if len(nodes) == 1 {
		n, err := Fit(nodes[0], budget)
		if err != nil {
			return nil, err
		}
		data, err := Encode([]Node{n})
		if err != nil {
			return nil, err
		}
		return []Shard{{Data: data, Nodes: names(nodes)}}, nil
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
