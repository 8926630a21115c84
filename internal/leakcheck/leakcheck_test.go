package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// TestFindWaits: a goroutine that ends after goleak.Find alone would have
// given up is no leak for Find.
func TestFindWaits(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	release := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		<-release
		close(ended)
	}()
	found := make(chan error, 1)
	go func() { found <- Find(ignore) }()
	// A whole goleak.Find retry budget passes with the goroutine blocked.
	if err := goleak.Find(ignore); err == nil {
		t.Fatal("goleak.Find saw no goroutine while one was blocked")
	}
	close(release)
	<-ended
	if err := <-found; err != nil {
		t.Errorf("Find reported a goroutine that ended: %v", err)
	}
	if err := Find(ignore); err != nil {
		t.Errorf("Find after every goroutine ended: %v", err)
	}
}
