package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/objects"
)

// mapObjects is a standalone agent's own ConfigMaps and Secrets, which the
// test may change.
type mapObjects struct {
	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

func (m *mapObjects) getter() objects.Funcs {
	return objects.Funcs{
		ConfigMap: func(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if cm, ok := m.configMaps[ns+"/"+name]; ok {
				return cm, nil
			}
			return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
		},
		Secret: func(_ context.Context, ns, name string) (*v1.Secret, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if s, ok := m.secrets[ns+"/"+name]; ok {
				return s, nil
			}
			return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
		},
	}
}

func (m *mapObjects) setSecret(ns, name string, data map[string][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.secrets[ns+"/"+name] = &v1.Secret{Data: data}
}

// envPod reads its environment from a Secret, a ConfigMap (envFrom with a
// prefix, and a volume of the same getter), the downward API and its own
// resources.
const envPod = `apiVersion: v1
kind: Pod
metadata:
  name: envpod
  namespace: $NS
  labels:
    app: envtest
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: cfg
    configMap:
      name: settings
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    resources:
      limits:
        memory: 64Mi
    envFrom:
    - prefix: CFG_
      configMapRef:
        name: settings
    env:
    - name: DB_PASSWORD
      valueFrom:
        secretKeyRef:
          name: db
          key: password
    - name: DSN
      value: "user:$(DB_PASSWORD)@$(CFG_host)"
    - name: APP
      valueFrom:
        fieldRef:
          fieldPath: metadata.labels['app']
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: MEM_MI
      valueFrom:
        resourceFieldRef:
          resource: limits.memory
          divisor: 1Mi
    volumeMounts:
    - name: cfg
      mountPath: /etc/cfg
`

// missingPod needs a Secret that does not exist yet.
const missingPod = `apiVersion: v1
kind: Pod
metadata:
  name: missing
  namespace: $NS
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    env:
    - name: TOKEN
      valueFrom:
        secretKeyRef:
          name: late
          key: token
`

// TestEnvFromObjects: a standalone agent given its own ConfigMaps and
// Secrets (Options.Objects) runs a pod whose environment, read inside the
// container with env, holds the Secret's value, the prefixed ConfigMap
// keys, a $(VAR) composed of both, a label, the sandbox's IP and the
// memory limit in Mi, and whose configMap volume shows the same
// ConfigMap. A pod needing a Secret that does not exist waits with
// CreateContainerConfigError and the message `secrets "late" not found`,
// then runs once the Secret appears, with its value.
func TestEnvFromObjects(t *testing.T) {
	f := newFixture(t, envEndpoint)
	objs := &mapObjects{
		configMaps: map[string]*v1.ConfigMap{f.ns + "/settings": {Data: map[string]string{"host": "db.local", "mode": "fast"}}},
		secrets:    map[string]*v1.Secret{f.ns + "/db": {Data: map[string][]byte{"password": []byte("s3cret")}}},
	}
	a := f.agentWith(nil, "env", func(o *nodekit.Options) { o.Objects = objs.getter() })
	writeManifest(t, f.dir, "envpod.yaml", strings.ReplaceAll(envPod, "$NS", f.ns))
	writeManifest(t, f.dir, "missing.yaml", strings.ReplaceAll(missingPod, "$NS", f.ns))

	pod := f.pod("envpod")
	eventually(t, 60*time.Second, pod+" Running", func() bool { return a.running(pod) })
	s, _ := a.status(pod)
	id := strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")
	out, _, err := execIn(t, f, id, "env")
	if err != nil {
		t.Fatalf("exec env: %v", err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"DB_PASSWORD": "s3cret", "CFG_host": "db.local", "CFG_mode": "fast", "DSN": "user:s3cret@db.local",
		"APP": "envtest", "MEM_MI": "64",
	}
	if len(s.PodIPs) > 0 {
		want["POD_IP"] = s.PodIPs[0].IP
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	if got["POD_IP"] == "" {
		t.Errorf("env POD_IP is empty (pod IPs %v)", s.PodIPs)
	}
	if out, _, err := execIn(t, f, id, "cat", "/etc/cfg/host"); err != nil || out != "db.local" {
		t.Errorf("configMap volume file host = %q, %v; want db.local", out, err)
	}

	missing := f.pod("missing")
	eventually(t, 30*time.Second, missing+" waiting with CreateContainerConfigError", func() bool {
		s, ok := a.status(missing)
		if !ok || len(s.ContainerStatuses) == 0 || s.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		w := s.ContainerStatuses[0].State.Waiting
		return w.Reason == "CreateContainerConfigError" && w.Message == `secrets "late" not found`
	})
	objs.setSecret(f.ns, "late", map[string][]byte{"token": []byte("t0k3n")})
	eventually(t, 60*time.Second, missing+" Running once the Secret exists", func() bool { return a.running(missing) })
	s, _ = a.status(missing)
	id = strings.TrimPrefix(s.ContainerStatuses[0].ContainerID, "containerd://")
	if out, _, err := execIn(t, f, id, "sh", "-c", "echo -n $TOKEN"); err != nil || out != "t0k3n" {
		t.Errorf("TOKEN = %q, %v; want t0k3n", out, err)
	}
}
