package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseImage(t *testing.T) {
	cases := map[string]struct {
		ref     string
		want    Image
		wantErr bool
	}{
		"repo and tag":      {ref: "ghcr.io/x/remover:v1", want: Image{Repo: "ghcr.io/x/remover", Tag: "v1"}},
		"no tag":            {ref: "remover", want: Image{Repo: "remover"}},
		"registry port":     {ref: "localhost:5000/remover", want: Image{Repo: "localhost:5000/remover"}},
		"registry port tag": {ref: "localhost:5000/remover:v2", want: Image{Repo: "localhost:5000/remover", Tag: "v2"}},
		"digest":            {ref: "r/remover@sha256:abcd", want: Image{Repo: "r/remover@sha256:abcd"}},
		"empty":             {ref: "", wantErr: true},
		"space":             {ref: "a b", wantErr: true},
		"no repo, tag":      {ref: ":v1", wantErr: true},
		"empty tag":         {ref: "remover:", wantErr: true},
		"no repo, digest":   {ref: "@sha256:abcd", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseImage(tc.ref)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err == nil && got.Ref() != tc.ref {
				t.Errorf("Ref() = %q, want %q", got.Ref(), tc.ref)
			}
		})
	}
}
