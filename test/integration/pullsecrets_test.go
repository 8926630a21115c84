package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// loginImages is the in-memory runtime's image service in front of a
// registry that wants user:password for the images of host; it records
// the logins it was given.
type loginImages struct {
	*runtimetest.Runtime
	host, user, password string

	mu     sync.Mutex
	logins []string
}

func (l *loginImages) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	if strings.HasPrefix(spec.GetImage(), l.host+"/") {
		l.mu.Lock()
		l.logins = append(l.logins, auth.GetUsername()+":"+auth.GetPassword())
		l.mu.Unlock()
		if auth.GetUsername() != l.user || auth.GetPassword() != l.password {
			return "", status.Errorf(codes.Unknown, "failed to pull and unpack image %q: pulling from host %s failed with status code [manifests 1]: 401 Unauthorized", spec.GetImage(), l.host)
		}
	}
	return l.Runtime.PullImage(ctx, spec, auth, sc)
}

func (l *loginImages) loginsSeen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.logins...)
}

// TestPullSecretFromAPIServer: an agent joined to the real API server
// reads a pod's imagePullSecrets there: a Secret of type
// kubernetes.io/dockerconfigjson gives the login its image's registry
// wants, and the pod runs; a pod without it shows ErrImagePull with the
// registry's 401 in its status in the API server, and a Failed event.
func TestPullSecretFromAPIServer(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("pullsecret")
	cleanupNode(t, c, nodeName)
	const host = "registry.private.test:5000"
	image := host + "/team/app:1"

	name := uniqueName("regcred")
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	sec := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"https://` + host + `":{"auth":"` + auth + `"}}}`)},
	}
	if _, err := c.CoreV1().Secrets(sec.Namespace).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Secrets(sec.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	images := &loginImages{Runtime: rt, host: host, user: "alice", password: "s3cret"}
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     clientset.From(c),
		Runtime:        rt,
		Images:         images,
		RootDir:        t.TempDir(),
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 0}).WithName("agent"),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "agent", agent.Run)
	eventually(t, 30*time.Second, "the Node Ready", func() error { return nodeReady(t.Context(), c, nodeName) })

	withSecret := newPod(uniqueName("authed"), nodeName)
	withSecret.Spec.Containers[0].Image = image
	withSecret.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: name}}
	createPod(t, c, withSecret)
	eventually(t, 30*time.Second, withSecret.Name+" Running in the API server", func() error {
		got, err := c.CoreV1().Pods(withSecret.Namespace).Get(t.Context(), withSecret.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != v1.PodRunning {
			return fmt.Errorf("phase %q, container statuses %+v", got.Status.Phase, got.Status.ContainerStatuses)
		}
		return nil
	})
	if got := images.loginsSeen(); len(got) != 1 || got[0] != "alice:s3cret" {
		t.Errorf("logins sent to the registry: %q, want alice's once", got)
	}

	without := newPod(uniqueName("noauth"), nodeName)
	without.Spec.Containers[0].Image = image
	createPod(t, c, without)
	eventually(t, 30*time.Second, without.Name+" waiting with ErrImagePull and the registry's 401 in the API server", func() error {
		got, err := c.CoreV1().Pods(without.Namespace).Get(t.Context(), without.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cs := got.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].State.Waiting == nil {
			return fmt.Errorf("container statuses %+v", cs)
		}
		if w := cs[0].State.Waiting; w.Reason != "ErrImagePull" || !strings.Contains(w.Message, "401 Unauthorized") {
			return fmt.Errorf("waiting %s: %s", w.Reason, w.Message)
		}
		return nil
	})
	eventually(t, 30*time.Second, "a Failed event of the pull without credentials", func() error {
		evs, err := c.CoreV1().Events(without.Namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + without.Name})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "Failed" && e.Type == v1.EventTypeWarning && strings.Contains(e.Message, "401 Unauthorized") {
				return nil
			}
		}
		return fmt.Errorf("%d events, none Failed with the 401", len(evs.Items))
	})
}
