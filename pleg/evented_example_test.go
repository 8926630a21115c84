package pleg_test

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// ExampleNewAuto picks the PLEG for a runtime: the in-memory runtime (like
// the CRI client) streams container events, so it gets an Evented PLEG,
// which relists every second until the stream works.
func ExampleNewAuto() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	mgr, err := podruntime.New(rt, rt, podruntime.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cache := pleg.NewCache()
	gen, err := pleg.NewAuto(rt, mgr, cache, pleg.EventedOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- gen.Run(ctx) }()
	defer func() { cancel(); <-done }()

	e := gen.(*pleg.Evented)
	for !e.Streaming() { // about a second: the stream must settle
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "1234"},
		Labels:   map[string]string{runtime.LabelPodUID: "1234"},
	}, "")
	ev := <-gen.Events()
	fmt.Println(ev.ID, ev.Type)
	// Output: 1234 ContainerStarted
}
