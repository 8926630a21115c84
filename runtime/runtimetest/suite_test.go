package runtimetest_test

import (
	"testing"

	"github.com/nodekit/nodekit/runtime/runtimesuite"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestConformance runs the runtime conformance suite on the in-memory
// runtime: the lifecycle checks a runtime that simulates its containers
// can pass.
func TestConformance(t *testing.T) {
	runtimesuite.Run(t, func(t *testing.T) runtimesuite.Config {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		t.Cleanup(rt.Close)
		return runtimesuite.Config{Runtime: rt}
	})
}
