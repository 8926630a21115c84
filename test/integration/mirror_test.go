package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/mirror"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status"
)

// staticPodFor is a static pod from a file, defaulted as the file source
// does for nodeName.
func staticPodFor(name, nodeName, image string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
	sources.StaticPodDefaults(p, "/etc/nodekit/manifests/"+name+".yaml", nodeName)
	p.Annotations[sources.AnnotationSource] = sources.FileSource
	return p
}

// TestMirrorPod: a static pod gets a mirror pod with the mirror annotation,
// owned by the Node, showing the static pod's status; a mirror pod deleted
// by a user is created again (and its status written again), a changed
// manifest replaces it, and a removed static pod takes it away.
func TestMirrorPod(t *testing.T) {
	c := client(t)
	nodeName := uniqueName("mirror-node")
	cleanupNode(t, c, nodeName)
	n, err := c.CoreV1().Nodes().Create(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var statuses *status.Manager
	mirrors, err := mirror.New(clientset.From(c), mirror.Options{
		NodeName: nodeName,
		Logger:   testr.New(t).WithName("mirror"),
		OnCreate: func(static, _ *v1.Pod) { statuses.Requeue(static.UID) },
	})
	if err != nil {
		t.Fatal(err)
	}
	statuses = runStatusManager(t, "status", status.Options{Client: clientset.From(c), NodeName: nodeName, MirrorPod: mirrors.MirrorPod, ResyncPeriod: time.Second})

	static := staticPodFor("etcd", nodeName, "registry.example/etcd:3.7")
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.CoreV1().Pods(static.Namespace).Delete(t.Context(), static.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	statuses.SetPodStatus(static, agentStatus(v1.PodRunning, "running", true))
	if err := mirrors.Sync(t.Context(), []*v1.Pod{static}); err != nil {
		t.Fatal(err)
	}

	mirrorShown := func(what string, hash string, notUID types.UID) *v1.Pod {
		t.Helper()
		var got *v1.Pod
		eventually(t, 10*time.Second, what, func() error {
			p, err := c.CoreV1().Pods(static.Namespace).Get(t.Context(), static.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			switch {
			case p.UID == notUID:
				return fmt.Errorf("still the old mirror pod %s", p.UID)
			case p.Annotations[sources.AnnotationMirror] != hash:
				return fmt.Errorf("mirror annotation %q, want %q", p.Annotations[sources.AnnotationMirror], hash)
			case len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "Node" || p.OwnerReferences[0].UID != n.UID:
				return fmt.Errorf("owner references %+v, want the Node %s", p.OwnerReferences, n.UID)
			case p.Spec.NodeName != nodeName:
				return fmt.Errorf("spec.nodeName %q", p.Spec.NodeName)
			case p.Status.Phase != v1.PodRunning || podCondition(p.Status, v1.PodReady) != v1.ConditionTrue:
				return fmt.Errorf("status phase %s Ready %s, want the static pod's (Running, True)", p.Status.Phase, podCondition(p.Status, v1.PodReady))
			}
			got = p
			return nil
		})
		return got
	}
	first := mirrorShown("mirror pod with the static pod's status", static.Annotations[sources.AnnotationHash], "")

	// A user deletes the mirror pod (gracefully, as kubectl does).
	if err := c.CoreV1().Pods(first.Namespace).Delete(t.Context(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mirrors.Sync(t.Context(), []*v1.Pod{static}); err != nil {
		t.Fatal(err)
	}
	second := mirrorShown("mirror pod created again", static.Annotations[sources.AnnotationHash], first.UID)

	// The manifest changes: a new static pod (new UID and hash) replaces
	// the old one, and the stale mirror pod is replaced.
	edited := staticPodFor("etcd", nodeName, "registry.example/etcd:3.8")
	statuses.SetPodStatus(edited, agentStatus(v1.PodRunning, "running", true))
	if err := mirrors.Sync(t.Context(), []*v1.Pod{edited}); err != nil {
		t.Fatal(err)
	}
	third := mirrorShown("mirror pod of the edited manifest", edited.Annotations[sources.AnnotationHash], second.UID)
	if third.Spec.Containers[0].Image != "registry.example/etcd:3.8" {
		t.Errorf("mirror pod image %s, want the edited manifest's", third.Spec.Containers[0].Image)
	}

	// The static pod is removed.
	if err := mirrors.Sync(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "orphaned mirror pod deleted", func() error {
		_, err := c.CoreV1().Pods(static.Namespace).Get(t.Context(), static.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	t.Logf("mirror requests: %+v; status requests: %+v", mirrors.Stats(), statuses.Stats())
}
