package pleg

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// bufRecorder is a wire lister that records the buffers it is given and
// the answers it returns.
type bufRecorder struct {
	runtimetest.Wire
	givenSb, givenCs [][]byte
	gotSb, gotCs     [][]byte
}

func (r *bufRecorder) ListPodSandboxWire(ctx context.Context, f *runtimeapi.PodSandboxFilter, buf []byte) ([]byte, error) {
	r.givenSb = append(r.givenSb, buf)
	b, err := r.Wire.ListPodSandboxWire(ctx, f, buf)
	r.gotSb = append(r.gotSb, b)
	return b, err
}

func (r *bufRecorder) ListContainersWire(ctx context.Context, f *runtimeapi.ContainerFilter, buf []byte) ([]byte, error) {
	r.givenCs = append(r.givenCs, buf)
	b, err := r.Wire.ListContainersWire(ctx, f, buf)
	r.gotCs = append(r.gotCs, b)
	return b, err
}

// TestRelistReusesBuffers: each relist reads its answers into the
// buffers of the last one, rather than allocating a pair each second.
func TestRelistReusesBuffers(t *testing.T) {
	rt, _ := benchRuntime(t, 20)
	rec := &bufRecorder{Wire: runtimetest.Wire{Runtime: rt}}
	g, err := NewGeneric(rec, nopStatus, NewCache(), GenericOptions{ChannelCapacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		drain(g.Events())
	}
	if len(rec.givenSb) != 3 || len(rec.givenCs) != 3 {
		t.Fatalf("%d sandbox and %d container lists, want 3 each", len(rec.givenSb), len(rec.givenCs))
	}
	if rec.givenSb[0] != nil || rec.givenCs[0] != nil {
		t.Errorf("the first relist was given buffers")
	}
	for i := 1; i < 3; i++ {
		if cap(rec.givenSb[i]) == 0 || &rec.givenSb[i][:1][0] != &rec.gotSb[i-1][:1][0] {
			t.Errorf("relist %d: the sandbox list was not read into the last answer's buffer", i+1)
		}
		if cap(rec.givenCs[i]) == 0 || &rec.givenCs[i][:1][0] != &rec.gotCs[i-1][:1][0] {
			t.Errorf("relist %d: the container list was not read into the last answer's buffer", i+1)
		}
	}
}

func TestKeepBuffer(t *testing.T) {
	for _, tc := range []struct {
		len, cap int
		kept     bool
	}{{0, 0, true}, {10, 1 << 20, false}, {1 << 20, 1 << 20, true}, {300 << 10, 1 << 20, true}, {10, 64 << 10, true}} {
		b := make([]byte, tc.len, tc.cap)
		if got := keepBuffer(b) != nil || tc.cap == 0; got != tc.kept {
			t.Errorf("keepBuffer(len %d, cap %d) kept = %v, want %v", tc.len, tc.cap, got, tc.kept)
		}
	}
}
