package process_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nodekit/nodekit/runtime/process"
)

// ExampleNew makes the process runtime, to pass as nodekit.Options.Runtime.
// The program calls process.RunMonitor first thing in main (here, TestMain
// does).
func ExampleNew() {
	dir, err := os.MkdirTemp("", "nodekit-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	rt, err := process.New(process.Options{StateDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	v, err := rt.Version(context.Background(), "v1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.RuntimeName)
	// Output: process
}
