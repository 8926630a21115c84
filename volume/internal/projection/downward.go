package projection

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/volume"
	"github.com/nodekit/nodekit/volume/internal/atomicwriter"
)

// DownwardAPIFiles are the files of downwardAPI items, the kubelet's
// CollectData: each item's path holds the value of its fieldRef
// (podmodel.FieldValue) or resourceFieldRef (podmodel.ResourceValue, a container's limits
// defaulting to allocatable), with its mode or defaultMode.
func DownwardAPIFiles(items []v1.DownwardAPIVolumeFile, pod *v1.Pod, defaultMode *int32, allocatable v1.ResourceList) (Files, error) {
	def, err := Mode(defaultMode, DefaultMode)
	if err != nil {
		return nil, fmt.Errorf("defaultMode: %w", err)
	}
	files := Files{}
	var errs []error
	for _, it := range items {
		if err := Path(it.Path); err != nil {
			return nil, err
		}
		mode, err := Mode(it.Mode, def)
		if err != nil {
			return nil, fmt.Errorf("item %s: %w", it.Path, err)
		}
		var value string
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			err = volume.Mark(errors.New("both fieldRef and resourceFieldRef are set"), volume.ErrInvalid)
		case it.FieldRef != nil:
			if v := it.FieldRef.APIVersion; v != "" && v != "v1" {
				err = volume.Mark(fmt.Errorf("fieldRef apiVersion %q is not v1", v), volume.ErrInvalid)
				break
			}
			value, err = podmodel.FieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			if it.ResourceFieldRef.ContainerName == "" {
				err = volume.Mark(errors.New("resourceFieldRef needs a containerName in a volume"), volume.ErrInvalid)
				break
			}
			value, err = podmodel.ResourceValue(it.ResourceFieldRef, pod, allocatable)
		default:
			err = volume.Mark(errors.New("neither fieldRef nor resourceFieldRef is set"), volume.ErrInvalid)
		}
		if errors.Is(err, podmodel.ErrInvalidField) {
			err = volume.Mark(err, volume.ErrInvalid)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("item %s: %w", it.Path, err))
			continue
		}
		files[it.Path] = atomicwriter.File{Data: []byte(value), Mode: mode}
	}
	return files, errors.Join(errs...)
}
