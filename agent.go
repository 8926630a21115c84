package nodekit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/run"
)

// Agent is a node agent assembled from nodekit's parts. Create it with New
// and call Run once. Its query methods are safe to call from any
// goroutine.
type Agent struct {
	opts  Options
	log   logr.Logger
	parts *parts
	ran   atomic.Bool
}

// New checks opts, applies the defaults and assembles an Agent from the
// default parts (see wire, in wiring.go). It does no I/O and starts no
// goroutine.
func New(opts Options) (*Agent, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	p, err := wire(opts)
	if err != nil {
		return nil, err
	}
	return &Agent{opts: opts, log: p.log, parts: p}, nil
}

// Add adds a long-running part of the caller's to the agent: it starts
// after the agent's own parts (the sync loop among them) and stops before
// them. Add must be called before Run.
func (a *Agent) Add(name string, r run.Runnable) error {
	return a.parts.group.Add(name, r)
}

// Run runs the agent until ctx ends. It returns nil then, after every
// goroutine it started has exited; pods keep running in the runtime, so a
// restarted agent finds them again. Run may be called only once.
//
// Before it starts the parts (in the order wire adds them), Run reads the
// machine's capacity (unless Options.Node.Capacity is set) and makes the
// node's cgroups.
func (a *Agent) Run(ctx context.Context) error {
	if !a.ran.CompareAndSwap(false, true) {
		return errors.New("nodekit: Agent.Run called twice")
	}
	p := a.parts
	a.log.Info("Starting node agent", "sources", len(a.opts.Sources), "maxPods", a.opts.Node.MaxPods)
	capacity := a.opts.Node.Capacity
	if capacity == nil {
		m, err := node.ReadMachine("")
		if err != nil {
			return fmt.Errorf("nodekit: reading the machine's capacity (or set Options.Node.Capacity): %w", err)
		}
		capacity = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewQuantity(m.CPUs, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		}
	}
	if err := p.upkeep.Prepare(capacity); err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	if err := p.cgroups.EnsureNode(); err != nil {
		return fmt.Errorf("nodekit: setting up the node's cgroups (set Options.Cgroups.Disabled on a host the agent does not own): %w", err)
	}
	err := p.group.Run(ctx)
	a.log.Info("Node agent stopped")
	if err != nil {
		return fmt.Errorf("nodekit: %w", err)
	}
	return nil
}

// Healthy reports whether the agent works: its sync loop iterates, the
// runtime answers and the PLEG relists.
func (a *Agent) Healthy() error {
	return errors.Join(a.parts.loop.Healthy(), a.parts.runtimeHealthy(nil))
}

// PodStatus returns the status the agent holds for the pod. Its slices
// and pointers are shared with the status held (see package status):
// treat it as read-only.
func (a *Agent) PodStatus(uid types.UID) (v1.PodStatus, bool) {
	return a.parts.statuses.GetPodStatus(uid)
}

// Pods returns the pods the agent has been asked to run (admitted or not),
// in no particular order. They must not be modified.
func (a *Agent) Pods() []*v1.Pod { return a.parts.handler.Pods().Pods() }

// SourcesReady reports whether every source delivered its first snapshot.
func (a *Agent) SourcesReady() bool { return a.parts.config.SourcesReady() }

// Allocatable is what the node offers pods: its capacity (Options.Node.Capacity
// or the machine's, known once Run started) less the reserved resources
// and the hard eviction thresholds (see upkeep.Manager.Allocatable).
func (a *Agent) Allocatable() v1.ResourceList { return a.parts.upkeep.Allocatable() }

// NodeConditions are the node's pressure conditions (MemoryPressure,
// DiskPressure, PIDPressure) as the eviction manager sees them.
func (a *Agent) NodeConditions() []v1.NodeConditionType { return a.parts.upkeep.NodeConditions() }
