package userns

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAllocateNearlyFull allocates and frees one block of the
// default range (65534 pods) with all but 100 blocks in use: the scan
// from a random block to a free one.
func BenchmarkAllocateNearlyFull(b *testing.B) {
	p := newPool(DefaultRange(DefaultIDsPerPod), DefaultIDsPerPod)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range p.n - 100 {
		p.set(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		i, ok := p.allocate(r)
		if !ok {
			b.Fatal("no free block")
		}
		p.clear(i)
	}
}

// BenchmarkPodUserNamespaceRecorded is the call of each container start
// of a hostUsers: false pod: its mapping file read back and checked.
func BenchmarkPodUserNamespaceRecorded(b *testing.B) {
	m, err := New(Options{RootDir: b.TempDir(), Runtime: supporting(""), Range: &Range{65536, 65536 * 200}})
	if err != nil {
		b.Fatal(err)
	}
	pod := userPod("a", ptr(false))
	if _, err := m.PodUserNamespace(b.Context(), pod, ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.PodUserNamespace(b.Context(), pod, ""); err != nil {
			b.Fatal(err)
		}
	}
}
