package kubeclient

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// countingCodec counts the encodings it makes.
type countingCodec struct {
	runtime.ParameterCodec
	n int
}

func (c *countingCodec) EncodeParameters(obj runtime.Object, to schema.GroupVersion) (url.Values, error) {
	c.n++
	return c.ParameterCodec.EncodeParameters(obj, to)
}

// TestZeroParams: the Clientset's parameter codec encodes each options
// type's zero value through the scheme once, and every query it gives,
// zero or not, is the scheme codec's; a query handed out and changed
// changes none given later.
func TestZeroParams(t *testing.T) {
	plain := runtime.NewParameterCodec(NewScheme())
	inner := &countingCodec{ParameterCodec: plain}
	p := &zeroParams{ParameterCodec: inner}
	gv := corev1.SchemeGroupVersion
	zero := []runtime.Object{&metav1.UpdateOptions{}, &metav1.PatchOptions{}, &metav1.GetOptions{}, &metav1.CreateOptions{}, &metav1.ListOptions{}}
	set := []runtime.Object{
		&metav1.UpdateOptions{FieldManager: "m"}, &metav1.PatchOptions{DryRun: []string{"All"}},
		&metav1.GetOptions{ResourceVersion: "0"}, &metav1.ListOptions{FieldSelector: "spec.nodeName=n", Watch: true},
	}
	check := func(obj runtime.Object) {
		t.Helper()
		want, err := plain.EncodeParameters(obj, gv)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.EncodeParameters(obj, gv)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%T %+v: query (-want +got):\n%s", obj, obj, diff)
		}
		got.Set("changed", "yes")
	}
	for range 3 {
		for _, o := range zero {
			check(o)
		}
	}
	if inner.n != len(zero) {
		t.Errorf("%d encodings through the scheme for %d zero options asked 3 times each, want %d", inner.n, len(zero), len(zero))
	}
	inner.n = 0
	for range 2 {
		for _, o := range set {
			check(o)
		}
	}
	if inner.n != 2*len(set) {
		t.Errorf("%d encodings through the scheme of options set, want %d", inner.n, 2*len(set))
	}
}

// TestClientsetZeroParams: the Clientset's typed clients encode their
// options through zeroParams.
func TestClientsetZeroParams(t *testing.T) {
	cs, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cs.coordination.params.(*zeroParams); !ok {
		t.Errorf("the Lease client's parameter codec is %T, want *zeroParams", cs.coordination.params)
	}
}
