package atomicwriter

import (
	"fmt"
	"testing"
)

// payloadOf is n files of size bytes each, their content depending on v.
func payloadOf(n, size, v int) map[string]File {
	p := make(map[string]File, n)
	for i := range n {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(v + i + j)
		}
		p[fmt.Sprintf("dir%d/file%d", i%3, i)] = File{Data: b, Mode: 0o644}
	}
	return p
}

// BenchmarkWrite measures a refresh of a volume: unchanged (compare only)
// and changed (a new directory swapped in).
func BenchmarkWrite(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("unchanged/%dfiles", n), func(b *testing.B) {
			dir := b.TempDir()
			p := payloadOf(n, 1024, 0)
			if _, err := Write(dir, p, Options{}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if changed, err := Write(dir, p, Options{}); err != nil || changed {
					b.Fatal(changed, err)
				}
			}
		})
		b.Run(fmt.Sprintf("changed/%dfiles", n), func(b *testing.B) {
			dir := b.TempDir()
			v := 0
			for b.Loop() {
				v++
				if changed, err := Write(dir, payloadOf(n, 1024, v), Options{}); err != nil || !changed {
					b.Fatal(changed, err)
				}
			}
		})
	}
}
