//go:build !linux

package eviction

import "errors"

type thresholdNotifier struct{}

func newThresholdNotifier(string, int64, chan<- struct{}) (*thresholdNotifier, error) {
	return nil, errNotifierUnsupported
}

func (n *thresholdNotifier) stop() {}

var errNotifierUnsupported = errors.New("eviction: memory threshold notifications need Linux")

func notifierSupported(string) error { return errNotifierUnsupported }
