package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/hostfs"
)

// PluginName is the plugin's name, the kubelet's.
const PluginName = "kubernetes.io/host-path"

// AllowedHostPath is volume.AllowedHostPath, which an agent sets in
// volume.Options.
type AllowedHostPath = volume.AllowedHostPath

// Options configure the hostPath plugin.
type Options struct {
	// AllowedHostPaths restricts the host paths that volumes may use. nil
	// allows every path, as the kubelet does; a non-nil list allows only
	// the paths below its prefixes, so an empty non-nil list allows none.
	// Defaults to nil.
	AllowedHostPaths []AllowedHostPath
	// Logger receives the host paths created (DirectoryOrCreate,
	// FileOrCreate) at V(1). Defaults to discarding.
	Logger logr.Logger
}

// Plugin sets up hostPath volumes. It is safe for concurrent use.
type Plugin struct {
	allowed []AllowedHostPath // nil: all
	log     logr.Logger
}

var _ volume.Plugin = (*Plugin)(nil)

// New returns the hostPath plugin. It fails when an allowed path prefix is
// not absolute.
func New(opts Options) (*Plugin, error) {
	p := &Plugin{log: opts.Logger.WithName("hostpath")}
	if opts.AllowedHostPaths != nil {
		p.allowed = make([]AllowedHostPath, 0, len(opts.AllowedHostPaths))
		for _, a := range opts.AllowedHostPaths {
			if !filepath.IsAbs(a.PathPrefix) {
				return nil, fmt.Errorf("hostpath: allowed host path %q is not absolute", a.PathPrefix)
			}
			if hostfs.HasBackstep(a.PathPrefix) {
				return nil, fmt.Errorf("hostpath: allowed host path %q contains '..'", a.PathPrefix)
			}
			p.allowed = append(p.allowed, AllowedHostPath{PathPrefix: filepath.Clean(a.PathPrefix), ReadOnly: a.ReadOnly})
		}
	}
	return p, nil
}

// Name returns PluginName.
func (p *Plugin) Name() string { return PluginName }

// CanSupport reports whether vol is a hostPath volume.
func (p *Plugin) CanSupport(vol *v1.Volume) bool { return vol.HostPath != nil }

// SetUp checks the volume's host path against the allowed paths, twice: as
// written (cleaned) and with every symlink in it followed; checks its type
// (creating it for DirectoryOrCreate and FileOrCreate) as the kubelet does,
// and returns its resolved path, so that the runtime binds what was
// checked. A path with ".." is refused, as the kubelet does.
//
// A path allowed only read-only needs every container that mounts the
// volume to mount it read-only (the PodSecurityPolicy rule), and the Mount
// is read-only. Errors wrap volume.ErrInvalid (spec mistakes) or
// volume.ErrNotAllowed (the allowed paths), neither of which retrying
// cures; a failed type check is retried, since the path may appear.
//
// The checks cannot stop a swap of a directory of the path for a symlink
// between SetUp and the runtime's bind mount: allow only paths that
// untrusted parties (including containers with a writable hostPath above
// them) cannot write to.
func (p *Plugin) SetUp(_ context.Context, req volume.SetUpRequest) (volume.Mount, error) {
	vol := req.Volume
	src := vol.HostPath
	if src == nil {
		return volume.Mount{}, volume.Mark(fmt.Errorf("hostpath: volume %s is not a hostPath volume", vol.Name), volume.ErrInvalid)
	}
	typ := v1.HostPathUnset
	if src.Type != nil {
		typ = *src.Type
	}
	if src.Path == "" || !filepath.IsAbs(src.Path) {
		return volume.Mount{}, volume.Mark(fmt.Errorf("hostpath: volume %s: path %q must be absolute", vol.Name, src.Path), volume.ErrInvalid)
	}
	if hostfs.HasBackstep(src.Path) {
		return volume.Mount{}, volume.Mark(fmt.Errorf("hostpath: volume %s: path %q must not contain '..'", vol.Name, src.Path), volume.ErrInvalid)
	}
	switch typ {
	case v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
		v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev:
	default:
		return volume.Mount{}, volume.Mark(fmt.Errorf("hostpath: volume %s: %q is an invalid hostPath type", vol.Name, typ), volume.ErrInvalid)
	}
	path := filepath.Clean(src.Path)

	readOnly, err := p.check(vol.Name, path, "")
	if err != nil {
		return volume.Mount{}, err
	}
	resolved, err := hostfs.Resolve(path)
	if err != nil {
		return volume.Mount{}, fmt.Errorf("hostpath: volume %s: resolving %s: %w", vol.Name, path, err)
	}
	if resolved != path {
		ro, err := p.check(vol.Name, resolved, path)
		if err != nil {
			return volume.Mount{}, err
		}
		readOnly = readOnly || ro
	}
	if readOnly {
		if err := allMountsReadOnly(req.Pod, vol.Name, path); err != nil {
			return volume.Mount{}, err
		}
	}
	if err := p.checkType(vol.Name, resolved, typ, readOnly); err != nil {
		return volume.Mount{}, err
	}
	// The path must not have changed under the checks.
	again, err := hostfs.Resolve(path)
	if err != nil {
		return volume.Mount{}, fmt.Errorf("hostpath: volume %s: resolving %s: %w", vol.Name, path, err)
	}
	if again != resolved {
		return volume.Mount{}, fmt.Errorf("hostpath: volume %s: %s changed while it was checked (it resolved to %s, now to %s)", vol.Name, path, resolved, again)
	}
	return volume.Mount{Name: vol.Name, HostPath: resolved, ReadOnly: readOnly}, nil
}

