package sources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// defaultedSpec is the pod-level part of SetDefaults on an empty spec.
func defaultedSpec(containers ...v1.Container) v1.PodSpec {
	return v1.PodSpec{
		RestartPolicy:                 v1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		DNSPolicy:                     v1.DNSClusterFirst,
		SchedulerName:                 "default-scheduler",
		SecurityContext:               &v1.PodSecurityContext{},
		EnableServiceLinks:            ptr.To(true),
		Containers:                    containers,
	}
}

// defaultedContainer is a container with the per-container defaults.
func defaultedContainer(name, image string, pull v1.PullPolicy) v1.Container {
	return v1.Container{
		Name:                     name,
		Image:                    image,
		ImagePullPolicy:          pull,
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: v1.TerminationMessageReadFile,
	}
}

func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   v1.PodSpec
		want v1.PodSpec
	}{
		{
			name: "empty spec",
			in:   v1.PodSpec{},
			want: defaultedSpec(),
		},
		{
			name: "set fields are kept",
			in: v1.PodSpec{
				RestartPolicy:                 v1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				DNSPolicy:                     v1.DNSDefault,
				SchedulerName:                 "mine",
				SecurityContext:               &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1)},
				EnableServiceLinks:            ptr.To(false),
				Containers: []v1.Container{{
					Name: "c", Image: "x:latest", ImagePullPolicy: v1.PullNever,
					TerminationMessagePath: "/tmp/t", TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
				}},
			},
			want: v1.PodSpec{
				RestartPolicy:                 v1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				DNSPolicy:                     v1.DNSDefault,
				SchedulerName:                 "mine",
				SecurityContext:               &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1)},
				EnableServiceLinks:            ptr.To(false),
				Containers: []v1.Container{{
					Name: "c", Image: "x:latest", ImagePullPolicy: v1.PullNever,
					TerminationMessagePath: "/tmp/t", TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
				}},
			},
		},
		{
			name: "image pull policy from the image reference",
			in: v1.PodSpec{Containers: []v1.Container{
				{Name: "a", Image: "busybox"},
				{Name: "b", Image: "busybox:latest"},
				{Name: "c", Image: "busybox:1.36"},
				{Name: "d", Image: "busybox@sha256:abcd"},
				{Name: "e", Image: "busybox:latest@sha256:abcd"},
				{Name: "f", Image: "registry:5000/busybox"},
				{Name: "g", Image: "registry:5000/busybox:1"},
				{Name: "h", Image: "registry:5000/team/busybox:latest"},
			}},
			want: defaultedSpec(
				defaultedContainer("a", "busybox", v1.PullAlways),
				defaultedContainer("b", "busybox:latest", v1.PullAlways),
				defaultedContainer("c", "busybox:1.36", v1.PullIfNotPresent),
				defaultedContainer("d", "busybox@sha256:abcd", v1.PullIfNotPresent),
				defaultedContainer("e", "busybox:latest@sha256:abcd", v1.PullIfNotPresent),
				defaultedContainer("f", "registry:5000/busybox", v1.PullAlways),
				defaultedContainer("g", "registry:5000/busybox:1", v1.PullIfNotPresent),
				defaultedContainer("h", "registry:5000/team/busybox:latest", v1.PullAlways),
			),
		},
		{
			name: "init containers are defaulted too",
			in:   v1.PodSpec{InitContainers: []v1.Container{{Name: "i", Image: "x:1"}}},
			want: func() v1.PodSpec {
				s := defaultedSpec()
				s.InitContainers = []v1.Container{defaultedContainer("i", "x:1", v1.PullIfNotPresent)}
				return s
			}(),
		},
		{
			name: "ports, probes, env fieldRef, resources",
			in: v1.PodSpec{Containers: []v1.Container{{
				Name: "c", Image: "x:1",
				Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{
					HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)},
				}},
				ReadinessProbe: &v1.Probe{
					ProbeHandler:   v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
					TimeoutSeconds: 5, PeriodSeconds: 7, SuccessThreshold: 2, FailureThreshold: 9,
				},
				StartupProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{
					HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTPS},
				}},
				Env: []v1.EnvVar{
					{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
					{Name: "PLAIN", Value: "x"},
				},
				Resources: v1.ResourceRequirements{
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
				},
			}}},
			want: defaultedSpec(func() v1.Container {
				c := defaultedContainer("c", "x:1", v1.PullIfNotPresent)
				c.Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}}
				c.LivenessProbe = &v1.Probe{
					ProbeHandler:   v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP}},
					TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
				}
				c.ReadinessProbe = &v1.Probe{
					ProbeHandler:   v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
					TimeoutSeconds: 5, PeriodSeconds: 7, SuccessThreshold: 2, FailureThreshold: 9,
				}
				c.StartupProbe = &v1.Probe{
					ProbeHandler:   v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTPS}},
					TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
				}
				c.Env = []v1.EnvVar{
					{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
					{Name: "PLAIN", Value: "x"},
				}
				c.Resources = v1.ResourceRequirements{
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")},
				}
				return c
			}()),
		},
		{
			name: "host network ports get their host port",
			in: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{
				Name: "c", Image: "x:1", Ports: []v1.ContainerPort{{ContainerPort: 8080}},
			}}},
			want: func() v1.PodSpec {
				c := defaultedContainer("c", "x:1", v1.PullIfNotPresent)
				c.Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: v1.ProtocolTCP}}
				s := defaultedSpec(c)
				s.HostNetwork = true
				return s
			}(),
		},
		{
			name: "volume default modes",
			in: v1.PodSpec{Volumes: []v1.Volume{
				{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "m", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{DefaultMode: ptr.To[int32](0o400)}}},
				{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				}}}},
				{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
				{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			}},
			want: func() v1.PodSpec {
				s := defaultedSpec()
				s.Volumes = []v1.Volume{
					{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o644)}}},
					{Name: "m", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{DefaultMode: ptr.To[int32](0o400)}}},
					{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
						DefaultMode: ptr.To[int32](0o644),
						Items: []v1.DownwardAPIVolumeFile{
							{Path: "n", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
						},
					}}},
					{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644)}}},
					{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				}
				return s
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tt.in}
			SetDefaults(pod)
			if diff := cmp.Diff(tt.want, pod.Spec); diff != "" {
				t.Errorf("SetDefaults (-want +got):\n%s", diff)
			}
			again := pod.DeepCopy()
			SetDefaults(again)
			if diff := cmp.Diff(pod, again); diff != "" {
				t.Errorf("SetDefaults is not idempotent (-first +second):\n%s", diff)
			}
		})
	}
}

