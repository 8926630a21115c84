package projection

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/emptydir"
	"github.com/nodekit/nodekit/volume/internal/atomicwriter"
	"github.com/nodekit/nodekit/volume/internal/hostfs"
)

// dirPerm is the mode of a volume's directory, the kubelet's (that of the
// emptyDir it wraps). Containers mount it read-only.
const dirPerm fs.FileMode = 0o777

// Dirs sets up and tears down the directories of one plugin's volumes.
// It is safe for concurrent use for different directories.
type Dirs struct {
	// Plugin is the plugin's package name, which starts its errors
	// ("secret").
	Plugin string
	// Memory puts each volume on a tmpfs of its own (secrets, tokens), as
	// the kubelet does, when the agent can mount one.
	Memory bool
	// NoTmpfs keeps Memory volumes on disk.
	NoTmpfs bool
	// Log receives content updates (V(1)) and the fall-back to disk.
	Log logr.Logger

	warned atomic.Bool
}

// Errorf returns an error starting with the plugin's name and the volume.
func (d *Dirs) Errorf(vol string, err error) error {
	return fmt.Errorf("%s: volume %s: %w", d.Plugin, vol, err)
}

// Write writes files into req.Dir with the atomic writer, creating the
// directory first (on a tmpfs for Memory volumes, unless NoTmpfs is set,
// the agent is not root, or mounting is not permitted: then on disk,
// logged once), and returns the volume's Mount, read-only as the kubelet mounts
// API data.
func (d *Dirs) Write(req volume.SetUpRequest, files Files) (volume.Mount, error) {
	name := req.Volume.Name
	if err := d.prepare(req); err != nil {
		return volume.Mount{}, d.Errorf(name, err)
	}
	fsGroup := FSGroup(req.Pod)
	changed, err := atomicwriter.Write(req.Dir, files, atomicwriter.Options{FSGroup: fsGroup})
	if err != nil {
		if errors.Is(err, atomicwriter.ErrInvalidPath) {
			err = volume.Mark(err, volume.ErrInvalid)
		}
		return volume.Mount{}, d.Errorf(name, err)
	}
	if fsGroup != nil {
		if err := atomicwriter.SetGroup(req.Dir, *fsGroup); err != nil {
			return volume.Mount{}, d.Errorf(name, err)
		}
	}
	if changed {
		d.Log.V(1).Info("Volume content written", "pod", podRef(req.Pod), "podUID", req.Pod.UID, "volume", name, "files", len(files))
	}
	return d.Mount(req), nil
}

// Mount is the Mount of the volume of req.
func (d *Dirs) Mount(req volume.SetUpRequest) volume.Mount {
	return volume.Mount{Name: req.Volume.Name, HostPath: req.Dir, ReadOnly: true}
}

// KeepOnError decides what SetUp does when getting the volume's content
// failed with err: when the error is one that may pass (the API server
// unreachable, overloaded, timing out; not a missing object nor a denied
// request nor an invalid spec) and the volume already holds content from
// an earlier SetUp, it logs the error and reports true: SetUp keeps the
// content and succeeds, so that a restarted agent keeps its pods' volumes
// while the API server is away.
func (d *Dirs) KeepOnError(ctx context.Context, req volume.SetUpRequest, err error) bool {
	if ctx.Err() != nil || volume.IsPermanent(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) ||
		apierrors.IsUnauthorized(err) || apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) {
		return false
	}
	if cur, cerr := atomicwriter.Current(req.Dir); cerr != nil || cur == "" {
		return false
	}
	d.Log.Info("Keeping the volume's content: getting its source failed", "pod", podRef(req.Pod), "podUID", req.Pod.UID, "volume", req.Volume.Name, "err", err.Error())
	return true
}

// prepare creates the volume's directory, and mounts a tmpfs on it for a
// Memory volume whose directory is empty.
func (d *Dirs) prepare(req volume.SetUpRequest) error {
	dir := req.Dir
	created := false
	switch err := os.Mkdir(dir, dirPerm); {
	case err == nil:
		created = true
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if created {
		if err := os.Chmod(dir, dirPerm); err != nil {
			return err
		}
	}
	if !d.Memory {
		return nil
	}
	mounted, fsType, err := hostfs.IsMountPoint(dir)
	if errors.Is(err, hostfs.ErrUnsupported) {
		d.warnDisk(req, "tmpfs is not supported on this system")
		return nil
	}
	if err != nil {
		return err
	}
	if mounted {
		if fsType != "tmpfs" {
			return fmt.Errorf("%s is a %s mount, not a tmpfs", dir, fsType)
		}
		return nil
	}
	// A directory with content and no tmpfs was set up on disk before:
	// it stays there.
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return err
	}
	switch {
	case d.NoTmpfs:
		d.warnDisk(req, "NoTmpfs is set")
		return nil
	case os.Geteuid() != 0:
		d.warnDisk(req, "the agent is not root")
		return nil
	}
	size := emptydir.MemorySize(req.Pod, &v1.Volume{VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	if err := hostfs.MountTmpfs(dir, size); err != nil {
		if errors.Is(err, syscall.EPERM) {
			d.warnDisk(req, "mounting a tmpfs is not permitted")
			return nil
		}
		return err
	}
	d.Log.V(1).Info("Mounted tmpfs", "podUID", req.Pod.UID, "volume", req.Volume.Name, "dir", dir, "size", size)
	return os.Chmod(dir, dirPerm)
}

// warnDisk logs, once for the plugin, that Memory volumes go to disk.
func (d *Dirs) warnDisk(req volume.SetUpRequest, why string) {
	if d.warned.CompareAndSwap(false, true) {
		d.Log.Info("Writing volumes to disk, not to a tmpfs: their content may reach the disk", "reason", why, "plugin", d.Plugin)
	}
	d.Log.V(1).Info("Volume on disk, not on a tmpfs", "podUID", req.Pod.UID, "volume", req.Volume.Name, "reason", why)
}

// TearDown unmounts the volume's tmpfs if it has one and removes its
// directory; it never removes through another mount.
func (d *Dirs) TearDown(req volume.TearDownRequest) error {
	if _, err := os.Lstat(req.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	mounted, fsType, err := hostfs.IsMountPoint(req.Dir)
	if err != nil && !errors.Is(err, hostfs.ErrUnsupported) {
		return d.Errorf(req.Name, err)
	}
	if mounted && fsType == "tmpfs" {
		if err := hostfs.Unmount(req.Dir); err != nil {
			return d.Errorf(req.Name, err)
		}
		d.Log.V(1).Info("Unmounted tmpfs", "podUID", req.PodUID, "volume", req.Name, "dir", req.Dir)
	}
	if err := hostfs.RemoveAllUnmounted(req.Dir); err != nil {
		return d.Errorf(req.Name, err)
	}
	return nil
}

func podRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
