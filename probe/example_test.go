package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/probe"
)

func ExampleNewDefaultProber() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	p := probe.NewDefaultProber(probe.ProberOptions{})
	result, output, err := p.Probe(context.Background(), probe.Request{
		Type:      probe.Readiness,
		PodStatus: &v1.PodStatus{PodIP: u.Hostname()},
		Container: &v1.Container{Name: "web"},
		Probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Path: "/healthz", Port: intstr.Parse(u.Port()),
		}}},
	})
	fmt.Println(result, output, err)
	// Output: Success ok <nil>
}

func ExampleNewManager() {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "web",
			ReadinessProbe: &v1.Probe{
				ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
				PeriodSeconds: 1,
			},
		}}},
	}
	// The status the agent computed for the pod: its container runs and,
	// having no startup probe, has started.
	started := true
	status := v1.PodStatus{
		Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "web", ContainerID: "containerd://abc",
			State:   v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
			Started: &started,
		}},
	}
	m, err := probe.NewManager(func(types.UID) (v1.PodStatus, bool) { return status, true }, probe.Options{
		// A runtime that runs every command successfully.
		Runtime: probe.ExecerFunc(func(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
			return nil, nil, nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	m.AddPod(pod)

	fmt.Println(<-m.Readiness()) // the initial result
	fmt.Println(<-m.Readiness()) // after the first probe
	next := *status.DeepCopy()   // the agent's next status computation
	m.UpdatePodStatus(pod, &next)
	fmt.Println("ready:", next.ContainerStatuses[0].Ready)

	cancel()
	fmt.Println(<-done)
	// Output:
	// {abc Failure uid-1}
	// {abc Success uid-1}
	// ready: true
	// <nil>
}