// manifest is a pod as a manifest file would hold it.
func manifest() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1"}}},
	}
}

func TestStaticPodDefaults(t *testing.T) {
	pod := manifest()
	StaticPodDefaults(pod, "/etc/manifests/web.yaml", "Node-1")

	if err := Validate(pod); err != nil {
		t.Fatalf("a defaulted manifest is invalid: %v", err)
	}
	if len(pod.UID) != 32 {
		t.Errorf("UID = %q, want 32 hex characters", pod.UID)
	}
	wantMeta := metav1.ObjectMeta{
		Name:        "web-node-1",
		Namespace:   "default",
		UID:         pod.UID,
		Annotations: map[string]string{AnnotationHash: string(pod.UID)},
	}
	if diff := cmp.Diff(wantMeta, pod.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if pod.Spec.NodeName != "Node-1" {
		t.Errorf("spec.nodeName = %q, want Node-1", pod.Spec.NodeName)
	}
	wantTol := []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	if diff := cmp.Diff(wantTol, pod.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if pod.Status.Phase != v1.PodPending {
		t.Errorf("phase = %q, want Pending", pod.Status.Phase)
	}
	if pod.Spec.RestartPolicy != v1.RestartPolicyAlways || pod.Spec.Containers[0].ImagePullPolicy != v1.PullIfNotPresent {
		t.Errorf("SetDefaults not applied: %+v", pod.Spec)
	}
}

func TestStaticPodDefaultsUID(t *testing.T) {
	uid := func(p *v1.Pod, source, node string) string {
		StaticPodDefaults(p, source, node)
		return string(p.UID)
	}
	const file, url, node = "/etc/manifests/web.yaml", "http://config/pods", "node-1"
	base := uid(manifest(), file, node)

	tests := []struct {
		name     string
		pod      *v1.Pod
		source   string
		node     string
		wantSame bool
	}{
		{name: "same content, source and node", pod: manifest(), source: file, node: node, wantSame: true},
		{name: "explicit default equals implicit default", pod: func() *v1.Pod {
			p := manifest()
			p.Spec.RestartPolicy = v1.RestartPolicyAlways
			return p
		}(), source: file, node: node, wantSame: true},
		{name: "image changed", pod: func() *v1.Pod {
			p := manifest()
			p.Spec.Containers[0].Image = "nginx:2"
			return p
		}(), source: file, node: node},
		{name: "label added", pod: func() *v1.Pod {
			p := manifest()
			p.Labels = map[string]string{"a": "b"}
			return p
		}(), source: file, node: node},
		{name: "other file", pod: manifest(), source: "/etc/manifests/other.yaml", node: node},
		{name: "other node", pod: manifest(), source: file, node: "node-2"},
		{name: "url source", pod: manifest(), source: url, node: node},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := uid(tt.pod, tt.source, tt.node)
			if same := got == base; same != tt.wantSame {
				t.Errorf("UID %q vs base %q: same = %v, want %v", got, base, same, tt.wantSame)
			}
		})
	}

	t.Run("file path and url with the same text differ", func(t *testing.T) {
		// "file:" and "url:" prefixes keep a path from colliding with a URL.
		if uid(manifest(), "http://h/p", node) == string(staticPodUID(manifest(), "/h/p", node)) {
			t.Error("URL and path hashed alike")
		}
	})

	t.Run("explicit UID is kept", func(t *testing.T) {
		p := manifest()
		p.UID = "mine"
		StaticPodDefaults(p, file, node)
		if p.UID != "mine" || p.Annotations[AnnotationHash] != "mine" {
			t.Errorf("UID = %q, hash = %q, want both mine", p.UID, p.Annotations[AnnotationHash])
		}
	})

	t.Run("namespace kept, toleration not duplicated", func(t *testing.T) {
		p := manifest()
		p.Namespace = "kube-system"
		p.Spec.Tolerations = []v1.Toleration{
			{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)},
			{Key: "k", Operator: v1.TolerationOpExists},
		}
		StaticPodDefaults(p, file, node)
		if p.Namespace != "kube-system" {
			t.Errorf("namespace = %q, want kube-system", p.Namespace)
		}
		want := []v1.Toleration{
			{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
			{Key: "k", Operator: v1.TolerationOpExists},
		}
		if diff := cmp.Diff(want, p.Spec.Tolerations); diff != "" {
			t.Errorf("tolerations (-want +got):\n%s", diff)
		}
	})
}

// TestStaticPodNegativeGracePeriod: terminationGracePeriodSeconds -1 (and
// any negative value) becomes 1, as the kubelet's defaulting of static pods
// does; 0 stays 0.
func TestStaticPodNegativeGracePeriod(t *testing.T) {
	for in, want := range map[int64]int64{-1: 1, -30: 1, 0: 0, 45: 45} {
		pod := manifest()
		g := in
		pod.Spec.TerminationGracePeriodSeconds = &g
		StaticPodDefaults(pod, "/etc/manifests/web.yaml", "node-1")
		if got := *pod.Spec.TerminationGracePeriodSeconds; got != want {
			t.Errorf("terminationGracePeriodSeconds %d became %d, want %d", in, got, want)
		}
	}
}
