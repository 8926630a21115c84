package node

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestReadHugePages(t *testing.T) {
	dir := t.TempDir()
	for name, nr := range map[string]string{"hugepages-2048kB": "8\n", "hugepages-1048576kB": "0\n", "hugepages-64kB": "3"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "nr_hugepages"), []byte(nr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "not-hugepages"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHugePages(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int64{2 << 20: 16 << 20, 1 << 30: 0, 64 << 10: 192 << 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadHugePages (-want +got):\n%s", diff)
	}
	capacity := HugePagesCapacity(got)
	if diff := cmp.Diff(map[v1.ResourceName]string{"hugepages-2Mi": "16Mi", "hugepages-1Gi": "0", "hugepages-64Ki": "192Ki"}, quantities(capacity)); diff != "" {
		t.Errorf("HugePagesCapacity (-want +got):\n%s", diff)
	}

	// No hugepage support: none, no error.
	if got, err := ReadHugePages(filepath.Join(dir, "absent")); err != nil || len(got) != 0 {
		t.Errorf("ReadHugePages(absent) = %v, %v", got, err)
	}
	// A bad count is an error naming the size.
	if err := os.WriteFile(filepath.Join(dir, "hugepages-2048kB", "nr_hugepages"), []byte("many"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHugePages(dir); err == nil {
		t.Error("ReadHugePages accepted a bad nr_hugepages")
	}
}

func quantities(rl v1.ResourceList) map[v1.ResourceName]string {
	out := map[v1.ResourceName]string{}
	for k, q := range rl {
		out[k] = q.String()
	}
	return out
}

// TestFactsHugePages: the Node's capacity lists every hugepage size, and
// its allocatable the sizes less what is reserved of them.
func TestFactsHugePages(t *testing.T) {
	m := testMachine
	m.HugePages = map[int64]int64{2 << 20: 64 << 20, 1 << 30: 0}
	opts := Options{nodeName: "n1", AgentVersion: "nodekit/v0.1.0", SystemReserved: v1.ResourceList{"hugepages-2Mi": resource.MustParse("16Mi")}}
	if err := opts.setDefaults(); err != nil {
		t.Fatal(err)
	}
	f := newFacts(opts, m, net.ParseIP("192.0.2.10").To4())
	got := map[string]string{
		"capacity 2Mi": f.capacity.Name("hugepages-2Mi", resource.BinarySI).String(), "capacity 1Gi": f.capacity.Name("hugepages-1Gi", resource.BinarySI).String(),
		"allocatable 2Mi": f.allocatable.Name("hugepages-2Mi", resource.BinarySI).String(), "allocatable 1Gi": f.allocatable.Name("hugepages-1Gi", resource.BinarySI).String(),
	}
	want := map[string]string{"capacity 2Mi": "64Mi", "capacity 1Gi": "0", "allocatable 2Mi": "48Mi", "allocatable 1Gi": "0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hugepages (-want +got):\n%s", diff)
	}
}
