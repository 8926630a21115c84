package podruntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestSyncPodHostIPEnv: before the pod's status holds the node's address,
// the environment's status.hostIP and status.hostIPs take the node's; the
// pod is not modified.
func TestSyncPodHostIPEnv(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("hostip", "a")
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
		{Name: "HOST_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIPs"}}},
	}
	res := f.m.SyncPodWithOptions(t.Context(), pod, f.status(t, pod), SyncPodOptions{
		HostIPs: func() []string { return []string{"192.0.2.10", "2001:db8::10"} },
	})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range f.rec.lastContainerConfig("a").Envs {
		env[kv.Key] = string(kv.Value)
	}
	if env["HOST_IP"] != "192.0.2.10" || env["HOST_IPS"] != "192.0.2.10,2001:db8::10" {
		t.Errorf("env = %v, want the node's addresses", env)
	}
	if pod.Status.HostIP != "" || pod.Status.HostIPs != nil {
		t.Errorf("the pod was modified: %+v", pod.Status)
	}
}
