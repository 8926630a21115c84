// Command pause is the sandbox ("pause") container of the images that
// hack/containerd.sh builds for nodekit's tests: it holds the pod's
// namespaces, reaps the zombies of a shared PID namespace, and exits 0 on
// SIGTERM or SIGINT. Build it static (CGO_ENABLED=0).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (nodekit)")
		return 0
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %s\n", sig)
			return 0
		}
		reap()
	}
	return 0
}

// reap waits for every child that has exited, so that processes orphaned
// into the sandbox's PID namespace do not stay zombies.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
