package podmodel

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "a.b": "x", "a": "y"},
			Annotations: map[string]string{"note": "line1\nline2 \"quoted\"", "example.com/k": "v"},
		},
		Spec: v1.PodSpec{
			NodeName:           "node-1",
			ServiceAccountName: "builder",
			InitContainers: []v1.Container{{
				Name:      "init",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}},
			}},
			Containers: []v1.Container{{
				Name: "app",
				Resources: v1.ResourceRequirements{
					Limits: v1.ResourceList{
						v1.ResourceCPU:                   resource.MustParse("1500m"),
						v1.ResourceMemory:                resource.MustParse("128Mi"),
						v1.ResourceName("hugepages-2Mi"): resource.MustParse("4Mi"),
					},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				},
			}, {Name: "bare"}},
		},
		Status: v1.PodStatus{
			PodIP: "10.0.0.5", PodIPs: []v1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}},
			HostIP: "192.168.1.2", HostIPs: []v1.HostIP{{IP: "192.168.1.2"}},
		},
	}
}

func TestFieldValue(t *testing.T) {
	pod := testPod()
	for _, tc := range []struct {
		path    string
		want    string
		invalid bool
	}{
		{path: "metadata.name", want: "web"},
		{path: "metadata.namespace", want: "prod"},
		{path: "metadata.uid", want: "uid-1"},
		{path: "metadata.labels", want: "a=\"y\"\na.b=\"x\"\napp=\"web\""},
		{path: "metadata.annotations", want: "example.com/k=\"v\"\nnote=\"line1\\nline2 \\\"quoted\\\"\""},
		{path: "metadata.labels['app']", want: "web"},
		{path: "metadata.labels['absent']", want: ""},
		{path: "metadata.annotations['note']", want: "line1\nline2 \"quoted\""},
		{path: "metadata.annotations['example.com/k']", want: "v"},
		{path: "spec.nodeName", want: "node-1"},
		{path: "spec.serviceAccountName", want: "builder"},
		{path: "status.podIP", want: "10.0.0.5"},
		{path: "status.podIPs", want: "10.0.0.5,fd00::5"},
		{path: "status.hostIP", want: "192.168.1.2"},
		{path: "status.hostIPs", want: "192.168.1.2"},
		{path: "metadata.labels['bad key!']", invalid: true},
		{path: "metadata.name['x']", invalid: true},
		{path: "spec.containers", invalid: true},
		{path: "", invalid: true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := FieldValue(pod, tc.path)
			if tc.invalid {
				if !errors.Is(err, ErrInvalidField) {
					t.Errorf("FieldValue(%q) = %q, %v; want an ErrInvalidField error", tc.path, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("FieldValue(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestResourceValue(t *testing.T) {
	pod := testPod()
	allocatable := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
	for _, tc := range []struct {
		name        string
		container   string
		resource    string
		divisor     string
		allocatable v1.ResourceList
		want        string
		invalid     bool
	}{
		{name: "cpu limit in cores, rounded up", container: "app", resource: "limits.cpu", want: "2"},
		{name: "cpu limit in millicores", container: "app", resource: "limits.cpu", divisor: "1m", want: "1500"},
		{name: "cpu request", container: "app", resource: "requests.cpu", divisor: "1m", want: "250"},
		{name: "memory limit in bytes", container: "app", resource: "limits.memory", want: "134217728"},
		{name: "memory limit in Mi", container: "app", resource: "limits.memory", divisor: "1Mi", want: "128"},
		{name: "memory request defaults to the limit", container: "app", resource: "requests.memory", divisor: "1Mi", want: "128"},
		{name: "hugepages limit", container: "app", resource: "limits.hugepages-2Mi", divisor: "1Mi", want: "4"},
		{name: "init container", container: "init", resource: "limits.memory", divisor: "1Mi", want: "64"},
		{name: "cpu limit from allocatable", container: "bare", resource: "limits.cpu", allocatable: allocatable, want: "4"},
		{name: "memory limit from allocatable", container: "bare", resource: "limits.memory", divisor: "1Gi", allocatable: allocatable, want: "8"},
		{name: "ephemeral-storage from allocatable", container: "app", resource: "limits.ephemeral-storage", divisor: "1Gi", allocatable: allocatable, want: "20"},
		{name: "no limit, no allocatable", container: "bare", resource: "limits.cpu", want: "0"},
		{name: "no request", container: "bare", resource: "requests.memory", allocatable: allocatable, want: "0"},
		{name: "unknown resource", container: "app", resource: "limits.gpu", invalid: true},
		{name: "no kind", container: "app", resource: "cpu", invalid: true},
		{name: "unknown container", container: "nope", resource: "limits.cpu", invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := &v1.ResourceFieldSelector{ContainerName: tc.container, Resource: tc.resource}
			if tc.divisor != "" {
				sel.Divisor = resource.MustParse(tc.divisor)
			}
			got, err := ResourceValue(sel, pod, tc.allocatable)
			if tc.invalid {
				if !errors.Is(err, ErrInvalidField) {
					t.Errorf("ResourceValue = %q, %v; want an ErrInvalidField error", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("ResourceValue(%s of %s) = %q, want %q", tc.resource, tc.container, got, tc.want)
			}
		})
	}
}
