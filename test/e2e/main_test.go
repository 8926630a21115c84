package e2e

import (
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime/process"
)

func TestMain(m *testing.M) {
	// The process runtime of the benchmarks starts this binary again as
	// the monitor of each container.
	process.RunMonitor()
	// As root, the run fails when a test leaves a process or mount of its
	// own behind: an agent's emptyDir mounts, a containerd or API server
	// a test started. Containers run under the containerds' shims, and
	// each test removes them and its cgroup root (testCgroupRoot).
	leakcheck.VerifyHostTestMain(m)
}
