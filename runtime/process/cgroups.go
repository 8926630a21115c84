package process

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/nodekit/nodekit/cgroup"
)

// containerCgroup names a container's own cgroup: its pod's cgroup joined
// with the container's ID, as runc's cgroupfs driver names it below a
// sandbox's cgroup parent. The agent's stats read each container's CPU
// and memory there (stats.Options.ContainerCgroup), and the pod's limits,
// set on the parent, bound it.
func containerCgroup(parent, id string) string { return path.Join(parent, id) }

// joinContainerCgroup makes the container's cgroup below the pod's and
// moves the monitor into it, so that the process the monitor starts is
// born there.
func joinContainerCgroup(cg cgroup.Manager, parent, id string) (string, error) {
	name := containerCgroup(parent, id)
	if err := cg.Create(name, nil); err != nil {
		return "", err
	}
	if err := cg.AddProcess(name, os.Getpid()); err != nil {
		_ = cg.Destroy(context.Background(), name) // the monitor's own process: no caller's context
		return "", err
	}
	return name, nil
}

// leaveContainerCgroup moves the monitor, once its process runs, to the
// root cgroup, out of the pod's, as containerd's shims live outside the
// pods' cgroups: the container's figures are its processes' alone, the
// pod's limits bound its containers only, and a monitor is never the
// victim of its pod's OOM kill (which would lose the container's exit
// status). The root cgroup holds processes on cgroup v2 too.
func leaveContainerCgroup(cg cgroup.Manager) error {
	return cg.AddProcess("/", os.Getpid())
}

// destroyContainerCgroup kills what is left in the container's cgroup
// (processes that left its process group) and removes the cgroup, as a
// runc container's cgroup goes when its init exits. It gives up after a
// few seconds; Remove tries again.
func destroyContainerCgroup(ctx context.Context, cg cgroup.Manager, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cg.Destroy(ctx, name)
}

// removeCgroup removes the container's cgroup if its monitor left it
// behind (a monitor killed before it removed it).
func (b *Backend) removeCgroup(ctx context.Context, dir, id string) error {
	var sp spec
	if !b.cgroups || readJSON(filepath.Join(dir, specFile), &sp) != nil || sp.CgroupParent == "" {
		return nil
	}
	cg, err := cgroup.Open("")
	if err != nil {
		return fmt.Errorf("process: remove container %s: %w", id, err)
	}
	if err := destroyContainerCgroup(ctx, cg, containerCgroup(sp.CgroupParent, id)); err != nil {
		return fmt.Errorf("process: remove container %s: %w", id, err)
	}
	return nil
}
