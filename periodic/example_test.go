package periodic_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nodekit/nodekit/periodic"
)

// One Driver starts the calls of a task given by a part; the part's Run
// waits for its context, then for the call in flight.
func ExampleNewDriver() {
	ctx, cancel := context.WithCancel(context.Background())
	d := periodic.NewDriver()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	calls := make(chan int, 3)
	n := 0
	wait := d.Go(ctx, 0, func(context.Context) time.Duration {
		n++
		calls <- n
		return 10 * time.Millisecond
	})
	for range 3 {
		fmt.Println("call", <-calls)
	}
	cancel()
	wait()
	fmt.Println(<-done)
	// Output:
	// call 1
	// call 2
	// call 3
	// <nil>
}
