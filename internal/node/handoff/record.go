package handoff

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/eraser-oss/eraser/internal/util/atomicfile"
)

// WriteCollected records, in dir, the images the collector hands on. The
// record is written to a temporary file, synced and renamed into place, so a
// reader sees the previous record or this one whole, never a part.
func WriteCollected(dir string, images []Image) error {
	data, err := Encode(images)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, Collected), data); err != nil {
		return fmt.Errorf("recording the collected images: %w", err)
	}
	return nil
}

// ReadCollected reads the collector's record from dir.
func ReadCollected(dir string) ([]Image, error) {
	path := filepath.Join(dir, Collected)
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the collector's record of the images it listed (%s) is missing, so the hand-off cannot be checked: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the collector's record: %w", err)
	}
	images, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("the collector's record %s: %w", path, err)
	}
	return images, nil
}

func readFile(path string) ([]byte, error) {
	f, err := openRecord(path)
	if err != nil {
		return nil, err
	}
	data, err := readAll(f, MaxPayload)
	return data, closeWith(f, err)
}
