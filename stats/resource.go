package stats

import (
	"context"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Summarizer gives summaries (a Provider).
type Summarizer interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}
