package hollow

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/go-logr/logr/testr"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A pod start on a hollow node is one status write, Running, even when
// the machine is so loaded that the pod's sync takes longer than a lone
// agent's 2s hold (here every runtime call takes 800ms): without the
// longer hold, the Pending status the sync began with is written first.
// The node writes no checkpoint of its pods.
func TestSlowStartOneStatusWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		rt := runtimetest.New(runtimetest.Options{Latency: 800 * time.Millisecond})
		defer rt.Close()
		opts := Options{EventFilter: events.Warnings, Logger: testr.New(t)}
		dir := t.TempDir()
		o := nodeOptions("hollow-0", dir, clientset.From(cs), rt, opts)
		o.Node.Capacity = v1.ResourceList{}
		agent, err := nodekit.New(o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		time.Sleep(30 * time.Second) // registered, Ready
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		if n, err := cs.CoreV1().Nodes().Get(ctx, "hollow-0", metav1.GetOptions{}); err != nil || !ready(n) {
			t.Fatalf("node not Ready: %v", err)
		}
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
			// As the API server defaults it.
			Spec: v1.PodSpec{
				NodeName:                      "hollow-0",
				RestartPolicy:                 v1.RestartPolicyAlways,
				DNSPolicy:                     v1.DNSClusterFirst,
				TerminationGracePeriodSeconds: new(int64(30)),
				SchedulerName:                 "default-scheduler",
				Containers: []v1.Container{{
					Name: "c", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: v1.PullIfNotPresent,
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
				}},
			},
			Status: v1.PodStatus{Phase: v1.PodPending},
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		got, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1.PodRunning {
			t.Errorf("phase %s, want Running", got.Status.Phase)
		}
		// Nor does the node keep the API source's checkpoint of its pods.
		if cps, _ := filepath.Glob(filepath.Join(dir, "root", "checkpoints", "apiserver-*")); len(cps) > 0 {
			t.Errorf("API source checkpoint written: %v, want none", cps)
		}
		var writes []string
		for _, a := range cs.Actions() {
			if a.GetResource().Resource == "pods" && a.GetSubresource() == "status" && a.GetVerb() != "get" {
				w := a.GetVerb()
				if p, ok := a.(k8stesting.PatchAction); ok {
					w += " " + string(p.GetPatch())
				}
				writes = append(writes, w)
			}
		}
		if len(writes) != 1 {
			t.Errorf("%d status writes, want 1:\n%q", len(writes), writes)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
