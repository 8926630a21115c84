package manifest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantKind string
		// wantNames are the names of the decoded pods, and their first
		// container's image.
		wantNames []string
		wantErr   string
		wantIs    error
	}{
		{
			name:      "YAML pod",
			in:        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: x:1\n",
			wantKind:  KindPod,
			wantNames: []string{"a x:1"},
		},
		{
			name:      "JSON pod",
			in:        `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"x:1"}]}}`,
			wantKind:  KindPod,
			wantNames: []string{"a x:1"},
		},
		{
			name:      "no kind means Pod",
			in:        "metadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: x:1\n",
			wantKind:  KindPod,
			wantNames: []string{"a x:1"},
		},
		{
			name:      "empty documents around the pod are ignored",
			in:        "---\n# a comment\n---\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: x:1\n---\n",
			wantKind:  KindPod,
			wantNames: []string{"a x:1"},
		},
		{
			name:      "pod list",
			in:        "apiVersion: v1\nkind: PodList\nitems:\n- metadata:\n    name: a\n  spec:\n    containers: [{name: c, image: 'x:1'}]\n- metadata:\n    name: b\n  spec:\n    containers: [{name: c, image: 'y:2'}]\n",
			wantKind:  KindPodList,
			wantNames: []string{"a x:1", "b y:2"},
		},
		{
			name:      "unknown fields are ignored",
			in:        "metadata:\n  name: a\n  bogus: 1\nspec:\n  containers:\n  - name: c\n    image: x:1\n",
			wantKind:  KindPod,
			wantNames: []string{"a x:1"},
		},
		{name: "two pods", in: "metadata: {name: a}\n---\nmetadata: {name: b}\n", wantIs: ErrMultipleDocuments},
		{name: "empty", in: "", wantIs: ErrEmpty},
		{name: "only comments", in: "# nothing\n", wantIs: ErrEmpty},
		{name: "other kind", in: "apiVersion: v1\nkind: Service\n", wantErr: `kind "Service" is not Pod or PodList`},
		{name: "other apiVersion", in: "apiVersion: apps/v1\nkind: Pod\n", wantErr: `apiVersion "apps/v1" is not v1`},
		{name: "not an object", in: "- a\n- b\n", wantErr: "not an object"},
		{name: "broken YAML", in: "metadata: {name: a\n", wantErr: "not YAML or JSON"},
		{name: "wrong field type", in: "metadata: {name: a}\nspec: {containers: 3}\n", wantErr: "cannot decode pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, kind, err := Decode([]byte(tt.in))
			if tt.wantErr != "" || tt.wantIs != nil {
				if err == nil {
					t.Fatalf("Decode() = %d pods, want an error", len(pods))
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("Decode() error = %v, want %v", err, tt.wantIs)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Decode() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode() = %v", err)
			}
			if kind != tt.wantKind {
				t.Errorf("kind = %q, want %q", kind, tt.wantKind)
			}
			var got []string
			for _, p := range pods {
				if p.Kind != "" || p.APIVersion != "" {
					t.Errorf("pod %s keeps its TypeMeta %+v", p.Name, p.TypeMeta)
				}
				got = append(got, p.Name+" "+p.Spec.Containers[0].Image)
			}
			if diff := cmp.Diff(tt.wantNames, got); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: x:1\n",
		`{"kind":"PodList","items":[{"metadata":{"name":"a"}}]}`,
		"a: b\n---\nc: d\n",
		"--- foo\n",
		"&a [*a]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, kind, err := Decode(data)
		if err == nil && kind != KindPod && kind != KindPodList {
			t.Errorf("Decode() kind = %q without error", kind)
		}
		if err == nil && kind == KindPod && len(pods) != 1 {
			t.Errorf("Decode() kind Pod with %d pods", len(pods))
		}
	})
}
