package volume

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The directories of a pod below PodDirs.Pod, as the kubelet names them.
const (
	volumesDirName    = "volumes"
	pluginsDirName    = "plugins"
	containersDirName = "containers"
	subPathsDirName   = "volume-subpaths"
)

// PodDirs is the layout of the agent's pod directories, the kubelet's:
//
//	<root>/pods/<uid>/volumes/<escaped plugin name>/<volume name>
//	<root>/pods/<uid>/volume-subpaths/<volume name>/<container name>/<mount index>
//	<root>/pods/<uid>/plugins/<escaped plugin name>/...
//	<root>/pods/<uid>/containers/<container name>/...
//
// Its methods only compute paths; they do not check their arguments (see
// CheckName).
type PodDirs struct {
	// Root is the agent's root directory, e.g. /var/lib/nodekit.
	Root string
}

// Pods is <root>/pods.
func (d PodDirs) Pods() string { return filepath.Join(d.Root, "pods") }

// Pod is <root>/pods/<uid>.
func (d PodDirs) Pod(uid types.UID) string { return filepath.Join(d.Pods(), string(uid)) }

// Volumes is <root>/pods/<uid>/volumes.
func (d PodDirs) Volumes(uid types.UID) string { return filepath.Join(d.Pod(uid), volumesDirName) }

// Volume is the directory a plugin may keep a volume in:
// <root>/pods/<uid>/volumes/<escaped plugin name>/<volume name>.
func (d PodDirs) Volume(uid types.UID, plugin, name string) string {
	return filepath.Join(d.Volumes(uid), EscapePluginName(plugin), name)
}

// Plugins is <root>/pods/<uid>/plugins.
func (d PodDirs) Plugins(uid types.UID) string { return filepath.Join(d.Pod(uid), pluginsDirName) }

// Containers is <root>/pods/<uid>/containers.
func (d PodDirs) Containers(uid types.UID) string {
	return filepath.Join(d.Pod(uid), containersDirName)
}

// SubPaths is <root>/pods/<uid>/volume-subpaths, where the subPaths of the
// pod's volume mounts are bind-mounted.
func (d PodDirs) SubPaths(uid types.UID) string { return filepath.Join(d.Pod(uid), subPathsDirName) }

// SubPath is where the subPath of the index-th volumeMount of a container
// is bind-mounted: <root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>.
func (d PodDirs) SubPath(uid types.UID, volume, container string, index int) string {
	return filepath.Join(d.SubPaths(uid), volume, container, strconv.Itoa(index))
}

// EscapePluginName is the directory name of a plugin's volumes: its name
// with "/" replaced by "~" ("kubernetes.io/empty-dir" becomes
// "kubernetes.io~empty-dir"), the kubelet's EscapeQualifiedName.
func EscapePluginName(name string) string { return strings.ReplaceAll(name, "/", "~") }

// CheckName returns an ErrInvalid error unless s can be one component of a
// path: not empty, not "." or "..", without "/" or NUL. Pod UIDs, volume
// and container names become directory names; in API pods they are UUIDs
// and DNS labels, but a static pod's manifest may say anything.
func CheckName(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return Mark(fmt.Errorf("volume: %s %q cannot be a directory name", what, s), ErrInvalid)
	}
	return nil
}
