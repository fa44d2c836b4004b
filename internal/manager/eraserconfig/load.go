package eraserconfig

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Source is where the manager's EraserConfig comes from.
type Source struct {
	// File is the mounted document (--config).
	File string
	// ConfigMap is the EraserConfig ConfigMap the file is mounted from,
	// and Key the key of the document in it.
	ConfigMap client.ObjectKey
	Key       string
	// RemoverImage overrides components.remover.image (--remover-image).
	RemoverImage string
}

// ErrInvalid is a mounted EraserConfig that does not parse or validate.
var ErrInvalid = errors.New("invalid EraserConfig")

// Load reads and validates the EraserConfig file, applying
// --remover-image. Warnings are logged; an invalid file is ErrInvalid,
// naming every bad field.
func Load(log logr.Logger, src Source) (*Store, error) {
	if src.File == "" {
		return nil, errors.New("--config is required: the path of the mounted EraserConfig")
	}
	data, err := os.ReadFile(src.File)
	if err != nil {
		return nil, fmt.Errorf("reading EraserConfig: %w", err)
	}
	cfg, warnings, err := config.Parse(data)
	for _, w := range warnings {
		log.Info("EraserConfig warning", "file", src.File, "warning", w)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalid, src.File, err)
	}
	return storeWith(cfg, data, src.RemoverImage)
}

// LoadLastGood is the start-up fallback for a mounted EraserConfig that is
// invalid (loadErr): a document that hot reload refused is still in the
// ConfigMap, so a restart would crash-loop on it. If the cluster has a last
// good document on record, the manager starts with that and says so; with
// none it still refuses to start.
func LoadLastGood(ctx context.Context, log logr.Logger, restConfig *rest.Config, src Source, loadErr error) (*Store, error) {
	c, err := client.New(restConfig, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w (and no client to read the last good one: %w)", loadErr, err)
	}
	raw, err := Recorded(ctx, c, src.ConfigMap, src.Key)
	if err != nil {
		// The mounted file lags the ConfigMap by up to a minute: a document
		// fixed there is what the file is about to hold.
		live := &corev1.ConfigMap{}
		if gerr := c.Get(ctx, src.ConfigMap, live); gerr == nil {
			if cfg, _, perr := config.Parse([]byte(live.Data[src.Key])); perr == nil {
				log.Info("the mounted EraserConfig is invalid and its ConfigMap's is valid: starting with the ConfigMap's, which the file will hold soon", "configMap", src.ConfigMap.String())
				return storeWith(cfg, []byte(live.Data[src.Key]), src.RemoverImage)
			}
		}
		return nil, fmt.Errorf("%w (and no last good one on record: %w)", loadErr, err)
	}
	cfg, _, err := config.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w (and the last good one on record no longer parses: %w)", loadErr, err)
	}
	log.Error(loadErr, "the mounted EraserConfig is invalid; starting with the last good configuration on record, until the ConfigMap is fixed",
		"record", RecordKey(src.ConfigMap).Name)
	return storeWith(cfg, raw, src.RemoverImage)
}

func storeWith(cfg *config.Config, data []byte, removerImage string) (*Store, error) {
	if err := ApplyRemoverImage(cfg, removerImage); err != nil {
		return nil, err
	}
	return NewStore(cfg, data), nil
}

// ApplyRemoverImage overrides cfg's remover image with image, the
// --remover-image the manager runs with (none when ""). Every
// configuration a job runs with gets it: the one loaded at start, each one
// hot reload applies, and each job's snapshot when read back.
func ApplyRemoverImage(cfg *config.Config, image string) error {
	if image == "" {
		return nil
	}
	img, err := config.ParseImage(image)
	if err != nil {
		return fmt.Errorf("--remover-image: %w", err)
	}
	cfg.Components.Remover.Image = img
	return nil
}
