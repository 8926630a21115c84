package emptydir_test

import (
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

// TestMain fails the run, as root, when a test leaves a mount, process or
// cgroup behind.
func TestMain(m *testing.M) { leakcheck.VerifyHostTestMain(m) }
