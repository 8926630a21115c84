package emptydir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/hostfs"
)

// PluginName is the plugin's name, the kubelet's; its volumes live in
// <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>.
const PluginName = "kubernetes.io/empty-dir"

// perm is the mode of an emptyDir, as the kubelet's: every container user
// may write to it.
const perm fs.FileMode = 0o777

// Options configure the emptyDir plugin.
type Options struct {
	// Logger receives tmpfs mounts and unmounts at V(1). Defaults to
	// discarding.
	Logger logr.Logger
}

// Plugin sets up emptyDir volumes in the directory the volume manager gives
// it. It is safe for concurrent use.
type Plugin struct {
	log logr.Logger
}

var _ volume.Plugin = (*Plugin)(nil)

// New returns the emptyDir plugin.
func New(opts Options) *Plugin {
	return &Plugin{log: opts.Logger.WithName("emptydir")}
}

// Name returns PluginName.
func (p *Plugin) Name() string { return PluginName }

// CanSupport reports whether vol is an emptyDir volume.
func (p *Plugin) CanSupport(vol *v1.Volume) bool { return vol.EmptyDir != nil }

// SetUp creates req.Dir with mode 0777 (and its group set to the pod's
// fsGroup, with the setgid bit, when it has one) and, for medium Memory,
// mounts a tmpfs on it sized by MemorySize, whose root is 1777 (sticky), as
// the kubelet's. When the directory exists
// (or, for Memory, a tmpfs is already mounted there) it is kept with its
// content: the agent restarted.
func (p *Plugin) SetUp(_ context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	vol := req.Volume
	if vol.EmptyDir == nil {
		return volume.Mount{}, volume.Mark(fmt.Errorf("emptydir: volume %s is not an emptyDir volume", vol.Name), volume.ErrInvalid)
	}
	medium := vol.EmptyDir.Medium
	switch medium {
	case v1.StorageMediumDefault, v1.StorageMediumMemory:
	default:
		return volume.Mount{}, volume.Mark(fmt.Errorf("emptydir: volume %s: medium %q is not supported (only \"\" and Memory)", vol.Name, medium), volume.ErrInvalid)
	}
	if err := setupDir(req.Dir); err != nil {
		return volume.Mount{}, fmt.Errorf("emptydir: volume %s: %w", vol.Name, err)
	}
	if medium == v1.StorageMediumMemory {
		mounted, fsType, err := hostfs.IsMountPoint(req.Dir)
		if err != nil {
			return volume.Mount{}, fmt.Errorf("emptydir: volume %s: %w", vol.Name, err)
		}
		if mounted && fsType != "tmpfs" {
			return volume.Mount{}, fmt.Errorf("emptydir: volume %s: %s is a %s mount, not a tmpfs", vol.Name, req.Dir, fsType)
		}
		if !mounted {
			size := MemorySize(req.Pod, vol)
			if err := hostfs.MountTmpfs(req.Dir, size); err != nil {
				return volume.Mount{}, fmt.Errorf("emptydir: volume %s: %w", vol.Name, err)
			}
			// The tmpfs root comes up as 1777 (sticky) and stays so, as
			// the kubelet's, which mounts it without a mode option: a
			// missing subPath is then created 1777 too.
			p.log.V(1).Info("Mounted tmpfs", "podUID", podUID(req.Pod), "volume", vol.Name, "dir", req.Dir, "size", size)
		}
	}
	if err := setFSGroup(req.Dir, req.Pod); err != nil {
		return volume.Mount{}, fmt.Errorf("emptydir: volume %s: %w", vol.Name, err)
	}
	return volume.Mount{Name: vol.Name, HostPath: req.Dir}, nil
}

func podUID(pod *v1.Pod) string {
	if pod == nil {
		return ""
	}
	return string(pod.UID)
}

// setupDir creates dir with mode 0777 whatever the umask, the kubelet's
// setupDir; its parent exists.
func setupDir(dir string) error {
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm() != perm {
		return os.Chmod(dir, perm|fi.Mode()&(fs.ModeSetgid|fs.ModeSticky))
	}
	return nil
}

// setFSGroup gives dir to the pod's fsGroup, group-writable and setgid, so
// that files created in it belong to the group: the kubelet's
// SetVolumeOwnership on a new volume, which adds g+rwx and setgid to the
// mode the directory has (a tmpfs root keeps its sticky bit: dgtrwxrwxrwx).
// The kubelet also walks existing content; a new emptyDir has none.
func setFSGroup(dir string, pod *v1.Pod) error {
	if pod == nil || pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.FSGroup == nil {
		return nil
	}
	gid := int(*pod.Spec.SecurityContext.FSGroup)
	if err := os.Lchown(dir, -1, gid); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	return os.Chmod(dir, mode|0o770|fs.ModeSetgid)
}

// MemorySize is the size of the tmpfs of a Memory emptyDir, the kubelet's
// calculateEmptyDirMemorySize without the node's allocatable memory: the
// smaller of the volume's sizeLimit and the pod's memory limit, each when
// positive; 0 (the kernel's default: half the RAM) when neither is set.
// The pod's memory limit is the kubelet's pod cgroup limit: set only when
// every container has one, the larger of the sum over the app containers
// and restartable init containers, and the largest other init container,
// plus the pod overhead.
func MemorySize(pod *v1.Pod, vol *v1.Volume) int64 {
	var size int64
	if pod != nil {
		size = podMemoryLimit(pod)
	}
	if vol.EmptyDir != nil && vol.EmptyDir.SizeLimit != nil {
		if l := vol.EmptyDir.SizeLimit.Value(); l > 0 && (size == 0 || l < size) {
			size = l
		}
	}
	return size
}

func podMemoryLimit(pod *v1.Pod) int64 {
	limit := func(c *v1.Container) (int64, bool) {
		q, ok := c.Resources.Limits[v1.ResourceMemory]
		if !ok || q.IsZero() {
			return 0, false
		}
		return q.Value(), true
	}
	var sum, maxInit int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		l, ok := limit(c)
		if !ok {
			return 0
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum += l
		} else {
			maxInit = max(maxInit, l)
		}
	}
	for i := range pod.Spec.Containers {
		l, ok := limit(&pod.Spec.Containers[i])
		if !ok {
			return 0
		}
		sum += l
	}
	total := max(sum, maxInit)
	if o, ok := pod.Spec.Overhead[v1.ResourceMemory]; ok {
		total += o.Value()
	}
	return total
}

// TearDown unmounts the volume's tmpfs if it has one, then removes req.Dir
// with its content. It refuses to remove a directory under which something
// else is still mounted.
func (p *Plugin) TearDown(_ context.Context, req volume.TearDownRequest) error {
	if _, err := os.Lstat(req.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	mounted, fsType, err := hostfs.IsMountPoint(req.Dir)
	if err != nil {
		return fmt.Errorf("emptydir: volume %s: %w", req.Name, err)
	}
	if mounted && fsType == "tmpfs" {
		if err := hostfs.Unmount(req.Dir); err != nil {
			return fmt.Errorf("emptydir: volume %s: %w", req.Name, err)
		}
		p.log.V(1).Info("Unmounted tmpfs", "podUID", req.PodUID, "volume", req.Name, "dir", req.Dir)
	}
	if err := hostfs.RemoveAllUnmounted(req.Dir); err != nil {
		return fmt.Errorf("emptydir: volume %s: %w", req.Name, err)
	}
	return nil
}
