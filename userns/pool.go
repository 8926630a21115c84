package userns

import "math/rand/v2"

// pool is the set of blocks of a node's ID range: block i holds the IDs
// first+i*size to first+(i+1)*size-1. Blocks that would reach past
// maxID are left out.
type pool struct {
	first uint64
	size  uint64
	n     int
	free  int
	// used has a bit per block, set when the block is in use; nil until
	// the first is (most nodes never run a pod in a user namespace, and
	// the default range's bitmap is 8 KiB).
	used []uint64
}

func newPool(r Range, size uint32) pool {
	p := pool{first: uint64(r.First), size: uint64(size)}
	n := uint64(r.Length) / p.size
	if p.first+p.size-1 > maxID {
		n = 0
	} else if last := (maxID - p.first + 1) / p.size; n > last {
		// The kubelet hands out the block that ends at 2^32-1 (and, with
		// a subordinate range past 2^32, blocks that wrap around to
		// host IDs); the kernel refuses the first, the second would map
		// the host's IDs.
		n = last
	}
	p.n = int(n)
	p.free = p.n
	return p
}

// index returns the block that starts at hostID, if there is one.
func (p *pool) index(hostID uint32) (int, bool) {
	h := uint64(hostID)
	if p.size == 0 || h < p.first || (h-p.first)%p.size != 0 {
		return 0, false
	}
	i := (h - p.first) / p.size
	if i >= uint64(p.n) {
		return 0, false
	}
	return int(i), true
}

func (p *pool) hostID(i int) uint32 { return uint32(p.first + uint64(i)*p.size) }

func (p *pool) has(i int) bool { return p.used != nil && p.used[i/64]&(1<<(i%64)) != 0 }

func (p *pool) set(i int) {
	if p.used == nil {
		p.used = make([]uint64, (p.n+63)/64)
	}
	if !p.has(i) {
		p.used[i/64] |= 1 << (i % 64)
		p.free--
	}
}

func (p *pool) clear(i int) {
	if p.has(i) {
		p.used[i/64] &^= 1 << (i % 64)
		p.free++
	}
}

// allocate marks a free block as used: the first free one from a random
// block on, wrapping around.
func (p *pool) allocate(r *rand.Rand) (int, bool) {
	if p.free == 0 {
		return 0, false
	}
	start := r.IntN(p.n)
	for k := 0; k < p.n; {
		i := (start + k) % p.n
		if i%64 == 0 && k+64 <= p.n && p.used != nil && p.used[i/64] == ^uint64(0) {
			k += 64 // a full word of used blocks
			continue
		}
		if !p.has(i) {
			p.set(i)
			return i, true
		}
		k++
	}
	return 0, false
}
