package status

import (
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
