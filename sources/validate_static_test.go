package sources

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/userns"
)

func TestValidateStatic(t *testing.T) {
	long := strings.Repeat("a", 165)
	probe := func(mut func(*v1.Probe)) *v1.Probe {
		p := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3, TimeoutSeconds: 1}
		if mut != nil {
			mut(p)
		}
		return p
	}
	deadline := int64(0)
	tests := []struct {
		name    string
		mut     func(*v1.Pod)
		wantErr []string // substrings; none means valid
	}{
		{name: "resource claims", mut: func(p *v1.Pod) {
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
		}, wantErr: []string{"static pods may not use ResourceClaims"}},
		{name: "cluster trust bundle projection", mut: func(p *v1.Pod) {
			name := "ca"
			p.Spec.Volumes = []v1.Volume{{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: &name, Path: "ca.pem"}}}}}}}
		}, wantErr: []string{"static pods may not use ClusterTrustBundle", `"trust"`}},
		{name: "valid, with most fields set", mut: func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "web", "example.com/tier": "front"}
			p.Annotations = map[string]string{"example.com/note": "x"}
			p.Spec.Hostname, p.Spec.Subdomain = "web-0", "svc"
			p.Spec.HostNetwork = true
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}, Searches: []string{"svc.cluster.local", "."}, Options: []v1.PodDNSConfigOption{{Name: "ndots"}}}
			p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db.local"}}}
			p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			c := &p.Spec.Containers[0]
			c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 8080, Protocol: v1.ProtocolTCP}}
			c.Env = []v1.EnvVar{{Name: "my.var-1"}, {Name: "PATH"}}
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "a/b"}}
			c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
			c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
			c.LivenessProbe, c.ReadinessProbe = probe(nil), probe(func(p *v1.Probe) { p.SuccessThreshold = 3 })
		}},
		{name: "what Validate refuses", mut: func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, wantErr: []string{"spec.containers[0].image: Required value"}},
		{name: "165-character hostname", mut: func(p *v1.Pod) { p.Spec.Hostname = long }, wantErr: []string{"spec.hostname: Invalid value", "must be no more than 63 characters"}},
		{name: "hostname with a dot", mut: func(p *v1.Pod) { p.Spec.Hostname = "a.b" }, wantErr: []string{"spec.hostname: Invalid value"}},
		{name: "subdomain not a DNS label", mut: func(p *v1.Pod) { p.Spec.Subdomain = "Svc_1" }, wantErr: []string{"spec.subdomain: Invalid value"}},
		{name: "bad label value", mut: func(p *v1.Pod) { p.Labels = map[string]string{"app": "a b"} }, wantErr: []string{"metadata.labels: Invalid value"}},
		{name: "bad annotation key", mut: func(p *v1.Pod) { p.Annotations = map[string]string{"a/b/c": "x"} }, wantErr: []string{"metadata.annotations: Invalid value"}},
		{name: "bad node selector", mut: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"-x": "y"} }, wantErr: []string{"spec.nodeSelector: Invalid value"}},
		{name: "bad service account", mut: func(p *v1.Pod) { p.Spec.ServiceAccountName = "Admin" }, wantErr: []string{"spec.serviceAccountName: Invalid value"}},
		{name: "zero activeDeadlineSeconds", mut: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = &deadline }, wantErr: []string{"spec.activeDeadlineSeconds: Invalid value"}},
		{name: "unknown OS", mut: func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: "plan9"} }, wantErr: []string{"spec.os.name: Unsupported value"}},
		{name: "unknown DNS policy", mut: func(p *v1.Pod) { p.Spec.DNSPolicy = "Magic" }, wantErr: []string{"spec.dnsPolicy: Unsupported value"}},
		{name: "DNS policy None without nameservers", mut: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }, wantErr: []string{"spec.dnsConfig.nameservers: Required value"}},
		{name: "too many nameservers, bad IP", mut: func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3", "not-an-ip"}}
		}, wantErr: []string{"must not have more than 3 nameservers", "spec.dnsConfig.nameservers[3]: Invalid value"}},
		{name: "bad search domain", mut: func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{"a_b"}} }, wantErr: []string{"spec.dnsConfig.searches[0]: Invalid value"}},
		{name: "bad host alias", mut: func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "x", Hostnames: []string{"A_B"}}} },
			wantErr: []string{"spec.hostAliases[0].ip: Invalid value", "spec.hostAliases[0].hostnames[0]: Invalid value"}},
		{name: "volumes: duplicate, bad name, no source, two sources", mut: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "B_", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "none"},
				{Name: "two", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
			}
		}, wantErr: []string{`spec.volumes[1].name: Duplicate value: "a"`, "spec.volumes[2].name: Invalid value", "spec.volumes[3]: Invalid value", "must specify exactly one volume type, not 0", "not 2"}},
		{name: "image with whitespace", mut: func(p *v1.Pod) { p.Spec.Containers[0].Image = " busybox" }, wantErr: []string{"spec.containers[0].image: Invalid value", "whitespace"}},
		{name: "bad pull policy", mut: func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, wantErr: []string{"spec.containers[0].imagePullPolicy: Unsupported value"}},
		{name: "bad ports", mut: func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{
				{Name: "http", ContainerPort: 70000},
				{Name: "http", ContainerPort: 80, Protocol: "ICMP"},
				{Name: "this-name-is-too-long", HostPort: -1},
			}
		}, wantErr: []string{"spec.containers[0].ports[0].containerPort: Invalid value", `spec.containers[0].ports[1].name: Duplicate value: "http"`,
			"spec.containers[0].ports[1].protocol: Unsupported value", "spec.containers[0].ports[2].name: Invalid value",
			"spec.containers[0].ports[2].containerPort: Required value", "spec.containers[0].ports[2].hostPort: Invalid value"}},
		{name: "hostNetwork hostPort differs", mut: func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 81}}
		}, wantErr: []string{"must match `containerPort` when `hostNetwork` is true"}},
		{name: "bad env names", mut: func(p *v1.Pod) { p.Spec.Containers[0].Env = []v1.EnvVar{{Name: ""}, {Name: "A=B"}, {Name: "tab\t"}} },
			wantErr: []string{"spec.containers[0].env[0].name: Required value", "spec.containers[0].env[1].name: Invalid value", "spec.containers[0].env[2].name: Invalid value"}},
		{name: "bad volume mounts", mut: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
				{Name: "missing", MountPath: "/a"},
				{Name: "v", MountPath: "/a"},
				{Name: "v", MountPath: "/b", SubPath: "../x"},
				{Name: "v", MountPath: "/c", SubPath: "/abs"},
				{Name: "v"},
			}
		}, wantErr: []string{`spec.containers[0].volumeMounts[0].name: Not found: "missing"`, "spec.containers[0].volumeMounts[1].mountPath: Invalid value",
			"volumeMounts[2].subPath: Invalid value", "must not contain '..'", "must be a relative path", "volumeMounts[4].mountPath: Required value"}},
		{name: "bad resources", mut: func(p *v1.Pod) {
			c := &p.Spec.Containers[0]
			c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi"), v1.ResourceCPU: resource.MustParse("-1")}
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
		}, wantErr: []string{"spec.containers[0].resources.requests[memory]: Invalid value", "must be less than or equal to memory limit of 1Gi",
			"spec.containers[0].resources.requests[cpu]: Invalid value"}},
		{name: "bad probes", mut: func(p *v1.Pod) {
			c := &p.Spec.Containers[0]
			c.LivenessProbe = probe(func(p *v1.Probe) { p.SuccessThreshold = 2 })
			c.StartupProbe = probe(func(p *v1.Probe) { p.TCPSocket = &v1.TCPSocketAction{} })
			c.ReadinessProbe = probe(func(p *v1.Probe) { p.PeriodSeconds = -1 })
		}, wantErr: []string{"spec.containers[0].livenessProbe.successThreshold: Invalid value", "spec.containers[0].startupProbe: Invalid value",
			"must specify exactly one handler type", "spec.containers[0].readinessProbe.periodSeconds: Invalid value"}},
		{name: "hostUsers false with host namespaces", mut: func(p *v1.Pod) {
			f := false
			p.Spec.HostUsers = &f
			p.Spec.HostNetwork, p.Spec.HostPID, p.Spec.HostIPC = true, true, true
		}, wantErr: []string{"spec.hostNetwork: Forbidden: when `hostUsers` is false",
			"spec.HostPID: Forbidden: when `hostUsers` is false", "spec.HostIPC: Forbidden: when `hostUsers` is false"}},
		{name: "hostUsers false with hostPID, and another error", mut: func(p *v1.Pod) {
			f := false
			p.Spec.HostUsers = &f
			p.Spec.HostPID = true
			p.Spec.Hostname = "a.b"
		}, wantErr: []string{"spec.hostname: Invalid value", "spec.HostPID: Forbidden"}},
		{name: "hostUsers false with volumeDevices", mut: func(p *v1.Pod) {
			f := false
			p.Spec.HostUsers = &f
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "blk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
		}, wantErr: []string{"spec.containers[0].volumeDevices: Forbidden: when `hostUsers` is false"}},
		{name: "hostUsers false alone", mut: func(p *v1.Pod) {
			f := false
			p.Spec.HostUsers = &f
		}},
		{name: "hostUsers true with host namespaces", mut: func(p *v1.Pod) {
			tr := true
			p.Spec.HostUsers = &tr
			p.Spec.HostNetwork, p.Spec.HostPID, p.Spec.HostIPC = true, true, true
		}},
		{name: "procMount Unmasked with the host's users", mut: func(p *v1.Pod) {
			pm := v1.UnmaskedProcMount
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "x", SecurityContext: &v1.SecurityContext{ProcMount: &pm}}}
		}, wantErr: []string{"spec.initContainers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"}},
		{name: "procMount Unmasked with hostUsers false", mut: func(p *v1.Pod) {
			f, pm := false, v1.UnmaskedProcMount
			p.Spec.HostUsers = &f
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &pm}
		}},
		{name: "procMount Default", mut: func(p *v1.Pod) {
			pm := v1.DefaultProcMount
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &pm}
		}},
		{name: "procMount unknown", mut: func(p *v1.Pod) {
			pm := v1.ProcMountType("Masked")
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &pm}
		}, wantErr: []string{"spec.containers[0].securityContext.procMount: Unsupported value: \"Masked\""}},
		{name: "init containers are checked too", mut: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "x", Env: []v1.EnvVar{{Name: "A=B"}}}}
		}, wantErr: []string{"spec.initContainers[0].env[0].name: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod("a")
			tt.mut(pod)
			err := ValidateStatic(pod)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ValidateStatic() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateStatic() = nil, want an error containing %q", tt.wantErr)
			}
			for _, sub := range tt.wantErr {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("ValidateStatic() = %q, want it to contain %q", err, sub)
				}
			}
		})
	}
}

// TestValidateStaticUserNamespacesClass: the refusal of hostUsers: false
// with a host namespace is userns.ErrHostNamespaces, as the sandbox
// failure the pod would otherwise get.
func TestValidateStaticUserNamespacesClass(t *testing.T) {
	pod := testPod("a")
	f := false
	pod.Spec.HostUsers = &f
	pod.Spec.HostIPC = true
	if err := ValidateStatic(pod); !errors.Is(err, userns.ErrHostNamespaces) {
		t.Errorf("ValidateStatic() = %v, want userns.ErrHostNamespaces", err)
	}
}
