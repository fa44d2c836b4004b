package imagejob

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRefusedAll(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	forbidden := apierrors.NewForbidden(gr, "p", errors.New(`violates PodSecurity "baseline:latest": hostPath volumes`))
	cases := map[string]struct {
		errs []error
		want bool
	}{
		"none sent":               {errs: nil},
		"all forbidden":           {errs: []error{forbidden, forbidden}, want: true},
		"one created":             {errs: []error{forbidden, nil}},
		"a transient error":       {errs: []error{forbidden, apierrors.NewServiceUnavailable("busy")}},
		"invalid (PriorityClass)": {errs: []error{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil)}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, got := refusedAll(tc.errs); got != tc.want {
				t.Errorf("refusedAll = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAPIMessageOmitsThePod: one refusal of many pods reads as one.
func TestAPIMessageOmitsThePod(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	a := apiMessage(apierrors.NewForbidden(gr, "job-node-a-12345678", errors.New("exceeded quota: q")))
	b := apiMessage(apierrors.NewForbidden(gr, "job-node-b-87654321", errors.New("exceeded quota: q")))
	if a != b || strings.Contains(a, "node-a") || !strings.Contains(a, "exceeded quota") {
		t.Errorf("messages %q and %q", a, b)
	}
}
