package sourcestest_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/sources/sourcestest"
)

func TestSourceFunc(t *testing.T) {
	sourcestest.SourceSuite(t, func(t *testing.T) sources.Source {
		return sources.SourceFunc(func(ctx context.Context, snapshots chan<- []*v1.Pod) error {
			select {
			case snapshots <- nil:
			case <-ctx.Done():
				return nil
			}
			<-ctx.Done()
			return nil
		})
	})
}

func TestChan(t *testing.T) {
	sourcestest.SourceSuite(t, func(t *testing.T) sources.Source {
		c := make(sources.Chan, 1)
		c <- nil
		return c
	})
}
