package nodekit

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit/gc"
)

// GCOptions configure the agent's garbage collectors (package gc): dead
// containers, old sandboxes and the logs of deleted pods every minute,
// unused images every five minutes above 85% of the image file system.
type GCOptions struct {
	// DisableContainers turns the container and sandbox collector off.
	DisableContainers bool
	// Containers configures the container collector. Pods, SourcesReady
	// and PodLogsDir are the agent's.
	Containers gc.ContainerOptions
	// DisableImages turns the image collector off.
	DisableImages bool
	// Images configures the image collector. Containers is the agent's
	// Runtime. Without FsStats or ImageFsPath the collector reads the
	// image file system the runtime names (CRI ImageFsInfo, with the
	// runtime/cri client); when the runtime cannot name it, images are
	// not collected and the agent logs why.
	Images gc.ImageOptions
}

// nodeAlive holds the parts that keep the node alive.
type nodeAlive struct {
	containerGC *gc.ContainerCollector // nil when disabled
	imageGC     *gc.ImageCollector     // nil when disabled
}

// buildNodeAlive builds the garbage collectors; the pod workers and
// sources exist by then.
func (a *Agent) buildNodeAlive() error {
	o := a.opts.GC
	if !o.DisableContainers {
		co := o.Containers
		co.Pods = a.workers
		co.SourcesReady = a.config.SourcesReady
		co.PodLogsDir = a.opts.RuntimeManager.PodLogsDir // "": the same default
		if co.Logger.GetSink() == nil {
			co.Logger = a.log
		}
		c, err := gc.NewContainerCollector(a.opts.Runtime, co)
		if err != nil {
			return fmt.Errorf("nodekit: %w", err)
		}
		a.alive.containerGC = c
	}
	if !o.DisableImages {
		io := o.Images
		io.Containers = a.opts.Runtime
		if io.Logger.GetSink() == nil {
			io.Logger = a.log
		}
		c, err := gc.NewImageCollector(a.opts.Images, io)
		if err != nil {
			if io.FsStats != nil || io.ImageFsPath != "" {
				return fmt.Errorf("nodekit: %w", err)
			}
			a.log.Info("Image garbage collection is off: the runtime does not name its image file system (set Options.GC.Images.ImageFsPath)")
		} else {
			a.alive.imageGC = c
		}
	}
	return nil
}

// runNodeAlive starts the collectors' loops.
func (a *Agent) runNodeAlive(run func(name string, f func(context.Context) error)) {
	if c := a.alive.containerGC; c != nil {
		run("container gc", c.Run)
	}
	if c := a.alive.imageGC; c != nil {
		run("image gc", c.Run)
	}
}

// runtimeRecovered is called when the runtime answers again after it did
// not (and after the first check): sandboxes that a crash left half-made
// are collected at once rather than at the next period.
func (a *Agent) runtimeRecovered() {
	if c := a.alive.containerGC; c != nil {
		c.Trigger()
	}
}
