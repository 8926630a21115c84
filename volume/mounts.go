package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/expansion"
	"github.com/nodekit/nodekit/volume/internal/hostfs"
)

// ContainerMount is one volumeMount of a container, resolved on the host:
// the fields of a CRI Mount.
type ContainerMount struct {
	// Name is the volume's name.
	Name string
	// ContainerPath is where the container sees it (volumeMount.mountPath).
	ContainerPath string
	// HostPath is what the runtime binds: the volume's host path, or for a
	// subPath the bind mount of it under the pod directory (see
	// PodDirs.SubPath), or its resolved path with Options.NoSubPathBind.
	HostPath string
	// ReadOnly is volumeMount.readOnly or the volume's own read-only flag.
	ReadOnly bool
	// Propagation is None, HostToContainer or Bidirectional (CRI's
	// PROPAGATION_PRIVATE, PROPAGATION_HOST_TO_CONTAINER and
	// PROPAGATION_BIDIRECTIONAL); never empty.
	Propagation v1.MountPropagationMode
}

// ContainerMounts turns the container's volumeMounts into host mounts, the
// kubelet's makeMounts: mounts are the pod's volumes as WaitForPodVolumes
// returned them, env the container's environment (for subPathExpr; nil
// leaves $(VAR) references as they are).
//
// A subPath (or the expanded subPathExpr) must be relative and without
// "..", and must stay inside the volume once its symlinks are followed; a
// missing one is created as a directory with the mode of the volume's root,
// as the kubelet does. Unless Options.NoSubPathBind is set it is then
// opened without following symlinks and that very file is bind-mounted at
// PodDirs.SubPath, which is what the runtime gets: a container cannot
// redirect it afterwards. The binds stay until the volume is torn down and
// are reused when the container restarts.
//
// A subPathExpr is expanded as the runtime expands commands and environment
// values ($(VAR) by the value of VAR when defined, $$ an escaped $), up to
// 4096 bytes (PATH_MAX): a longer one fails with an ErrInvalid error that
// names the mount, as soon as the expansion crosses that bound.
//
// Bidirectional propagation needs a privileged container. Errors wrap
// ErrInvalid (spec mistakes) or ErrNotAllowed (a subPath leaving its
// volume).
func (m *Manager) ContainerMounts(pod *v1.Pod, c *v1.Container, mounts map[string]Mount, env map[string]string) ([]ContainerMount, error) {
	if len(c.VolumeMounts) == 0 {
		return nil, nil
	}
	if e := m.lockPod(pod.UID, false); e != nil {
		// Not at the same time as a teardown of the pod's volumes.
		defer m.unlockPod(e)
	}
	out := make([]ContainerMount, 0, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		cm, err := m.containerMount(pod, c, i, vm, mounts, env)
		if err != nil {
			return nil, fmt.Errorf("volume: container %s: volume mount %s: %w", c.Name, vm.Name, err)
		}
		out = append(out, cm)
	}
	return out, nil
}

func (m *Manager) containerMount(pod *v1.Pod, c *v1.Container, index int, vm *v1.VolumeMount, mounts map[string]Mount, env map[string]string) (ContainerMount, error) {
	vol, ok := mounts[vm.Name]
	if !ok {
		for _, v := range pod.Spec.Volumes {
			if v.Name == vm.Name {
				return ContainerMount{}, errors.New("volume is not set up")
			}
		}
		return ContainerMount{}, Mark(fmt.Errorf("no volume %s in the pod spec", vm.Name), ErrInvalid)
	}
	if vm.MountPath == "" {
		return ContainerMount{}, Mark(errors.New("mountPath is empty"), ErrInvalid)
	}
	prop, err := propagation(vm.MountPropagation, c)
	if err != nil {
		return ContainerMount{}, err
	}
	hostPath := vol.HostPath
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		if sub != "" {
			return ContainerMount{}, Mark(errors.New("subPath and subPathExpr are mutually exclusive"), ErrInvalid)
		}
		sub, err = expansion.Expand(vm.SubPathExpr, expansion.Map(env), expansion.MaxPathBytes)
		if err != nil {
			return ContainerMount{}, Mark(fmt.Errorf("subPathExpr: %w", err), ErrInvalid)
		}
	}
	if sub != "" {
		hostPath, err = m.subPath(pod.UID, vm.Name, c.Name, index, vol, sub)
		if err != nil {
			return ContainerMount{}, err
		}
	}
	return ContainerMount{
		Name:          vm.Name,
		ContainerPath: vm.MountPath,
		HostPath:      hostPath,
		ReadOnly:      vm.ReadOnly || vol.ReadOnly,
		Propagation:   prop,
	}, nil
}

