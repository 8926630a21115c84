package podmodel

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidField matches the errors of FieldValue and ResourceValue: a
// field path, key, resource, divisor or container that the downward API
// does not offer.
var ErrInvalidField = errors.New("podmodel: invalid downward API field")

// fieldError is an ErrInvalidField error whose message is the kubelet's,
// so that a container that cannot be configured shows the same reason.
type fieldError struct{ msg string }

func (e *fieldError) Error() string        { return e.msg }
func (e *fieldError) Is(target error) bool { return target == ErrInvalidField }

func invalid(err error) error { return &fieldError{msg: err.Error()} }

// FieldValue is the value of a downward API fieldRef, as the kubelet
// writes it: metadata.name, metadata.namespace, metadata.uid,
// metadata.labels and metadata.annotations (every entry as a key="value"
// line, Go-quoted, sorted by key), one label or annotation
// (metadata.labels['key'], its raw value, empty when absent), and, beyond
// what the API server accepts in a volume (the kubelet offers them to
// environment variables only): spec.nodeName, spec.serviceAccountName,
// status.podIP, status.podIPs, status.hostIP and status.hostIPs (lists
// comma-separated), empty until the pod's status has them. Any other path
// is an ErrInvalidField error, with the kubelet's message ("field label not
// supported: x", "invalid key subscript in x: ...").
func FieldValue(pod *v1.Pod, fieldPath string) (string, error) {
	if p, key, ok := splitSubscript(fieldPath); ok {
		switch p {
		case "metadata.annotations":
			if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
				return "", invalid(fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";")))
			}
			return pod.Annotations[key], nil
		case "metadata.labels":
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return "", invalid(fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";")))
			}
			return pod.Labels[key], nil
		}
		return "", invalid(fmt.Errorf("field label not supported: %s", fieldPath))
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		ips := make([]string, len(pod.Status.PodIPs))
		for i, ip := range pod.Status.PodIPs {
			ips[i] = ip.IP
		}
		return strings.Join(ips, ","), nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		ips := make([]string, len(pod.Status.HostIPs))
		for i, ip := range pod.Status.HostIPs {
			ips[i] = ip.IP
		}
		return strings.Join(ips, ","), nil
	}
	return "", invalid(fmt.Errorf("field label not supported: %s", fieldPath))
}

// RuntimeFieldValue is the value of a downward API fieldRef of an
// environment variable, as the kubelet's podFieldSelectorRuntimeValue
// gives it: the pod's IPs are podIPs (the sandbox's: the pod's status may
// not show them yet), the host's are hostIPs (the node's addresses) when
// any are given, else the pod status's; every other field is FieldValue's.
// An invalid label or annotation key is an ErrInvalidField error, which
// fails the container's configuration (CreateContainerConfigError).
func RuntimeFieldValue(pod *v1.Pod, fieldPath string, podIPs, hostIPs []string) (string, error) {
	switch fieldPath {
	case "status.podIP":
		if len(podIPs) > 0 {
			return podIPs[0], nil
		}
		return "", nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	case "status.hostIP":
		if len(hostIPs) > 0 {
			return hostIPs[0], nil
		}
	case "status.hostIPs":
		if len(hostIPs) > 0 {
			return strings.Join(hostIPs, ","), nil
		}
	}
	return FieldValue(pod, fieldPath)
}

// splitSubscript splits "metadata.labels['key']" into its path and key.
func splitSubscript(fieldPath string) (string, string, bool) {
	s, ok := strings.CutSuffix(fieldPath, "']")
	if !ok {
		return "", "", false
	}
	p, key, ok := strings.Cut(s, "['")
	if !ok || p == "" {
		return "", "", false
	}
	return p, key, true
}

// formatMap is the kubelet's fieldpath.FormatMap: key="value" lines, the
// value Go-quoted, sorted by key, without a final newline.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// ResourceValue is the value of a downward API resourceFieldRef, as the
// kubelet writes it: the named container's (app or init) limits.cpu,
// limits.memory, limits.ephemeral-storage, limits.hugepages-<size>, or
// the same requests, divided by the divisor (default 1) and rounded up; a
// cpu, memory or ephemeral-storage limit the container does not set is
// the node's allocatable one, and a request it does not set is its limit
// when it sets one (as the API server's defaulting would have made it). A
// resource the container and the node lack is 0. An unknown resource or
// container is an ErrInvalid error.
func ResourceValue(sel *v1.ResourceFieldSelector, pod *v1.Pod, allocatable v1.ResourceList) (string, error) {
	c := FindContainer(pod, sel.ContainerName)
	if c == nil {
		return "", invalid(fmt.Errorf("container %q not found in the pod", sel.ContainerName))
	}
	divisor := sel.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(sel.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", invalid(fmt.Errorf("unsupported container resource %q", sel.Resource))
	}
	rn := v1.ResourceName(name)
	switch {
	case rn == v1.ResourceCPU, rn == v1.ResourceMemory, rn == v1.ResourceEphemeralStorage:
	case strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
	default:
		return "", invalid(fmt.Errorf("unsupported container resource %q", sel.Resource))
	}
	limit, hasLimit := c.Resources.Limits[rn]
	q := limit
	if kind == "requests" {
		req, ok := c.Resources.Requests[rn]
		switch {
		case ok:
			q = req
		case hasLimit:
			q = limit
		default:
			q = resource.Quantity{}
		}
	} else if (!hasLimit || limit.IsZero()) && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
		// Hugepages are never overcommitted: no default from allocatable.
		if a, ok := allocatable[rn]; ok {
			q = a
		} else {
			q = resource.Quantity{}
		}
	}
	var v int64
	if rn == v1.ResourceCPU {
		if divisor.MilliValue() == 0 {
			return "", invalid(fmt.Errorf("divisor %s of %s is below 1m", divisor.String(), sel.Resource))
		}
		v = int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))
	} else {
		if divisor.Value() == 0 {
			return "", invalid(fmt.Errorf("divisor %s of %s is below 1", divisor.String(), sel.Resource))
		}
		v = int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))
	}
	return strconv.FormatInt(v, 10), nil
}

// FindContainer returns the pod's app or init container of this name, or
// nil.
func FindContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
