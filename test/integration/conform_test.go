package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// conformVerbosity is the agent log verbosity of these tests.
var conformVerbosity = 0

// envRecorder is the in-memory runtime, recording the environment each
// container is created with, by container name.
type envRecorder struct {
	*runtimetest.Runtime
	mu   sync.Mutex
	envs map[string][]string
}

func (r *envRecorder) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	var env []string
	for _, kv := range config.GetEnvs() {
		env = append(env, kv.GetKey()+"="+string(kv.GetValue()))
	}
	r.mu.Lock()
	r.envs[config.GetMetadata().GetName()] = env
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, sandboxID, config, sandboxConfig)
}

func (r *envRecorder) env(container string) ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	env, ok := r.envs[container]
	return slices.Clone(env), ok
}

// startConformAgent runs an agent on the in-memory runtime (wrapped to
// record environments), joined to the test API server, and waits for its
// Node to be Ready.
func startConformAgent(t *testing.T, nodeName string, tweak func(*nodekit.Options)) *envRecorder {
	t.Helper()
	c := client(t)
	cleanupNode(t, c, nodeName)
	rt := &envRecorder{
		Runtime: runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}}),
		envs:    map[string][]string{},
	}
	t.Cleanup(rt.Close)
	opts := nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     newAgentClient(t, kubeconfig(t)),
		Runtime:        rt,
		Images:         rt.Runtime,
		RootDir:        t.TempDir(),
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: conformVerbosity}).WithName("agent"),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
	}
	if tweak != nil {
		tweak(&opts)
	}
	agent, err := nodekit.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "agent", agent.Run)
	eventually(t, 30*time.Second, "the Node Ready", func() error { return nodeReady(t.Context(), c, nodeName) })
	return rt
}

// TestEnvFromAPIServer is the upstream "Secrets/ConfigMap should be
// consumable via the environment": a pod from the API server whose
// container takes every key of a Secret and of a ConfigMap through envFrom
// (with and without a prefix) starts with each key in its environment,
// beside a secretKeyRef variable.
func TestEnvFromAPIServer(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("envfrom")
	rt := startConformAgent(t, nodeName, nil)

	name := uniqueName("envfrom")
	secret := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Data:       map[string][]byte{"data-1": []byte("value-1")},
	}
	if _, err := c.CoreV1().Secrets(secret.Namespace).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Data:       map[string]string{"data-2": "value-2"},
	}
	if _, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.CoreV1().Secrets(secret.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})

	pod := newPod(name, nodeName)
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	ref := v1.LocalObjectReference{Name: name}
	pod.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{
		{SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref}},
		{Prefix: "p-", SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref}},
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref}},
		{Prefix: "q-", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref}},
	}
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "KEYREF", ValueFrom: &v1.EnvVarSource{
		SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref, Key: "data-1"},
	}}}
	createPod(t, c, pod)

	var env []string
	eventually(t, 30*time.Second, "the container created", func() error {
		var ok bool
		if env, ok = rt.env("c"); !ok {
			return fmt.Errorf("no container created yet")
		}
		return nil
	})
	for _, want := range []string{"data-1=value-1", "p-data-1=value-1", "data-2=value-2", "q-data-2=value-2", "KEYREF=value-1"} {
		if !slices.Contains(env, want) {
			t.Errorf("the container's environment lacks %s: %s", want, strings.Join(env, " "))
		}
	}
}

// TestReadinessGatesFromAPIServer is the upstream "Pods should support pod
// readiness gates": the pod is not Ready while its gates' conditions are
// missing or False, and Ready soon after another writer patches them True
// in the pod's status in the API server.
func TestReadinessGatesFromAPIServer(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("gates")
	startConformAgent(t, nodeName, nil)

	const gate1, gate2 = "k8s.io/test-condition1", "k8s.io/test-condition2"
	pod := newPod(uniqueName("gates"), nodeName)
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate1}, {ConditionType: gate2}}
	createPod(t, c, pod)

	ready := func(want v1.ConditionStatus) func() error {
		return func() error {
			got, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != v1.PodRunning {
				return fmt.Errorf("phase %q", got.Status.Phase)
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == v1.PodReady {
					if cond.Status != want {
						return fmt.Errorf("Ready %s (%s: %s), want %s", cond.Status, cond.Reason, cond.Message, want)
					}
					return nil
				}
			}
			return fmt.Errorf("no Ready condition")
		}
	}
	eventually(t, 30*time.Second, "the pod Running, not Ready", ready(v1.ConditionFalse))

	patch := func(gate string, status v1.ConditionStatus) {
		t.Helper()
		body := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"lastProbeTime":null,"lastTransitionTime":%q}]}}`,
			gate, status, time.Now().UTC().Format(time.RFC3339))
		if _, err := c.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("patching %s: %v", gate, err)
		}
	}
	patch(gate1, v1.ConditionTrue)
	time.Sleep(2 * time.Second) // one gate of two: the pod must stay unready
	if err := ready(v1.ConditionFalse)(); err != nil {
		t.Fatalf("with one gate True: %v", err)
	}
	patch(gate2, v1.ConditionTrue)
	begin := time.Now()
	eventually(t, 10*time.Second, "the pod Ready once both gates are True", ready(v1.ConditionTrue))
	t.Logf("Ready %v after the second gate's patch", time.Since(begin).Round(10*time.Millisecond))

	patch(gate1, v1.ConditionFalse)
	eventually(t, 10*time.Second, "the pod unready once a gate is False", ready(v1.ConditionFalse))
}

// TestHostNetworkPodIPs is the upstream "Downward API should provide host
// IP and pod IP as an env var if pod uses host network": a hostNetwork
// pod's podIP and podIPs are the node's, in its API status and in its
// container's status.podIP and status.hostIP variables.
func TestHostNetworkPodIPs(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("hostnet")
	rt := startConformAgent(t, nodeName, nil)

	pod := newPod(uniqueName("hostnet"), nodeName)
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	field := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	pod.Spec.Containers[0].Env = []v1.EnvVar{field("POD_IP", "status.podIP"), field("POD_IPS", "status.podIPs"), field("HOST_IP", "status.hostIP")}
	createPod(t, c, pod)

	var got *v1.Pod
	eventually(t, 30*time.Second, "the pod Running with a pod IP", func() error {
		var err error
		if got, err = c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if got.Status.Phase != v1.PodRunning || got.Status.PodIP == "" {
			return fmt.Errorf("phase %q, podIP %q, podIPs %v", got.Status.Phase, got.Status.PodIP, got.Status.PodIPs)
		}
		return nil
	})
	s := got.Status
	if s.HostIP == "" || s.PodIP != s.HostIP || len(s.PodIPs) == 0 || s.PodIPs[0].IP != s.HostIP {
		t.Errorf("podIP %q, podIPs %v, want the node's IP %q (hostIPs %v)", s.PodIP, s.PodIPs, s.HostIP, s.HostIPs)
	}
	env, _ := rt.env("c")
	for _, want := range []string{"POD_IP=" + s.HostIP, "POD_IPS=" + s.HostIP, "HOST_IP=" + s.HostIP} {
		if !slices.Contains(env, want) {
			t.Errorf("the container's environment lacks %s: %s", want, strings.Join(env, " "))
		}
	}
}
