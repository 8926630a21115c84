package cgroup_test

import (
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

// TestMain fails the run, as root, when a test leaves a cgroup, process
// or mount behind.
func TestMain(m *testing.M) { leakcheck.VerifyHostTestMain(m) }
