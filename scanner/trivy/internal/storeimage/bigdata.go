package storeimage

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// The store's files read here besides its records (criorecords), driver
// "overlay" by default:
//
//	<root>/<driver>-images/<id>/<key file>   an image's "big data": its config, manifests
//	<root>/<driver>-layers/<id>.tar-split.gz the layer tar's headers, for reassembly
//	<root>/<driver>/<id>/diff                the layer's files
//
// They are read without the store's locks: the scanner's view of the
// node's images is a read-only mount, and a file that changes under it
// fails that image's scan (which keeps the image), never the run.

// maxBigData bounds one stored document read into memory: configs and
// manifests are kilobytes; a config of a thousand-layer image is well
// under a megabyte.
const maxBigData = 16 << 20

// layerChain returns the layers of the image whose top layer is top, base
// first, as the config's diff IDs list them.
func layerChain(layers map[string]criorecords.Layer, top string) ([]criorecords.Layer, error) {
	var chain []criorecords.Layer
	for id := top; id != ""; {
		l, ok := layers[id]
		if !ok {
			return nil, fmt.Errorf("layer %s is not in the store's layer records", id)
		}
		chain = append(chain, l)
		// A store has at most a few thousand layers; a longer chain is a
		// loop in damaged records.
		if len(chain) > len(layers) {
			return nil, fmt.Errorf("the parents of layer %s loop", top)
		}
		id = l.Parent
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// errNoBigData means the image has no stored document under the key.
var errNoBigData = errors.New("no such document stored with the image")

// bigData reads one of the documents stored with the image in the store at
// root, of the driver.
func bigData(root, driver string, img criorecords.Image, key string) ([]byte, error) {
	if !slices.Contains(img.BigDataNames, key) {
		return nil, fmt.Errorf("image %s, %q: %w", img.ID, key, errNoBigData)
	}
	if !storeID(img.ID) {
		return nil, fmt.Errorf("image ID %q is not a store ID", img.ID)
	}
	data, err := readBigData(filepath.Join(root, driver+"-images", img.ID, bigDataFile(key)))
	if err != nil {
		return nil, fmt.Errorf("image %s, %q: %w", img.ID, key, err)
	}
	return data, nil
}

func readBigData(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBigData+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(data) > maxBigData {
		return nil, fmt.Errorf("%s is over %d MiB: not read", file, maxBigData>>20)
	}
	return data, nil
}

// bigDataFile is the file name containers/storage gives a document's key:
// the key itself when it is only lower-case letters, digits and dots, else
// "=" and the key in standard base64 (a digest key has a colon).
func bigDataFile(key string) string {
	for _, r := range key {
		if r != '.' && (r < '0' || r > '9') && (r < 'a' || r > 'z') {
			return "=" + base64.StdEncoding.EncodeToString([]byte(key))
		}
	}
	return key
}
