package podruntime

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSecurityContext(t *testing.T) {
	f := newFakes(t, Options{RootDir: "/var/lib/nk"})
	unmasked := v1.UnmaskedProcMount
	strict := v1.SupplementalGroupsPolicyStrict
	pod := testPod("sec", "a")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{
		SeccompProfile:           &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		AppArmorProfile:          &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("k8s-default")},
		SELinuxOptions:           &v1.SELinuxOptions{Level: "s0:c1,c2"},
		SupplementalGroupsPolicy: &strict,
		SupplementalGroups:       []int64{5000},
		RunAsUser:                ptr(int64(1000)),
	}
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("profiles/audit.json")},
		ProcMount:      &unmasked,
		RunAsGroup:     ptr(int64(2000)),
	}
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	sb := f.rec.sandboxConfigs[0].GetLinux().GetSecurityContext()
	if sb.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault || sb.GetSelinuxOptions().GetLevel() != "s0:c1,c2" ||
		sb.GetSupplementalGroupsPolicy() != runtimeapi.SupplementalGroupsPolicy_Strict {
		t.Errorf("sandbox security context = %v", sb)
	}
	sc := f.rec.lastContainerConfig("a").GetLinux().GetSecurityContext()
	if p := sc.GetSeccomp(); p.GetProfileType() != runtimeapi.SecurityProfile_Localhost || p.GetLocalhostRef() != "/var/lib/nk/seccomp/profiles/audit.json" {
		t.Errorf("container seccomp = %v, want the container's Localhost profile under <RootDir>/seccomp", p)
	}
	if p := sc.GetApparmor(); p.GetProfileType() != runtimeapi.SecurityProfile_Localhost || p.GetLocalhostRef() != "k8s-default" {
		t.Errorf("container AppArmor = %v, want the pod's", p)
	}
	if len(sc.GetMaskedPaths()) != 0 || len(sc.GetReadonlyPaths()) != 0 {
		t.Errorf("procMount Unmasked: masked %v, read-only %v; want none", sc.GetMaskedPaths(), sc.GetReadonlyPaths())
	}
	if sc.GetRunAsUser().GetValue() != 1000 || sc.GetRunAsGroup().GetValue() != 2000 || sc.GetSupplementalGroups()[0] != 5000 ||
		sc.GetSupplementalGroupsPolicy() != runtimeapi.SupplementalGroupsPolicy_Strict || sc.GetSelinuxOptions().GetLevel() != "s0:c1,c2" {
		t.Errorf("container security context = %v", sc)
	}

	// Defaults: Unconfined seccomp, no AppArmor profile (the runtime's),
	// the kubelet's masked and read-only paths.
	plain := testPod("plain", "b")
	if err := f.sync(t, plain).Err(); err != nil {
		t.Fatal(err)
	}
	sc = f.rec.lastContainerConfig("b").GetLinux().GetSecurityContext()
	if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_Unconfined || sc.GetApparmor() != nil ||
		len(sc.GetMaskedPaths()) != len(defaultMaskedPaths) || len(sc.GetReadonlyPaths()) != len(defaultReadonlyPaths) {
		t.Errorf("default container security context = %v", sc)
	}
}

func TestHostUsersFalse(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("userns", "a")
	pod.Spec.HostUsers = ptr(false)
	res := f.sync(t, pod)
	if err := res.Err(); !errors.Is(err, ErrCreatePodSandbox) || !errors.Is(err, ErrUserNamespaces) {
		t.Fatalf("sync error = %v, want CreatePodSandboxError for hostUsers: false", err)
	}
	if len(f.rec.sandboxConfigs) != 0 {
		t.Errorf("RunPodSandbox called %d times, want none", len(f.rec.sandboxConfigs))
	}
}
