package e2e

import (
	"os"
	"testing"

	"github.com/nodekit/nodekit/runtime/process"
)

func TestMain(m *testing.M) {
	// The process runtime of the benchmarks starts this binary again as
	// the monitor of each container.
	process.RunMonitor()
	os.Exit(m.Run())
}