// check returns whether path is allowed only read-only, or an
// ErrNotAllowed error when it is not allowed. via is the path as written
// when path is what it resolves to.
func (p *Plugin) check(name, path, via string) (bool, error) {
	if p.allowed == nil {
		return false, nil
	}
	matched, readOnly := false, true
	for _, a := range p.allowed {
		in := hostfs.Within(path, a.PathPrefix)
		if !in && via != "" {
			// A resolved path is also checked against the resolved
			// prefix: an allowed /data that is a symlink to /mnt/data
			// allows /mnt/data/x.
			if rp, err := hostfs.Resolve(a.PathPrefix); err == nil && rp != a.PathPrefix {
				in = hostfs.Within(path, rp)
			}
		}
		if in {
			matched = true
			readOnly = readOnly && a.ReadOnly
		}
	}
	if matched {
		return readOnly, nil
	}
	prefixes := make([]string, len(p.allowed))
	for i, a := range p.allowed {
		prefixes[i] = a.PathPrefix
		if a.ReadOnly {
			prefixes[i] += " (read-only)"
		}
	}
	list := "[" + strings.Join(prefixes, " ") + "]"
	if via != "" {
		return false, volume.Mark(fmt.Errorf("hostpath: volume %s: %s resolves to %s, outside the allowed host paths %s", name, via, path, list), volume.ErrNotAllowed)
	}
	return false, volume.Mark(fmt.Errorf("hostpath: volume %s: %s is outside the allowed host paths %s", name, path, list), volume.ErrNotAllowed)
}

// allMountsReadOnly fails when a container mounts the volume writable.
func allMountsReadOnly(pod *v1.Pod, name, path string) error {
	if pod == nil {
		return nil
	}
	check := func(c string, vms []v1.VolumeMount) error {
		for _, vm := range vms {
			if vm.Name == name && !vm.ReadOnly {
				return volume.Mark(fmt.Errorf("hostpath: volume %s: %s is allowed read-only, but container %s mounts it writable (set readOnly: true)", name, path, c), volume.ErrNotAllowed)
			}
		}
		return nil
	}
	for _, c := range pod.Spec.InitContainers {
		if err := check(c.Name, c.VolumeMounts); err != nil {
			return err
		}
	}
	for _, c := range pod.Spec.Containers {
		if err := check(c.Name, c.VolumeMounts); err != nil {
			return err
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if err := check(c.Name, c.VolumeMounts); err != nil {
			return err
		}
	}
	return nil
}

// checkType is the kubelet's checkType on the resolved path.
func (p *Plugin) checkType(name, path string, typ v1.HostPathType, readOnly bool) error {
	fi, err := os.Lstat(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostpath: volume %s: %w", name, err)
	}
	want, what := fs.FileMode(0), ""
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return p.create(name, path, true, readOnly)
		}
		fallthrough
	case v1.HostPathDirectory:
		want, what = fs.ModeDir, "directory"
	case v1.HostPathFileOrCreate:
		if !exists {
			return p.create(name, path, false, readOnly)
		}
		fallthrough
	case v1.HostPathFile:
		want, what = 0, "file"
	case v1.HostPathSocket:
		want, what = fs.ModeSocket, "socket file"
	case v1.HostPathCharDev:
		want, what = fs.ModeDevice|fs.ModeCharDevice, "character device"
	case v1.HostPathBlockDev:
		want, what = fs.ModeDevice, "block device"
	}
	if !exists {
		return fmt.Errorf("hostpath: volume %s: hostPath %s doesn't exist", name, path)
	}
	got := fi.Mode().Type()
	if got != want {
		return fmt.Errorf("hostpath: volume %s: hostPath type check failed: %s is not a %s, it's a %s", name, path, what, describe(got))
	}
	return nil
}

// describe names a file type as the kubelet's GetFileType does.
func describe(t fs.FileMode) string {
	switch t {
	case fs.ModeDir:
		return string(v1.HostPathDirectory)
	case 0:
		return string(v1.HostPathFile)
	case fs.ModeSocket:
		return string(v1.HostPathSocket)
	case fs.ModeDevice | fs.ModeCharDevice:
		return string(v1.HostPathCharDev)
	case fs.ModeDevice:
		return string(v1.HostPathBlockDev)
	case fs.ModeNamedPipe:
		return "named pipe"
	case fs.ModeSymlink:
		return "symlink"
	}
	return "file of an unknown type"
}

// create makes the missing directory (mode 0755, with its missing parents)
// or empty file (mode 0644; its parent must exist, as in the kubelet)
// without following symlinks.
func (p *Plugin) create(name, path string, dir, readOnly bool) error {
	if readOnly {
		return volume.Mark(fmt.Errorf("hostpath: volume %s: %s does not exist and is allowed read-only, so it is not created", name, path), volume.ErrNotAllowed)
	}
	if dir {
		existing, missing, err := hostfs.ExistingPrefix(path)
		if err != nil {
			return fmt.Errorf("hostpath: volume %s: creating directory %s: %w", name, path, err)
		}
		if err := hostfs.MkdirNoFollow(existing, missing, 0o755); err != nil {
			return fmt.Errorf("hostpath: volume %s: creating directory %s: %w", name, path, err)
		}
		p.log.V(1).Info("Created host directory", "volume", name, "path", path)
		return nil
	}
	created, err := hostfs.CreateFileNoFollow(path, 0o644)
	if err != nil {
		return fmt.Errorf("hostpath: volume %s: creating file %s: %w", name, path, err)
	}
	if created {
		p.log.V(1).Info("Created host file", "volume", name, "path", path)
		return nil
	}
	// Something appeared meanwhile: check it is a file.
	return p.checkType(name, path, v1.HostPathFile, readOnly)
}

// TearDown does nothing: the host path stays as it is.
func (p *Plugin) TearDown(context.Context, volume.TearDownRequest) error { return nil }
