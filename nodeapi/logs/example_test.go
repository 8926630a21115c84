package logs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/nodeapi/logs"
)

// Reading a CRI log file as `kubectl logs --timestamps --tail=2` shows it.
func ExampleRead() {
	dir, _ := os.MkdirTemp("", "logs-example")
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "0.log")
	os.WriteFile(p, []byte(`2026-01-01T00:00:01.5Z stdout F first
2026-01-01T00:00:02Z stderr P a long 
2026-01-01T00:00:03Z stderr F line
2026-01-01T00:00:04Z stdout F last
`), 0o644)
	two := int64(3)
	opts := logs.NewOptions(&v1.PodLogOptions{TailLines: &two, Timestamps: true}, time.Now())
	// The runtime is asked only when following.
	if err := logs.Read(context.Background(), p, "id", opts, nil, os.Stdout, os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 2026-01-01T00:00:02.000000000Z a long line
	// 2026-01-01T00:00:04.000000000Z last
}
