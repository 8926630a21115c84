package nodekit

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/userns"
)

// UserNamespacesOptions configure the user namespaces of pods with
// hostUsers: false (package userns), on by default as in the kubelet
// (UserNamespacesSupport).
type UserNamespacesOptions struct {
	// Disabled turns user namespaces off: every sandbox gets the
	// runtime's default and a hostUsers: false pod fails with
	// podruntime.ErrUserNamespaces. Defaults to false.
	Disabled bool
	// IDsPerPod is how many user and group IDs each pod gets, a multiple
	// of 65536. Defaults to 65536 (the kubelet's
	// userNamespaces.idsPerPod).
	IDsPerPod uint32
	// Range is the range of host IDs given to pods. Defaults to nil: the
	// "kubelet" user's subordinate IDs (getsubids), else every ID from
	// IDsPerPod up, as the kubelet.
	Range *userns.Range
}

// wireUserNamespaces gives the runtime manager the agent's user
// namespace manager, unless disabled or set by the user
// (RuntimeManager.UserNamespaces).
func (a *Agent) wireUserNamespaces(o *podruntime.Options) error {
	if a.opts.UserNamespaces.Disabled || o.UserNamespaces != nil {
		return nil
	}
	m, err := userns.New(userns.Options{
		RootDir:       a.opts.RootDir,
		Runtime:       a.opts.Runtime,
		IDsPerPod:     a.opts.UserNamespaces.IDsPerPod,
		Range:         a.opts.UserNamespaces.Range,
		MaxPods:       a.opts.MaxPods,
		CleanupPeriod: a.opts.HousekeepingPeriod,
		Logger:        a.log,
	})
	if err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	a.userns = m
	o.UserNamespaces = m
	return nil
}

// runUserNamespaces runs the user namespace manager, which releases the
// ID ranges of pods whose directory was removed.
func (a *Agent) runUserNamespaces(run func(string, func(ctx context.Context) error)) {
	if a.userns != nil {
		run("user namespaces", a.userns.Run)
	}
}
