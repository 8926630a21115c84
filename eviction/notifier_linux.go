//go:build linux

package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// thresholdNotifier is a cgroup v1 memory threshold notification: an
// eventfd the kernel signals when the cgroup's memory usage crosses a
// value (cgroup.event_control on memory.usage_in_bytes), the kubelet's
// memory threshold notifier.
type thresholdNotifier struct {
	ev   *os.File
	done chan struct{}
	once sync.Once
}

// newThresholdNotifier arms a notification on cgroup's memory usage
// crossing threshold bytes; each crossing sends on wake (without
// blocking) until stop.
func newThresholdNotifier(cgroup string, threshold int64, wake chan<- struct{}) (*thresholdNotifier, error) {
	usage, err := os.Open(filepath.Join(cgroup, "memory.usage_in_bytes"))
	if err != nil {
		return nil, fmt.Errorf("eviction: memory threshold notifier: %w", err)
	}
	defer usage.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eviction: memory threshold notifier: eventfd: %w", err)
	}
	// A non-blocking descriptor goes to the runtime's poller: Read parks
	// the goroutine, Close wakes it.
	ev := os.NewFile(uintptr(efd), "eventfd")
	ctl, err := os.OpenFile(filepath.Join(cgroup, "cgroup.event_control"), os.O_WRONLY, 0)
	if err != nil {
		ev.Close()
		return nil, fmt.Errorf("eviction: memory threshold notifier: %w", err)
	}
	defer ctl.Close()
	if _, err := fmt.Fprintf(ctl, "%d %d %d", efd, usage.Fd(), threshold); err != nil {
		ev.Close()
		return nil, fmt.Errorf("eviction: memory threshold notifier: arming: %w", err)
	}
	n := &thresholdNotifier{ev: ev, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		buf := make([]byte, 8)
		for {
			if _, err := ev.Read(buf); err != nil {
				return // closed by stop, or the cgroup is gone
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return n, nil
}

// stop disarms the notification and waits for its goroutine.
func (n *thresholdNotifier) stop() {
	n.once.Do(func() { n.ev.Close() })
	<-n.done
}

var errNotifierUnsupported = errors.New("eviction: memory threshold notifications need cgroup v1's memory controller")

func notifierSupported(cgroup string) error {
	if _, err := os.Stat(filepath.Join(cgroup, "cgroup.event_control")); err != nil {
		return fmt.Errorf("%w: %v", errNotifierUnsupported, err)
	}
	return nil
}
