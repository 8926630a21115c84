package integration

import (
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

// TestMain fails the run, as root, when a test leaves a process or mount
// of its own behind: an API server, controller manager or agent binary it
// started, or an agent's emptyDir mount.
func TestMain(m *testing.M) { leakcheck.VerifyHostTestMain(m) }
