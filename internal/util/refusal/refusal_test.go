package refusal

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestForGood(t *testing.T) {
	gr := schema.GroupResource{Group: "eraser.sh", Resource: "imagejobs"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "", Kind: "ConfigMap"}, "x", field.ErrorList{field.TooLong(field.NewPath("data"), "", 1<<20)})
	cases := map[string]struct {
		err  error
		want bool
	}{
		"too large":            {apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		"invalid":              {invalid, true},
		"invalid, wrapped":     {fmt.Errorf("writing part 2: %w", invalid), true},
		"bad request":          {apierrors.NewBadRequest("the object could not be decoded"), true},
		"conflict":             {apierrors.NewConflict(gr, "x", errors.New("modified")), false},
		"timeout":              {apierrors.NewServerTimeout(gr, "create", 1), false},
		"throttled":            {apierrors.NewTooManyRequests("slow down", 1), false},
		"unavailable":          {apierrors.NewServiceUnavailable("etcd leader changed"), false},
		"already exists":       {apierrors.NewAlreadyExists(gr, "x"), false},
		"a connection refused": {errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), false},
		"no error":             {nil, false},
	}
	for name, tc := range cases {
		if got := ForGood(tc.err); got != tc.want {
			t.Errorf("%s: ForGood(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}