// propagation is the kubelet's translateMountPropagation, with the API's
// check that Bidirectional is for privileged containers only.
func propagation(p *v1.MountPropagationMode, c *v1.Container) (v1.MountPropagationMode, error) {
	switch {
	case p == nil || *p == v1.MountPropagationNone:
		return v1.MountPropagationNone, nil
	case *p == v1.MountPropagationHostToContainer:
		return v1.MountPropagationHostToContainer, nil
	case *p == v1.MountPropagationBidirectional:
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			return "", Mark(errors.New("Bidirectional mount propagation is available only to privileged containers"), ErrInvalid)
		}
		return v1.MountPropagationBidirectional, nil
	}
	return "", Mark(fmt.Errorf("invalid mount propagation %q", *p), ErrInvalid)
}

// subPath resolves, creates if missing and (unless NoSubPathBind)
// bind-mounts the subPath sub of the volume.
func (m *Manager) subPath(uid types.UID, volName, container string, index int, vol Mount, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", Mark(fmt.Errorf("subPath %q must be a relative path", sub), ErrInvalid)
	}
	if hostfs.HasBackstep(sub) {
		return "", Mark(fmt.Errorf("subPath %q must not contain '..'", sub), ErrInvalid)
	}
	if err := CheckName("pod UID", string(uid)); err != nil {
		return "", err
	}
	if err := CheckName("container name", container); err != nil {
		return "", err
	}
	if err := CheckName("volume name", volName); err != nil {
		return "", err
	}
	base, err := hostfs.Resolve(vol.HostPath)
	if err != nil {
		return "", err
	}
	baseInfo, err := os.Stat(base)
	if err != nil {
		return "", fmt.Errorf("volume root: %w", err)
	}
	path, err := hostfs.Resolve(filepath.Join(base, sub))
	if err != nil {
		return "", err
	}
	if !hostfs.Within(path, base) {
		return "", Mark(fmt.Errorf("subPath %q resolves to %s, outside the volume (%s)", sub, path, base), ErrNotAllowed)
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if vol.ReadOnly {
			return "", Mark(fmt.Errorf("subPath %q does not exist and the volume is read-only", sub), ErrNotAllowed)
		}
		// Create it, as the kubelet does, with the mode of the volume's root
		// (its setgid and sticky bits too: an emptyDir with an FSGroup is
		// dgtrwxrwxrwx) so that the containers can use it as they use the
		// volume.
		existing, missing, err := hostfs.ExistingPrefix(path)
		if err != nil {
			return "", fmt.Errorf("creating subPath %q: %w", sub, err)
		}
		if err := hostfs.MkdirNoFollow(existing, missing, baseInfo.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return "", fmt.Errorf("creating subPath %q: %w", sub, err)
		}
	} else if err != nil {
		return "", err
	}
	if m.opts.NoSubPathBind {
		return path, nil
	}
	var rel []string
	if path != base {
		rel = strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, base), "/"), "/")
	}
	fd, err := hostfs.OpenBeneath(base, rel)
	if err != nil {
		return "", fmt.Errorf("opening subPath %q: %w", sub, err)
	}
	defer hostfs.CloseFD(fd)
	target := m.dirs.SubPath(uid, volName, container, index)
	if ok, _, err := hostfs.IsMountPoint(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	} else if ok {
		same, err := hostfs.SameFile(fd, target)
		if err != nil {
			return "", err
		}
		if same {
			return target, nil
		}
		if err := hostfs.Unmount(target); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), dirPerm); err != nil {
		return "", err
	}
	isDir, err := hostfs.IsDirFD(fd)
	if err != nil {
		return "", err
	}
	if isDir {
		err = os.Mkdir(target, dirPerm)
	} else {
		// A file takes the bind of any non-directory (file, socket,
		// device).
		var f *os.File
		f, err = os.OpenFile(target, os.O_RDONLY|os.O_CREATE, 0o640)
		if err == nil {
			f.Close()
		}
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if err := hostfs.BindFD(fd, target); err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	return target, nil
}
