package projection

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/atomicwriter"
)

// DefaultMode is the mode of a volume's files when the volume sets none:
// the API's default for configMap, secret, downwardAPI and projected
// volumes (0644).
const DefaultMode fs.FileMode = 0o644

// Files are the files of a volume, by path relative to it.
type Files = map[string]atomicwriter.File

// Mode returns the file mode m asks for, def when m is nil. A mode outside
// 0-0777 is an ErrInvalid error (the API server refuses it; a static pod
// may say anything).
func Mode(m *int32, def fs.FileMode) (fs.FileMode, error) {
	if m == nil {
		return def, nil
	}
	if *m < 0 || *m > 0o777 {
		return 0, volume.Mark(fmt.Errorf("mode %#o is not between 0 and 0777", *m), volume.ErrInvalid)
	}
	return fs.FileMode(*m), nil
}

// Path checks a file path of the pod spec (an item's path, a token's
// path): an ErrInvalid error unless the atomic writer accepts it.
func Path(p string) error {
	if err := atomicwriter.Validate(p); err != nil {
		return volume.Mark(err, volume.ErrInvalid)
	}
	return nil
}

// Optional reports whether an optional field is set and true.
func Optional(b *bool) bool { return b != nil && *b }

// KeyFiles are the files of an object's keys, the kubelet's MakePayload
// of the configMap and secret plugins: with no items, one file per key,
// named after it, with defaultMode; with items, the file of each item's
// key at its path, with its mode or defaultMode. An item whose key the
// object lacks is an error naming the object (what, e.g. "configMap
// default/app") unless optional, when it is skipped.
func KeyFiles(what string, data map[string][]byte, items []v1.KeyToPath, defaultMode *int32, optional bool) (Files, error) {
	def, err := Mode(defaultMode, DefaultMode)
	if err != nil {
		return nil, fmt.Errorf("defaultMode: %w", err)
	}
	files := Files{}
	if len(items) == 0 {
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if err := Path(k); err != nil {
				return nil, fmt.Errorf("key of %s: %w", what, err)
			}
			files[k] = atomicwriter.File{Data: data[k], Mode: def}
		}
		return files, nil
	}
	var errs []error
	for _, it := range items {
		if err := Path(it.Path); err != nil {
			return nil, fmt.Errorf("item %s: %w", it.Key, err)
		}
		mode, err := Mode(it.Mode, def)
		if err != nil {
			return nil, fmt.Errorf("item %s: %w", it.Key, err)
		}
		b, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			errs = append(errs, fmt.Errorf("%s has no key %q", what, it.Key))
			continue
		}
		files[it.Path] = atomicwriter.File{Data: b, Mode: mode}
	}
	return files, errors.Join(errs...)
}

// ConfigMapData merges a ConfigMap's Data and BinaryData.
func ConfigMapData(cm *v1.ConfigMap) map[string][]byte {
	out := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out
}

// FsUser is the uid every container of the pod (init and app) runs as,
// when they all set the same one (their own runAsUser, or the pod's); nil
// otherwise. The kubelet gives projected service-account tokens to it.
func FsUser(pod *v1.Pod) *int64 {
	var uid *int64
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	for i := range containers {
		c := &containers[i]
		var u *int64
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			u = c.SecurityContext.RunAsUser
		} else if pod.Spec.SecurityContext != nil {
			u = pod.Spec.SecurityContext.RunAsUser
		}
		if u == nil || (uid != nil && *uid != *u) {
			return nil
		}
		uid = u
	}
	if uid == nil {
		return nil
	}
	v := *uid
	return &v
}

// FSGroup is the pod's fsGroup, nil when it has none.
func FSGroup(pod *v1.Pod) *int64 {
	if pod == nil || pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.FSGroup == nil {
		return nil
	}
	v := *pod.Spec.SecurityContext.FSGroup
	return &v
}
