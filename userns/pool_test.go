package userns

import (
	"math/rand/v2"
	"testing"
)

// A pool holds no bitmap until a block is in use, and then works as
// before: blocks set, found, allocated and cleared.
func TestPoolBitmapOnFirstUse(t *testing.T) {
	p := newPool(DefaultRange(DefaultIDsPerPod), DefaultIDsPerPod)
	if p.used != nil {
		t.Fatalf("a new pool holds a bitmap of %d words, want none", len(p.used))
	}
	if p.has(0) || p.has(p.n-1) {
		t.Error("a new pool has a block in use")
	}
	p.clear(5)
	if p.used != nil || p.free != p.n {
		t.Errorf("clearing a free block: bitmap %d words, %d free of %d", len(p.used), p.free, p.n)
	}
	i, ok := p.allocate(rand.New(rand.NewPCG(1, 2)))
	if !ok || !p.has(i) || p.free != p.n-1 {
		t.Fatalf("allocate = %d, %v; in use %v, %d free of %d", i, ok, p.has(i), p.free, p.n)
	}
	p.set(i)
	p.set(p.n - 1)
	if p.free != p.n-2 || !p.has(p.n-1) {
		t.Errorf("%d free of %d after two blocks, want %d", p.free, p.n, p.n-2)
	}
	p.clear(i)
	if p.has(i) || p.free != p.n-1 {
		t.Errorf("cleared block %d still in use (%d free)", i, p.free)
	}
}
