package hollow

import (
	"testing"

	"github.com/go-logr/logr"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestPLEGCapacity: a hollow node's PLEG is the evented one with
// channels of plegCapacity.
func TestPLEGCapacity(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	g, err := newPLEG(rt, pleg.StatusGetterFunc(nil), pleg.NewCache(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.(*pleg.Evented); !ok {
		t.Errorf("PLEG %T, want *pleg.Evented", g)
	}
	if c := cap(g.Events()); c != plegCapacity {
		t.Errorf("events channel of %d, want %d", c, plegCapacity)
	}
}
